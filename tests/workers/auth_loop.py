"""Child process: authenticate one key in a loop; report when it stops working."""

import asyncio
import sys
import time

import django

django.setup()

from gateway.accounts.authentication import AuthenticationFailed, authenticate_key  # noqa: E402


async def watch(raw_key: str) -> None:
    await authenticate_key(raw_key, "inference")
    print("ok", flush=True)
    while True:
        try:
            await authenticate_key(raw_key, "inference")
        except AuthenticationFailed as exc:
            print(f"rejected {time.time():.3f} {exc}", flush=True)
            return
        await asyncio.sleep(0.02)  # the watch's resolution: it reports when the key stopped


if __name__ == "__main__":
    asyncio.run(watch(sys.argv[1]))
