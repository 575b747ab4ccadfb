"""What a worker's labels (Worker.labels, a JSON object such as {"gpu": "h100", "spot": true})
say about its cost. Plain functions, no Django: the fleet snapshot (read in every gateway
process) and the fleet sampler both ask."""

from collections.abc import Mapping

GPU = "gpu"
SPOT = "spot"


def gpu_label(labels: Mapping[str, object]) -> str | None:
    """A worker's `gpu` label, which names its GpuRate; None when it has none."""
    value = labels.get(GPU)
    return value if isinstance(value, str) and value else None


def on_spot(labels: Mapping[str, object]) -> bool:
    """Whether a worker runs on spot capacity: labelled `"spot": true`, the JSON boolean
    (a string "true" is not, so a typo never gives a discount nobody set)."""
    return labels.get(SPOT) is True
