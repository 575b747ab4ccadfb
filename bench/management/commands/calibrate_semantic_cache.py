"""python manage.py calibrate_semantic_cache: measure the semantic cache's false-hit table
(caching/false_hit_table.json) on the development pairs: STS-B train and dev, the
adversarial pairs, the generated pairs' development half and their third, fresh and extra
groups (80 more intents), never a held-out half.

The int8 model the gateway serves embeds the pairs (about 45 s on one core). Run it again
after changing verification, the evidence cells or the development data, then commit the
table, the cosines it was measured with (bench/data/development_cosines.npy: the tests
rebuild the table from them, as int8 results differ slightly from CPU to CPU) and
`manage.py cache_precision`'s new figures together.
"""

from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from bench import calibration
from caching.evidence import MODEL_FILE
from inference.embeddings import OnnxMiniLM


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", default=str(MODEL_FILE))
        parser.add_argument(
            "--cosines",
            help="where the cosines go (default: the recorded ones with the shipped table, "
            "else beside --out)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        cosines = calibration.development_cosines(OnnxMiniLM(settings.EMBEDDING_MODEL_DIR))
        table = calibration.measure_development(cosines)
        with open(options["out"], "w", encoding="utf-8") as handle:
            handle.write(table.encode())
        recorded = calibration.RECORDED_COSINES
        if options["cosines"]:
            recorded = Path(options["cosines"])
        elif Path(options["out"]).resolve() != MODEL_FILE.resolve():
            recorded = Path(options["out"]).with_suffix(".cosines.npy")
        np.save(recorded, cosines)
        self.stdout.write("| cell | false hits | pairs | false-hit probability |")
        self.stdout.write("|---|---|---|---|")
        for cell, (false, seen) in sorted(table.cells.items()):
            self.stdout.write(f"| {cell} | {false} | {seen} | {table.rate(cell):.1%} |")
        self.stdout.write(f"written to {options['out']} and {recorded}")
