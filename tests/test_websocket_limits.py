"""The chat socket's abuse limits, attacked: flooding one socket, flooding from many sockets
of one address (in one gateway process and across two), guessing keys across new sockets,
rotating X-Forwarded-For, and Redis going away (gateway/chat/limits.py)."""

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import aiohttp
import pytest
from channels.testing import WebsocketCommunicator

from foundation.rate_window import LocalWindow
from foundation.redis_clients import reset_clients
from gateway.accounts import actions
from gateway.asgi import application
from gateway.client_address import client_address
from inference import fleet
from inference.client import close_http_session
from inference.scraper import Scraper
from tests.live import LiveGateway

pytestmark = pytest.mark.django_db(transaction=True)
T = TypeVar("T")
ORIGIN = (b"origin", b"http://127.0.0.1:8000")
ATTACKER = "203.0.113.7"
BYSTANDER = "198.51.100.9"
# Sent before authenticating: each is answered with exactly one event (401 unauthenticated)
# while it is under the limits, which makes the count of handled messages easy to read.
UNAUTHENTICATED_CHAT = {
    "type": "chat",
    "model": "small-model",
    "messages": [{"role": "user", "content": "Hi"}],
}


def from_address(address: str) -> Any:
    """The real application, reached from `address` (as uvicorn fills scope["client"])."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await application({**scope, "client": (address, 40000)}, receive, send)

    return app


_opened: list[WebsocketCommunicator] = []


async def open_socket(address: str, *headers: tuple[bytes, bytes]) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(from_address(address), "/ws/chat/", headers=[ORIGIN, *headers])
    _opened.append(socket)
    connected, _ = await socket.connect()
    assert connected
    return socket


def run(scenario: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, then disconnect every socket the scenario opened, in the same loop: a
    consumer left for asyncio.run to cancel can keep its loop from ever closing."""

    async def then_disconnect() -> T:
        try:
            return await scenario
        finally:
            while _opened:
                await _opened.pop().disconnect()
            await close_http_session()

    return asyncio.run(then_disconnect())


async def ask_unauthenticated(socket: WebsocketCommunicator) -> str:
    """Send one chat before authenticating; the code of the error it gets."""
    await socket.send_json_to(UNAUTHENTICATED_CHAT)
    return str((await socket.receive_json_from(timeout=5))["error"]["code"])


async def guess(socket: WebsocketCommunicator, key: str) -> dict[str, Any]:
    await socket.send_json_to({"type": "auth", "api_key": key})
    event: dict[str, Any] = await socket.receive_json_from(timeout=5)
    return event


@pytest.fixture
def api_key():
    return actions.issue_api_key(actions.create_team("Acme", requests_per_minute=1000)).plaintext


@pytest.fixture
def served_key(api_key, upstream_sim):
    """A key whose team can chat with small-model, served by a simulator."""
    deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
    fleet.register_worker(deployment, upstream_sim.url, registered_by="test")
    return api_key


@pytest.mark.live
def test_a_socket_flooding_chats_is_refused_then_closed(served_key, upstream_sim, settings):
    settings.WS_MESSAGES_PER_MINUTE = 4  # the auth message and three chats
    settings.WS_REFUSALS_BEFORE_CLOSE = 3
    chat = {**UNAUTHENTICATED_CHAT, "max_tokens": 1}

    async def scenario() -> tuple[list[str], list[str], dict[str, Any], str]:
        async with aiohttp.ClientSession() as session:
            await Scraper().scrape_once(session)
        socket = await open_socket(ATTACKER)
        assert (await guess(socket, served_key))["type"] == "ready"
        await socket.receive_json_from(timeout=5)  # quota
        served = []
        for _ in range(3):
            await socket.send_json_to(chat)
            event = await socket.receive_json_from(timeout=10)
            while event["type"] not in ("done", "error"):
                event = await socket.receive_json_from(timeout=10)
            served.append(event["type"])
            await socket.receive_json_from(timeout=5)  # quota
        refused = []
        for _ in range(3):
            await socket.send_json_to(chat)
            refused.append((await socket.receive_json_from(timeout=5))["error"]["code"])
        closed = await socket.receive_output(timeout=5)
        # The same address on another socket is not held to the first socket's count.
        other = await open_socket(ATTACKER)
        bystander = await ask_unauthenticated(other)
        return served, refused, closed, bystander

    served, refused, closed, other_socket = run(scenario())
    assert served == ["done"] * 3
    assert refused == ["rate_limited"] * 3
    assert closed == {"type": "websocket.close", "code": 4429}
    assert upstream_sim.metric("vllm:request_success_total") == 3  # refused chats never ran
    assert other_socket == "unauthenticated"


@pytest.mark.live
def test_many_sockets_from_one_address_share_one_message_limit(settings):
    settings.WS_ADDRESS_MESSAGES_PER_MINUTE = 6

    async def scenario() -> tuple[list[str], str, str]:
        sockets = [await open_socket(ATTACKER) for _ in range(4)]
        handled = [await ask_unauthenticated(s) for s in sockets[:3] for _ in range(2)]
        fourth = await ask_unauthenticated(sockets[3])
        bystander = await ask_unauthenticated(await open_socket(BYSTANDER))
        return handled, fourth, bystander

    handled, fourth, bystander = run(scenario())
    assert handled == ["unauthenticated"] * 6
    assert fourth == "rate_limited"
    assert bystander == "unauthenticated"  # another address is not affected


@pytest.mark.live
def test_the_address_message_limit_holds_across_gateway_processes(redis_url):
    gateways = [LiveGateway(redis_url, WS_ADDRESS_MESSAGES_PER_MINUTE="4") for _ in range(2)]

    async def over(session: aiohttp.ClientSession, url: str, messages: int) -> list[str]:
        codes = []
        async with session.ws_connect(
            url.replace("http://", "ws://") + "/ws/chat/", headers={"Origin": url}
        ) as socket:
            for _ in range(messages):
                await socket.send_json(UNAUTHENTICATED_CHAT)
                codes.append(str((await socket.receive_json(timeout=5))["error"]["code"]))
        return codes

    async def scenario() -> tuple[list[str], list[str]]:
        async with aiohttp.ClientSession() as session:
            first = await over(session, gateways[0].url, 2)
            second = await over(session, gateways[1].url, 3)
        return first, second

    try:
        first, second = run(scenario())
    finally:
        for gateway in gateways:
            gateway.stop()
    assert first == ["unauthenticated"] * 2
    assert second == ["unauthenticated", "unauthenticated", "rate_limited"]


@pytest.mark.live
def test_guessing_keys_across_new_sockets_locks_the_address_out(api_key, settings):
    settings.WS_AUTH_FAILURES_PER_ADDRESS = 7

    async def scenario() -> tuple[list[str], list[str], dict[str, Any], dict[str, Any], str]:
        first = await open_socket(ATTACKER)
        first_codes = [(await guess(first, f"sk-sluice-a{n}"))["error"]["code"] for n in range(5)]
        first_codes.append((await first.receive_json_from(timeout=5))["error"]["code"])
        await first.receive_output(timeout=5)  # closed: five failures on one socket
        second = await open_socket(ATTACKER)  # a new socket does not reset the count
        second_codes = [(await guess(second, f"sk-sluice-b{n}"))["error"]["code"] for n in range(2)]
        second_codes.append((await second.receive_json_from(timeout=5))["error"]["code"])
        second_closed = await second.receive_output(timeout=5)
        # A third socket is told at once, before any guess; even the right key would not do.
        third = await open_socket(ATTACKER)
        refused_at_connect = await third.receive_json_from(timeout=5)
        await third.receive_output(timeout=5)
        bystander = await open_socket(BYSTANDER)
        bystander_event = (await guess(bystander, api_key))["type"]
        return first_codes, second_codes, second_closed, refused_at_connect, bystander_event

    first, second, second_closed, at_connect, bystander = run(scenario())
    assert first == ["invalid_api_key"] * 5 + ["too_many_failed_authentications"]
    assert second == ["invalid_api_key"] * 2 + ["too_many_failed_authentications"]
    assert second_closed == {"type": "websocket.close", "code": 4429}
    assert at_connect["error"]["code"] == "too_many_failed_authentications"
    assert "from your address" in at_connect["error"]["message"]
    assert bystander == "ready"


@pytest.mark.live
def test_a_rotated_x_forwarded_for_does_not_escape_the_address_limit(settings):
    settings.WS_ADDRESS_MESSAGES_PER_MINUTE = 2

    async def from_one_peer(forwarded: list[str]) -> list[str]:
        codes = []
        for claimed in forwarded:
            socket = await open_socket(ATTACKER, (b"x-forwarded-for", claimed.encode()))
            codes.append(await ask_unauthenticated(socket))
        return codes

    rotated = run(from_one_peer(["10.0.0.1", "10.0.0.2", "10.0.0.3"]))
    assert rotated == ["unauthenticated", "unauthenticated", "rate_limited"]

    # Behind one trusted proxy (the peer), the address the proxy appended is the client's;
    # what the client wrote to its left is still ignored.
    settings.TRUSTED_PROXY_COUNT = 1
    behind_proxy = run(from_one_peer(["1.1.1.1, 192.0.2.10", "2.2.2.2, 192.0.2.10", "192.0.2.11"]))
    assert behind_proxy == ["unauthenticated", "unauthenticated", "unauthenticated"]
    assert run(from_one_peer(["3.3.3.3, 192.0.2.10"])) == ["rate_limited"]


@pytest.mark.live
def test_the_limits_fail_closed_when_redis_is_down(api_key, settings, unreachable_redis_url):
    async def scenario() -> tuple[str, str]:
        socket = await open_socket(ATTACKER)
        settings.REDIS_URL = unreachable_redis_url
        reset_clients()
        chat = await ask_unauthenticated(socket)
        return chat, str((await guess(socket, api_key))["error"]["code"])

    assert run(scenario()) == ("service_unavailable", "service_unavailable")


@pytest.mark.unit
def test_the_client_address_comes_from_trusted_proxies_only():
    assert client_address("203.0.113.7", ["10.9.9.9"], 0) == "203.0.113.7"
    assert client_address("10.0.0.5", ["6.6.6.6, 203.0.113.7"], 1) == "203.0.113.7"
    assert client_address("10.0.0.5", ["6.6.6.6, 203.0.113.7", "10.0.0.4"], 2) == "203.0.113.7"
    assert client_address("10.0.0.5", [], 1) == "10.0.0.5"  # not through the proxy
    assert client_address(None, [], 0) == "unknown"
    # One IPv6 subscriber holds a /64: its addresses share one count.
    assert client_address("2001:db8:1:2::1", [], 0) == client_address("2001:db8:1:2::ff", [], 0)
    assert client_address("2001:db8:1:2::1", [], 0) != client_address("2001:db8:1:3::1", [], 0)
    assert client_address("10.0.0.5", ["[2001:db8::7]:443"], 1) == "2001:db8::/64"
    assert client_address("::ffff:203.0.113.7", [], 0) == "203.0.113.7"


@pytest.mark.unit
def test_a_socket_window_slides_instead_of_resetting_on_the_minute():
    window = LocalWindow(limit=3, window_s=60)
    admitted = [not window.admit(now=t).over for t in (0, 10, 20, 30, 59.9, 60, 69.9, 70)]
    assert admitted == [True, True, True, False, False, True, False, True]
    refused = window.admit(now=71)
    assert refused.over and refused.reset_in_s == pytest.approx(9)
