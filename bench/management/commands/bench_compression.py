from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand

from bench import compression, prompt_tokens


class Command(BaseCommand):
    help = (
        "Prompt compression on a corpus of prompts as clients send them: tokens before and "
        "after (the embedded model's tokenizer), and whether the embedded model's greedy "
        "answer stays the same where only whitespace or a repeat is left out. Starts the "
        "embedded worker unless --url names one; --no-answers skips the answers."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--url", help="a running worker serving the embedded model")
        parser.add_argument("--no-answers", action="store_true", help="count tokens only")

    def handle(self, *args: Any, **options: Any) -> None:
        url, worker = options["url"], None
        if url is None and not options["no_answers"]:
            worker, url = prompt_tokens.start_embedded_worker()
        try:
            rows = compression.run(None if options["no_answers"] else url)
        finally:
            if worker is not None:
                worker.terminate()
                worker.wait(timeout=30)
        for line in compression.table(rows):
            self.stdout.write(line)
