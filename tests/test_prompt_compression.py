"""Prompt compression, a team's opt-in (gateway/serving/compression.py): what it leaves out
(trailing whitespace and blank-line runs, a message repeated right after itself, the middle
of very long tool outputs), what it never touches (indentation and spaces inside a line,
system messages, the last user message, a text completion's prompt), and, live, fewer
prompt tokens billed with the saving said in a header."""

from typing import Any

import openai
import pytest

from gateway.accounts import actions
from gateway.serving.compression import TOOL_OUTPUT_MAX_CHARS, compress
from inference.chat_request import chat_request_from
from inference.text_completion import text_completion_from
from tests.waiting import wait_until

CODE = 'def f(x):   \n    return "a  b"  \n\n\n\n# done\r\n'


def chat(*messages: dict[str, Any]) -> Any:
    return chat_request_from({"model": "m", "messages": list(messages)})


@pytest.mark.unit
def test_trailing_whitespace_and_blank_runs_go_but_indentation_and_inner_spaces_stay():
    done = compress(chat({"role": "user", "content": CODE}))
    assert done.chat.messages[0]["content"] == 'def f(x):\n    return "a  b"\n\n# done\n'
    assert done.chars_saved == len(CODE) - len(done.chat.messages[0]["content"])


@pytest.mark.unit
def test_a_message_repeated_right_after_itself_is_left_out_once():
    system = {"role": "system", "content": "Be brief."}
    asked = {"role": "user", "content": "What is Redis?"}
    done = compress(chat(system, system, asked, asked, asked))
    assert done.chat.messages == [system, system, asked]  # system messages all kept
    assert done.messages_dropped == 2
    answer = {"role": "assistant", "content": "A store."}
    spaced = compress(chat(asked, answer, asked))  # not back to back: a real repeat
    assert spaced.chars_saved == 0 and len(spaced.chat.messages) == 3


@pytest.mark.unit
def test_a_long_tool_output_keeps_its_head_and_tail():
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "logs", "arguments": "{}"}}
        ],
    }
    output = "HEAD" + "x" * (2 * TOOL_OUTPUT_MAX_CHARS) + "TAIL"
    result = {"role": "tool", "tool_call_id": "c1", "content": output}
    asked = {"role": "user", "content": "Why did it fail?"}
    done = compress(chat(asked, call, result))
    trimmed = done.chat.messages[2]["content"]
    assert trimmed.startswith("HEAD") and trimmed.endswith("TAIL")
    assert "characters of this output left out" in trimmed
    assert len(trimmed) < TOOL_OUTPUT_MAX_CHARS and done.tool_outputs_trimmed == 1
    short = {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert compress(chat(asked, call, short)).chars_saved == 0


@pytest.mark.unit
def test_a_text_completion_and_a_tidy_prompt_are_left_as_they_are():
    text = text_completion_from({"model": "m", "prompt": CODE})
    assert compress(text).chat is text
    tidy = chat({"role": "user", "content": "Hello"})
    assert compress(tidy).chat is tidy and compress(tidy).chars_saved == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_a_team_that_opts_in_is_billed_for_the_compressed_prompt(platform):
    client: openai.OpenAI = platform["client"]
    repeated = {"role": "user", "content": "Summarize the incident report in one line please"}
    messages: Any = [repeated, repeated, repeated]

    def prompt_tokens() -> tuple[int, str | None]:
        raw = client.chat.completions.with_raw_response.create(
            model="small-model",
            messages=messages,
            max_tokens=2,
            extra_headers={"Cache-Control": "no-cache"},
        )
        usage = raw.parse().usage
        assert usage is not None
        return usage.prompt_tokens, raw.headers.get("x-sluice-prompt-compressed")

    full, header = prompt_tokens()
    assert header is None  # off by default
    actions.update_quota_policy(platform["team"], compress_prompts=True)

    def applied() -> tuple[int, str] | None:
        tokens, saved = prompt_tokens()
        return None if saved is None else (tokens, saved)

    found = wait_until(applied, 10, "the team's policy to apply", poll_s=0.3)
    assert found is not None
    compressed, saved = found
    assert int(saved) == 2 * len(repeated["content"])
    assert compressed < full  # two of the three copies were never sent or billed
