"""The WebSocket chat protocol against the real ASGI application and a simulator worker."""

import asyncio
import time
from typing import Any

import aiohttp
import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from foundation.redis_clients import async_redis
from gateway.accounts import actions
from gateway.accounts.models import Team
from gateway.asgi import application
from gateway.usage.ledger import STREAM, ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from inference.client import close_http_session
from inference.scraper import Scraper
from tests.waiting import async_wait_until

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = [(b"origin", b"http://127.0.0.1:8000")]
HELLO = {
    "type": "chat",
    "model": "small-model",
    "max_tokens": 300,
    "ignore_eos": True,
    "messages": [{"role": "user", "content": "Tell me a story"}],
}


@pytest.fixture
def sim(upstream_sim):
    return upstream_sim


@pytest.fixture
def api_key(sim):
    # Its own policy: 100 requests per minute and no other limit (not the default's).
    team = actions.create_team("Acme", **{**actions.NO_LIMITS, "requests_per_minute": 100})
    deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
    fleet.register_worker(deployment, sim.url, registered_by="test")
    return actions.issue_api_key(team).plaintext


async def connected(api_key: str | None) -> WebsocketCommunicator:
    async with aiohttp.ClientSession() as session:
        await Scraper().scrape_once(session)  # publish the worker to the fleet snapshot
    socket = WebsocketCommunicator(application, "/ws/chat/", headers=ORIGIN)
    connected_, _ = await socket.connect()
    assert connected_
    if api_key is not None:
        await socket.send_json_to({"type": "auth", "api_key": api_key})
        assert (await socket.receive_json_from(timeout=5))["type"] == "ready"
        assert (await socket.receive_json_from(timeout=5))["type"] == "quota"
    return socket


async def worker_idle_within(sim, seconds: float) -> None:
    """The worker has no request running within `seconds` (the generation was aborted)."""
    await async_wait_until(
        lambda: sim.metric("vllm:num_requests_running") == 0,
        seconds,
        "the worker to abort the generation",
    )


@pytest.mark.live
def test_a_key_client_streams_deltas_then_done_with_usage(api_key):
    async def scenario():
        socket = await connected(api_key)
        await socket.send_json_to({**HELLO, "max_tokens": 8})
        events: list[dict[str, object]] = []
        while not events or events[-1]["type"] not in ("done", "error"):
            events.append(await socket.receive_json_from(timeout=10))
        await socket.disconnect()
        await close_http_session()
        return events

    events = asyncio.run(scenario())
    assert [e["type"] for e in events[:-1]] == ["delta"] * 8
    assert events[-1]["type"] == "done"
    assert events[-1]["usage"]["completion_tokens"] == 8


@pytest.mark.live
def test_a_fault_of_the_servers_own_is_an_error_event_and_the_socket_goes_on(
    api_key, monkeypatch, caplog
):
    """A bug on the reply's path (here injected: opening the completion raises) must not
    leave the page waiting for a reply that has ended: HTTP would answer a 500, the
    socket sends the same error, and the next message is served."""
    from gateway.chat import consumers
    from gateway.serving.pipeline import open_completion as real_open

    faults = [RuntimeError("injected fault")]

    async def failing_once(*args: Any, **kwargs: Any) -> Any:
        if faults:
            raise faults.pop()
        return await real_open(*args, **kwargs)

    monkeypatch.setattr(consumers, "open_completion", failing_once)

    async def scenario():
        socket = await connected(api_key)
        await socket.send_json_to({**HELLO, "max_tokens": 4})
        failed = await socket.receive_json_from(timeout=10)
        await socket.send_json_to({**HELLO, "max_tokens": 4})
        events: list[dict[str, Any]] = []
        while not events or events[-1]["type"] not in ("done", "error"):
            events.append(await socket.receive_json_from(timeout=10))
        await socket.disconnect()
        await close_http_session()
        return failed, events

    failed, events = asyncio.run(scenario())
    assert failed["type"] == "error" and failed["error"]["code"] == "internal_error"
    assert "injected" not in str(failed)
    assert "injected fault" in caplog.text
    assert events[-1]["type"] == "done"


@pytest.mark.live
def test_stop_cancels_the_generation_on_the_worker(api_key, sim):
    async def scenario():
        socket = await connected(api_key)
        await socket.send_json_to(HELLO)
        for _ in range(3):
            assert (await socket.receive_json_from(timeout=10))["type"] == "delta"
        await socket.send_json_to({"type": "stop"})
        event = await socket.receive_json_from(timeout=10)
        while event["type"] == "delta":
            event = await socket.receive_json_from(timeout=10)
        await worker_idle_within(sim, 1.0)
        await socket.disconnect()
        await close_http_session()
        return event

    stopped = asyncio.run(scenario())
    assert stopped["type"] == "stopped"
    assert 3 <= stopped["usage"]["completion_tokens"] < 300


@pytest.mark.live
def test_closing_the_socket_mid_reply_cancels_the_worker_and_bills_what_was_sent(api_key, sim):
    async def scenario():
        socket = await connected(api_key)
        await socket.send_json_to(HELLO)
        for _ in range(3):
            assert (await socket.receive_json_from(timeout=10))["type"] == "delta"
        await socket.disconnect()  # no stop message: the browser tab was closed
        closed_at = time.monotonic()
        await worker_idle_within(sim, 1.0)

        async def settled() -> bool:  # its usage event is queued
            return await async_redis().xlen(STREAM) > 0

        await async_wait_until(
            settled, 2.0 - (time.monotonic() - closed_at), "the request to be settled"
        )
        await close_http_session()

    asyncio.run(scenario())
    ingest("test-consumer")
    record = UsageRecord.objects.get()
    assert record.status == "cancelled"
    assert 3 <= record.completion_tokens < 300


@pytest.mark.live
def test_a_logged_in_web_user_chats_on_their_team_without_a_key(api_key):
    user = get_user_model().objects.create_user("ann", password="a-long-password-1")
    actions.add_member(Team.objects.get(name="Acme"), user)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def scenario():
        async with aiohttp.ClientSession() as session:
            await Scraper().scrape_once(session)
        socket = WebsocketCommunicator(
            application, "/ws/chat/", headers=[*ORIGIN, (b"cookie", cookie)]
        )
        assert (await socket.connect())[0]
        await socket.send_json_to({**HELLO, "max_tokens": 3})
        events = [await socket.receive_json_from(timeout=10) for _ in range(6)]
        await socket.disconnect()
        await close_http_session()
        return events

    events = asyncio.run(scenario())
    assert [e["type"] for e in events] == ["quota", "delta", "delta", "delta", "done", "quota"]
    remaining = [
        {item["limit"]: item["remaining"] for item in e["limits"]} for e in (events[0], events[-1])
    ]
    assert remaining[0]["requests_per_minute"] == 100
    assert remaining[1]["requests_per_minute"] == 99
    assert remaining[0]["tokens_per_month"] is None  # unlimited stays unlimited


@pytest.mark.live
def test_chat_before_authenticating_is_refused(api_key):
    async def scenario():
        socket = await connected(None)
        await socket.send_json_to(HELLO)
        reply = await socket.receive_json_from(timeout=5)
        await socket.send_json_to({"type": "auth", "api_key": "sk-sluice-wrong"})
        bad_key = await socket.receive_json_from(timeout=5)
        await socket.disconnect()
        return reply, bad_key

    reply, bad_key = asyncio.run(scenario())
    assert reply["error"]["code"] == "unauthenticated"
    assert bad_key["error"]["code"] == "invalid_api_key"


@pytest.mark.unit
def test_a_foreign_origin_cannot_open_the_socket():
    async def scenario() -> bool:
        socket = WebsocketCommunicator(
            application, "/ws/chat/", headers=[(b"origin", b"https://evil.example")]
        )
        connected_, _ = await socket.connect()
        return bool(connected_)

    assert asyncio.run(scenario()) is False


@pytest.mark.live
def test_a_repeated_deterministic_chat_is_answered_from_the_cache(api_key, sim):
    question = {**HELLO, "max_tokens": 6, "temperature": 0, "ignore_eos": False}

    async def ask(
        socket: WebsocketCommunicator, body: dict[str, object]
    ) -> tuple[str, dict[str, object]]:
        await socket.send_json_to(body)
        text, event = "", await socket.receive_json_from(timeout=10)
        while event["type"] == "delta":
            text += str(event["content"])
            event = await socket.receive_json_from(timeout=10)
        return text, event

    async def scenario():
        socket = await connected(api_key)
        first = await ask(socket, question)
        await socket.receive_json_from(timeout=5)  # the quota after each reply
        generated = sim.metric("vllm:request_success_total")
        second = await ask(socket, question)
        await socket.receive_json_from(timeout=5)
        paraphrased = await ask(
            socket, {**question, "messages": [{"role": "user", "content": "tell me a story"}]}
        )
        unchanged = sim.metric("vllm:request_success_total") == generated
        await socket.disconnect()
        await close_http_session()
        return first, second, paraphrased, unchanged

    first, second, paraphrased, unchanged = asyncio.run(scenario())
    assert first[1]["cache"] == "miss"
    assert (second[1]["cache"], second[0]) == ("hit-exact", first[0])
    assert (paraphrased[1]["cache"], paraphrased[0]) == ("hit-semantic", first[0])
    assert unchanged  # neither reached the worker


@pytest.mark.live
def test_a_message_over_the_body_limit_is_refused_and_the_socket_closed(api_key, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048

    async def scenario():
        socket = await connected(api_key)
        await socket.send_to(text_data='{"type": "chat", "pad": "' + "x" * 4096 + '"}')
        refused = await socket.receive_json_from(timeout=5)
        closed = await socket.receive_output(timeout=5)
        await close_http_session()
        return refused, closed

    refused, closed = asyncio.run(scenario())
    assert refused["error"]["code"] == "request_too_large"
    assert closed == {"type": "websocket.close", "code": 1009}


@pytest.mark.live
def test_a_message_that_is_not_json_gets_an_error_and_the_socket_stays_open(api_key):
    async def scenario():
        socket = await connected(api_key)
        await socket.send_to(text_data="{not json")
        refused = await socket.receive_json_from(timeout=5)
        await socket.send_json_to({**HELLO, "max_tokens": 2})
        events = [await socket.receive_json_from(timeout=10) for _ in range(3)]
        await socket.disconnect()
        await close_http_session()
        return refused, events

    refused, events = asyncio.run(scenario())
    assert refused["error"]["code"] == "invalid_request"
    assert [e["type"] for e in events] == ["delta", "delta", "done"]


@pytest.mark.live
def test_a_socket_guessing_keys_is_closed_after_five_failures(api_key):
    async def scenario():
        socket = await connected(None)
        codes = []
        for guess in range(5):
            await socket.send_json_to({"type": "auth", "api_key": f"sk-sluice-guess{guess}"})
            codes.append((await socket.receive_json_from(timeout=5))["error"]["code"])
        last = await socket.receive_json_from(timeout=5)
        closed = await socket.receive_output(timeout=5)
        return codes, last, closed

    codes, last, closed = asyncio.run(scenario())
    assert codes == ["invalid_api_key"] * 5
    assert last["error"]["code"] == "too_many_failed_authentications"
    assert closed == {"type": "websocket.close", "code": 4429}


@pytest.mark.live
@pytest.mark.parametrize("ended_by", ["signing out", "a password change"])
def test_a_logged_in_socket_is_served_no_more_once_its_session_ends(api_key, ended_by):
    """A socket outlives the page that opened it, and a stolen session cookie's socket
    outlived its owner's signing out: every message now checks the session as a page does."""
    user = get_user_model().objects.create_user("ann", password="a-long-password-1")
    actions.add_member(Team.objects.get(name="Acme"), user)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    def end_the_session() -> None:
        if ended_by == "signing out":
            client.post("/accounts/logout/")
        else:
            user.set_password("another-long-password-2")
            user.save()

    async def scenario() -> list[dict[str, Any]]:
        async with aiohttp.ClientSession() as session:
            await Scraper().scrape_once(session)
        socket = WebsocketCommunicator(
            application, "/ws/chat/", headers=[*ORIGIN, (b"cookie", cookie)]
        )
        assert (await socket.connect())[0]
        assert (await socket.receive_json_from(timeout=5))["type"] == "quota"
        await sync_to_async(end_the_session)()
        await socket.send_json_to({**HELLO, "max_tokens": 3})
        refused = await socket.receive_json_from(timeout=10)
        await socket.disconnect()
        await close_http_session()
        return [refused]

    (refused,) = asyncio.run(scenario())
    assert refused["type"] == "error", refused
    assert refused["error"]["code"] == "unauthenticated"
    assert "session has ended" in refused["error"]["message"]
