"""An idle chat socket stays open: the channel layer's Redis reads outlast its blocking pop."""

import asyncio
import json
import os
from typing import Any

import aiohttp
import pytest
from channels_redis.core import RedisChannelLayer

from foundation.channel_layer import CHANNEL_LAYER_SOCKET_TIMEOUT_S, channel_layers_for

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


async def _idle_then_chat(url: str, key: str) -> list[dict[str, Any]]:
    ws_url = url.replace("http://", "ws://") + "/ws/chat/"
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(ws_url, headers={"Origin": url}, heartbeat=None) as socket,
    ):
        await socket.send_json({"type": "auth", "api_key": key})
        assert (await socket.receive_json(timeout=5))["type"] == "ready"
        assert (await socket.receive_json(timeout=5))["type"] == "quota"
        # Nothing for a minute: a closed socket shows up here as a CLOSE/CLOSED message.
        idle = await _next_message_within(socket, IDLE_S)
        assert idle is None, f"the server spoke or closed while idle: {idle}"
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
