"""Context windows and max_tokens policies through a live gateway and the simulator, with
the official openai client: a request that cannot fit is refused before any worker sees
it, or, under a team's clamp policy, its max_tokens is lowered and the response says so."""

from typing import Any

import openai
import pytest

from gateway.accounts import actions
from gateway.accounts.models import QuotaPolicy
from inference.models import ModelDeployment
from inference.sim.server import SIM_MAX_MODEL_LEN
from tests.conftest import MESSAGES
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
SERVED = "vllm:prompt_tokens_total"  # the simulator's count of prompt tokens it processed


def _set_window(tokens: int | None) -> None:
    ModelDeployment.objects.filter(name="small-model").update(context_length=tokens)


def _set_policy(team: Any, policy: str, cap: int | None = None) -> None:
    """Through the accounts action, which publishes the team's limits to every gateway."""
    actions.update_quota_policy(team, max_tokens_policy=policy, max_tokens_cap=cap)


def _refusal(client: openai.OpenAI, max_tokens: int) -> openai.BadRequestError | None:
    try:
        client.chat.completions.create(
            model="small-model", messages=MESSAGES, max_tokens=max_tokens
        )
    except openai.BadRequestError as exc:
        return exc
    return None


def test_a_request_over_the_workers_window_is_refused_before_any_worker_sees_it(platform):
    client, sim = platform["client"], platform["sim"]
    served = sim.metric(SERVED)
    refused = _refusal(client, SIM_MAX_MODEL_LEN)
    assert refused is not None and refused.code == "context_length_exceeded"
    assert refused.param == "messages"
    assert f"context length of {SIM_MAX_MODEL_LEN} tokens" in refused.message
    assert sim.metric(SERVED) == served  # the worker never saw it
    listed = {m.id: m for m in client.models.list()}
    assert (listed["small-model"].model_extra or {}).get("context_length") == SIM_MAX_MODEL_LEN
    assert (listed["model-without-workers"].model_extra or {}).get("context_length") is None


def test_the_operators_override_wins_over_what_the_worker_reports(platform):
    client, sim = platform["client"], platform["sim"]
    _set_window(200)
    refused = wait_until(
        lambda: _refusal(client, 190), 15, "the gateway to read the override", poll_s=0.3
    )
    assert refused is not None and refused.code == "context_length_exceeded"
    assert "context length of 200" in refused.message
    served = sim.metric(SERVED)
    assert _refusal(client, 100) is None  # fits 200 with this short prompt
    assert sim.metric(SERVED) > served
    listed = {m.id: m for m in client.models.list()}
    assert (listed["small-model"].model_extra or {}).get("context_length") == 200


def test_the_clamp_policy_lowers_max_tokens_to_what_fits_and_says_so(platform):
    client = platform["client"]
    _set_window(200)
    _set_policy(platform["team"], QuotaPolicy.LengthPolicy.CLAMP)

    def clamped() -> Any:
        raw = client.chat.completions.with_raw_response.create(
            model="small-model", messages=MESSAGES, max_tokens=190
        )
        return raw if raw.headers.get("x-sluice-max-tokens-clamped") else None

    raw = wait_until(
        clamped,
        15,
        "the override and the clamp policy to apply",
        poll_s=0.3,
        ignoring=(openai.BadRequestError,),
    )
    assert raw.headers["x-sluice-max-tokens-clamped"] == "190"
    reply = raw.parse()
    assert reply.usage is not None and reply.usage.completion_tokens < 190
    fits = client.chat.completions.with_raw_response.create(
        model="small-model", messages=MESSAGES, max_tokens=20
    )
    assert "x-sluice-max-tokens-clamped" not in fits.headers
    long_prompt: Any = [{"role": "user", "content": "word " * 400}]
    with pytest.raises(openai.BadRequestError) as alone:  # the prompt alone does not fit
        client.chat.completions.create(model="small-model", messages=long_prompt, max_tokens=1)
    assert alone.value.code == "context_length_exceeded"


def test_max_tokens_over_the_cap_is_refused_or_clamped_by_policy(platform):
    client = platform["client"]
    _set_policy(platform["team"], QuotaPolicy.LengthPolicy.REFUSE, cap=5)

    def over_cap() -> openai.BadRequestError | None:
        refused = _refusal(client, 10)
        return refused if refused is not None and refused.code == "max_tokens_over_cap" else None

    wait_until(over_cap, 15, "the cap to apply", poll_s=0.3)
    _set_policy(platform["team"], QuotaPolicy.LengthPolicy.CLAMP, cap=5)

    def clamped() -> Any:
        try:
            raw = client.chat.completions.with_raw_response.create(
                model="small-model", messages=MESSAGES, max_tokens=10
            )
        except openai.BadRequestError:
            return None
        return raw

    raw = wait_until(clamped, 15, "the clamp policy to apply", poll_s=0.3)
    assert raw.headers["x-sluice-max-tokens-clamped"] == "10"
    reply = raw.parse()
    assert reply.usage is not None and reply.usage.completion_tokens <= 5


def test_a_request_without_max_tokens_gets_what_fits_the_window_and_the_cap_under_refuse(
    platform,
):
    """OpenAI reads an absent max_tokens as "what fits": the default (512) gives way to the
    window and the team's cap with no header, where a max_tokens the client set is refused."""
    client = platform["client"]
    _set_window(200)
    wait_until(lambda: _refusal(client, 190), 15, "the gateway to read the override", poll_s=0.3)
    raw = client.chat.completions.with_raw_response.create(
        model="small-model", messages=MESSAGES, extra_body={"ignore_eos": True}
    )
    reply = raw.parse()
    assert reply.usage is not None
    assert reply.usage.prompt_tokens + reply.usage.completion_tokens == 200  # all that fits
    assert "x-sluice-max-tokens-clamped" not in raw.headers

    _set_policy(platform["team"], QuotaPolicy.LengthPolicy.REFUSE, cap=5)

    def over_cap() -> openai.BadRequestError | None:
        refused = _refusal(client, 10)
        return refused if refused is not None and refused.code == "max_tokens_over_cap" else None

    wait_until(over_cap, 15, "the cap to apply", poll_s=0.3)
    capped = client.chat.completions.create(
        model="small-model", messages=MESSAGES, extra_body={"ignore_eos": True}
    )
    assert capped.usage is not None and capped.usage.completion_tokens == 5


def test_under_trim_a_request_without_max_tokens_whose_kept_turns_leave_little_room_is_served(
    platform,
):
    """Trim leaves room for the default (512) when it can; when the turns it must keep
    leave less, the default gives way rather than the request being refused."""
    client = platform["client"]
    _set_window(200)
    wait_until(lambda: _refusal(client, 190), 15, "the gateway to read the override", poll_s=0.3)
    long_question: Any = [{"role": "user", "content": "word " * 120}]
    raw = client.chat.completions.with_raw_response.create(
        model="small-model",
        messages=long_question,
        extra_body={"ignore_eos": True},
        extra_headers={"x-sluice-context-policy": "trim"},
    )
    reply = raw.parse()
    assert reply.usage is not None and reply.usage.completion_tokens > 0
    assert reply.usage.prompt_tokens + reply.usage.completion_tokens == 200
    with pytest.raises(openai.BadRequestError) as set_by_client:  # a figure it named: refused
        client.chat.completions.create(
            model="small-model",
            messages=long_question,
            max_tokens=150,
            extra_headers={"x-sluice-context-policy": "trim"},
        )
    assert set_by_client.value.code == "context_length_exceeded"
