"""The benchmark's outputs: a terminal table, a JSON file and a self-contained HTML report
(plotly's JavaScript inlined, so it opens offline and attaches to a ticket as one file)."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io

from bench.loadtest.summary import LevelSummary, ratios

Column = tuple[str, int, Callable[[LevelSummary], str]]  # header, width, formatter
COLUMNS: list[Column] = [
    ("endpoint", 10, lambda s: s.endpoint[:10]),
    ("level", 7, lambda s: f"{s.level:g}"),
    ("req/s", 8, lambda s: f"{s.requests_per_s:.1f}"),
    ("tok/s", 9, lambda s: f"{s.output_tokens_per_s:.0f}"),
    ("lat P50", 8, lambda s: _ms(s.latency_p50_s)),
    ("lat P90", 8, lambda s: _ms(s.latency_p90_s)),
    ("lat P99", 8, lambda s: _ms(s.latency_p99_s)),
    ("TTFT P50", 9, lambda s: _ms(s.ttft_p50_s)),
    ("TTFT P99", 9, lambda s: _ms(s.ttft_p99_s)),
    ("TPOT", 7, lambda s: _ms(s.tpot_p50_s)),
    ("cache", 6, lambda s: "-" if s.cache_hit_share is None else f"{s.cache_hit_share:.0%}"),
    ("errors", 0, lambda s: ", ".join(f"{k}:{v}" for k, v in s.errors.items()) or "-"),
]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f}ms"


def table(summaries: list[LevelSummary]) -> str:
    lines = [" ".join(h.ljust(w) for h, w, _ in COLUMNS)]
    lines += [" ".join(f(s).ljust(w) for _, w, f in COLUMNS) for s in summaries]
    return "\n".join(lines)


def comparison_table(pairs: list[tuple[LevelSummary, LevelSummary]]) -> str:
    lines = ["level   throughput  tokens/s  +lat P50   +lat P99   +TTFT P50"]
    for this, other in pairs:
        r = ratios(this, other)
        cells = [
            f"{this.level:<7g}",
            f"{_ratio(r['throughput_ratio']):<11}",
            f"{_ratio(r['tokens_ratio']):<9}",
            f"{_ms_signed(r['added_latency_p50_s']):<10}",
            f"{_ms_signed(r['added_latency_p99_s']):<10}",
            _ms_signed(r["added_ttft_p50_s"]),
        ]
        lines.append(" ".join(cells))
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _ms_signed(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:+.1f}ms"


def document(
    settings: dict[str, Any],
    summaries: list[LevelSummary],
    pairs: list[tuple[LevelSummary, LevelSummary]],
) -> dict[str, Any]:
    return {
        "settings": settings,
        "levels": [s.as_dict() for s in summaries],
        "comparison": [{"level": a.level, **ratios(a, b)} for a, b in pairs],
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.write_text(json.dumps(doc, indent=2) + "\n")


def _figure(
    summaries: list[LevelSummary],
    x_title: str,
    series: list[tuple[str, str]],
    y_title: str,
    scale: float,
) -> go.Figure:
    figure = go.Figure()
    for endpoint in dict.fromkeys(s.endpoint for s in summaries):
        rows = [s for s in summaries if s.endpoint == endpoint]
        for field, label in series:
            values = [getattr(s, field) for s in rows]
            figure.add_trace(
                go.Scatter(
                    x=[s.level for s in rows],
                    name=f"{endpoint} {label}",
                    mode="lines+markers",
                    y=[None if v is None else v * scale for v in values],
                )
            )
    figure.update_layout(xaxis_title=x_title, yaxis_title=y_title, height=420, margin={"t": 30})
    return figure


def write_html(path: Path, doc: dict[str, Any], summaries: list[LevelSummary]) -> None:
    x_title = "arrival rate (req/s)" if doc["settings"]["mode"] == "open" else "concurrency"
    charts = [  # title, [(field, label)], y axis, scale
        ("Throughput", [("requests_per_s", "req/s")], "req/s", 1),
        ("Output tokens", [("output_tokens_per_s", "tok/s")], "tokens/s", 1),
        ("Latency", [("latency_p50_s", "P50"), ("latency_p99_s", "P99")], "ms", 1000),
        ("Time to first token", [("ttft_p50_s", "P50"), ("ttft_p99_s", "P99")], "ms", 1000),
    ]
    figures = [
        (title, _figure(summaries, x_title, series, y_title, scale))
        for title, series, y_title, scale in charts
    ]
    parts = [
        f"<h2>{title}</h2>" + plotly.io.to_html(fig, full_html=False, include_plotlyjs=(i == 0))
        for i, (title, fig) in enumerate(figures)
    ]
    settings_json = json.dumps(doc["settings"], indent=2)
    html = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Sluice benchmark</title>"
        "</head><body style='font-family: sans-serif; max-width: 1000px; margin: auto'>"
        f"<h1>Sluice benchmark</h1><pre>{_escape(settings_json)}</pre>"
        f"<pre>{_escape(table(summaries))}</pre>{''.join(parts)}</body></html>"
    )
    path.write_text(html)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
