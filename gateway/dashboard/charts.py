"""Plotly figure specifications as plain dicts: the page embeds them with json_script and
static/dashboard/dashboard.js draws them with the vendored plotly.min.js. Building dicts
(not plotly.graph_objects) keeps the Python side to microseconds per chart."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

Chart = dict[str, Any]


def _x(values: Sequence[datetime]) -> list[str]:
    return [v.isoformat() for v in values]


def layout(title: str, y_title: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 14}},
        "height": 280,
        "margin": {"l": 55, "r": 20, "t": 40, "b": 40},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.2},
        **extra,
    }


def lines(
    chart_id: str,
    title: str,
    x: Sequence[datetime],
    series: list[tuple[str, Sequence[float | None]]],
    y_title: str = "",
    stacked: bool = False,
) -> Chart:
    mode = "lines" if len(x) > 2 else "lines+markers"  # a lone point must still show
    traces = [
        {
            "type": "scatter",
            "mode": mode,
            "name": name,
            "x": _x(x),
            "y": list(ys),
            **({"stackgroup": "one"} if stacked else {}),
        }
        for name, ys in series
    ]
    return {"id": chart_id, "data": traces, "layout": layout(title, y_title)}


def bars(
    chart_id: str,
    title: str,
    labels: Sequence[str],
    series: list[tuple[str, Sequence[float]]],
    y_title: str = "",
) -> Chart:
    traces = [
        {"type": "bar", "name": name, "x": list(labels), "y": list(ys)} for name, ys in series
    ]
    return {"id": chart_id, "data": traces, "layout": layout(title, y_title, barmode="group")}


def timeline(
    chart_id: str,
    title: str,
    demand_x: Sequence[datetime],
    demand: Sequence[float],
    replicas_x: Sequence[datetime],
    replicas: Sequence[float],
    decisions: list[dict[str, Any]],
) -> Chart:
    """Demand (left axis) against replicas and each decision (right axis); hovering a
    decision shows its reason."""
    traces: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "requests/s",
            "x": _x(demand_x),
            "y": list(demand),
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "ready workers",
            "x": _x(replicas_x),
            "y": list(replicas),
            "yaxis": "y2",
            "line": {"shape": "hv"},
        },
    ]
    for action, symbol in (
        ("up", "triangle-up"),
        ("down", "triangle-down"),
        ("hold", "circle-open"),
        ("warm", "diamond"),
        ("drain", "x"),
    ):
        chosen = [d for d in decisions if d["action"] == action]
        if chosen:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": f"decision: {action}",
                    "x": _x([d["at"] for d in chosen]),
                    "y": [d["to_replicas"] for d in chosen],
                    "yaxis": "y2",
                    "marker": {"symbol": symbol, "size": 10},
                    "text": [f"{d['deployment__name']}: {d['reason']}" for d in chosen],
                    "hoverinfo": "text+x",
                }
            )
    extra = {
        "yaxis2": {
            "title": {"text": "replicas"},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
        }
    }
    spec = layout(title, "requests/s", **extra)
    spec["margin"]["r"] = 70  # room for the replicas axis
    return {"id": chart_id, "data": traces, "layout": spec}
