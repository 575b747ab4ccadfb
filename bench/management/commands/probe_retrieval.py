"""python manage.py probe_retrieval: how well probe vectors find the semantic cache's
candidates, against MiniLM's own vectors (inference/probe_embeddings.py).

Two measures per data set and half:
- the probe floors: of the pairs whose MiniLM cosine reaches evidence.FLOOR (0.70, the
  lowest a bound ever serves), and of those reaching the default threshold (0.92), the
  share whose probe cosine is under that floor's probe floor (caching/semantic.py): pairs
  the probe search drops before verification;
- retrieval in a crowded set: every pair's cached question (a) stored in one vector set,
  each new question (b) that a threshold of 0.85 with verification would serve from its
  pair looked up; how often the pair is among the probe's nearest PROBE_CANDIDATES (what a
  lookup verifies) and among MiniLM's nearest 4 (what lookups searched before probes).
Exact nearest neighbours (numpy), not Redis's HNSW: this measures the vectors.
"""

from typing import Any

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand

from bench import calibration
from caching.evidence import FLOOR
from caching.semantic import PROBE_CANDIDATES, probe_floor
from caching.verify.verdict import verify
from inference.embeddings import OnnxMiniLM
from inference.probe_embeddings import ProbeEmbedder

SERVED_AT = 0.85
FLOORS = (FLOOR, 0.92)


class Command(BaseCommand):
    help = __doc__

    def handle(self, *args: Any, **options: Any) -> None:
        minilm = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)
        probe = ProbeEmbedder(settings.EMBEDDING_MODEL_DIR)
        floors = " | ".join(f"MiniLM >= {f}: pairs, under probe {probe_floor(f)}" for f in FLOORS)
        self.stdout.write(
            f"| data set | {floors} | stored | served pairs | in probe's {PROBE_CANDIDATES} "
            "| in MiniLM's 4 |"
        )
        self.stdout.write("|---|---|---|---|---|---|---|")
        for name, pairs in calibration.data_sets().items():
            texts = sorted({p.a for p in pairs} | {p.b for p in pairs})
            full = {t: v for t, v in zip(texts, _minilm(minilm, texts), strict=True)}
            probes = {t: _probe(probe, t) for t in texts}
            cosine = np.array([float(full[p.a] @ full[p.b]) for p in pairs])
            probe_cosine = np.array([float(probes[p.a] @ probes[p.b]) for p in pairs])
            cells = []
            for floor in FLOORS:
                reachable = cosine >= floor
                dropped = int((probe_cosine[reachable] < probe_floor(floor)).sum())
                share = dropped / max(int(reachable.sum()), 1)
                cells.append(f"{int(reachable.sum())}, {dropped} ({share:.1%})")
            stored = sorted({p.a for p in pairs})
            index = {text: i for i, text in enumerate(stored)}
            stored_full = np.stack([full[t] for t in stored])
            stored_probes = np.stack([probes[t] for t in stored])
            served = in_probe = in_minilm = 0
            for pair, similarity in zip(pairs, cosine, strict=True):
                if similarity < SERVED_AT or not verify(pair.b, pair.a).accepted:
                    continue
                served += 1
                own = index[pair.a]
                by_probe = stored_probes @ probes[pair.b]
                by_minilm = stored_full @ full[pair.b]
                in_probe += int((by_probe > by_probe[own]).sum()) < PROBE_CANDIDATES
                in_minilm += int((by_minilm > by_minilm[own]).sum()) < 4
            self.stdout.write(
                f"| {name} | {' | '.join(cells)} | {len(stored)} | {served} | "
                f"{in_probe / max(served, 1):.3f} | {in_minilm / max(served, 1):.3f} |"
            )


def _minilm(model: OnnxMiniLM, texts: list[str]) -> list[np.ndarray]:
    vectors = []
    for text in texts:
        vector = model.embed_whole(text)
        if vector is None:
            raise ValueError(f"a benchmark text is too long to embed: {text[:60]!r}")
        vectors.append(vector)
    return vectors


def _probe(model: ProbeEmbedder, text: str) -> np.ndarray:
    vector = model.vector(text)
    if vector is None:
        raise ValueError(f"a benchmark text is too long to probe: {text[:60]!r}")
    return vector
