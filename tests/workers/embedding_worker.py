"""Child process: an embedding worker the way vLLM serves a pooling model (`--task embed`):
/health, /metrics under vLLM's names, and POST /v1/embeddings, here with the real
all-MiniLM-L6-v2 (the gateway's built-in model), so its vectors can be compared with the
gateway's own. Like vLLM for a model without Matryoshka support, it refuses `dimensions`.

Usage: embedding_worker.py --port N --model-dir DIR [--model NAME]
"""

import argparse
import base64
from pathlib import Path
from typing import Any

from aiohttp import web
from tokenizers import Tokenizer

from inference.embeddings import OnnxMiniLM

MODEL: web.AppKey[str] = web.AppKey("model", str)
EMBEDDER: web.AppKey[OnnxMiniLM] = web.AppKey("embedder", OnnxMiniLM)
COUNTER: web.AppKey[Tokenizer] = web.AppKey("counter", Tokenizer)
SERVED: web.AppKey[list[int]] = web.AppKey("served", list)


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}}
    return web.json_response(body, status=status)


async def embeddings(request: web.Request) -> web.Response:
    body: Any = await request.json()
    app = request.app
    if body.get("model") != app[MODEL]:
        return _error(404, f"The model `{body.get('model')}` does not exist.")
    if body.get("dimensions") is not None:
        return _error(400, "Model does not support matryoshka representation")
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    if not all(isinstance(text, str) for text in texts):
        return _error(400, "this worker takes text")
    counts = [len(e.ids) for e in app[COUNTER].encode_batch(texts)]
    vectors = app[EMBEDDER].embed_batch(texts)
    data = []
    for index, vector in enumerate(vectors):
        if body.get("encoding_format") == "base64":
            embedding: Any = base64.b64encode(vector.astype("<f4").tobytes()).decode()
        else:
            embedding = vector.tolist()
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    app[SERVED][0] += 1
    usage = {"prompt_tokens": sum(counts), "total_tokens": sum(counts)}
    return web.json_response(
        {"id": "embd-worker", "object": "list", "model": app[MODEL], "data": data, "usage": usage}
    )


async def health(request: web.Request) -> web.Response:
    return web.Response(text="")


async def metrics(request: web.Request) -> web.Response:
    model = request.app[MODEL]
    lines = [
        f'vllm:num_requests_running{{model_name="{model}"}} 0.0',
        f'vllm:num_requests_waiting{{model_name="{model}"}} 0.0',
        f'vllm:kv_cache_usage_perc{{model_name="{model}"}} 0.0',
        f'sluice_test_embeddings_served{{model_name="{model}"}} {request.app[SERVED][0]}',
    ]
    return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    args = parser.parse_args()
    app = web.Application(client_max_size=4 * 1024 * 1024)
    app[MODEL] = args.model
    app[EMBEDDER] = OnnxMiniLM(Path(args.model_dir))
    counter = Tokenizer.from_file(str(Path(args.model_dir) / "tokenizer.json"))
    counter.no_padding()  # the file pads and truncates to 128
    counter.no_truncation()
    app[COUNTER] = counter
    app[SERVED] = [0]
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
