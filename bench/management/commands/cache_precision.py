"""python manage.py cache_precision: the semantic cache's precision and recall by
threshold, with and without verification, on STS-B and the adversarial pairs."""

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from caching import evaluation
from inference.embeddings import OnnxMiniLM

THRESHOLDS = "0.80,0.85,0.88,0.90,0.92,0.94,0.96"


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--thresholds", default=THRESHOLDS)
        parser.add_argument(
            "--model-file",
            default="model.onnx",
            help="model-fp32.onnx: the float32 model, for comparison",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        thresholds = [float(t) for t in options["thresholds"].split(",")]
        embedder = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR, model_file=options["model_file"])
        datasets = {
            "STS-B train+dev": evaluation.sts_b_pairs(),
            "adversarial": evaluation.adversarial_pairs(),
        }
        for name, pairs in datasets.items():
            positives = sum(p.same_meaning for p in pairs)
            self.stdout.write(
                f"\n{name}: {len(pairs)} pairs, {positives} with the same "
                f"meaning (STS >= {evaluation.POSITIVE_STS} or labelled)\n"
            )
            self.stdout.write(
                "| threshold | verify | precision | recall | true hits | "
                "false hits |\n|---|---|---|---|---|---|"
            )
            cosines = evaluation.similarities(embedder, pairs)
            for row in evaluation.score(pairs, cosines, thresholds):
                self.stdout.write(
                    f"| {row.threshold:.2f} | {'on' if row.verified else 'off'} "
                    f"| {row.precision:.3f} | {row.recall:.3f} | "
                    f"{row.true_hits} | {row.false_hits} |"
                )
