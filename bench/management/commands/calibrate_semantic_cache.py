"""python manage.py calibrate_semantic_cache: measure the semantic cache's false-hit table
(caching/false_hit_table.json) on the development pairs: STS-B train and dev, the
adversarial pairs and the generated pairs' development half, never a held-out half.

The int8 model the gateway serves embeds the pairs (about 30 s on one core). Run it again
after changing verification, the evidence cells or the development data, then commit the
table and `manage.py cache_precision`'s new figures together.
"""

from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from bench import calibration, semantic_evaluation
from caching.evidence import MODEL_FILE
from inference.embeddings import OnnxMiniLM


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--out", default=str(MODEL_FILE))

    def handle(self, *args: Any, **options: Any) -> None:
        embedder = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)
        development = {
            name: pairs for name, pairs in calibration.data_sets().items() if "held" not in name
        }
        pairs = [pair for group in development.values() for pair in group]
        cosines = np.concatenate(
            [semantic_evaluation.similarities(embedder, group) for group in development.values()]
        )
        table = calibration.measure(pairs, cosines, "; ".join(development))
        with open(options["out"], "w", encoding="utf-8") as handle:
            handle.write(table.encode())
        self.stdout.write("| cell | false hits | pairs | false-hit probability |")
        self.stdout.write("|---|---|---|---|")
        for cell, (false, seen) in sorted(table.cells.items()):
            probability = (false + 0.5) / (seen + 1)
            self.stdout.write(f"| {cell} | {false} | {seen} | {probability:.1%} |")
        self.stdout.write(f"written to {options['out']}")
