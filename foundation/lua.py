"""The one way Lua scripts reach Redis: loaded from files, run by SHA, reloaded on NOSCRIPT.

Quota admission (gateway/accounts/lua/) and cache eviction (caching/lua/) each keep their
scripts beside their code; both run them through LuaScript, so a Redis restart (which
forgets loaded scripts) costs one extra round trip, never an error.

A batched script is loaded in the batch ahead of its first run on each connection (SCRIPT
LOAD, then EVALSHA, in order): a NOSCRIPT reply would have it run again later, after the
commands its caller submitted behind it, which the caches rely on following it (an
identical question asked again at once, looked up behind the store of its reply).
"""

import asyncio
import hashlib
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import redis.exceptions
from redis.asyncio import Redis

from foundation.redis_batch import CommandBatcher, may_go_unawaited


class LuaScript:
    def __init__(self, *files: Path) -> None:
        """One script from one or more files, joined in order (shared helpers first)."""
        self.source = "\n".join(path.read_text() for path in files)
        self.sha = hashlib.sha1(self.source.encode()).hexdigest()  # noqa: S324 - Redis's id

    async def run_batched(
        self,
        batcher: CommandBatcher,
        keys: Sequence[str],
        args: Sequence[int | str],
        abandoned: Callable[[Any], None] | None = None,
    ) -> Any:
        """run(), sharing a pipeline with whatever else this event-loop turn sends.

        abandoned: for a script whose effect someone must undo if its caller is cancelled
        (a client gone while its quota is being reserved). The command then still goes out
        and runs, and abandoned gets its reply, instead of the reply being dropped unread."""
        command = self._command(batcher, keys, args)
        reply = batcher.submit(*command)
        if abandoned is None:
            return await self._reply(batcher, reply, command)
        try:
            return await _handed_over_if_cancelled(reply, abandoned)
        except redis.exceptions.NoScriptError:  # a restarted Redis forgot it: it never ran
            pass
        # The run after reloading is handed over too: a caller gone during it (just after a
        # Redis restart) would otherwise leave its effect (a reservation) undone.
        rerun = asyncio.ensure_future(self._reloaded(batcher, command))
        return await _handed_over_if_cancelled(rerun, abandoned)

    def submitted(
        self, batcher: CommandBatcher, keys: Sequence[str], args: Sequence[int | str]
    ) -> Coroutine[Any, Any, Any]:
        """run_batched() whose command is in the batch before this returns: commands the
        caller submits next go after it, in the same pipeline. Await the result."""
        command = self._command(batcher, keys, args)
        return self._reply(batcher, batcher.submit(*command), command)

    def _command(
        self, batcher: CommandBatcher, keys: Sequence[str], args: Sequence[int | str]
    ) -> tuple[Any, ...]:
        if self.sha not in batcher.scripts_loaded:
            batcher.scripts_loaded.add(self.sha)
            # Its failure shows as the EVALSHA's NOSCRIPT, handled there.
            may_go_unawaited(batcher.submit("SCRIPT", "LOAD", self.source))
        return ("EVALSHA", self.sha, len(keys), *keys, *args)

    async def _reply(
        self, batcher: CommandBatcher, reply: "asyncio.Future[Any]", command: tuple[Any, ...]
    ) -> Any:
        try:
            return await reply
        except redis.exceptions.NoScriptError:  # a restarted Redis forgot it
            return await self._reloaded(batcher, command)

    async def _reloaded(self, batcher: CommandBatcher, command: tuple[Any, ...]) -> Any:
        await batcher.client.script_load(self.source)
        return await batcher.execute(*command)

    async def run(self, client: Redis, keys: Sequence[str], args: Sequence[int | str]) -> Any:
        try:
            return await client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            await client.script_load(self.source)
            return await client.evalsha(self.sha, len(keys), *keys, *args)


async def _handed_over_if_cancelled(
    reply: "asyncio.Future[Any]", abandoned: Callable[[Any], None]
) -> Any:
    """The reply; if the caller is cancelled first, the reply still arrives and goes to
    `abandoned` instead of being dropped unread."""
    try:
        return await asyncio.shield(reply)
    except asyncio.CancelledError:
        reply.add_done_callback(lambda done: _hand_over(done, abandoned))
        raise


def _hand_over(done: "asyncio.Future[Any]", abandoned: Callable[[Any], None]) -> None:
    if done.cancelled() or done.exception() is not None:
        return  # never ran, or failed: nothing to undo
    abandoned(done.result())
