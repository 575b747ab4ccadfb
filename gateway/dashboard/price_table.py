"""The prices in force, as the cost page lists them: what the figures below them were
computed from, so a reader can check a bill or a GPU cost by hand.

Token prices are per deployment (USD per million tokens): input, cached input (blank means
the input price), output, and what a batch line and a request served on spot capacity pay
after their discounts (the larger one when both apply, inference/deployments.py). GPU
rates are per worker `gpu` label, on demand and spot, with how many live workers each
prices now; a worker without a matching rate costs its deployment's gpu_cost_per_hour.
"""

from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

from inference.models import GpuRate, ModelDeployment, Worker
from inference.worker_labels import gpu_label, on_spot


def _less(price: Decimal, percent: int) -> Decimal:
    return price * (100 - percent) / 100


@dataclass(frozen=True)
class DeploymentPrices:
    model: str
    input: Decimal
    cached_input: Decimal
    output: Decimal
    batch_discount_percent: int
    spot_discount_percent: int
    gpu_per_hour: Decimal  # for its workers no GpuRate prices
    example: bool

    @property
    def batch_input(self) -> Decimal:
        return _less(self.input, self.batch_discount_percent)

    @property
    def batch_output(self) -> Decimal:
        return _less(self.output, self.batch_discount_percent)

    @property
    def spot_input(self) -> Decimal:
        return _less(self.input, self.spot_discount_percent)

    @property
    def spot_output(self) -> Decimal:
        return _less(self.output, self.spot_discount_percent)


@dataclass(frozen=True)
class GpuRateRow:
    gpu: str
    on_demand_per_hour: Decimal
    spot_per_hour: Decimal
    example: bool
    on_demand_workers: int  # live workers (every state but dead) it prices now
    spot_workers: int


def deployment_prices() -> list[DeploymentPrices]:
    return [
        DeploymentPrices(
            d.name,
            d.price_input_per_million,
            (
                d.price_input_per_million
                if d.price_cached_input_per_million is None
                else d.price_cached_input_per_million
            ),
            d.price_output_per_million,
            d.batch_discount_percent,
            d.spot_discount_percent,
            d.gpu_cost_per_hour,
            d.prices_are_examples,
        )
        for d in ModelDeployment.objects.order_by("name")
    ]


def gpu_rates() -> list[GpuRateRow]:
    live: Counter[tuple[str, bool]] = Counter()
    for labels in Worker.objects.exclude(state=Worker.State.DEAD).values_list("labels", flat=True):
        gpu = gpu_label(labels or {})
        if gpu is not None:
            live[(gpu, on_spot(labels))] += 1
    return [
        GpuRateRow(
            rate.gpu,
            rate.on_demand_per_hour,
            rate.spot_per_hour,
            rate.is_example,
            live[(rate.gpu, False)],
            live[(rate.gpu, True)],
        )
        for rate in GpuRate.objects.order_by("gpu")
    ]
