"""`manage.py tier_accuracy`: how well the tier classifier agrees with hand-written labels.

Prints overall accuracy, the confusion matrix and per-class precision and recall on
bench/data/tier_prompts.tsv (or --file), for all rows and for the tune and holdout sets
apart: the holdout rows were not looked at while tuning the rules, so their figure is the
honest one. Also the classifier's cost per request, which sits on the gateway's hot path.
"""

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scaling.routing.tiers import ROUTED_TIERS, TierClassifier, TierRequest, default_classifier

DATA_FILE = Path(__file__).resolve().parents[2] / "data" / "tier_prompts.tsv"


@dataclass(frozen=True)
class LabelledPrompt:
    label: str
    set: str
    prompt: str


def _unescape(text: str) -> str:
    """\\n is a newline and \\\\ a backslash: one prompt per line, code blocks included."""
    out, chars = [], iter(text)
    for char in chars:
        if char == "\\":
            escaped = next(chars, "")
            out.append("\n" if escaped == "n" else escaped)
        else:
            out.append(char)
    return "".join(out)


def load_prompts(path: Path = DATA_FILE) -> list[LabelledPrompt]:
    """Rows of `label<TAB>set<TAB>prompt`; `#` lines and the header are skipped."""
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#") or line.startswith("label\t"):
            continue
        label, subset, prompt = line.split("\t", 2)
        if label not in ROUTED_TIERS:
            raise ValueError(f"{path}:{number}: label must be small or large, not {label!r}")
        rows.append(LabelledPrompt(label, subset, _unescape(prompt)))
    return rows


@dataclass
class Score:
    """Counts of (label, predicted) pairs and the figures derived from them."""

    pairs: Counter[tuple[str, str]] = field(default_factory=Counter)
    errors: list[tuple[LabelledPrompt, str]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.pairs.values())

    @property
    def accuracy(self) -> float:
        right = sum(n for (label, predicted), n in self.pairs.items() if label == predicted)
        return right / self.total if self.total else 0.0

    def precision(self, tier: str) -> float:
        predicted = sum(n for (_, p), n in self.pairs.items() if p == tier)
        return self.pairs[tier, tier] / predicted if predicted else 0.0

    def recall(self, tier: str) -> float:
        labelled = sum(n for (label, _), n in self.pairs.items() if label == tier)
        return self.pairs[tier, tier] / labelled if labelled else 0.0


def evaluate(
    rows: Iterable[LabelledPrompt], classifier: TierClassifier = default_classifier
) -> Score:
    score = Score()
    for row in rows:
        request = TierRequest([{"role": "user", "content": row.prompt}])
        predicted = classifier.classify(request).tier
        score.pairs[row.label, predicted] += 1
        if predicted != row.label:
            score.errors.append((row, predicted))
    return score


def microseconds_per_request(rows: Sequence[LabelledPrompt], repeats: int = 20) -> float:
    requests = [TierRequest([{"role": "user", "content": r.prompt}]) for r in rows]
    started = time.perf_counter()
    for _ in range(repeats):
        for request in requests:
            default_classifier.classify(request)
    return (time.perf_counter() - started) / (repeats * len(requests)) * 1e6


def report(name: str, score: Score) -> list[str]:
    """The figures for one set of rows, as Markdown-friendly lines."""
    pairs, total = score.pairs, score.total
    right = pairs["small", "small"] + pairs["large", "large"]
    lines = [
        f"{name}: {total} prompts, accuracy {score.accuracy:.1%} ({right}/{total})",
        "  confusion (rows: label, columns: predicted)   small   large",
    ]
    for label in ROUTED_TIERS:
        lines.append(f"  {label:<44} {pairs[label, 'small']:>6}  {pairs[label, 'large']:>6}")
    for tier in ROUTED_TIERS:
        precision, recall = score.precision(tier), score.recall(tier)
        lines.append(f"  {tier}: precision {precision:.1%}, recall {recall:.1%}")
    return lines


class Command(BaseCommand):
    help = "Accuracy of the tier classifier (model auto) on labelled prompts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", type=Path, default=DATA_FILE)
        parser.add_argument(
            "--show-errors",
            choices=["none", "tune", "all"],
            default="none",
            help="list the misclassified prompts of that set",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            rows = load_prompts(options["file"])
        except (OSError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        scores = {"all": evaluate(rows)}
        for subset in sorted({r.set for r in rows}):
            scores[subset] = evaluate(r for r in rows if r.set == subset)
        for name, score in scores.items():
            self.stdout.write("\n".join(report(name, score)) + "\n")
        self.stdout.write(f"classifier cost: {microseconds_per_request(rows):.1f} us per request\n")
        shown = options["show_errors"]
        for row, predicted in scores["all"].errors if shown != "none" else []:
            if shown == "all" or row.set == shown:
                self.stdout.write(
                    f"[{row.set}] label {row.label}, predicted {predicted}: {row.prompt[:100]!r}"
                )
