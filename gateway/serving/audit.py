"""The semantic cache's audit: a sampled semantic hit is answered again by the model and
the two replies compared, so the cache learns from outcomes nobody reports.

A team's cache policy sets `audit_rate` (0 by default); each semantic hit is drawn with
that chance (caching/cache_plan.py). After the hit has been served and settled, the same
request goes to a worker of the deployment in the background, at batch priority (behind
every interactive request), and only while a worker is routable (an audit never waits
for, or wakes, a deployment scaled to zero). At most AUDITS_IN_FLIGHT audits exist at a
time per process: a hit drawn while that many run is not audited (counted as skipped), so
audits never pile up in the dispatcher's queue, which the autoscaler reads as demand. Only
deterministic requests are audited (a sampled reply, cached under `cache_sampled`, would
differ from any fresh draw). Its tokens are the platform's (counted in
`sluice_cache_semantic_audit_tokens_total`), never the team's quota or bill.

The fresh reply agrees with the cached one when the texts are equal, or when verification
finds no contradiction between the replies (the same negation, numbers and dates, no
opposite: "No, you should not" and "Yes, you can" embed at 0.94) and their embeddings
(the cache's own MiniLM, on the first COMPARED_CHARS of each) are at least AGREEMENT
similar. Agreement is counted on the entry and lowers its false-hit probability under an
error bound, by at most half (caching/evidence.py); a disagreement takes the entry out of
service for every other question, as a false-hit report does (caching/semantic.py). Where
the hit had an evidence cell (it was verified), the outcome is counted in the team's cell
too, once per entry (caching/cell_audits.py): a cell the team's audits find wrong more
often than the bound stops serving that team. So is the outcome of comparing a fresh
reply with the candidate the bound turned down (compare_turned_down), drawn at the same
rate among misses, at no model cost.

An exact re-ask teaches the entry the same way, at no cost to anyone: a team that asks
a request a semantic hit answered again within 10 minutes, bypassing the caches
(`Cache-Control: no-cache`, as a client does when a reply looked wrong), pays for a fresh
reply it asked for; that reply is compared with the cached one as an audit's is, and the
outcome recorded on the entry (learn_from_reask, counted in
`sluice_cache_semantic_reasks_total`).

What agreement cannot tell: a model that words a correct answer differently for the
paraphrase reads as a disagreement: the audit errs towards turning entries down.
"""

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from caching import cell_audits, responses, semantic
from caching.exact import CachedReply, CacheUnavailable
from caching.verify.verdict import verify
from foundation import metrics
from foundation.redis_clients import REDIS_FAILURES, async_cache_redis
from inference.client import UpstreamError
from inference.deployments import DeploymentInfo
from inference.embeddings import EmbedderUnavailable, TextTooLong, loaded_embedder
from inference.reply import ReplyAssembler
from scaling.routing.dispatcher import Dispatcher, NoHealthyWorker, Priority, QueueTimeout
from scaling.routing.fair_queue import Tenant
from scaling.routing.router import RouteContext
from scaling.routing.streaming import stream_completion

logger = logging.getLogger(__name__)
AGREEMENT = 0.90
COMPARED_CHARS = 1000
AUDITS_IN_FLIGHT = 2
# Verification's reasons that make two replies say different things. Not names or word
# order: two right answers name things in their own order ("The capital of France is
# Paris." / "Paris is France's capital.").
CONTRADICTIONS = frozenset({"negation", "numbers", "dates", "antonyms"})
AUDITOR = Tenant("platform:audit", 1, AUDITS_IN_FLIGHT)
_running: set["asyncio.Task[str]"] = set()
_comparing = 0  # compare_turned_down calls in flight


@dataclass(frozen=True)
class AuditJob:
    """A served semantic hit, and how to ask its question again."""

    request_id: str
    deployment: DeploymentInfo
    entry_key: str  # the semantic entry that answered
    cached: CachedReply
    body: dict[str, Any]  # the upstream body the request would have been sent with
    route: RouteContext
    path: str
    team_cell: tuple[int, str | None]  # the team, and the hit's evidence cell if verified


def schedule(dispatcher: Dispatcher, job: AuditJob) -> None:
    """Start the audit in the background (the request it audits is already answered), or
    skip it while AUDITS_IN_FLIGHT audits run in this process."""
    if len(_running) >= AUDITS_IN_FLIGHT:
        metrics.labelled(metrics.semantic_audits, "skipped").inc()
        return
    task = asyncio.get_running_loop().create_task(run(dispatcher, job))
    _running.add(task)
    task.add_done_callback(_running.discard)


async def run(dispatcher: Dispatcher, job: AuditJob) -> str:
    """The audit's outcome: agreed, disagreed or failed (no fresh answer, or it could not
    be kept). Never raises: a background task's failure is logged and counted here."""
    try:
        outcome = await _audit(dispatcher, job)
    except Exception:
        logger.exception("audit of %s failed", job.request_id)
        outcome = "failed"
    metrics.labelled(metrics.semantic_audits, outcome).inc()
    logger.info("semantic cache audit of %s (%s): %s", job.request_id, job.entry_key, outcome)
    return outcome


async def _audit(dispatcher: Dispatcher, job: AuditJob) -> str:
    fresh = await _regenerate(dispatcher, job)
    if fresh is None:
        return "failed"
    compared = await compare_replies(job.cached.content, fresh)
    agreed = compared is True
    # The entry errs towards being turned down; its team's cell learns only from a verdict.
    team_cell = job.team_cell if compared is not None else None
    try:
        await semantic.record_audit(async_cache_redis(), job.entry_key, agreed, team_cell)
    except REDIS_FAILURES as exc:
        logger.warning("audit of %s: outcome not kept: %s", job.request_id, exc)
        return "failed"
    return "agreed" if agreed else "disagreed"


async def _regenerate(dispatcher: Dispatcher, job: AuditJob) -> str | None:
    if not await dispatcher.fleet.routable(job.deployment.name):
        logger.info("audit of %s: no worker routable now; not waiting", job.request_id)
        return None
    reply = ReplyAssembler()
    usage: dict[str, Any] = {}
    try:
        async for _, chunk in stream_completion(
            dispatcher,
            job.deployment.name,
            job.body,
            Priority.BATCH,
            route=job.route,
            tenant=AUDITOR,
            path=job.path,
            headers=job.deployment.worker_headers,
        ):
            reply.add(chunk)
            usage = chunk.get("usage") or usage
    except (UpstreamError, NoHealthyWorker, QueueTimeout) as exc:
        logger.info("audit of %s: no fresh answer: %s", job.request_id, exc)
        return None
    tokens = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    metrics.labelled(metrics.semantic_audit_tokens, job.deployment.name).inc(tokens)
    return reply.text


async def learn_from_reask(request_id: str, exact_key: str, fresh: str) -> None:
    """A fresh reply to a request the caches were told to bypass: if a semantic hit
    answered this very request lately (caching/responses.py notes it), compare the two
    and record the outcome on the entry. In the background, after the reply; never
    raises (a failure is logged and counted)."""
    try:
        found = await responses.reasked_hit(exact_key)
        if found is None:
            return
        entry_key = found.entry_key
        agreed = await replies_agree(found.content, fresh)
        if agreed and not found.first:
            metrics.labelled(metrics.semantic_reasks, "repeated").inc()
            return  # this request agreed before: no new evidence
        await semantic.record_audit(async_cache_redis(), entry_key, agreed)
    except (CacheUnavailable, *REDIS_FAILURES) as exc:
        logger.warning("re-ask %s: not compared with its earlier hit: %s", request_id, exc)
        metrics.labelled(metrics.semantic_reasks, "failed").inc()
        return
    except Exception:
        logger.exception("re-ask %s: comparing it with its earlier hit failed", request_id)
        metrics.labelled(metrics.semantic_reasks, "failed").inc()
        return
    outcome = "agreed" if agreed else "disagreed"
    metrics.labelled(metrics.semantic_reasks, outcome).inc()
    logger.info("semantic cache re-ask %s (%s): %s", request_id, entry_key, outcome)


async def compare_turned_down(
    request_id: str, team_id: int, turned_down: semantic.SemanticMatch, fresh: str
) -> None:
    """A miss drawn for an audit whose best verified candidate the bound turned down:
    compare that candidate's reply with the fresh one this request got, and count the
    outcome in the team's evidence cell of the candidate (caching/cell_audits.py), not on
    the entry, which gave no hit. No model time: the fresh reply was made for the miss.
    In the background, after the reply; never raises (a failure is logged and counted)."""
    global _comparing
    if turned_down.cell is None:
        return
    if _comparing >= AUDITS_IN_FLIGHT:  # each embeds two replies on the gateway's core
        metrics.labelled(metrics.semantic_audits, "turned_down_skipped").inc()
        return
    _comparing += 1
    try:
        compared = await compare_replies(turned_down.reply.content, fresh)
        if compared is None:  # nothing to compare with: no verdict for the cell
            metrics.labelled(metrics.semantic_audits, "turned_down_failed").inc()
            return
        agreed = compared
        client, entry_key = async_cache_redis(), turned_down.entry_key
        counted = await cell_audits.record(client, team_id, turned_down.cell, agreed, entry_key)
    except REDIS_FAILURES as exc:
        logger.warning("audit of the candidate %s turned down: not kept: %s", request_id, exc)
        metrics.labelled(metrics.semantic_audits, "turned_down_failed").inc()
        return
    except Exception:
        logger.exception("audit of the candidate %s turned down failed", request_id)
        metrics.labelled(metrics.semantic_audits, "turned_down_failed").inc()
        return
    finally:
        _comparing -= 1
    outcome = "turned_down_agreed" if agreed else "turned_down_disagreed"
    if not counted:
        outcome = "turned_down_counted_before"
    metrics.labelled(metrics.semantic_audits, outcome).inc()
    logger.info(
        "semantic cache audit of %s, candidate %s turned down (%s): %s",
        request_id,
        turned_down.entry_key,
        turned_down.cell,
        outcome,
    )


async def replies_agree(cached: str, fresh: str) -> bool:
    """Equal texts; or replies verification accepts as saying the same (their beginnings)
    whose embeddings are at least AGREEMENT similar. Without an embedder to compare them
    with, not counted as agreement."""
    return await compare_replies(cached, fresh) is True


async def compare_replies(cached: str, fresh: str) -> bool | None:
    """replies_agree's verdict, or None when the embeddings it needs cannot be made (no
    embedder, a reply MiniLM cannot read whole): no verdict."""
    if cached.strip() == fresh.strip():
        return True
    if not cached.strip() or not fresh.strip():
        return False
    if verify(fresh[:COMPARED_CHARS], cached[:COMPARED_CHARS]).reason in CONTRADICTIONS:
        return False
    try:
        embedder = await loaded_embedder()
        left = await embedder.embed(cached[:COMPARED_CHARS])
        right = await embedder.embed(fresh[:COMPARED_CHARS])
    except (EmbedderUnavailable, TextTooLong):
        return None
    return float(np.dot(left, right)) >= AGREEMENT
