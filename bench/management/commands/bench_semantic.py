"""python manage.py bench_semantic: semantic lookup latency (probe, search, verify, then
MiniLM for a question with a verified candidate, and the error bound's evidence under
--bound), the path a deterministic request that missed the exact cache takes, against a
vector set of --entries STS-B sentences in a real Redis 8 (the bundled one unless
--redis-url). Each concurrency runs the threshold and the bound side by side. The entries
keep MiniLM's vectors, as those stored after a lookup that scored do; with
--without-vectors they keep none, so a candidate's first scoring in the process embeds it
too (caching/semantic_scores.py). With --team-id, lookups are a team's, as served: its
lookup log is written, and its audits per evidence cell are read (a record holding every
cell of the table: caching/cell_audits.py; only in the bench's own Redis)."""

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench.semantic_evaluation import sts_b_pairs
from caching import cell_audits, eviction, semantic
from caching.evidence import false_hit_table
from caching.exact import CachedReply
from caching.semantic_keys import SemanticSlot
from foundation import embedded_redis
from foundation.redis_clients import async_cache_redis, reset_clients
from inference.embeddings import OnnxMiniLM

CONTEXT = "bench-semantic"


class Command(BaseCommand):
    help = __doc__
    team_id: int | None = None

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--entries", type=int, default=10_000)
        parser.add_argument("--queries", type=int, default=1_000)
        parser.add_argument("--concurrency", default="1,16")
        parser.add_argument("--redis-url", default="")
        parser.add_argument("--without-vectors", action="store_true")
        parser.add_argument("--team-id", type=int, default=None)
        parser.add_argument(
            "--bound",
            type=float,
            default=0.02,
            help="also measure lookups under this error bound (max_false_hit_rate)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["team_id"] is not None and options["redis_url"]:
            raise CommandError("--team-id writes audits for the team: only in the bench's Redis")
        with tempfile.TemporaryDirectory() as scratch:
            process = None
            url = options["redis_url"]
            if not url:
                process, url = embedded_redis.start(Path(scratch), persistent=False)
            settings.CACHE_REDIS_URL = url
            reset_clients()
            try:
                asyncio.run(self._run(options))
            finally:
                if process is not None:
                    process.terminate()
                    process.wait(timeout=10)

    async def _run(self, options: dict[str, Any]) -> None:
        embedder = OnnxMiniLM(settings.EMBEDDING_MODEL_DIR)
        pairs = sts_b_pairs()
        stored = list(dict.fromkeys(p.a for p in pairs))[: options["entries"]]
        # A query stored word for word would take the own-question shortcut (no
        # verification, no evidence): not what a lookup of another wording costs.
        known = set(stored)
        queries = [p.b for p in pairs if p.b not in known][: options["queries"]]
        started = time.perf_counter()
        await self._fill(embedder, stored, not options["without_vectors"])
        self.team_id = options["team_id"]
        if self.team_id is not None:
            client = async_cache_redis()
            for index, cell in enumerate(false_hit_table().cells):
                entry = f"bench-entry-{index}"  # each cell's count from its own entry
                await cell_audits.record(client, self.team_id, cell, True, entry)
        self.stdout.write(
            f"stored {len(stored)} questions in one context (a vector set per anchors) in "
            f"{time.perf_counter() - started:.0f} s"
        )
        self.stdout.write(
            "| rule | concurrency | lookups/s | probe P50 | P50 | P99 | embedded | hits |"
        )
        self.stdout.write("|---|---|---|---|---|---|---|---|")
        for level in [int(c) for c in options["concurrency"].split(",")]:
            for bound in (None, options["bound"]):  # side by side, in one run
                await self._measure(queries, level, bound)

    async def _fill(self, embedder: OnnxMiniLM, questions: list[str], vectors: bool) -> None:
        budget = eviction.Budget("bench", 2**40)
        reply = CachedReply("a cached reply of typical length " * 8, "stop", 20, 64)
        for start in range(0, len(questions), 64):
            batch = questions[start : start + 64]
            for question, vector in zip(batch, embedder.embed_batch(batch), strict=True):
                kept = vector if vectors else None
                slot = await semantic.probed(SemanticSlot.of(CONTEXT, question, vector=kept))
                assert slot is not None
                await semantic.store(slot, reply, budget, 3600, 1)

    async def _measure(self, queries: list[str], level: int, bound: float | None) -> None:
        probe_s: list[float] = []
        total_s: list[float] = []
        hits, embedded = 0, 0
        pending = iter(queries)

        async def worker() -> None:
            nonlocal hits, embedded
            for question in pending:
                began = time.perf_counter()
                slot = await semantic.probed(SemanticSlot.of(CONTEXT, question))
                probed = time.perf_counter()
                assert slot is not None
                found = await semantic.lookup(
                    slot, settings.CACHE_SEMANTIC_THRESHOLD, True, self.team_id, bound
                )
                total_s.append(time.perf_counter() - began)
                probe_s.append(probed - began)
                hits += found.match is not None
                embedded += found.slot.vector is not None

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(level)))
        elapsed = time.perf_counter() - began
        rule = (
            f"threshold {settings.CACHE_SEMANTIC_THRESHOLD}"
            if bound is None
            else f"bound {bound:.1%}"
        )
        self.stdout.write(
            f"| {rule} | {level} | {len(total_s) / elapsed:.0f} | {_ms(probe_s, 50)} | "
            f"{_ms(total_s, 50)} | {_ms(total_s, 99)} | {embedded} | {hits}/{len(total_s)} |"
        )


def _ms(samples: list[float], percentile: int) -> str:
    cut = (
        statistics.quantiles(samples, n=100, method="inclusive")[percentile - 1]
        if percentile < 100
        else max(samples)
    )
    return f"{cut * 1000:.2f} ms"
