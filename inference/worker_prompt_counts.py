"""Prompt tokens counted by the deployment's own worker, for models whose folder is not on
the gateway's host (inference/prompt_tokens.py counts those whose folder is).

A remote vLLM worker (or the simulator) counts a prompt exactly as it will bill it: its
/tokenize takes the same messages, tools and generation prompt as a chat completion and
answers {"count": n}. Admission asks one routable worker of the deployment, bounded by a
short timeout (WORKER_COUNT_TIMEOUT_S), and keeps the answer in a per-process LRU, so
a retried or repeated prompt is counted once. A worker that could not count is not asked
again for BACK_OFF_S (the deployment's other workers are, or its prompts are estimated).

The LRU is keyed by team as well as by the prompt's digest: a count served from it is
faster than one asked of a worker, and a shared entry would tell a team, by timing, that
another team sent the same prompt recently. Only the count is kept, never the prompt.

When no worker can count (none routable: the deployment scales from zero or is down; the
worker failed or was slow; an OpenAI-compatible server, which has no /tokenize; an image
part, which only the worker expands) the caller falls back to the upper-leaning estimate,
counted in sluice_prompt_counted{how="estimated"} and logged (at most once a minute per
deployment), and reconcile corrects the reservation to the worker's usage as before.
"""

import hashlib
import logging
import random
import time
from collections import OrderedDict

from django.conf import settings

from foundation.json_bytes import sorted_json_bytes
from foundation.single_flight import SingleFlight
from inference.chat_request import ChatRequest
from inference.client import UpstreamError, count_prompt_tokens
from inference.deployments import DeploymentInfo
from inference.snapshot import WorkerView, fleet_view

logger = logging.getLogger(__name__)
LOG_EVERY_S = 60.0
# A worker tokenizes this many in well under WORKER_COUNT_TIMEOUT_S; a timeout on a shorter
# prompt means the worker is slow, on a longer one perhaps only that the prompt is long.
LONG_PROMPT_TOKENS = 8_000
# After a worker could not count (no /tokenize, an error, too slow), the deployment's
# prompts are estimated without asking for this long: a worker without the endpoint, or
# one too loaded to answer in time, must not cost every admission a failed request.
BACK_OFF_S = 30.0


class WorkerPromptCounts:
    """Counts asked of workers, remembered per (team, deployment revision, prompt)."""

    def __init__(self, capacity: int = 8192) -> None:
        self.capacity = capacity
        self._counts: OrderedDict[bytes, int] = OrderedDict()
        self._logged_at: dict[str, float] = {}
        self._unable_until: dict[str, float] = {}
        self._asking: SingleFlight[int | None] = SingleFlight()

    async def count(
        self, team_id: int, deployment: DeploymentInfo, chat: ChatRequest
    ) -> tuple[int, str] | None:
        """The prompt's count and how it was had ("worker_remembered", or "worker": asked,
        once for every identical prompt of the team's in flight at that moment), or None
        when no worker could count it (see ask)."""
        key = _key(team_id, deployment, chat)
        count = self._recall(key)
        if count is not None:
            return count, "worker_remembered"
        # Shared within the team only: another team's identical prompt answered sooner
        # would tell it, by timing, that this prompt was just sent.
        asked = await self._asking.run(key, lambda: self.ask(deployment, chat))
        if asked is None:
            return None
        self._remember(key, asked)
        return asked, "worker"

    def remembered(self, team_id: int, deployment: DeploymentInfo, chat: ChatRequest) -> int | None:
        return self._recall(_key(team_id, deployment, chat))

    def _recall(self, key: bytes) -> int | None:
        count = self._counts.get(key)
        if count is not None:
            self._counts.move_to_end(key)  # used: the newest
        return count

    def remember(
        self, team_id: int, deployment: DeploymentInfo, chat: ChatRequest, count: int
    ) -> None:
        self._remember(_key(team_id, deployment, chat), count)

    def _remember(self, key: bytes, count: int) -> None:
        self._counts[key] = count
        while len(self._counts) > self.capacity:
            self._counts.popitem(last=False)

    async def ask(self, deployment: DeploymentInfo, chat: ChatRequest) -> int | None:
        """The worker's count, or None (logged) when no worker could give it in time.

        A worker that could not count at all (no answer, too slow for a prompt of up to
        LONG_PROMPT_TOKENS, no /tokenize, a 5xx) is not asked again for BACK_OFF_S. A
        worker that refused this one prompt (any other 4xx: a template that rejects its
        role order, say), or was too slow for a longer one, says nothing about the next:
        only this request is estimated, so no team's request can switch counting off for
        the others."""
        now = time.monotonic()
        workers = [
            w
            for w in await fleet_view.routable(deployment.name)
            if self._unable_until.get(w.url, float("-inf")) <= now
        ]
        if not workers:
            self._log(deployment, "no worker is routable to count it, or none could lately")
            return None
        worker = _least_busy(workers)
        try:
            return await count_prompt_tokens(
                worker.url,
                worker.upstream_model,
                chat.messages,
                chat.options.get("tools"),
                chat.text_prompt,
                deployment.worker_headers,
                timeout_s=settings.WORKER_COUNT_TIMEOUT_S,
                chat_template_kwargs=chat.options.get("chat_template_kwargs"),
            )
        except UpstreamError as exc:
            if not _refused_this_prompt(exc) and not _slow_for_its_size(exc, chat):
                now = time.monotonic()
                # Expired back-offs go as one is added: pods come and go, URLs with them.
                for url in [u for u, until in self._unable_until.items() if until <= now]:
                    del self._unable_until[url]
                self._unable_until[worker.url] = now + BACK_OFF_S
                self._log(deployment, f"{exc} (not asked again for {BACK_OFF_S:.0f} s)")
            return None

    def clear(self) -> None:
        self._counts.clear()
        self._logged_at.clear()
        self._unable_until.clear()

    def _log(self, deployment: DeploymentInfo, why: str) -> None:
        now = time.monotonic()
        if now - self._logged_at.get(deployment.name, float("-inf")) < LOG_EVERY_S:
            return
        self._logged_at[deployment.name] = now
        logger.warning(
            "prompt tokens of %s are estimated (bytes / 3) at admission: %s",
            deployment.name,
            why,
        )


def asks_workers(deployment: DeploymentInfo, chat: ChatRequest) -> bool:
    """Whether the deployment's workers can count this prompt: vLLM and the simulator have
    /tokenize; an OpenAI-compatible server does not; an image part is the worker's to
    expand into however many tokens its vision encoder makes."""
    return (
        settings.WORKER_COUNT_PROMPTS and deployment.speaks_vllm and chat.first_image_part() is None
    )


def _refused_this_prompt(exc: UpstreamError) -> bool:
    status = exc.status
    return status is not None and 400 <= status < 500 and status not in (404, 405)


def _slow_for_its_size(exc: UpstreamError, chat: ChatRequest) -> bool:
    """A long prompt that took longer than the timeout to tokenize says nothing about the
    worker: backing off for it would let one team, sending such prompts, switch counting
    off for every team's requests (each then estimated, reserved high, perhaps refused)."""
    timed_out = isinstance(exc.__cause__, TimeoutError)
    return timed_out and chat.estimated_prompt_tokens() > LONG_PROMPT_TOKENS


def _least_busy(workers: list[WorkerView]) -> WorkerView:
    """The least loaded worker, ties broken at random: between two snapshot refreshes the
    figures do not move, and a fixed order would send every ask to one API server."""
    least = min(w.running + w.waiting for w in workers)
    return random.choice([w for w in workers if w.running + w.waiting == least])


def _key(team_id: int, deployment: DeploymentInfo, chat: ChatRequest) -> bytes:
    # A tool's schema may hold an integer over 64 bits ("maximum": 1e20 written out), which
    # orjson refuses: it was a 500 here.
    prompt = sorted_json_bytes(
        [
            chat.text_prompt,
            chat.messages,
            chat.options.get("tools"),
            chat.options.get("chat_template_kwargs"),
        ]
    )
    digest = hashlib.blake2b(prompt, digest_size=16)
    names = (team_id, deployment.name, deployment.served_model_name, deployment.revision)
    digest.update("\x1f".join(map(str, names)).encode())
    return digest.digest()


worker_prompt_counts = WorkerPromptCounts()
