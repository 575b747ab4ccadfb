"""Write the shipped replay traces (scaling/replay/data/*.jsonl), deterministically.

    python -m scaling.replay.tracegen

steady      6 h at 400 req/s, the control case
diurnal     3 days of office-hours traffic: 8% of peak at night, a steep 08:00-10:00 ramp,
            a lunch dip, an evening decline; each day's peak differs (0.93-1.07x of
            3,000 req/s) so yesterday is a guide, not a copy
spike       launch day: 1 h at 300 req/s, then 10,000 req/s within about 20 minutes
            (logistic, 10%->90% in 20 min), decaying to 4,000 req/s over 4 h
multitenant 3 h, three teams with their own system prompts (shared prefixes of 1,200 to
            3,000 tokens), rates that peak at different times
"""

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaling.replay.traces import TRACES_DIR

SEGMENT_S = 300
HOUR = 3600.0


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def office_hours(hour: float) -> float:
    """Share of the day's peak at this hour of the day (0-24)."""
    rise = _logistic((hour - 9.0) / 0.35)
    fall = _logistic((hour - 19.5) / 1.2)
    lunch = 1 - 0.15 * math.exp(-(((hour - 13.0) / 0.6) ** 2))
    return 0.08 + 0.92 * rise * (1 - fall) * lunch


def launch(t: float) -> float:
    """Requests per second on launch day, t seconds into the trace."""
    ramp = _logistic((t - 1.5 * HOUR) / (1200 / math.log(81)))
    decay = 1.0 if t < 2 * HOUR else math.exp(-(t - 2 * HOUR) / (4 * HOUR / math.log(2.5)))
    return 300 + (10_000 * decay - 300) * ramp


def segments(
    rate: Callable[[float], float], hours: float, step: int = SEGMENT_S, **fields: Any
) -> list[dict[str, Any]]:
    """Piecewise-constant segments, each at the rate in its middle."""
    return [
        {"at": t, "duration": step, "rps": round(rate(t + step / 2), 3), **fields}
        for t in range(0, int(hours * HOUR), step)
    ]


def diurnal_rate() -> Callable[[float], float]:
    scale = [1.0, 1.07, 0.93]
    return lambda t: 3000 * scale[int(t // 86_400) % 3] * office_hours((t % 86_400) / HOUR)


def multitenant() -> list[dict[str, Any]]:
    teams = [
        ("acme", "acme-support-v3", 1200, 250, 11.0),
        ("globex", "globex-rag", 3000, 120, 12.5),
        ("initech", "initech-code", 1800, 400, 14.0),
    ]
    lines: list[dict[str, Any]] = []
    for team, prefix, prefix_tokens, rps, peak_hour in teams:

        def rate(t: float, rps: float = rps, peak: float = peak_hour) -> float:
            return rps * (0.3 + 0.7 * math.exp(-((((t / HOUR) + 10.0 - peak) / 0.8) ** 2)))

        lines += segments(
            rate,
            3,
            step=60,
            tenant=team,
            prefix=prefix,
            prefix_tokens=prefix_tokens,
            prompt_tokens=prefix_tokens + 150,
            output_tokens=180,
        )
    return sorted(lines, key=lambda line: (line["at"], line["tenant"]))


def traces() -> dict[str, list[dict[str, Any]]]:
    common = {"prompt_tokens": 600, "output_tokens": 200}
    return {
        "steady": [
            {"trace": "steady", "description": "6 h at a constant 400 req/s", "ttft_target_s": 1.0},
            *segments(lambda t: 400.0, 6, step=60, **common),
        ],
        "diurnal": [
            {
                "trace": "diurnal",
                "ttft_target_s": 1.0,
                "description": "3 days of office-hours traffic, peak ~3,000 req/s",
            },
            *segments(diurnal_rate(), 72, step=60, **common),
        ],
        "spike": [
            {
                "trace": "spike",
                "ttft_target_s": 1.0,
                "description": "launch day: 300 -> 10,000 req/s in ~20 min at 1.5 h",
            },
            *segments(launch, 6, step=60, **common),
        ],
        "multitenant": [
            {
                "trace": "multitenant",
                "ttft_target_s": 1.0,
                "description": "three teams, shared system prompts (prefix ids)",
            },
            *multitenant(),
        ],
    }


def write(directory: Path = TRACES_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, lines in traces().items():
        path = directory / f"{name}.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write():
        print(path)
