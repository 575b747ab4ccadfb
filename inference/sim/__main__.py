"""python -m inference.sim --port P --profile NAME [--model NAME] [--time-scale X]
[--fixed-ttft-ms T --fixed-itl-ms I] [--scripted-replies FILE] [--wake-s S]"""

import argparse
import json
import os
from pathlib import Path

from aiohttp import web

from inference.sim.profiles import PROFILES
from inference.sim.server import build_app
from inference.sim.sleep import DEFAULT_WAKE_S


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m inference.sim", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--profile", choices=sorted(PROFILES), required=True)
    parser.add_argument("--model", help="model name to serve (default: the profile's)")
    parser.add_argument(
        "--time-scale", type=float, default=1.0, help="run this many times faster than real time"
    )
    parser.add_argument(
        "--fixed-ttft-ms",
        type=float,
        help="fixed latency mode: every request's time to first token",
    )
    parser.add_argument(
        "--fixed-itl-ms", type=float, default=0.0, help="fixed latency mode: the gap between tokens"
    )
    parser.add_argument(
        "--scripted-replies",
        type=Path,
        help="test hook: a JSON object {last message's text: reply}; those prompts get that "
        "reply (streamed a word at a time) instead of the deterministic words",
    )
    parser.add_argument(
        "--wake-s",
        type=float,
        default=float(os.environ.get("SLUICE_SIM_WAKE_S", DEFAULT_WAKE_S)),
        help="sleep mode: how long POST /wake_up takes (default: SLUICE_SIM_WAKE_S, else "
        f"{DEFAULT_WAKE_S})",
    )
    options = parser.parse_args()
    scripted = None
    if options.scripted_replies is not None:
        scripted = json.loads(options.scripted_replies.read_text())
        if not isinstance(scripted, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in scripted.items()
        ):
            parser.error("--scripted-replies: the file must hold a JSON object of strings")
    fixed = None
    if options.fixed_ttft_ms is not None:
        fixed = (options.fixed_ttft_ms / 1000, options.fixed_itl_ms / 1000)
    app = build_app(
        PROFILES[options.profile],
        options.model,
        options.time_scale,
        fixed,
        scripted,
        wake_s=options.wake_s,
    )
    # handler_cancellation: a client that disconnects cancels its request at once,
    # freeing the sequence slot, as vLLM aborts a request whose stream is closed.
    web.run_app(
        app,
        host=options.host,
        port=options.port,
        handler_cancellation=True,
        access_log=None,
        print=None,
    )


if __name__ == "__main__":
    main()
