"""An idle chat socket stays open: for a minute, and through a restart of the primary Redis
(the chat consumer holds no channel-layer read on it)."""

import asyncio
import json
import os
import subprocess
from typing import Any

import aiohttp
import pytest
from channels_redis.core import RedisChannelLayer

from foundation import embedded_redis
from foundation.channel_layer import CHANNEL_LAYER_SOCKET_TIMEOUT_S, channel_layers_for
from gateway.process_state import reset_process_state
from tests.conftest import live_platform

IDLE_S = float(os.environ.get("TEST_IDLE_S", "65"))


@pytest.mark.unit
def test_the_channel_layer_socket_timeout_outlasts_the_blocking_pop():
    # A channels-redis that blocks longer than our timeout would bring the 5 s close back.
    assert RedisChannelLayer.brpop_timeout < CHANNEL_LAYER_SOCKET_TIMEOUT_S
    config = channel_layers_for("redis://127.0.0.1:1/0")["default"]["CONFIG"]
    pool = RedisChannelLayer(**config).create_pool(0)
    assert pool.connection_kwargs["socket_timeout"] == CHANNEL_LAYER_SOCKET_TIMEOUT_S


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_socket_left_idle_for_a_minute_still_answers(platform):
    events = asyncio.run(_idle_then_chat(platform["gateway"].url, platform["key"]))
    assert [e["type"] for e in events][-2:] == ["done", "quota"]
    assert events[-2]["usage"]["completion_tokens"] == 3


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_open_socket_survives_a_restart_of_the_primary_redis(tmp_path, settings, upstream_sim):
    data = tmp_path / "redis"
    process, url = embedded_redis.start(data)
    settings.REDIS_URL = settings.CACHE_REDIS_URL = url
    reset_process_state()
    platform = live_platform(url, upstream_sim)
    try:
        running = next(platform)
        restarted: list[subprocess.Popen[bytes]] = []

        def restart() -> None:
            process.terminate()
            process.wait(timeout=10)
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            command = embedded_redis.redis_server_command(port, data, True)
            restarted.append(subprocess.Popen(command))
            embedded_redis.wait_until_ready(url, restarted[0])

        try:
            events = asyncio.run(_idle_then_chat(running["gateway"].url, running["key"], restart))
        finally:
            for server in restarted:
                server.terminate()
                server.wait(timeout=10)
        assert [e["type"] for e in events][-2:] == ["done", "quota"], events
    finally:
        platform.close()
        if process.poll() is None:
            process.terminate()


async def _idle_then_chat(
    url: str, key: str, meanwhile: Any = None, idle_s: float = IDLE_S
) -> list[dict[str, Any]]:
    ws_url = url.replace("http://", "ws://") + "/ws/chat/"
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(ws_url, headers={"Origin": url}, heartbeat=None) as socket,
    ):
        await socket.send_json({"type": "auth", "api_key": key})
        assert (await socket.receive_json(timeout=5))["type"] == "ready"
        assert (await socket.receive_json(timeout=5))["type"] == "quota"
        if meanwhile is not None:
            await asyncio.to_thread(meanwhile)
            idle_s = 3.0  # long enough for a dropped socket to show
        # Nothing for a while: a closed socket shows up here as a CLOSE/CLOSED message.
        idle = await _next_message_within(socket, idle_s)
        assert idle is None, f"the server spoke or closed while idle: {idle}"
        # After a Redis restart too, at once: a pooled connection the restart closed is
        # replaced when first used (foundation/redis_clients.py), not failed.
        return await _chat(socket)


async def _chat(socket: aiohttp.ClientWebSocketResponse) -> list[dict[str, Any]]:
    await socket.send_json(
        {
            "type": "chat",
            "model": "small-model",
            "max_tokens": 3,
            "ignore_eos": True,
            "messages": [{"role": "user", "content": "Still there?"}],
        }
    )
    events: list[dict[str, Any]] = []
    while not events or events[-1]["type"] not in ("quota", "error"):
        events.append(await socket.receive_json(timeout=10))
    return events


async def _next_message_within(
    socket: aiohttp.ClientWebSocketResponse, seconds: float
) -> object | None:
    # Not receive(timeout=...): each ping the server sends (uvicorn: every 20 s) restarts it.
    try:
        message = await asyncio.wait_for(socket.receive(), seconds)
    except TimeoutError:
        return None
    return (
        message.type,
        json.loads(message.data) if message.type == aiohttp.WSMsgType.TEXT else message.data,
    )
