"""Demand forecast for predictive autoscaling: level + trend, and daily/weekly seasonality.

Deliberately simple enough to explain in one sentence on the dashboard:

- level and trend: least-squares lines through the last 5 and 15 minutes of samples; the
  level is the 5-minute line read at now, the trend the steeper of the two slopes,
  extended horizon_s ahead (the short fit catches a ramp early, the long one is steady);
- seasonality: how much demand rose, yesterday (and a week ago) at this time of day, over
  the next horizon_s, as a ratio applied to today's level (seasonal naive on the change,
  so a busier day than yesterday still scales with its own level);
- the forecast is the higher of the two: the autoscaler provisions for the larger of two
  plausible futures, because missing the TTFT target costs more than one replica.

The forecast is the expected *peak* over the horizon, never less than the level: it is
used to start replicas early, while scaling down waits for measured quiet.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaling.autoscale.types import Forecast, Sample

DAY = 86_400.0
WEEK = 7 * DAY
# A fitted slope is used only if it is this many standard errors from zero: extrapolated
# over a start-up time, a slope made of noise would start replicas for nothing. 5, not the
# textbook 2 or 3: the test runs every tick (5,760 a day at 15 s) on about 20 points (heavy
# t-distribution tails), and each false trend starts replicas; a real ramp scores far more.
SIGNIFICANT_T = 5.0


@dataclass(frozen=True)
class Forecaster:
    periods: tuple[float, ...] = (DAY, WEEK)
    bucket_s: float = 300.0  # seasonal history resolution (means per bucket)
    trend_windows_s: tuple[float, ...] = (300.0, 900.0)  # the steeper fitted slope wins
    max_ratio: float = 5.0  # a seasonal rise larger than this is clipped, not trusted

    def forecast(
        self,
        recent: Sequence[Sample],
        buckets: Mapping[int, float],
        now: float,
        horizon_s: float,
    ) -> Forecast:
        """recent: raw samples, oldest first; buckets: bucket start -> mean demand."""
        fits = [level_and_trend(recent, now, window) for window in self.trend_windows_s]
        level = fits[0][0]  # the shortest window's: the most current
        trend = max(slope for _, slope in fits)
        trend_peak = max(level, level + trend * horizon_s)
        found = (self.seasonal_ratio(buckets, now - period, horizon_s) for period in self.periods)
        ratios = [r for r in found if r is not None]
        ratio = sum(ratios) / len(ratios) if ratios else None
        seasonal_peak = level * ratio if ratio is not None else 0.0
        value = max(trend_peak, seasonal_peak, 0.0)
        return Forecast(
            value=value,
            level=level,
            trend_per_s=trend,
            seasonal_ratio=ratio,
            horizon_s=horizon_s,
            explanation=_explain(level, trend, ratio, horizon_s, value),
        )

    def seasonal_ratio(
        self, buckets: Mapping[int, float], then: float, horizon_s: float
    ) -> float | None:
        """Peak over [then, then + horizon] / value at then; None without that history.

        Add-one smoothing keeps a near-empty night from turning one request into a 50x rise.
        """
        base = value_at(buckets, then, self.bucket_s)
        if base is None:
            return None
        half = self.bucket_s / 2
        first = math.ceil((then - half) / self.bucket_s)
        last = math.floor((then + horizon_s - half) / self.bucket_s)
        times = [then + horizon_s, *(k * self.bucket_s + half for k in range(first, last + 1))]
        ahead = [v for t in times if (v := value_at(buckets, t, self.bucket_s)) is not None]
        if not ahead:
            return None
        ratio = (max(ahead) + 1.0) / (base + 1.0)
        return min(max(ratio, 1.0), self.max_ratio)


def level_and_trend(recent: Sequence[Sample], now: float, window_s: float) -> tuple[float, float]:
    """Least-squares line through the window's demand, read at now; slope per second.

    A window less than half covered (the loop just started) gives no slope, and neither
    does a slope within SIGNIFICANT_T standard errors of zero: both would extrapolate noise."""
    points = [(s.at - now, s.demand) for s in recent if s.at >= now - window_s]
    if not points:
        return 0.0, 0.0
    if len(points) < 3 or points[-1][0] - points[0][0] < window_s / 2:
        return points[-1][1], 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return mean_y, 0.0
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / var
    residual = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in points)
    stderr = math.sqrt(residual / (len(points) - 2) / var)
    if abs(slope) <= SIGNIFICANT_T * stderr:
        return mean_y, 0.0  # no trend that stands out from the noise: the mean is the level
    return max(mean_y - slope * mean_x, 0.0), slope


def value_at(buckets: Mapping[int, float], t: float, bucket_s: float) -> float | None:
    """Demand at time t, interpolated between bucket centres; None where history is missing."""
    position = t / bucket_s - 0.5  # in bucket units, relative to centres
    left = math.floor(position)
    share = position - left
    left_start, right_start = int(left * bucket_s), int((left + 1) * bucket_s)
    lv, rv = buckets.get(left_start), buckets.get(right_start)
    if lv is None and rv is None:
        return None
    if lv is None or rv is None:
        return lv if rv is None else rv
    return lv + (rv - lv) * share


def bucket_start(t: float, bucket_s: float) -> int:
    return int(math.floor(t / bucket_s) * bucket_s)


def _explain(
    level: float, trend: float, ratio: float | None, horizon_s: float, value: float
) -> str:
    seasonal = (
        "no seasonal history"
        if ratio is None
        else f"same time yesterday/last week rose x{ratio:.2f}"
    )
    return (
        f"level {level:.1f} in flight, trend {trend * 60:+.2f}/min, {seasonal}; "
        f"expect up to {value:.1f} within {horizon_s:.0f} s"
    )
