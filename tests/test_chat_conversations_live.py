"""Conversations against live parts: the JSON API's ownership over real HTTP (a uvicorn
gateway, sessions from the real login form), and the socket keeping a logged-in user's
replies in their conversation (the ASGI application, real Redis and a simulator)."""

import asyncio
import http.cookiejar
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
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
from gateway.chat.models import Conversation, Message
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from inference.client import close_http_session
from inference.scraper import Scraper
from tests.web_chat_site import PASSWORD, ChatSite, chat_site

pytestmark = pytest.mark.django_db(transaction=True)
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


class WebSession:
    """A browser's cookies over plain HTTP: logs in through the form, sends the CSRF token."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def cookie(self, name: str) -> str:
        return next((c.value or "" for c in self.cookies if c.name == name), "")

    def log_in(self, username: str) -> None:
        self.opener.open(f"{self.base_url}/accounts/login/", timeout=10).read()
        form = {"username": username, "password": PASSWORD}
        form["csrfmiddlewaretoken"] = self.cookie("csrftoken")
        body = urllib.parse.urlencode(form).encode()
        self.opener.open(f"{self.base_url}/accounts/login/", body, timeout=10).read()
        assert self.cookie("sessionid"), f"{username} did not log in"

    def call(self, method: str, path: str, body: Any = None, csrf: bool = True) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if csrf:
            headers["X-CSRFToken"] = self.cookie("csrftoken")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base_url}{path}", data, headers, method=method)
        try:
            with self.opener.open(request, timeout=10) as response:
                status, text = response.status, response.read()
        except urllib.error.HTTPError as refused:
            status, text = refused.code, refused.read()
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text.decode(errors="replace")


@pytest.fixture
def site(redis_url: str, tmp_path: Path) -> Iterator[ChatSite]:
    yield from chat_site(redis_url, tmp_path)


@pytest.mark.live
def test_over_http_another_user_gets_404_for_a_conversation_and_cannot_touch_it(
    site: ChatSite,
) -> None:
    ann, bob = WebSession(site.url), WebSession(site.url)
    ann.log_in("ann")
    bob.log_in("bob")
    status, created = ann.call("POST", "/chat/api/conversations/", {"title": "Ann's plans"})
    assert status == 201
    path = f"/chat/api/conversations/{created['id']}/"
    assert ann.call("GET", path)[0] == 200

    for method, body in (("GET", None), ("PATCH", {"title": "Bob's now"}), ("DELETE", None)):
        status, answer = bob.call(method, path, body)
        assert (status, answer["error"]["code"]) == (404, "conversation_not_found"), method
    assert bob.call("GET", f"{path}messages/")[0] == 404
    assert bob.call("GET", "/chat/api/conversations/") == (
        200,
        {"conversations": [], "has_more": False},
    )
    # Ann's conversation is untouched, and a write without the CSRF token is refused.
    assert ann.call("GET", path)[1]["title"] == "Ann's plans"
    assert ann.call("DELETE", path, csrf=False)[0] == 403
    assert WebSession(site.url).call("GET", "/chat/api/conversations/")[0] == 401
    assert ann.call("DELETE", path)[0] == 204


# The socket, in process.


@pytest.fixture
def team(upstream_sim: Any) -> Team:
    team = account_actions.create_team(
        "Acme", **{**account_actions.NO_LIMITS, "requests_per_minute": 2}
    )
    deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
    fleet.register_worker(deployment, upstream_sim.url, registered_by="test")
    return team


def member(team: Team, name: str) -> tuple[Any, bytes]:
    person = get_user_model().objects.create_user(name, password=PASSWORD)
    account_actions.add_member(team, person)
    client = Client()
    client.force_login(person)
    return person, f"sessionid={client.cookies['sessionid'].value}".encode()


def chat(conversation: Any, question: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "chat",
        "conversation": conversation,
        "model": "small-model",
        "max_tokens": 5,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": question},
        ],
        **extra,
    }


def converse(cookie: bytes | None, messages: list[dict[str, Any]], api_key: str = "") -> list[Any]:
    """Send each message, reading events until its reply ends; all events, in order."""

    async def scenario() -> list[Any]:
        async with aiohttp.ClientSession() as session:
            await Scraper().scrape_once(session)
        headers = [ORIGIN] if cookie is None else [ORIGIN, (b"cookie", cookie)]
        socket = WebsocketCommunicator(application, "/ws/chat/", headers=headers)
        assert (await socket.connect())[0]
        events: list[Any] = []
        if api_key:
            await socket.send_json_to({"type": "auth", "api_key": api_key})
            events.append(await socket.receive_json_from(timeout=5))
        for message in messages:
            await socket.send_json_to(message)
            while True:
                event = await socket.receive_json_from(timeout=10)
                events.append(event)
                if event["type"] in ("done", "stopped", "error"):
                    break
        await socket.disconnect()
        await close_http_session()
        return events

    return asyncio.run(scenario())


@pytest.mark.live
def test_the_socket_keeps_a_users_question_and_reply_in_their_conversation(team: Any) -> None:
    ann, cookie = member(team, "ann")
    conversation = actions.create_conversation(ann.pk)
    events = converse(cookie, [chat(conversation.pk, "What is a sluice?")])
    done = next(e for e in events if e["type"] == "done")
    question, reply = Message.objects.filter(conversation=conversation)
    assert (done["conversation"], done["user_message_id"], done["message_id"]) == (
        conversation.pk,
        question.pk,
        reply.pk,
    )
    assert question.content == "What is a sluice?"  # the system prompt is not a message
    streamed = "".join(e["content"] for e in events if e["type"] == "delta")
    assert reply.content == streamed and streamed
    assert (reply.model, reply.cache_result) == ("small-model", done["cache"])
    assert reply.completion_tokens == done["usage"]["completion_tokens"] > 0
    assert reply.prompt_tokens == done["usage"]["prompt_tokens"] > 0
    assert reply.cost_micros == done["cost_micros"] == 0  # the deployment is priced at 0
    assert reply.ttft_ms == done["ttft_ms"] is not None
    assert reply.request_id == done["id"]
    conversation.refresh_from_db()
    assert conversation.title == "What is a sluice?"


@pytest.mark.live
def test_naming_another_users_conversation_is_refused_before_anything_is_generated(
    team: Any,
) -> None:
    ann, _ = member(team, "ann")
    _, bob_cookie = member(team, "bob")
    anns = actions.create_conversation(ann.pk)
    asks = [chat(anns.pk, "Let me in"), chat(2**70, "A huge id"), chat("1", "A string id")]
    events = converse(bob_cookie, asks)
    errors = [e for e in events if e["type"] == "error"]
    assert [e["error"]["code"] for e in errors] == [
        "conversation_not_found",
        "conversation_not_found",
        "invalid_request",
    ]
    assert errors[0]["error"]["param"] == "conversation"
    assert not any(e["type"] in ("delta", "done") for e in events)
    assert not Message.objects.exists()
    ingest("test-consumer")
    assert not UsageRecord.objects.exists()  # nothing was generated or billed


@pytest.mark.live
def test_a_full_conversation_is_refused_before_anything_is_generated(
    team: Any, settings: Any
) -> None:
    """At CHAT_MAX_MESSAGES the socket says to start a new conversation, and nothing is
    generated or billed; replacing an earlier question frees what it deletes."""
    settings.CHAT_MAX_MESSAGES = 2  # one exchange
    ann, cookie = member(team, "ann")
    conversation = actions.create_conversation(ann.pk)
    first = converse(cookie, [chat(conversation.pk, "One")])[-1]
    assert first["type"] == "done"
    ingest("test-consumer")
    billed = UsageRecord.objects.count()
    events = converse(cookie, [chat(conversation.pk, "Two")])
    refused = [e for e in events if e["type"] == "error"]
    assert [e["error"]["code"] for e in refused] == ["conversation_full"], events
    assert "start a new conversation" in refused[0]["error"]["message"]
    assert not any(e["type"] in ("delta", "done") for e in events)
    ingest("test-consumer")
    assert UsageRecord.objects.count() == billed  # nothing generated for it
    # Not admitted either: the team's second request a minute (of 2) is still free.
    replacing = chat(conversation.pk, "One, again", replace_from=first["user_message_id"])
    ends = [e for e in converse(cookie, [replacing]) if e["type"] in ("done", "error")]
    assert [e["type"] for e in ends] == ["done"], ends
    kept = Message.objects.filter(conversation=conversation).values_list("content", flat=True)
    assert kept[0] == "One, again" and len(kept) == 2


@pytest.mark.live
def test_regenerate_with_no_cache_is_answered_afresh_not_by_the_reply_it_replaces(
    upstream_sim: Any,
) -> None:
    team = account_actions.create_team("Regenerators", **account_actions.NO_LIMITS)
    deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
    fleet.register_worker(deployment, upstream_sim.url, registered_by="test")
    ann, cookie = member(team, "ann")
    conversation = actions.create_conversation(ann.pk)
    first = converse(cookie, [chat(conversation.pk, "One", temperature=0)])[-1]
    assert first["cache"] == "miss"

    def replacing(done: dict[str, Any], **extra: Any) -> dict[str, Any]:
        again = chat(conversation.pk, "One", temperature=0, **extra)
        [end] = [
            e for e in converse(cookie, [{**again, "replace_from": done["user_message_id"]}])
            if e["type"] in ("done", "error")
        ]  # fmt: skip
        return dict(end)

    cached = replacing(first)  # without no_cache: the caches hand back the same reply
    assert cached["type"] == "done" and cached["cache"] == "hit-exact"
    fresh = replacing(cached, no_cache=True)
    assert fresh["type"] == "done" and fresh["cache"] == "bypass"
    refused = replacing(fresh, no_cache="yes")
    assert refused["type"] == "error" and refused["error"]["param"] == "no_cache"
    kept = Message.objects.filter(conversation=conversation).values_list("content", flat=True)
    assert kept[0] == "One" and len(kept) == 2  # the refused regenerate removed nothing


@pytest.mark.live
def test_replace_from_must_be_a_question_of_the_same_conversation(team: Any) -> None:
    ann, cookie = member(team, "ann")
    conversation = actions.create_conversation(ann.pk)
    first = converse(cookie, [chat(conversation.pk, "One")])[-1]
    events = converse(
        cookie,
        [
            chat(conversation.pk, "Reply id", replace_from=first["message_id"]),
            chat(None, "No conversation", replace_from=first["user_message_id"]),
            chat(conversation.pk, "One, again", replace_from=first["user_message_id"]),
        ],
    )
    ends = [e for e in events if e["type"] in ("done", "error")]
    assert [e.get("error", {}).get("param") for e in ends] == ["replace_from", "replace_from", None]
    kept = Message.objects.filter(conversation=conversation).values_list("role", "content")
    assert [role for role, _ in kept] == ["user", "assistant"]
    assert kept[0][1] == "One, again"


@pytest.mark.live
def test_a_key_socket_keeps_no_conversation_and_a_quota_error_says_when_to_retry(
    team: Any,
) -> None:
    key = account_actions.issue_api_key(team).plaintext
    ann, cookie = member(team, "ann")
    conversation = actions.create_conversation(ann.pk)
    refused = converse(None, [chat(conversation.pk, "Via a key")], api_key=key)[-1]
    assert (refused["error"]["code"], refused["error"]["param"]) == (
        "invalid_request",
        "conversation",
    )

    # Two requests a minute: the third is refused, with the limit and when it resets.
    events = converse(cookie, [chat(conversation.pk, f"Question {n}") for n in range(3)])
    error = events[-1]
    assert error["error"]["code"] == "requests_per_minute"
    assert 1 <= error["retry_after"] <= 60
    assert Conversation.objects.get().messages.count() == 4  # the refused one is not kept
