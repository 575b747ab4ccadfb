"""The context policy "trim" (gateway/serving/context_trim.py): a conversation over the
deployment's context window loses its oldest turns, never its system messages or its last
user message, and the response says how many messages went. Chosen per team or per request
(x-sluice-context-policy over HTTP, context_policy on the socket, where trim is the
default). In process with the gateway's own counter, then through a live gateway and the
simulator with the official openai client, and over the WebSocket."""

import asyncio
import math
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from channels.testing import WebsocketCommunicator
from playwright.sync_api import expect, sync_playwright

from gateway.accounts import actions
from gateway.accounts.models import QuotaPolicy, Team
from gateway.asgi import application
from gateway.serving.admission import Target
from gateway.serving.context_trim import (
    TRIMMED_HEADER,
    KeptMessagesTooLong,
    droppable_turns,
    trim_to_fit,
    with_requested_policy,
)
from gateway.serving.errors import api_error
from inference import fleet
from inference.chat_request import ChatRequest, InvalidRequest, chat_request_from
from inference.client import close_http_session
from inference.deployments import DeploymentInfo
from inference.models import ModelDeployment
from inference.prompt_tokens import ESTIMATED
from inference.scraper import Scraper
from inference.sim.text import prompt_tokens
from tests.test_web_chat import Browsing, ask, log_in
from tests.test_web_chat_browser import CHROMIUM, CHROMIUM_FLAGS
from tests.waiting import wait_until
from tests.web_chat_site import MARKDOWN_QUESTION, chat_site

WINDOW = 200  # the deployment's context window in these tests (an operator's override)
MAX_TOKENS = 40  # leaves 160 tokens of prompt: the system message, one old turn, the question
SYSTEM = {"role": "system", "content": "Answer briefly."}
QUESTION = {"role": "user", "content": "And what should I wear today?"}
POLICY = "x-sluice-context-policy"


def turn(number: int) -> list[dict[str, Any]]:
    """An old exchange of about 80 estimated tokens: two of them and the rest are over 160."""
    return [
        {
            "role": "user",
            "content": f"Question {number}: tell me about the weather in city number "
            f"{number} in some detail.",
        },
        {
            "role": "assistant",
            "content": f"Answer {number}: the weather in city number {number} is mild, with "
            "light winds and some rain.",
        },
    ]


# Four old turns: 365 estimated tokens; trim keeps the last of them (129 with the rest).
CONVERSATION = [SYSTEM, *turn(0), *turn(1), *turn(2), *turn(3), QUESTION]
KEPT = [SYSTEM, *turn(3), QUESTION]


def chat(messages: list[dict[str, Any]], **fields: Any) -> ChatRequest:
    return chat_request_from({"model": "small-model", "messages": messages, **fields})


async def estimated(request: ChatRequest) -> int:
    """The counter admission uses for a model whose tokenizer is not on this host."""
    return ESTIMATED.count(request)


def trimmed(messages: list[dict[str, Any]], budget: int) -> Any:
    return asyncio.run(trim_to_fit(chat(messages), budget, estimated))


# --- in process: which turns go -----------------------------------------------------------


@pytest.mark.unit
def test_trim_leaves_out_the_oldest_turns_and_keeps_the_system_prompt_and_the_question():
    assert chat(CONVERSATION).estimated_prompt_tokens() > WINDOW - MAX_TOKENS
    trim = trimmed(CONVERSATION, WINDOW - MAX_TOKENS)
    assert trim.fits
    assert trim.chat.messages == KEPT
    assert trim.dropped == 6  # three turns of a question and an answer
    assert trim.tokens == chat(KEPT).estimated_prompt_tokens() <= WINDOW - MAX_TOKENS
    # The fewest: one turn fewer left out would not fit.
    assert chat([SYSTEM, *turn(2), *turn(3), QUESTION]).estimated_prompt_tokens() > 160


@pytest.mark.unit
def test_system_and_developer_messages_stay_wherever_they_stand():
    developer = {"role": "developer", "content": "Use metric units."}
    messages = [SYSTEM, *turn(0), developer, *turn(1), *turn(2), QUESTION]
    trim = trimmed(
        messages, chat([SYSTEM, developer, *turn(2), QUESTION]).estimated_prompt_tokens()
    )
    assert trim.chat.messages == [SYSTEM, developer, *turn(2), QUESTION]
    assert trim.dropped == 4


@pytest.mark.unit
def test_a_tool_call_goes_with_its_results_and_no_tool_message_is_orphaned():
    call: dict[str, Any] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_1", "content": "rain, 9 degrees " * 10}
    old: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Oslo?"},
        call,
        result,
    ]
    answered = {"role": "assistant", "content": "Rainy and cool."}
    messages = [SYSTEM, *old, answered, *turn(1), QUESTION]
    assert droppable_turns(chat(messages).messages) == [[1, 2, 3, 4], [5, 6]]
    trim = trimmed(messages, chat([SYSTEM, *turn(1), QUESTION]).estimated_prompt_tokens())
    assert trim.chat.messages == [SYSTEM, *turn(1), QUESTION]
    assert trim.dropped == 4  # the question, the call, its result and the answer
    kept_calls = {c["id"] for m in trim.chat.messages for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in kept_calls for m in trim.chat.messages if m["role"] == "tool")


@pytest.mark.unit
def test_tool_calls_after_the_last_question_are_kept_with_it():
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    result = {"role": "tool", "tool_call_id": "call_9", "content": "done"}
    messages = [SYSTEM, *turn(0), QUESTION, call, result]
    assert droppable_turns(chat(messages).messages) == [[1, 2]]
    trim = trimmed(messages, chat([SYSTEM, QUESTION, call, result]).estimated_prompt_tokens())
    assert trim.chat.messages == [SYSTEM, QUESTION, call, result]


@pytest.mark.unit
def test_kept_messages_that_alone_do_not_fit_are_reported_not_cut():
    long_question = {"role": "user", "content": "word " * 300}
    trim = trimmed([SYSTEM, *turn(0), long_question], WINDOW - MAX_TOKENS)
    assert not trim.fits
    assert trim.chat.messages == [SYSTEM, long_question]
    refusal = api_error(KeptMessagesTooLong("small-model", WINDOW, trim.tokens, MAX_TOKENS))
    assert (refusal.status, refusal.code, refusal.param) == (
        400,
        "context_length_exceeded",
        "messages",
    )
    assert f"context length of {WINDOW} tokens" in refusal.message
    assert "the last user message are" in refusal.message


@pytest.mark.unit
def test_trim_counts_a_logarithmic_number_of_candidates():
    counted: list[int] = []

    async def counting(request: ChatRequest) -> int:
        counted.append(len(request.messages))
        return ESTIMATED.count(request)

    turns = [m for number in range(64) for m in turn(number)]
    messages = [SYSTEM, *turns, QUESTION]
    budget = chat([SYSTEM, *turn(63), QUESTION]).estimated_prompt_tokens()
    trim = asyncio.run(trim_to_fit(chat(messages), budget, counting))
    assert trim.chat.messages == [SYSTEM, *turn(63), QUESTION]
    assert len(counted) <= 1 + math.ceil(math.log2(64))


@pytest.mark.unit
def test_the_requested_policy_is_checked_and_named_in_the_refusal():
    request = chat(CONVERSATION)
    assert with_requested_policy(request, None, POLICY).context_policy is None
    assert with_requested_policy(request, " Trim ", POLICY).context_policy == "trim"
    for wrong in ("shorten", "", 3):
        with pytest.raises(InvalidRequest) as refused:
            with_requested_policy(request, wrong, POLICY)
        error = api_error(refused.value)
        assert (error.status, error.param) == (400, POLICY)
        assert "refuse, clamp, trim" in error.message


@pytest.mark.unit
def test_the_target_says_how_many_messages_were_left_out():
    deployment = DeploymentInfo("small-model", Decimal(0), Decimal(0), 0)
    assert TRIMMED_HEADER not in Target(deployment).headers()
    assert Target(deployment, context_trimmed=6).headers()[TRIMMED_HEADER] == "6"


# --- over HTTP, through a live gateway ------------------------------------------------------

SERVED = "vllm:prompt_tokens_total"  # the simulator's count of prompt tokens it processed


async def _worker_counted(request: ChatRequest) -> int:
    """What the simulator counts (its /tokenize), which admission asks it for: small-model's
    tokenizer is not on this host (inference/worker_prompt_counts.py)."""
    return len(prompt_tokens(request.messages))


# Trimmed to the simulator's own count: fewer turns go than the estimate would leave out.
WORKER_TRIM = asyncio.run(trim_to_fit(chat(CONVERSATION), WINDOW - MAX_TOKENS, _worker_counted))
assert WORKER_TRIM.fits and WORKER_TRIM.dropped >= 2
assert WORKER_TRIM.dropped < trimmed(CONVERSATION, WINDOW - MAX_TOKENS).dropped


def _set_window(tokens: int | None) -> None:
    ModelDeployment.objects.filter(name="small-model").update(context_length=tokens)


def _set_policy(team: Any, policy: str) -> None:
    actions.update_quota_policy(team, max_tokens_policy=policy)


def _ask(
    client: openai.OpenAI, messages: Any, policy: str | None = None, max_tokens: int = MAX_TOKENS
) -> Any:
    headers = {POLICY: policy} if policy is not None else None
    return client.chat.completions.with_raw_response.create(
        model="small-model", messages=messages, max_tokens=max_tokens, extra_headers=headers
    )


def _window_applied(client: openai.OpenAI) -> None:
    """The gateway has read the override: the whole conversation is refused as it is."""

    def refused() -> bool:
        try:
            _ask(client, CONVERSATION, "refuse")
        except openai.BadRequestError as exc:
            return exc.code == "context_length_exceeded"
        return False

    wait_until(refused, 15, "the gateway to read the window override", poll_s=0.3)


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_request_header_trims_where_the_team_refuses(platform):
    client, sim = platform["client"], platform["sim"]
    _set_window(WINDOW)
    _window_applied(client)  # the team's policy (refuse) refuses it
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="small-model", messages=CONVERSATION, max_tokens=MAX_TOKENS
        )
    assert refused.value.code == "context_length_exceeded"
    raw = _ask(client, CONVERSATION, "trim")
    assert raw.headers[TRIMMED_HEADER] == str(WORKER_TRIM.dropped)
    reply = raw.parse()
    # The worker saw the system prompt, the newest old turns and the question, nothing else.
    assert reply.usage.prompt_tokens == len(prompt_tokens(WORKER_TRIM.chat.messages))
    fits = _ask(client, KEPT, "trim")
    assert TRIMMED_HEADER not in fits.headers  # nothing to leave out
    served = sim.metric(SERVED)
    long_question = {"role": "user", "content": "word " * 300}
    with pytest.raises(openai.BadRequestError) as alone:
        _ask(client, [SYSTEM, *turn(0), long_question], "trim")
    assert alone.value.code == "context_length_exceeded"
    assert "the last user message are" in alone.value.message
    assert sim.metric(SERVED) == served  # refused before any worker saw it


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_team_that_trims_is_overridden_by_the_request_header(platform):
    client = platform["client"]
    _set_window(WINDOW)
    _set_policy(platform["team"], QuotaPolicy.LengthPolicy.TRIM)

    def trims() -> Any:
        raw = _ask(client, CONVERSATION)
        return raw if raw.headers.get(TRIMMED_HEADER) else None

    raw = wait_until(
        trims, 15, "the trim policy to apply", poll_s=0.3, ignoring=(openai.BadRequestError,)
    )
    assert raw.headers[TRIMMED_HEADER] == str(WORKER_TRIM.dropped)
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(client, CONVERSATION, "refuse")
    assert refused.value.code == "context_length_exceeded"
    assert len(prompt_tokens(KEPT)) + 150 > WINDOW
    clamped = _ask(client, KEPT, "clamp", max_tokens=150)
    assert TRIMMED_HEADER not in clamped.headers
    assert clamped.headers["x-sluice-max-tokens-clamped"] == "150"


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_an_unknown_policy_header_is_a_400_in_openais_shape(platform):
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(platform["client"], CONVERSATION, "shorten")
    assert refused.value.code == "invalid_request"
    assert refused.value.param == POLICY
    body = refused.value.body
    assert isinstance(body, dict) and body.get("type") == "invalid_request_error"


# --- over the WebSocket ---------------------------------------------------------------------


@pytest.fixture
def chat_key(upstream_sim: Any) -> Iterator[str]:
    """A team (refuse, the default length policy), a key, small-model with a 200-token window."""
    team = actions.create_team("Acme", **{**actions.NO_LIMITS, "requests_per_minute": 100})
    deployment = fleet.ensure_deployment("small-model", served_model_name="sim-upstream")
    fleet.register_worker(deployment, upstream_sim.url, registered_by="test")
    _set_window(WINDOW)
    yield actions.issue_api_key(team).plaintext


async def _chat_events(api_key: str, messages: list[dict[str, Any]], **fields: Any) -> list[Any]:
    async with aiohttp.ClientSession() as session:
        await Scraper().scrape_once(session)  # publish the worker to the fleet snapshot
    socket = WebsocketCommunicator(
        application, "/ws/chat/", headers=[(b"origin", b"http://127.0.0.1:8000")]
    )
    assert (await socket.connect())[0]
    await socket.send_json_to({"type": "auth", "api_key": api_key})
    assert (await socket.receive_json_from(timeout=5))["type"] == "ready"
    assert (await socket.receive_json_from(timeout=5))["type"] == "quota"
    message = {"type": "chat", "model": "small-model", "max_tokens": MAX_TOKENS}
    await socket.send_json_to({**message, "messages": messages, **fields})
    events = [await socket.receive_json_from(timeout=10)]
    while events[-1]["type"] not in ("done", "error"):
        events.append(await socket.receive_json_from(timeout=10))
    await socket.disconnect()
    await close_http_session()
    return events


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_web_chat_trims_by_default_and_says_so(chat_key):
    done = asyncio.run(_chat_events(chat_key, CONVERSATION))[-1]
    assert done["type"] == "done", done
    assert done["context_trimmed"] == WORKER_TRIM.dropped
    assert done["usage"]["prompt_tokens"] == len(prompt_tokens(WORKER_TRIM.chat.messages))
    fits = asyncio.run(_chat_events(chat_key, KEPT))[-1]
    assert fits["type"] == "done" and "context_trimmed" not in fits


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_a_socket_message_may_ask_to_be_refused_and_an_unknown_policy_is_refused(chat_key):
    refused = asyncio.run(_chat_events(chat_key, CONVERSATION, context_policy="refuse"))[-1]
    assert refused["type"] == "error"
    assert refused["error"]["code"] == "context_length_exceeded"
    unknown = asyncio.run(_chat_events(chat_key, CONVERSATION, context_policy="shorten"))[-1]
    assert unknown["type"] == "error"
    assert (unknown["error"]["code"], unknown["error"]["param"]) == (
        "invalid_request",
        "context_policy",
    )


# --- in the web chat, in a real browser ----------------------------------------------------

WEB_CHAT_MAX_TOKENS = 1024  # what the page asks for (static/chat/chat.js)
# Room for the page's max_tokens and a short question (11 tokens as the simulator counts
# the first), not for a markdown reply too (76 with it and the next question).
WEB_CHAT_WINDOW = WEB_CHAT_MAX_TOKENS + 40


@pytest.fixture
def browsing(redis_url: str, tmp_path: Path) -> Iterator[Browsing]:
    """The web chat's site with small-model's window at WEB_CHAT_WINDOW, and one chromium,
    as tests/test_web_chat.py has them (the database is written before playwright starts:
    its event loop would refuse Django's synchronous calls)."""
    with contextmanager(chat_site)(redis_url, tmp_path) as site:
        _set_window(WEB_CHAT_WINDOW)
        key = actions.issue_api_key(Team.objects.get(name="Acme")).plaintext
        client = openai.OpenAI(base_url=f"{site.url}/v1", api_key=key, max_retries=0)

        def listed() -> bool:
            models = {m.id: m.model_extra or {} for m in client.models.list()}
            return models["small-model"].get("context_length") == WEB_CHAT_WINDOW

        wait_until(listed, 15, "the gateway to read the window override", poll_s=0.3)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True
            )
            browsing = Browsing(browser, site)
            yield browsing
            browser.close()
        assert browsing.console_errors == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_web_chat_tells_the_user_that_older_messages_were_left_out(
    browsing: Browsing,
) -> None:
    page = browsing.page()
    log_in(page)
    ask(page, MARKDOWN_QUESTION)  # a long scripted reply: the next question does not fit
    expect(page.locator("#usage")).not_to_contain_text("Older messages")
    ask(page, "And a lock?")
    expect(page.locator("#usage")).to_contain_text(
        "Older messages were left out to fit the model's context window."
    )
    # The conversation keeps everything; only what the model was sent was shorter.
    expect(page.locator(".message.user")).to_have_text([MARKDOWN_QUESTION, "And a lock?"])
