"""Text completions (/v1/completions) with the official openai client, through a live gateway
and the simulator: the same admission, exact cache, settlement and ledger as chat, OpenAI's
text_completion shape streamed and not, echo, n, the 16-token default, OpenAI's integer
logprobs (whole, streamed, never cached), clear refusals of what is not served, and batch
lines for the endpoint."""

from typing import Any

import openai
import pytest

from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference.chat_options import InvalidRequest
from inference.reply import ReplyAssembler
from inference.text_completion import as_chat_chunk, text_chunk, text_completion_from
from tests.batch_stack import jsonl
from tests.waiting import wait_until

PROMPT = "def fibonacci(n):"


@pytest.mark.parametrize(
    "fields, param",
    [
        ({"prompt": ["first", "second"]}, "prompt"),
        ({"prompt": [1, 2, 3]}, "prompt"),
        ({"prompt": ""}, "prompt"),
        ({"prompt": None}, "prompt"),
        ({"logprobs": 6}, "logprobs"),
        ({"logprobs": -1}, "logprobs"),
        ({"logprobs": True}, "logprobs"),
        ({"logprobs": 1.0}, "logprobs"),
        ({"logprobs": 2, "echo": True}, "logprobs"),
        ({"logprobs": 0, "echo": True}, "logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"best_of": 3}, "best_of"),
        ({"best_of": True}, "best_of"),
        ({"best_of": 1.0}, "best_of"),
        ({"echo": "yes"}, "echo"),
        ({"suffix": 5}, "suffix"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "messages"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"n": 9}, "n"),
    ],
)
@pytest.mark.unit
def test_what_is_not_served_is_refused_naming_the_field(fields: dict[str, Any], param: str):
    with pytest.raises(InvalidRequest) as refused:
        text_completion_from({"model": "m", "prompt": PROMPT, **fields})
    assert refused.value.param == param


@pytest.mark.unit
def test_token_ids_written_as_decimals_are_refused_as_token_ids_not_as_several_prompts():
    """Found by the conformance check: [1.0, 2.0] (integers, to JSON Schema) was refused with
    "One prompt per request", advice to split a prompt that is one."""
    for prompt in ([1.0, 2.0, 3.0], [1e308, 5.0], [[1.0, 2.0]], [1, 2.0]):
        with pytest.raises(InvalidRequest) as refused:
            text_completion_from({"model": "m", "prompt": prompt})
        assert refused.value.param == "prompt"
        assert "Token-id prompts are not served" in str(refused.value)
    with pytest.raises(InvalidRequest) as refused:
        text_completion_from({"model": "m", "prompt": ["one", 2.0]})
    assert "One prompt per request" in str(refused.value)


@pytest.mark.unit
def test_a_prompt_is_sent_as_a_prompt_to_the_workers_completions_endpoint():
    request = text_completion_from(
        {"model": "m", "prompt": [PROMPT], "temperature": 0, "top_k": 5, "best_of": 1}
    )
    body = request.upstream_body()
    assert request.upstream_path == "/v1/completions"
    assert body["prompt"] == PROMPT and "messages" not in body
    assert body["max_tokens"] == 16  # OpenAI's default for text completions
    assert body["temperature"] == 0 and body["top_k"] == 5


@pytest.mark.unit
def test_integer_logprobs_reach_the_worker_as_they_were_sent():
    for asked in (0, 5):
        body = text_completion_from({"model": "m", "prompt": PROMPT, "logprobs": asked})
        assert body.upstream_body()["logprobs"] == asked
    assert "logprobs" not in text_completion_from({"model": "m", "prompt": PROMPT}).options


def vllm_text_chunk(text: str, offset: int, finish: str | None = None) -> dict[str, Any]:
    """A chunk as vLLM's /v1/completions streams it with logprobs: 1."""
    logprobs = {
        "tokens": [text],
        "token_logprobs": [-0.5],
        "top_logprobs": [{text: -0.5, " x": -1.5}],
        "text_offset": [offset],
    }
    choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}
    return {"id": "cmpl-w", "object": "text_completion", "created": 1, "choices": [choice]}


@pytest.mark.unit
def test_a_workers_legacy_logprobs_are_relayed_per_chunk_and_concatenated_whole():
    chunks = [as_chat_chunk(vllm_text_chunk(t, o)) for t, o in (("Hi", 0), (" there", 2))]
    relayed = [text_chunk(chunk, include_usage=False) for chunk in chunks]
    assert [r["choices"][0]["logprobs"]["tokens"] for r in relayed if r] == [["Hi"], [" there"]]
    whole = ReplyAssembler()
    for chunk in chunks:
        whole.add(chunk)
    assert whole.logprobs() == {
        "tokens": ["Hi", " there"],
        "token_logprobs": [-0.5, -0.5],
        "top_logprobs": [{"Hi": -0.5, " x": -1.5}, {" there": -0.5, " x": -1.5}],
        "text_offset": [0, 2],
    }


def recorded(request_id: str) -> UsageRecord | None:
    ingest("test-consumer")
    return UsageRecord.objects.filter(request_id=request_id).first()


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_a_text_completion_comes_back_whole_and_is_billed_as_the_worker_counted(platform):
    client: openai.OpenAI = platform["client"]
    reply = client.completions.create(
        model="small-model", prompt=PROMPT, extra_body={"ignore_eos": True}
    )
    assert reply.object == "text_completion" and reply.id.startswith("cmpl-")
    [choice] = reply.choices
    assert choice.text and choice.index == 0 and choice.finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 16  # the default max_tokens, every token made
    assert len(choice.text.split()) == 16  # a simulated token is a word
    record = wait_until(lambda: recorded(reply.id), 5, "the usage record")
    assert record is not None
    assert (record.prompt_tokens, record.completion_tokens, record.status) == (
        reply.usage.prompt_tokens,
        16,
        "ok",
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_a_stream_carries_the_same_text_as_text_completion_chunks(platform):
    client: openai.OpenAI = platform["client"]
    whole = client.completions.create(
        model="small-model", prompt=PROMPT, max_tokens=12, temperature=0
    )
    stream = client.completions.create(
        model="small-model",
        prompt=PROMPT,
        max_tokens=12,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"Cache-Control": "no-cache"},  # generated again, not replayed
    )
    chunks = list(stream)
    assert {chunk.object for chunk in chunks} == {"text_completion"}
    text = "".join(choice.text for chunk in chunks for choice in chunk.choices)
    assert text == whole.choices[0].text
    assert chunks[-1].usage is not None and whole.usage is not None
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    finishes = [c.finish_reason for chunk in chunks for c in chunk.choices if c.finish_reason]
    assert finishes == [whole.choices[0].finish_reason]


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_echo_puts_the_prompt_first_streamed_and_not(platform):
    client: openai.OpenAI = platform["client"]
    reply = client.completions.create(model="small-model", prompt=PROMPT, max_tokens=5, echo=True)
    assert reply.choices[0].text.startswith(PROMPT)
    assert len(reply.choices[0].text) > len(PROMPT)
    stream = client.completions.create(
        model="small-model", prompt=PROMPT, max_tokens=5, echo=True, stream=True
    )
    first = next(iter(stream))
    assert first.choices[0].text == PROMPT


def check_logprobs(logprobs: Any, text: str, alternatives: int) -> None:
    """OpenAI's legacy shape: the tokens spell the text, each at its offset, with its own
    logprob among its top entries (the chosen token and up to `alternatives` others)."""
    assert logprobs is not None
    tokens = logprobs.tokens
    assert "".join(tokens) == text and tokens
    assert logprobs.text_offset == [len("".join(tokens[:i])) for i in range(len(tokens))]
    lists = (tokens, logprobs.token_logprobs, logprobs.top_logprobs)
    for token, logprob, top in zip(*lists, strict=True):  # as long as each other
        assert logprob <= 0 and top[token] == logprob
        assert 1 <= len(top) <= alternatives + 1 and max(top.values()) == logprob


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_integer_logprobs_come_back_whole_and_per_chunk_and_are_never_cached(platform):
    client: openai.OpenAI = platform["client"]
    ask: dict[str, Any] = {
        "model": "small-model",
        "prompt": PROMPT,
        "max_tokens": 8,
        "temperature": 0,
        "logprobs": 2,
    }
    raw = client.completions.with_raw_response.create(**ask)
    assert raw.headers["x-sluice-cache"] == "bypass"
    [choice] = raw.parse().choices
    check_logprobs(choice.logprobs, choice.text, alternatives=2)
    usage = raw.parse().usage
    assert usage is not None and len(choice.logprobs.tokens) == usage.completion_tokens

    streamed: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": []}
    offsets: list[int] = []
    for chunk in client.completions.create(**ask, stream=True):
        for part in chunk.choices:
            if part.text:  # every chunk with a token carries that token's logprobs
                assert part.logprobs is not None and part.logprobs.tokens == [part.text]
            if part.logprobs is not None:
                for field, kept in streamed.items():
                    kept += getattr(part.logprobs, field)
                offsets += part.logprobs.text_offset or []
    assert streamed == {
        "tokens": choice.logprobs.tokens,
        "token_logprobs": choice.logprobs.token_logprobs,
        "top_logprobs": choice.logprobs.top_logprobs,
    }
    assert offsets == choice.logprobs.text_offset

    # 0 still asks for logprobs (the chosen token's own): not cached either
    for _ in range(2):
        zero = client.completions.with_raw_response.create(**{**ask, "logprobs": 0})
        assert zero.headers["x-sluice-cache"] == "bypass"
    [only] = zero.parse().choices
    check_logprobs(only.logprobs, only.text, alternatives=0)
    assert all(len(top) == 1 for top in only.logprobs.top_logprobs)


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_each_of_n_choices_has_its_own_logprobs_and_echo_with_logprobs_is_refused(platform):
    client: openai.OpenAI = platform["client"]
    reply = client.completions.create(
        model="small-model", prompt=PROMPT, max_tokens=6, n=2, logprobs=1
    )
    for choice in reply.choices:
        check_logprobs(choice.logprobs, choice.text, alternatives=1)
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(model="small-model", prompt=PROMPT, echo=True, logprobs=1)
    assert refused.value.body["param"] == "logprobs"  # type: ignore[index]
    assert "'echo'" in refused.value.body["message"]  # type: ignore[index]


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_n_choices_come_back_under_their_indices(platform):
    client: openai.OpenAI = platform["client"]
    reply = client.completions.create(model="small-model", prompt=PROMPT, max_tokens=10, n=2)
    assert [choice.index for choice in reply.choices] == [0, 1]
    assert all(choice.text for choice in reply.choices)


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_the_exact_cache_answers_a_repeat_but_never_a_chat_turn_of_the_same_text(platform):
    client: openai.OpenAI = platform["client"]

    def cache_of(raw: Any) -> str:
        return str(raw.headers["x-sluice-cache"])

    ask: dict[str, Any] = {
        "model": "small-model",
        "prompt": PROMPT,
        "max_tokens": 8,
        "temperature": 0,
    }
    first = client.completions.with_raw_response.create(**ask)
    assert cache_of(first) == "miss"
    wait_until(
        lambda: cache_of(client.completions.with_raw_response.create(**ask)) == "hit-exact",
        5,
        "the reply to be kept",
        poll_s=0.1,
    )
    again = client.completions.with_raw_response.create(**ask).parse()
    assert again.choices[0].text == first.parse().choices[0].text
    assert again.object == "text_completion"
    chat = client.chat.completions.with_raw_response.create(
        model="small-model",
        messages=[{"role": "user", "content": PROMPT}],
        max_tokens=8,
        temperature=0,
    )
    assert cache_of(chat) == "miss"


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_refusals_are_openai_errors_naming_the_field(platform):
    client: openai.OpenAI = platform["client"]
    with pytest.raises(openai.BadRequestError) as refused:
        client.completions.create(model="small-model", prompt=["one", "two"])
    assert refused.value.body["param"] == "prompt"  # type: ignore[index]
    assert "One prompt per request" in refused.value.body["message"]  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt=PROMPT)
    anonymous = openai.OpenAI(base_url=str(client.base_url), api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        anonymous.completions.create(model="small-model", prompt=PROMPT)


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_a_batch_of_text_completion_lines_answers_each_in_the_endpoints_shape(stack):
    lines = [
        {
            "custom_id": f"t{n}",
            "method": "POST",
            "url": "/v1/completions",
            "body": {"model": "small-model", "prompt": f"Line {n} begins", "max_tokens": 6},
        }
        for n in range(4)
    ]
    stack.start_worker()
    created = stack.client.batches.create(
        input_file_id=stack.upload(jsonl(lines)),
        endpoint="/v1/completions",
        completion_window="24h",
    )
    batch = stack.wait_for(created.id, {"completed"})
    output = {line["custom_id"]: line["response"] for line in stack.read(batch.output_file_id)}
    assert sorted(output) == [f"t{n}" for n in range(4)]
    for response in output.values():
        assert response["status_code"] == 200
        assert response["body"]["object"] == "text_completion"
        assert response["body"]["choices"][0]["text"]
        assert response["body"]["usage"]["completion_tokens"] > 0
