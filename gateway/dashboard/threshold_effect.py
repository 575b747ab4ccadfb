"""What a similarity threshold change would do, shown on the Tuning page before it is saved.

Two figures, from two different sources:
- hit rate: measured on the team's own recent semantic lookups (caching/lookup_log.py:
  each lookup's candidates, MiniLM's cosine for those it scored, verify()'s verdicts). A
  lookup is a hit at threshold t when some candidate has cosine >= t and (verification
  on) is accepted. A candidate never scored (rejected by verification first, past the 4
  scored, or under the probe floor of the threshold then in force) has no cosine and
  counts under every threshold: lowering the threshold is under-predicted. Candidates
  verification never saw (verification off then) get the acceptance rate observed on
  evaluated candidates in the same cosine band, else in the nearest band that has
  verdicts; the preview says how many were estimated. With no verdict at all, they count
  as accepted: an upper bound.
- precision: not measurable on live traffic (nobody labels it), so it is read from the
  benchmark table below, interpolated between measured thresholds.

For an error bound (a team's max_false_hit_rate) the same lookups are replayed with each
candidate's logged false-hit probability (its evidence cell's rate: caching/evidence.py):
a lookup hits at the first candidate verification accepted whose probability is within
the bound. The predicted false-hit rate is the mean of those probabilities: the
development table's, not the team's traffic's. Candidates whose probability was never
logged (below the threshold then in force, or after the candidate that answered) count as
misses, so the hit rate is a lower bound; the page says how many.
"""

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass

from caching import lookup_log
from caching.evidence import FLOOR
from caching.lookup_log import LookupSample
from caching.models import CachePolicy
from foundation.redis_clients import sync_cache_redis
from gateway.accounts.models import Team

BAND = 0.02  # width of the cosine bands acceptance rates are pooled in

# Precision of the semantic cache on the adversarial pairs (114 paraphrases, 155
# near-misses), int8 model: docs/benchmarks.md, "Precision and recall of the semantic
# cache", table "Adversarial pairs" (python manage.py cache_precision).
ADVERSARIAL_PRECISION: dict[bool, tuple[tuple[float, float], ...]] = {
    True: (
        (0.80, 0.962),
        (0.85, 0.955),
        (0.88, 0.942),
        (0.90, 0.932),
        (0.92, 0.922),
        (0.94, 0.886),
        (0.96, 0.800),
    ),
    False: (
        (0.80, 0.448),
        (0.85, 0.437),
        (0.88, 0.407),
        (0.90, 0.399),
        (0.92, 0.395),
        (0.94, 0.383),
        (0.96, 0.255),
    ),
}


@dataclass(frozen=True)
class Precision:
    value: float
    measured_range: bool  # False: the threshold is outside 0.80..0.96, nearest value shown


def expected_precision(threshold: float, verify_enabled: bool) -> Precision:
    table = ADVERSARIAL_PRECISION[verify_enabled]
    if threshold <= table[0][0]:
        return Precision(table[0][1], math.isclose(threshold, table[0][0]))
    if threshold >= table[-1][0]:
        return Precision(table[-1][1], math.isclose(threshold, table[-1][0]))
    for (low_t, low_p), (high_t, high_p) in itertools.pairwise(table):
        if low_t <= threshold <= high_t:
            share = (threshold - low_t) / (high_t - low_t)
            return Precision(low_p + share * (high_p - low_p), True)
    raise AssertionError("unreachable: the table is sorted")


def _band(cosine: float) -> int:
    return math.floor(cosine / BAND + 1e-9)


class AcceptanceRates:
    """verify()'s acceptance rate by cosine band, over the candidates it evaluated. A
    candidate verification rejected has no cosine since lookups verify before they score
    (caching/semantic.py): where the log holds such rejections, every band's estimate is
    the overall rate instead, rather than a band rate that counts only acceptances."""

    def __init__(self, samples: Iterable[LookupSample]) -> None:
        counts: dict[int, list[int]] = {}
        accepted, judged, unbanded = 0, 0, 0
        for sample in samples:
            for cosine, verdict in zip(sample.cosines, sample.verdicts, strict=True):
                if verdict is None:
                    continue
                accepted += int(verdict)
                judged += 1
                if cosine is None:
                    unbanded += 1
                    continue
                seen = counts.setdefault(_band(cosine), [0, 0])
                seen[0] += int(verdict)
                seen[1] += 1
        self.rates = {band: ok / total for band, (ok, total) in counts.items()}
        self.overall = accepted / judged if unbanded else None

    def estimate(self, cosine: float) -> float | None:
        """The rate in the candidate's band, else the nearest band's; None without any."""
        if self.overall is not None:
            return self.overall
        if not self.rates:
            return None
        band = _band(cosine)
        nearest = min(self.rates, key=lambda b: (abs(b - band), -b))
        return self.rates[nearest]


@dataclass(frozen=True)
class Effect:
    threshold: float
    verify_enabled: bool
    hit_rate: float  # share of the sampled lookups, measured on the team's traffic
    estimated: int  # candidates whose verdict was estimated from a band's rate
    assumed: int  # candidates counted as accepted: no verdict observed anywhere
    precision: Precision  # from the benchmark, not the team's traffic

    @property
    def hit_rate_pct(self) -> str:
        return f"{100 * self.hit_rate:.1f}%"

    @property
    def precision_pct(self) -> str:
        return f"{100 * self.precision.value:.1f}%"


def predict(
    samples: list[LookupSample],
    threshold: float,
    verify_enabled: bool,
    rates: AcceptanceRates | None = None,
) -> Effect:
    """Expected semantic hit rate of these lookups at this threshold. Each lookup hits
    unless every candidate at or above the threshold is rejected; a candidate's chance of
    acceptance is 1 or 0 where verify() judged it, else its band's rate. Lowering the
    threshold only adds candidates, so it never predicts fewer hits. A candidate the
    lookup never scored (no cosine: verification rejected it first) counts under every
    threshold, so previewing verification off from lookups made with it on under-counts
    the hits that turning it off would add."""
    rates = rates or AcceptanceRates(samples)
    hits, estimated, assumed = 0.0, 0, 0
    for sample in samples:
        miss = 1.0
        for cosine, verdict in zip(sample.cosines, sample.verdicts, strict=True):
            if cosine is None or cosine < threshold:
                continue  # never scored: rejected by verification, or past the scored few
            if not verify_enabled:
                miss = 0.0
                break
            if verdict is not None:
                accept = 1.0 if verdict else 0.0
            else:
                rate = rates.estimate(cosine)
                estimated += rate is not None
                assumed += rate is None
                accept = 1.0 if rate is None else rate
            miss *= 1.0 - accept
        hits += 1.0 - miss
    hit_rate = hits / len(samples) if samples else 0.0
    return Effect(
        threshold,
        verify_enabled,
        hit_rate,
        estimated,
        assumed,
        expected_precision(threshold, verify_enabled),
    )


@dataclass(frozen=True)
class BoundEffect:
    bound: float
    hit_rate: float  # share of the sampled lookups
    false_hit_rate: float  # expected among those hits, from the development table
    unknown: int  # candidates above the floor whose probability was never logged

    @property
    def bound_pct(self) -> str:
        return f"{100 * self.bound:.1f}%"

    @property
    def hit_rate_pct(self) -> str:
        return f"{100 * self.hit_rate:.1f}%"

    @property
    def false_hit_pct(self) -> str:
        return f"{100 * self.false_hit_rate:.2f}%"


def predict_bound(samples: list[LookupSample], bound: float) -> BoundEffect:
    """Expected semantic hit rate and false-hit rate of these lookups under the bound."""
    answered: list[float] = []
    unknown = 0
    for sample in samples:
        probabilities = sample.probabilities or (None,) * len(sample.cosines)
        for cosine, verdict, probability in zip(
            sample.cosines, sample.verdicts, probabilities, strict=True
        ):
            if cosine is None or cosine < FLOOR or verdict is False:
                continue
            if probability is None:
                unknown += 1
            elif probability <= bound:
                answered.append(probability)
                break
    hit_rate = len(answered) / len(samples) if samples else 0.0
    false_rate = sum(answered) / len(answered) if answered else 0.0
    return BoundEffect(bound, hit_rate, false_rate, unknown)


@dataclass(frozen=True)
class Preview:
    lookups: int
    with_candidates: int
    current: Effect
    proposed: Effect
    current_bound: BoundEffect | None = None
    proposed_bound: BoundEffect | None = None


def preview(
    samples: list[LookupSample],
    current: tuple[float, bool],
    proposed: tuple[float, bool],
    bounds: tuple[float | None, float | None] = (None, None),
) -> Preview | None:
    """None when there are no samples to measure on. bounds: the error bound in force and
    the proposed one (None: none)."""
    if not samples:
        return None
    rates = AcceptanceRates(samples)
    current_bound, proposed_bound = (
        None if bound is None else predict_bound(samples, bound) for bound in bounds
    )
    return Preview(
        len(samples),
        sum(1 for s in samples if s.cosines),
        predict(samples, *current, rates=rates),
        predict(samples, *proposed, rates=rates),
        current_bound,
        proposed_bound,
    )


def recent_samples(team: Team | None) -> list[LookupSample]:
    """The team's recent lookups; for the global default, those of every team that follows
    it (no cache policy of its own), each team's last KEEP."""
    if team is not None:
        team_ids = [team.pk]
    else:
        own = CachePolicy.objects.filter(team__isnull=False).values("team_id")
        team_ids = list(Team.objects.exclude(pk__in=own).values_list("pk", flat=True))
    if not team_ids:
        return []
    pipe = sync_cache_redis().pipeline(transaction=False)
    for team_id in team_ids:
        pipe.lrange(lookup_log.key(team_id), 0, lookup_log.KEEP - 1)
    return [sample for raw in pipe.execute() for sample in lookup_log.recent(raw)]
