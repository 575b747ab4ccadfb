"""Text completions (/v1/completions) with the official openai client, through a live gateway
and the simulator: the same admission, exact cache, settlement and ledger as chat, OpenAI's
text_completion shape streamed and not, echo, n, the 16-token default, clear refusals of
what is not served, and batch lines for the endpoint."""

from typing import Any

import openai
import pytest

from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference.chat_options import InvalidRequest
from inference.text_completion import text_completion_from
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
        ({"logprobs": 2}, "logprobs"),
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
