"""python manage.py cache_precision: the semantic cache's precision, recall and false-hit
rate on each data set and half: at error bounds (the team's max_false_hit_rate), at the old
fixed thresholds with verification, and for plain cosine.

Development data (what the false-hit model is fit on: `calibrate_semantic_cache`): STS-B
train and dev, the adversarial pairs, the generated pairs' development half, third group,
fresh group and extra group. Held out (never fit on): STS-B test, the generated pairs'
held-out half, and their blind, sealed and unseen groups.

Then each set replayed as one team's traffic with audits (`--audit-rates`, `--misread`:
bench/calibration.py, replay_with_audits): what the bound does once the team's own audits
are counted in its cells (caching/cell_audits.py), scored on the second half of the stream;
and a longer stream from each held-out question group's families (calibration.traffic_sets:
200 pairs an intent), replayed the same way. Between the two, each development question
set scored by a table measured without it (calibration.leave_one_group_out): the bound on
families its table has not seen, judged on development data alone.
"""

from typing import Any

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from bench import calibration, semantic_evaluation
from bench.semantic_evaluation import Pair
from caching.evidence import false_hit_table
from inference.embeddings import OnnxMiniLM

BOUNDS = "0.005,0.01,0.02"
THRESHOLDS = "0.85,0.92"
AUDIT_RATES = "0,0.1,0.25"  # 0: the same halves without audits, to compare with
REPLAY_BOUNDS = "0.02,0.05"


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bounds", default=BOUNDS)
        parser.add_argument("--thresholds", default=THRESHOLDS)
        parser.add_argument("--audit-rates", default=AUDIT_RATES, help="'' replays nothing")
        parser.add_argument("--replay-bounds", default=REPLAY_BOUNDS)
        parser.add_argument(
            "--misread", type=float, default=0.1, help="also replay audits misreading this share"
        )
        parser.add_argument(
            "--model-file",
            default="model.onnx",
            help="model-fp32.onnx: the float32 model, for comparison",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        bounds = [float(b) for b in options["bounds"].split(",")]
        thresholds = [float(t) for t in options["thresholds"].split(",")]
        audit_rates = [float(r) for r in options["audit_rates"].split(",") if r]
        replay_bounds = [float(b) for b in options["replay_bounds"].split(",") if b]
        misread = options["misread"]
        embedder = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR, model_file=options["model_file"])
        model = false_hit_table()
        self.stdout.write(f"false-hit table measured on {model.fit_on}")
        for name, pairs in calibration.data_sets().items():
            positives = sum(p.same_meaning for p in pairs)
            self.stdout.write(
                f"\n**{name}** ({len(pairs)} pairs, {positives} with the same meaning)\n"
            )
            self.stdout.write(
                "| rule | precision | recall | false-hit rate | true hits | false hits |\n"
                "|---|---|---|---|---|---|"
            )
            cosines = semantic_evaluation.similarities(embedder, pairs)
            rows = calibration.table(pairs, cosines, model, bounds, thresholds)
            rows += self._replays(pairs, cosines, replay_bounds, audit_rates, misread)
            self._rows(rows)
        for name, rows in calibration.leave_one_group_out(
            calibration.recorded_cosines(), bounds
        ).items():
            self.stdout.write(f"\n**{name}, scored by a table measured without it**\n")
            self.stdout.write(
                "| rule | precision | recall | false-hit rate | true hits | false hits |\n"
                "|---|---|---|---|---|---|"
            )
            self._rows(rows)
        if not audit_rates:
            return
        for name, pairs in calibration.traffic_sets().items():
            positives = sum(p.same_meaning for p in pairs)
            self.stdout.write(
                f"\n**{name}** ({len(pairs)} pairs, {positives} with the same meaning; the "
                "second half of each stream scored)\n"
            )
            self.stdout.write(
                "| rule | precision | recall | false-hit rate | true hits | false hits |\n"
                "|---|---|---|---|---|---|"
            )
            cosines = semantic_evaluation.similarities(embedder, pairs)
            self._rows(self._replays(pairs, cosines, replay_bounds, audit_rates, misread))

    def _replays(
        self,
        pairs: list[Pair],
        cosines: npt.NDArray[np.floating],
        bounds: list[float],
        rates: list[float],
        misread: float,
    ) -> list[calibration.BoundScore]:
        """At each bound, each audit rate; and the first rate over 0 with a comparator
        that misreads a right candidate as wrong with chance `misread`."""
        rows = []
        auditing = [rate for rate in rates if rate > 0]
        for bound in bounds:
            rows += [calibration.replay_with_audits(pairs, cosines, bound, r) for r in rates]
            if misread and auditing:
                replay = calibration.replay_with_audits(pairs, cosines, bound, auditing[0], misread)
                rows.append(replay)
        return rows

    def _rows(self, rows: list[calibration.BoundScore]) -> None:
        for row in rows:
            self.stdout.write(
                f"| {row.rule} | {row.precision:.3f} | {row.recall:.3f} | "
                f"{row.false_hit_rate:.1%} | {row.true_hits} | {row.false_hits} |"
            )
