from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from bench import prompt_tokens


class Command(BaseCommand):
    help = (
        "Prompt tokens at admission against the embedded model's own count (vLLM /tokenize) "
        "over a mixed corpus, and the CPU cost of counting. Starts the embedded worker unless "
        "--url names one."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--url", help="a running worker serving the embedded model")
        parser.add_argument("--rounds", type=int, default=300, help="timing rounds over the corpus")

    def handle(self, *args: Any, **options: Any) -> None:
        url, worker = options["url"], None
        if url is None:
            worker, url = prompt_tokens.start_embedded_worker()
        try:
            rows, timings, asked = prompt_tokens.run(url, options["rounds"])
        finally:
            if worker is not None:
                worker.terminate()
                worker.wait(timeout=30)
        self.stdout.write(
            "| request | worker | counted | error | bytes / 3 | error | count us | estimate us "
            "| worker asked, ms |"
        )
        self.stdout.write("|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            counted = prompt_tokens.error_percent(row.counted, row.worker)
            estimated = prompt_tokens.error_percent(row.estimated, row.worker)
            template_us, estimate_us = timings[row.name]
            self.stdout.write(
                f"| {row.name} | {row.worker} | {row.counted} | {counted:+.1f}% | "
                f"{row.estimated} | {estimated:+.1f}% | {template_us:.0f} | {estimate_us:.1f} | "
                f"{asked[row.name]:.2f} |"
            )
