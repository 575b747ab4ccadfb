"""A Batch API job running behind the chaos run's interactive load.

Why: a batch runner is the longest-lived request the platform has (a Celery task holding a
heartbeat for minutes), and its promise is the strongest: every line answered exactly
once, in the output or the error file and in the ledger, even when its runner is killed
(docs/batches.md, "Exactly once per line"). The run submits one batch at the start; at the
end it cancels the batch if it has not finished, waits for it to end, and reads both files,
which the checks hold against the ledger.

Calls go through the gateways as the load's do: a refused connection tries the other one,
and a poll that fails (a fault is on) is simply tried again later.
"""

import asyncio
import json
import time
from typing import Any

import aiohttp

from bench.chaos.history import BatchLineResult, BatchResult

ENDED = ("completed", "cancelled", "expired", "failed")


class BatchError(RuntimeError):
    pass


class BatchRun:
    def __init__(self, urls: list[str], key: str, team: str) -> None:
        self.urls = urls
        self.headers = {"Authorization": f"Bearer {key}"}
        self.team = team
        self.batch_id = ""
        self.lines = 0
        self.statuses: list[tuple[float, str, int]] = []  # (when, status, completed)

    async def _call(self, method: str, path: str, text: bool = False, **kwargs: Any) -> Any:
        last: Exception | None = None
        timeout = aiohttp.ClientTimeout(total=60)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            for url in self.urls:
                try:
                    async with session.request(
                        method, f"{url}/v1{path}", headers=self.headers, **kwargs
                    ) as response:
                        if response.status != 200:
                            answer = (await response.text())[:300]
                            raise BatchError(f"{method} {path}: {response.status} {answer}")
                        return await (response.text() if text else response.json())
                except aiohttp.ClientConnectorError as exc:
                    last = exc  # a gateway that is stopping: the other one
        raise BatchError(f"{method} {path}: no gateway answered: {last}")

    async def submit(self, model: str, lines: int, max_tokens: int) -> str:
        content = "".join(
            json.dumps(
                {
                    "custom_id": f"line-{number}",
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": model,
                        "messages": [
                            {"role": "user", "content": f"Batch line {number}: summarise it."}
                        ],
                        "max_tokens": max_tokens,
                        "ignore_eos": True,
                        "temperature": 1.0,
                    },
                }
            )
            + "\n"
            for number in range(lines)
        )
        form = aiohttp.FormData()
        form.add_field("purpose", "batch")
        form.add_field("file", content.encode(), filename="chaos.jsonl")
        uploaded = await self._call("POST", "/files", data=form)
        body = {
            "input_file_id": uploaded["id"],
            "endpoint": "/v1/chat/completions",
            "completion_window": "24h",
        }
        self.batch_id = str((await self._call("POST", "/batches", json=body))["id"])
        self.lines = lines
        return self.batch_id

    async def poll(self) -> dict[str, Any] | None:
        """The batch as the API shows it, or None if no gateway could say (a fault)."""
        try:
            batch: dict[str, Any] = await self._call("GET", f"/batches/{self.batch_id}")
        except (BatchError, aiohttp.ClientError, TimeoutError):
            return None
        counts = batch.get("request_counts") or {}
        self.statuses.append((time.time(), batch["status"], int(counts.get("completed", 0))))
        return batch

    async def watch(self, every_s: float = 5.0) -> None:
        """Poll until cancelled (the run's progress line shows where the batch is)."""
        while True:
            await self.poll()
            await asyncio.sleep(every_s)

    async def finish(self, timeout_s: float = 180.0) -> BatchResult:
        """Cancel it unless it ended, wait for it to end, read its files."""
        result = BatchResult(self.batch_id, self.team, "unknown", self.lines)
        deadline = time.monotonic() + timeout_s
        cancelled = False
        batch = await self.poll()
        while time.monotonic() < deadline:
            if batch is not None and batch["status"] in ENDED:
                break
            if not cancelled and batch is not None and batch["status"] != "cancelling":
                try:
                    await self._call("POST", f"/batches/{self.batch_id}/cancel")
                    cancelled = True
                except (BatchError, aiohttp.ClientError, TimeoutError) as exc:
                    result.detail = f"cancel failed: {exc}"
            await asyncio.sleep(2)
            batch = await self.poll()
        if batch is None:
            result.detail = "the batch could not be read at the end"
            return result
        result.status = str(batch["status"])
        if result.status not in ENDED:
            result.detail = f"still {result.status} {timeout_s:g} s after the load ended"
        result.output = await self._read(batch.get("output_file_id"))
        result.errors = await self._read(batch.get("error_file_id"))
        return result

    async def _read(self, file_id: str | None) -> list[BatchLineResult]:
        if not file_id:
            return []
        text = await self._call("GET", f"/files/{file_id}/content", text=True)
        return [line_result(json.loads(line)) for line in text.splitlines() if line.strip()]


def line_result(line: dict[str, Any]) -> BatchLineResult:
    response = line.get("response") or {}
    body = response.get("body") or {}
    usage = body.get("usage") or {}
    error = line.get("error") or body.get("error") or {}
    return BatchLineResult(
        custom_id=str(line.get("custom_id") or f"line {error.get('line')}"),
        request_id=response.get("request_id"),
        status_code=response.get("status_code"),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        error_code=error.get("code"),
    )
