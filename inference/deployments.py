"""Model deployments as the API sees them: a per-process copy refreshed every few seconds."""

import time
from dataclasses import dataclass
from decimal import Decimal

from foundation.db import database_read
from foundation.single_flight import SingleFlight
from inference.models import ModelDeployment

REFRESH_S = 5.0


@dataclass(frozen=True)
class DeploymentInfo:
    name: str
    price_input_per_million: Decimal
    price_output_per_million: Decimal
    created: int
    revision: str = "1"  # part of every cache key: bumping it retires cached replies
    routing_policy: str = "prefix_aware"  # the worker choice (scaling/routing/policies.py)
    tier: str = "small"  # small and large deployments are what model "auto" routes to
    accepts_images: bool = False  # image_url content parts reach its workers

    def cost_micros(self, prompt_tokens: int, completion_tokens: int) -> int:
        """Cost in micro-dollars: tokens x USD per million tokens."""
        return int(
            prompt_tokens * self.price_input_per_million
            + completion_tokens * self.price_output_per_million
        )


class DeploymentCatalog:
    def __init__(self) -> None:
        self._by_name: dict[str, DeploymentInfo] = {}
        self._loaded_at = float("-inf")
        self._flights: SingleFlight[dict[str, DeploymentInfo]] = SingleFlight()

    async def all(self) -> dict[str, DeploymentInfo]:
        if time.monotonic() - self._loaded_at >= REFRESH_S:
            self._by_name = await self._flights.run("catalog", database_read(_load))
            self._loaded_at = time.monotonic()
        return self._by_name

    async def get(self, name: str) -> DeploymentInfo | None:
        return (await self.all()).get(name)

    def clear_local(self) -> None:
        """Forget this process's copy; the next lookup reads the database."""
        self._loaded_at = float("-inf")


def _load() -> dict[str, DeploymentInfo]:
    return {
        d.name: DeploymentInfo(
            d.name,
            d.price_input_per_million,
            d.price_output_per_million,
            int(d.pk),
            f"{d.served_model_name}@{d.revision}",
            d.routing_policy,
            d.tier,
            d.accepts_images,
        )
        for d in ModelDeployment.objects.all()
    }


catalog = DeploymentCatalog()
