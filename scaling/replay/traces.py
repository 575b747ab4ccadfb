"""Request traces for replay: JSON lines, read into per-second arrival rates.

A trace line is one of:
- a header: {"trace": "diurnal", "description": "...", "ttft_target_s": 1.0}
- a segment: {"at": 3600, "duration": 300, "rps": 42.5, "prompt_tokens": 600,
  "output_tokens": 180, "tenant": "acme", "prefix": "acme-system"}: Poisson arrivals at
  rps for duration seconds (segments may overlap: tenants add up);
- a request: {"at": 12.25, "prompt_tokens": 600, "output_tokens": 180, ...}: one arrival.

Segments keep a day-long trace at hundreds of requests per second a few hundred lines;
the replay expands them into per-second expected arrivals and draws Poisson counts.
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRACES_DIR = Path(__file__).resolve().parent / "data"


@dataclass
class Demand:
    """Per second: expected arrivals, and the mean output tokens of those arrivals."""

    rate: list[float]
    output_tokens: list[float]
    meta: dict[str, Any] = field(default_factory=dict)
    tenants: dict[str, float] = field(default_factory=dict)  # tenant -> expected requests

    @property
    def seconds(self) -> int:
        return len(self.rate)

    def in_flight(self, t: int, base_s: float, per_token_s: float) -> float:
        """Expected requests in flight at second t (Little's law: rate x time in system)."""
        if not 0 <= t < len(self.rate):
            return 0.0
        return self.rate[t] * (base_s + self.output_tokens[t] * per_token_s)


def trace_path(name_or_path: str) -> Path:
    """A shipped trace by name (`diurnal`) or any path to a .jsonl file."""
    path = Path(name_or_path)
    if path.suffix == ".jsonl" and path.exists():
        return path
    shipped = TRACES_DIR / f"{name_or_path}.jsonl"
    if shipped.exists():
        return shipped
    names = ", ".join(sorted(p.stem for p in TRACES_DIR.glob("*.jsonl")))
    raise FileNotFoundError(f"no trace {name_or_path!r}: give a .jsonl path or one of {names}")


def load_trace(path: Path) -> Demand:
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    meta: dict[str, Any] = next((line for line in lines if "trace" in line), {})
    events = [line for line in lines if "at" in line]
    end = max((e["at"] + e.get("duration", 1) for e in events), default=0)
    seconds = math.ceil(end)
    rate, tokens = [0.0] * seconds, [0.0] * seconds
    tenants: dict[str, float] = {}
    for event in events:
        _add(event, rate, tokens, tenants)
    output = [tokens[t] / rate[t] if rate[t] else 0.0 for t in range(seconds)]
    return Demand(rate=rate, output_tokens=output, meta=meta, tenants=tenants)


def _add(
    event: dict[str, Any], rate: list[float], tokens: list[float], tenants: dict[str, float]
) -> None:
    """Spread a segment's rate over its seconds (tokens kept as a rate-weighted sum)."""
    start, duration = float(event["at"]), float(event.get("duration", 0))
    rps = float(event["rps"]) if "rps" in event else None
    output = float(event.get("output_tokens", 200))
    if rps is None or duration <= 0:
        second, amount = int(start), 1.0
        if second < len(rate):
            rate[second] += amount
            tokens[second] += amount * output
        tenants[event.get("tenant", "-")] = tenants.get(event.get("tenant", "-"), 0.0) + amount
        return
    for second in range(int(start), min(math.ceil(start + duration), len(rate))):
        rate[second] += rps
        tokens[second] += rps * output
    tenant = event.get("tenant", "-")
    tenants[tenant] = tenants.get(tenant, 0.0) + rps * duration
