"""The same fault gets the same status and code over HTTP and over the WebSocket: both
transports are adapters around one pipeline and one error table (gateway/serving/)."""

import asyncio
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from gateway.accounts import actions
from gateway.accounts.models import ApiKey, Team

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
ASK = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


async def over_http(url: str, key: str, body: dict[str, Any]) -> tuple[int, str]:
    """The status and the error code ("" for a success)."""
    async with aiohttp.ClientSession() as session:
        headers = {"Authorization": f"Bearer {key}"}
        async with session.post(f"{url}/v1/chat/completions", json=body, headers=headers) as r:
            return r.status, (await r.json()).get("error", {}).get("code", "")


async def over_socket(url: str, key: str, body: dict[str, Any]) -> str:
    """The code of the first error the socket reports, whether at auth or at chat."""
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            url.replace("http://", "ws://") + "/ws/chat/", headers={"Origin": url}
        ) as socket,
    ):
        await socket.send_json({"type": "auth", "api_key": key})
        event = await socket.receive_json(timeout=5)
        if event["type"] == "error":
            return str(event["error"]["code"])
        await socket.send_json({"type": "chat", **body})
        while event["type"] != "error":
            event = await socket.receive_json(timeout=10)
            assert event["type"] not in ("done", "stopped"), "the fault was not refused"
        return str(event["error"]["code"])


def both(platform: dict[str, Any], key: str, body: dict[str, Any]) -> tuple[int, str, str]:
    url = platform["gateway"].url

    async def scenario() -> tuple[int, str, str]:
        status, http_code = await over_http(url, key, body)
        return status, http_code, await over_socket(url, key, body)

    return asyncio.run(scenario())


def key_for(platform: dict[str, Any], **options: Any) -> str:
    return actions.issue_api_key(Team.objects.get(pk=platform["team"].pk), **options).plaintext


FAULTS: dict[str, tuple[int, str, Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]]] = {
    "wrong key": (401, "invalid_api_key", lambda p: ("sk-sluice-wrong", ASK)),
    "key without the inference scope": (
        403,
        "insufficient_scope",
        lambda p: (key_for(p, scopes=(ApiKey.Scope.MANAGE.value,)), ASK),
    ),
    "invalid body": (
        400,
        "invalid_request",
        lambda p: (p["key"], {"model": "small-model", "messages": []}),
    ),
    "unknown model": (404, "model_not_found", lambda p: (p["key"], {"model": "nope", **ASK})),
    "model the key may not use": (
        403,
        "model_not_allowed",
        lambda p: (key_for(p, allowed_models=("other",)), {"model": "small-model", **ASK}),
    ),
    "no healthy worker": (
        503,
        "no_healthy_worker",
        lambda p: (p["key"], {"model": "model-without-workers", **ASK}),
    ),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_fault_has_the_same_code_over_http_and_the_socket(platform, fault):
    status, code, make = FAULTS[fault]
    key, body = make(platform)
    assert both(platform, key, body) == (status, code, code)


def new_team_key(**limits: Any) -> str:
    """A key of a new team (its limits are read fresh, not from a process's cached copy)."""
    return actions.issue_api_key(actions.create_team(f"Team {len(limits)}", **limits)).plaintext


def test_max_tokens_over_the_team_cap_has_the_same_code(platform):
    key = new_team_key(max_tokens_cap=2)
    expected = (400, "max_tokens_over_cap", "max_tokens_over_cap")
    assert both(platform, key, {"model": "small-model", **ASK}) == expected


def test_an_exhausted_quota_has_the_same_code(platform):
    key, url = new_team_key(requests_per_minute=1), platform["gateway"].url
    body = {"model": "small-model", **ASK}

    async def scenario() -> tuple[int, str, int, str, str]:
        first = await over_http(url, key, {**body, "messages": [{"role": "user", "content": "1"}]})
        return (*first, *await over_http(url, key, body), await over_socket(url, key, body))

    statuses = asyncio.run(scenario())
    assert statuses[2:] == (429, "requests_per_minute", "requests_per_minute")


def test_a_key_revoked_while_its_socket_is_open_is_refused_at_the_next_message(platform):
    url = platform["gateway"].url
    issued = actions.issue_api_key(Team.objects.get(pk=platform["team"].pk))

    async def scenario() -> tuple[str, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.ws_connect(
                url.replace("http://", "ws://") + "/ws/chat/", headers={"Origin": url}
            ) as socket,
        ):
            await socket.send_json({"type": "auth", "api_key": issued.plaintext})
            ready = (await socket.receive_json(timeout=5))["type"]
            await asyncio.to_thread(actions.revoke_api_key, issued.key)
            # Each process may trust its copy of the key record for AUTH_PROCESS_CACHE_TTL_S
            # (1 s): chat until refused, and fail if that takes much longer.
            deadline = asyncio.get_running_loop().time() + 3
            while True:
                await socket.send_json({"type": "chat", "model": "small-model", **ASK})
                event = await socket.receive_json(timeout=5)
                while event["type"] not in ("done", "error"):
                    event = await socket.receive_json(timeout=5)
                if event["type"] == "error":
                    return ready, str(event["error"]["code"])
                assert asyncio.get_running_loop().time() < deadline, "still served when revoked"

    assert asyncio.run(scenario()) == ("ready", "invalid_api_key")


def test_bodies_the_fuzz_broke_the_gateway_with_get_a_400_on_every_endpoint(platform):
    """Found by tests/test_fuzz.py (issue 14): nesting past the JSON decoder's limit, and a
    request id with a lone surrogate (it becomes a Redis key), were 500s."""
    url, key = platform["gateway"].url, platform["key"]
    cases = [
        ("/v1/chat/completions", b"[" * 100_000),
        ("/v1/cache/false-hits", b"[" * 100_000),
        ("/v1/cache/false-hits", b'{"request_id": "chatcmpl-\\ud800"}'),
    ]

    async def scenario() -> list[tuple[int, str]]:
        answers = []
        async with aiohttp.ClientSession() as session:
            headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
            for path, body in cases:
                async with session.post(url + path, data=body, headers=headers) as response:
                    payload = await response.json(content_type=None)
                    answers.append((response.status, payload["error"]["code"]))
        return answers

    assert asyncio.run(scenario()) == [(400, "invalid_request")] * len(cases)


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("POST", "/v1/responses/resp_1/cancel", 404, "not_found"),
        ("GET", "/v1/chat/completions", 405, "method_not_allowed"),
        ("DELETE", "/v1/models", 405, "method_not_allowed"),
    ],
)
def test_every_answer_under_v1_is_an_openai_error_even_for_paths_not_served(
    platform, method, path, status, code
):
    """A client library parses whatever /v1/ answers as JSON: Django's HTML 404 page or an
    empty 405 made it fail on parsing instead of reporting the error."""
    import http.client
    import json

    connection = http.client.HTTPConnection("127.0.0.1", platform["gateway"].port, timeout=10)
    headers = {"Authorization": f"Bearer {platform['key']}", "Content-Type": "application/json"}
    connection.request(method, path, body=b"{}" if method == "POST" else None, headers=headers)
    response = connection.getresponse()
    body = json.loads(response.read())
    assert response.status == status
    assert response.getheader("Content-Type", "").startswith("application/json")
    assert body["error"]["code"] == code and body["error"]["message"]
