"""metrics.labelled(): labels() remembered, counting into the same series."""

import pytest
from prometheus_client import CollectorRegistry, Counter

from foundation import metrics

pytestmark = pytest.mark.unit


def test_a_remembered_child_counts_into_the_series_labels_names(monkeypatch) -> None:
    monkeypatch.setattr(metrics, "_children", {})
    registry = CollectorRegistry()
    counter = Counter("probe", "a probe", ["model", "status"], registry=registry)
    metrics.labelled(counter, "m", "200").inc()
    metrics.labelled(counter, "m", "200").inc(2)
    metrics.labelled(counter, "m", "429").inc()
    assert registry.get_sample_value("probe_total", {"model": "m", "status": "200"}) == 3
    assert registry.get_sample_value("probe_total", {"model": "m", "status": "429"}) == 1
    assert metrics.labelled(counter, "m", "200") is counter.labels("m", "200")


def test_past_the_bound_children_are_looked_up_not_kept(monkeypatch) -> None:
    registry = CollectorRegistry()
    counter = Counter("bounded", "a probe", ["model"], registry=registry)
    monkeypatch.setattr(metrics, "_children", {})
    monkeypatch.setattr(metrics, "CHILDREN_KEPT", 2)
    for name in ("a", "b", "c", "d"):
        metrics.labelled(counter, name).inc()
    assert len(metrics._children) == 2
    assert registry.get_sample_value("bounded_total", {"model": "d"}) == 1
