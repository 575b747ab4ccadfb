"""Child process: wait for a shared start time, then fire N admissions at once."""

import argparse
import asyncio
import json
import time

import django

django.setup()

from gateway.accounts.quotas import AdmissionRequest, QuotaExceeded, admit  # noqa: E402
from gateway.accounts.records import QuotaLimits  # noqa: E402


async def burst(team_id: int, rpm: int, count: int) -> dict[str, object]:
    limits = QuotaLimits(requests_per_minute=rpm)
    request = AdmissionRequest(team_id=team_id, key_id="burst", prompt_tokens=10, max_tokens=10)

    async def one() -> float | None:
        try:
            await admit(limits, request)
        except QuotaExceeded as exc:
            return exc.retry_after_s
        return -1.0

    results = await asyncio.gather(*(one() for _ in range(count)))
    admitted = sum(1 for r in results if r == -1.0)
    return {"admitted": admitted, "retry_after": [r for r in results if r != -1.0]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--team", type=int, required=True)
    parser.add_argument("--rpm", type=int, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--start-at", type=float, required=True)
    options = parser.parse_args()
    # Every burst process starts at the same wall-clock moment, so their admissions race.
    time.sleep(max(options.start_at - time.time(), 0))
    print(json.dumps(asyncio.run(burst(options.team, options.rpm, options.count))), flush=True)


if __name__ == "__main__":
    main()
