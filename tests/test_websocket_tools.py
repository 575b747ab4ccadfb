"""Tool calling over the WebSocket chat (docs/websocket.md, "Tools"), against the real ASGI
application, real Redis and PostgreSQL and the simulator, whose tool calls are deterministic
(inference/sim/replies.py): tools validated as on the HTTP API, each call's parts relayed as
`tool_call_delta` events, `done` with finish_reason tool_calls and the calls assembled, the
results sent back as tool messages, a replay from the exact cache in the same shape, tools
held to the socket's size limit, and a logged-in user's conversation keeping the calls and
results so that it reads back as a message list a worker takes."""

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from gateway.accounts import actions as account_actions
from gateway.accounts.models import Team
from gateway.asgi import application
from gateway.chat import actions
from gateway.chat.models import Message
from inference import fleet
from inference.chat_tools import MAX_TOOLS
from inference.client import close_http_session
from inference.scraper import Scraper
from tests.test_openai_surface import ASK, QUESTION, TIME, WEATHER  # the same tools

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
ORIGIN = (b"origin", b"http://127.0.0.1:8000")
PASSWORD = "a-long-test-password-1"
ENDS = ("done", "stopped", "error")


def chat(messages: list[Any], **extra: Any) -> dict[str, Any]:
    return {"type": "chat", "model": "small-model", "max_tokens": 60, "messages": messages, **extra}


@pytest.fixture
def team(upstream_sim: Any) -> Team:
    team = account_actions.create_team("Acme", **account_actions.NO_LIMITS)
    deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
    fleet.register_worker(deployment, upstream_sim.url, registered_by="test")
    return team


class Socket:
    """A chat socket, authenticated with a key or a logged-in user's session cookie."""

    def __init__(self, cookie: bytes | None = None) -> None:
        headers = [ORIGIN] if cookie is None else [ORIGIN, (b"cookie", cookie)]
        self.socket = WebsocketCommunicator(application, "/ws/chat/", headers=headers)

    async def open(self, api_key: str = "") -> "Socket":
        async with aiohttp.ClientSession() as session:
            await Scraper().scrape_once(session)  # publish the worker to the fleet snapshot
        assert (await self.socket.connect())[0]
        if api_key:
            await self.socket.send_json_to({"type": "auth", "api_key": api_key})
            assert (await self.socket.receive_json_from(timeout=5))["type"] == "ready"
        assert (await self.socket.receive_json_from(timeout=5))["type"] == "quota"
        return self

    async def exchange(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """Send a message; its events up to the reply's end (the quota after it read)."""
        await self.socket.send_json_to(message)
        events = [await self.socket.receive_json_from(timeout=10)]
        while events[-1]["type"] not in ENDS:
            events.append(await self.socket.receive_json_from(timeout=10))
        if events[-1]["type"] != "error":
            assert (await self.socket.receive_json_from(timeout=5))["type"] == "quota"
        return events

    async def close(self) -> None:
        await self.socket.disconnect()
        await close_http_session()


def run_with_key(team: Team, scenario: Any) -> Any:
    key = account_actions.issue_api_key(team).plaintext

    async def wrapped() -> Any:
        socket = await Socket().open(key)
        try:
            return await scenario(socket)
        finally:
            await socket.close()

    return asyncio.run(wrapped())


def assembled(events: list[dict[str, Any]]) -> dict[int, dict[str, str]]:
    """The tool_call_delta events put together by index, checking that each call's first
    part names it (id and function) and the rest carry only arguments."""
    calls: dict[int, dict[str, str]] = {}
    for event in events:
        if event["type"] != "tool_call_delta":
            continue
        if event["index"] not in calls:
            assert event["call_id"] and event["name"], "a call's first part names it"
            calls[event["index"]] = {"id": event["call_id"], "name": event["name"], "arguments": ""}
        else:
            assert "call_id" not in event and "name" not in event
        calls[event["index"]]["arguments"] += event["arguments"]
    return calls


def as_message_calls(calls: dict[int, dict[str, str]]) -> list[dict[str, Any]]:
    return [
        {
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": call["arguments"]},
        }
        for _, call in sorted(calls.items())
    ]


def test_a_tool_call_streams_as_its_own_events_and_the_result_gets_an_answer(team: Team) -> None:
    async def scenario(socket: Socket) -> tuple[list[Any], list[Any]]:
        called = await socket.exchange(chat(ASK, tools=[WEATHER], tool_choice="auto"))
        done = called[-1]
        history = [
            *ASK,
            {"role": "assistant", "content": None, "tool_calls": done["tool_calls"]},
            {"role": "tool", "tool_call_id": done["tool_calls"][0]["id"], "content": "Sunny"},
        ]
        answered = await socket.exchange(chat(history, tools=[WEATHER], max_tokens=8))
        return called, answered

    called, answered = run_with_key(team, scenario)
    done = called[-1]
    assert done["type"] == "done" and done["finish_reason"] == "tool_calls"
    assert not any(e["type"] == "delta" for e in called)  # calls only, no text
    calls = assembled(called)
    assert len([e for e in called if e["type"] == "tool_call_delta"]) > 2  # in fragments
    assert done["tool_calls"] == as_message_calls(calls)
    [call] = done["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": QUESTION, "days": 6}
    assert done["usage"]["completion_tokens"] > 0

    # The result reached the worker as a tool message: it answers in text.
    assert answered[-1]["type"] == "done" and "tool_calls" not in answered[-1]
    assert answered[-1]["finish_reason"] in ("stop", "length")
    assert "".join(e["content"] for e in answered if e["type"] == "delta")
    assert not any(e["type"] == "tool_call_delta" for e in answered)


def test_required_calls_every_offered_tool_each_under_its_index_and_a_named_one_only_it(
    team: Team,
) -> None:
    async def scenario(socket: Socket) -> tuple[list[Any], list[Any]]:
        both = await socket.exchange(chat(ASK, tools=[WEATHER, TIME], tool_choice="required"))
        named = {"type": "function", "function": {"name": "get_time"}}
        one = await socket.exchange(chat(ASK, tools=[WEATHER, TIME], tool_choice=named))
        return both, one

    both, one = run_with_key(team, scenario)
    assert [c["name"] for _, c in sorted(assembled(both).items())] == ["get_weather", "get_time"]
    assert [c["function"]["name"] for c in both[-1]["tool_calls"]] == ["get_weather", "get_time"]
    assert [c["function"]["name"] for c in one[-1]["tool_calls"]] == ["get_time"]
    assert one[-1]["finish_reason"] == "tool_calls"


def test_a_cache_replay_relays_the_calls_as_the_generation_did(team: Team) -> None:
    ask = chat(ASK, tools=[WEATHER], temperature=0)

    async def scenario(socket: Socket) -> tuple[list[Any], list[Any]]:
        return await socket.exchange(ask), await socket.exchange(ask)

    generated, replayed = run_with_key(team, scenario)
    assert (generated[-1]["cache"], replayed[-1]["cache"]) == ("miss", "hit-exact")
    assert assembled(replayed) == assembled(generated)
    assert replayed[-1]["tool_calls"] == generated[-1]["tool_calls"]
    assert replayed[-1]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize(
    "fields, param",
    [
        ({"tool_choice": "auto"}, "tool_choice"),  # without tools
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}},
            "tool_choice",
        ),
        ({"tools": [WEATHER, WEATHER]}, "tools"),
        ({"tools": [{"type": "web_search"}]}, "tools.0.type"),
        ({"tools": [WEATHER] * (MAX_TOOLS + 1)}, "tools"),
        (
            {"tools": [{**WEATHER, "function": {"name": "big", "description": "x" * 70_000}}]},
            "tools",
        ),
        ({"functions": [WEATHER["function"]]}, "functions"),
        ({"messages": [*ASK, {"role": "tool", "content": "Sunny"}]}, "messages.1.tool_call_id"),
        (
            {"messages": [*ASK, {"role": "assistant", "tool_calls": [{"id": "c"}]}]},
            "messages.1.tool_calls.0",
        ),
    ],
)
def test_tools_are_validated_as_on_the_http_api_and_the_socket_goes_on(
    team: Team, fields: dict[str, Any], param: str
) -> None:
    async def scenario(socket: Socket) -> tuple[list[Any], list[Any]]:
        refused = await socket.exchange({**chat(ASK), **fields})
        return refused, await socket.exchange(chat(ASK, max_tokens=3))

    refused, after = run_with_key(team, scenario)
    assert [e["type"] for e in refused] == ["error"]
    assert (refused[0]["error"]["code"], refused[0]["error"]["param"]) == ("invalid_request", param)
    assert after[-1]["type"] == "done"


def test_tools_count_against_the_sockets_message_size_limit(team: Team, settings: Any) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2048
    big = {**WEATHER, "function": {**WEATHER["function"], "description": "x" * 4096}}

    async def scenario(socket: Socket) -> tuple[Any, Any]:
        await socket.socket.send_json_to(chat(ASK, tools=[big]))
        refused = await socket.socket.receive_json_from(timeout=5)
        return refused, await socket.socket.receive_output(timeout=5)

    refused, closed = run_with_key(team, scenario)
    assert refused["error"]["code"] == "request_too_large"
    assert closed == {"type": "websocket.close", "code": 1009}


def test_a_conversation_keeps_the_calls_and_results_and_reads_back_as_a_worker_takes_it(
    team: Team,
) -> None:
    ann = get_user_model().objects.create_user("ann", password=PASSWORD)
    account_actions.add_member(team, ann)
    browser = Client()
    browser.force_login(ann)
    cookie = f"sessionid={browser.cookies['sessionid'].value}".encode()
    conversation = actions.create_conversation(ann.pk)

    async def converse(*messages: dict[str, Any]) -> list[list[Any]]:
        socket = await Socket(cookie).open()
        try:
            return [await socket.exchange({**m, "conversation": conversation.pk}) for m in messages]
        finally:
            await socket.close()

    [called] = asyncio.run(converse(chat(ASK, tools=[WEATHER])))
    calls = called[-1]["tool_calls"]
    history = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": "Sunny, 21 C"},
    ]
    [answered] = asyncio.run(converse(chat(history, tools=[WEATHER], max_tokens=8)))
    # The page's way: the saved messages read back, sent again with the next question.
    saved = browser.get(f"/chat/api/conversations/{conversation.pk}/messages/").json()
    keys = ("role", "content", "tool_calls", "tool_call_id")
    again = [{k: m[k] for k in keys if k in m} for m in saved["messages"]]
    more = [*again, {"role": "user", "content": "And tomorrow?"}]
    [followed] = asyncio.run(
        converse(chat(more, tools=[WEATHER], tool_choice="none", max_tokens=5))
    )

    kept = list(Message.objects.filter(conversation=conversation).order_by("id"))
    assert [(m.role, m.tool_call_id) for m in kept[:4]] == [
        ("user", ""),
        ("assistant", ""),
        ("tool", calls[0]["id"]),
        ("assistant", ""),
    ]
    question, call, result, answer = kept[:4]
    assert question.content == QUESTION and called[-1]["user_message_id"] == question.pk
    assert (call.content, call.tool_calls, call.pk) == ("", calls, called[-1]["message_id"])
    assert result.content == "Sunny, 21 C" and answered[-1]["tool_message_ids"] == [result.pk]
    assert answered[-1]["user_message_id"] is None  # this exchange began with a result
    streamed = "".join(e["content"] for e in answered if e["type"] == "delta")
    assert answer.content == streamed and streamed and answer.tool_calls is None
    # The history read back was taken as it was: the next question got its answer.
    assert followed[-1]["type"] == "done" and followed[-1]["finish_reason"] in ("stop", "length")
    assert [(m.role, m.content) for m in kept[4:5]] == [("user", "And tomorrow?")]
    assert [m.role for m in kept] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    # Regenerating from tool results would delete the question and the call they answer.
    [regenerated] = asyncio.run(
        converse(chat(history, tools=[WEATHER], max_tokens=8, replace_from=question.pk))
    )
    assert regenerated[-1]["type"] == "error"
    assert regenerated[-1]["error"]["param"] == "replace_from"
    assert "the last message sent must be the user's" in regenerated[-1]["error"]["message"]
    assert Message.objects.filter(conversation=conversation).count() == len(kept)
