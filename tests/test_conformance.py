"""Issue 22: conformance with OpenAI's published OpenAPI description, by schemathesis against
a live gateway and the simulator (conformance/README.md), and the fixes it led to, pinned in
process.

The operations Sluice serves (conformance/openai-openapi.yml: chat completions, text
completions, embeddings, the model list and one model) get generated requests, valid and
malformed, with a valid key: every 200 must match OpenAI's response schema (streamed events
included), every malformed request must get a 4xx in OpenAI's error shape, nothing may get
a 5xx. What is excluded and
why: conformance/schemathesis.toml and conformance/refusals.py.

`make test` runs it with EXAMPLES per operation; `make conformance` with more
(SLUICE_CONFORMANCE_EXAMPLES), and SLUICE_CONFORMANCE_SEED replays a run.
"""

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.refusals import COMPLETIONS, by_design, openai_refuses_too, within_surface
from gateway.accounts import actions
from inference.chat_request import InvalidRequest, chat_request_from
from inference.reply import openai_logprobs
from inference.text_completion import text_completion_from
from tests.conftest import REPO_ROOT, live_platform
from tests.sims import SimProcess

CONFORMANCE = REPO_ROOT / "conformance"
EXAMPLES = int(os.environ.get("SLUICE_CONFORMANCE_EXAMPLES", "30"))
SEED = int(os.environ.get("SLUICE_CONFORMANCE_SEED", "2212"))
REPORTS = REPO_ROOT / "test-artifacts" / "conformance"
UNLIMITED = (
    "requests_per_minute",
    "tokens_per_minute",
    "tokens_per_month",
    "budget_per_month_usd",
    "max_tokens_cap",
    "max_concurrent_requests",
)
USER = {"role": "user", "content": "Hi"}


@pytest.fixture
def conformance_platform(redis_url: str) -> Iterator[dict[str, Any]]:
    """The live platform on a worker with no latency (a long max_tokens costs milliseconds),
    and a key of an unlimited team, so that valid requests reach the worker, not a quota."""
    sim = SimProcess(model="sim-upstream", fixed_ttft_ms=0, fixed_itl_ms=0)
    try:
        for started in live_platform(redis_url, sim, max_in_flight_per_worker=64):
            team = actions.create_team("Conformance", **dict.fromkeys(UNLIMITED, None))
            yield {**started, "unlimited": actions.issue_api_key(team).plaintext}
    finally:
        sim.stop()


def run_schemathesis(url: str, key: str) -> subprocess.CompletedProcess[str]:
    REPORTS.mkdir(parents=True, exist_ok=True)
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(CONFORMANCE / "schemathesis.toml"),
        "--no-color",
        "run",
        str(CONFORMANCE / "openai-openapi.yml"),
        f"--max-examples={EXAMPLES}",
        f"--seed={SEED}",
        "--report=junit",
        f"--report-junit-path={REPORTS / 'junit.xml'}",
    ]
    environment = {
        **os.environ,
        "SLUICE_CONFORMANCE_URL": url,
        "SLUICE_CONFORMANCE_KEY": key,
        "SLUICE_CONFORMANCE_CHAT_MODEL": "small-model",
    }
    return subprocess.run(
        command, cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=1800
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_served_operations_conform_to_openais_description(conformance_platform):
    platform = conformance_platform
    result = run_schemathesis(platform["gateway"].url, platform["unlimited"])
    report = result.stdout + result.stderr
    (REPORTS / "schemathesis.txt").write_text(report)
    assert result.returncode == 0, report[-20_000:]
    assert f"Seed: {SEED}" in report and " generated, " in report  # it ran, and said so


def chat(**fields: Any) -> Any:
    return chat_request_from({"model": "m", "messages": [USER], **fields})


@pytest.mark.unit
def test_null_is_read_as_a_field_left_out_for_stream_and_n():
    request = chat(stream=None, n=None, stream_options=None)
    assert request.stream is False and not request.include_usage


@pytest.mark.unit
def test_newer_openai_hints_are_checked_then_dropped():
    hints = {
        "safety_identifier": "user-1",
        "prompt_cache_key": "k",
        "prompt_cache_retention": "24h",
        "prompt_cache_options": {"ttl": "30m", "mode": "explicit"},
        "verbosity": "low",
        "modalities": ["text"],
        "service_tier": "fast",
    }
    assert not chat(**hints).upstream_body().keys() & hints.keys()
    for refused in (
        {"safety_identifier": "x" * 65},
        {"prompt_cache_options": {"ttl": "5m"}},
        {"verbosity": "loud"},
        {"modalities": ["text", "audio"]},
    ):
        with pytest.raises(InvalidRequest) as error:
            chat(**refused)
        assert error.value.param == next(iter(refused))


@pytest.mark.unit
def test_reasoning_effort_goes_to_the_worker():
    assert chat(reasoning_effort="low").upstream_body()["reasoning_effort"] == "low"
    with pytest.raises(InvalidRequest):
        chat(reasoning_effort="extreme")


@pytest.mark.unit
def test_an_earlier_reply_goes_back_as_openai_wrote_it():
    """An assistant turn with refusal (null or text, or as a part), and prompt-cache
    breakpoints on parts: accepted, and sent to the worker as plain text parts."""
    breakpoint_ = {"mode": "explicit"}
    messages = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hi", "prompt_cache_breakpoint": breakpoint_}],
        },
        {"role": "assistant", "content": "Hello", "refusal": None},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot."}]},
        {"role": "assistant", "content": None, "refusal": "I will not."},
    ]
    sent = chat_request_from({"model": "m", "messages": messages}).messages
    assert sent[0]["content"] == [{"type": "text", "text": "Hi"}]
    assert sent[1] == {"role": "assistant", "content": "Hello"}
    assert sent[2]["content"] == [{"type": "text", "text": "I cannot."}]
    assert sent[3] == {"role": "assistant", "content": "I will not."}
    for wrong in (
        {"role": "user", "content": "x", "refusal": "no"},
        {"role": "user", "content": [{"type": "refusal", "refusal": "no"}]},
        {"role": "assistant"},  # no content, tool_calls or function_call
        {"role": "user", "content": "x", "name": ["not", "a", "name"]},
    ):
        with pytest.raises(InvalidRequest):
            chat_request_from({"model": "m", "messages": [USER, wrong]})


@pytest.mark.unit
def test_a_function_result_without_content_reaches_the_worker_as_empty_text():
    call = {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": "{}"}}
    result = {"role": "function", "name": "f", "content": None}
    messages = chat_request_from({"model": "m", "messages": [USER, call, result]}).messages
    assert messages[-1] == {"role": "tool", "tool_call_id": "call_1", "content": ""}


@pytest.mark.unit
def test_streamed_logprobs_get_openais_refusal_field():
    chunk = {"choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": {"content": []}}]}
    assert openai_logprobs(chunk)["choices"][0]["logprobs"] == {"content": [], "refusal": None}
    plain = {"choices": [{"index": 0, "delta": {"content": "a"}, "logprobs": None}]}
    assert openai_logprobs(plain) is plain


@pytest.mark.unit
def test_a_null_max_completion_tokens_does_not_let_a_malformed_max_tokens_through():
    with pytest.raises(InvalidRequest) as error:
        chat(max_completion_tokens=None, max_tokens="many")
    assert error.value.param == "max_tokens"
    assert chat(max_completion_tokens=None, max_tokens=7).max_tokens == 7
    assert chat(max_completion_tokens=5, max_tokens=7).max_tokens == 5


@pytest.mark.unit
def test_a_json_schema_response_format_is_checked_for_openais_shape():
    good = {"name": "answer", "schema": {"type": "object"}, "strict": True}
    assert chat(response_format={"type": "json_schema", "json_schema": good}).options
    for wrong in (
        {**good, "strict": "yes"},
        {**good, "name": "an answer"},
        {**good, "extra": 1},
    ):
        with pytest.raises(InvalidRequest) as error:
            chat(response_format={"type": "json_schema", "json_schema": wrong})
        assert error.value.param == "response_format"
    with pytest.raises(InvalidRequest):
        chat(response_format={"type": "text", "json_schema": good})


@pytest.mark.unit
def test_stream_options_take_openais_two_booleans_only():
    assert chat(stream=True, stream_options={"include_usage": True, "include_obfuscation": False})
    wrongs: list[Any] = [
        {"include_usage": {}},
        {"include_obfuscation": "AAA"},
        {"usage": True},
        [],  # falsy, not an object: once read as none given
    ]
    for wrong in wrongs:
        with pytest.raises(InvalidRequest) as error:
            chat(stream=True, stream_options=wrong)
        assert error.value.param == "stream_options"


# A text completion's deliberate refusals (conformance/refusals.py): each as the gateway
# refuses it (the param it names) and as the check reads it; a base that is served.
TEXT = {"model": "m", "prompt": "Once upon a time"}
TEXT_BY_DESIGN: list[tuple[dict[str, Any], str]] = [
    ({"prompt": ["one", "two"]}, "prompt"),
    ({"prompt": [1212, 318]}, "prompt"),
    ({"prompt": [[1212, 318]]}, "prompt"),
    ({"prompt": [1e308, 318.0]}, "prompt"),  # integers, to JSON Schema
    ({"prompt": ""}, "prompt"),
    ({"prompt": [""]}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": None}, "prompt"),
    ({"logprobs": 0, "echo": True}, "logprobs"),
    ({"n": 9}, "n"),
    ({"best_of": 3, "n": 2}, "best_of"),
    ({"max_tokens": 0}, "max_tokens"),
]
TEXT_REFUSED_TOO: list[tuple[dict[str, Any], str]] = [
    ({"best_of": 1, "n": 2}, "best_of"),
    ({"logit_bias": {"a": 1}}, "logit_bias"),
    ({"n": 2.0}, "n"),
    ({"model": ""}, "model"),
    ({"extra": 1}, "extra"),
]


@pytest.mark.unit
def test_a_text_completions_documented_refusals_are_the_gateways_and_narrow():
    for change, param in TEXT_BY_DESIGN + TEXT_REFUSED_TOO:
        body = {**TEXT, **change}
        with pytest.raises(InvalidRequest) as error:
            text_completion_from(body)
        assert error.value.param == param, change
        judge = by_design if (change, param) in TEXT_BY_DESIGN else openai_refuses_too
        assert judge(COMPLETIONS, param, body), change
    for change, _ in [*TEXT_BY_DESIGN, ({"extra": 1}, "extra")]:  # what most requests drop
        assert text_completion_from(within_surface(COMPLETIONS, {**TEXT, **change})), change
    for served in (
        {"prompt": ["one"]},
        {"n": 8, "best_of": 8},
        {"max_tokens": 1, "logprobs": None, "echo": True},
        {"logprobs": 0},
        {"logprobs": 5, "echo": False},
    ):
        body = {**TEXT, **served}
        assert text_completion_from(body)
        for param in served:
            assert not by_design(COMPLETIONS, param, body), served
            assert not openai_refuses_too(COMPLETIONS, param, body), served


@pytest.mark.unit
def test_two_functions_of_one_name_are_a_documented_refusal():
    tool = {"type": "function", "function": {"name": "f"}}
    for field, offered in (("tools", [tool, tool]), ("functions", [{"name": "f"}] * 2)):
        with pytest.raises(InvalidRequest) as error:
            chat(**{field: offered})
        assert error.value.param == field
        assert by_design("/chat/completions", field, {field: offered})
        assert not by_design("/chat/completions", field, {field: offered[:1]})


@pytest.mark.unit
def test_either_token_limit_out_of_range_is_a_documented_refusal():
    """Sluice checks max_tokens beside a valid max_completion_tokens too (the one it reads)."""
    for body in ({"max_completion_tokens": 4096, "max_tokens": 2**40}, {"max_tokens": 2**40}):
        with pytest.raises(InvalidRequest) as error:
            chat(**body)
        assert error.value.param == "max_tokens"
        assert by_design("/chat/completions", "max_tokens", body)
    below = {"max_completion_tokens": 4096, "max_tokens": 0}
    assert openai_refuses_too("/chat/completions", "max_tokens", below)
    assert not by_design("/chat/completions", "max_tokens", {"max_tokens": 4096})
    # the refusal names the field that is out of range, and only that one is excused
    huge = {"max_completion_tokens": 2**40, "max_tokens": 7}
    with pytest.raises(InvalidRequest) as error:
        chat(**huge)
    assert error.value.param == "max_completion_tokens"
    assert by_design("/chat/completions", "max_completion_tokens", huge)
    assert not by_design("/chat/completions", "max_tokens", huge)
