"""The policy's clock in a live replay: every duration divided by the speed.

A live replay compresses trace time `speed` times, so the arrival rate changes `speed`
times faster; the autoscaler must see its tick, scrape interval, windows, cooldowns,
start-up time and forecast windows shrink alike, or it would react `speed` times too late.
"""

from dataclasses import dataclass, replace

from scaling.autoscale.forecast import Forecaster
from scaling.autoscale.types import PolicySpec

PRODUCTION_TICK_S = 15.0
MIN_TICK_S = 0.25  # below this the loop's database work would take the 2 cores
PRODUCTION_SCRAPE_S = 1.0  # FLEET_SCRAPE_INTERVAL_S's default
MIN_SCRAPE_S = 0.1  # the scraper's floor on 2 cores


@dataclass(frozen=True)
class TimeScale:
    """The policy's clock, divided by speed (see the module docstring)."""

    speed: float

    @property
    def tick_s(self) -> float:
        return max(PRODUCTION_TICK_S / self.speed, MIN_TICK_S)

    @property
    def scrape_s(self) -> float:
        """The scrape interval (1 s) / speed, floored. Its ratio to the tick matters: a new
        replica is `ready` one scrape before it is healthy in the snapshot, and a tick in
        that gap counts it as serving but neither as loading nor as capacity, so a
        saturated fleet steps again (production: a 1 s gap in a 15 s tick)."""
        return min(max(PRODUCTION_SCRAPE_S / self.speed, MIN_SCRAPE_S), self.tick_s)

    def seconds(self, trace_s: float) -> int:
        """A policy duration on the wall clock, in whole seconds (the row's fields are
        integers), at least 1."""
        return max(round(trace_s / self.speed), 1)

    def policy(self, policy: PolicySpec) -> PolicySpec:
        return replace(
            policy,
            scale_up_window_s=self.seconds(policy.scale_up_window_s),
            scale_down_window_s=self.seconds(policy.scale_down_window_s),
            scale_up_cooldown_s=self.seconds(policy.scale_up_cooldown_s),
            scale_down_cooldown_s=self.seconds(policy.scale_down_cooldown_s),
            startup_time_s=self.seconds(policy.startup_time_s),
        )

    def forecaster(self, base: Forecaster | None = None) -> Forecaster:
        base = base or Forecaster()
        return Forecaster(
            periods=tuple(p / self.speed for p in base.periods),
            bucket_s=base.bucket_s / self.speed,
            trend_windows_s=tuple(w / self.speed for w in base.trend_windows_s),
            max_ratio=base.max_ratio,
        )

    def describe(self, policy: PolicySpec) -> str:
        """What was scaled, as effective trace seconds (rounding shows)."""
        scaled = self.policy(policy)

        def pair(name: str, trace: float, wall: float) -> str:
            return f"{name} {trace:g}->{wall:g} s (= {wall * self.speed:g} trace s)"

        return ", ".join(
            [
                pair("tick", PRODUCTION_TICK_S, self.tick_s),
                pair("scrape", PRODUCTION_SCRAPE_S, self.scrape_s),
                pair("up window", policy.scale_up_window_s, scaled.scale_up_window_s),
                pair("down window", policy.scale_down_window_s, scaled.scale_down_window_s),
                pair("up cooldown", policy.scale_up_cooldown_s, scaled.scale_up_cooldown_s),
                pair("down cooldown", policy.scale_down_cooldown_s, scaled.scale_down_cooldown_s),
                pair("start-up", policy.startup_time_s, scaled.startup_time_s),
                "forecast windows "
                + "/".join(f"{w:g}" for w in Forecaster().trend_windows_s)
                + "->"
                + "/".join(f"{w:g}" for w in self.forecaster().trend_windows_s)
                + " s",
            ]
        )
