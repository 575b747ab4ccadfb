"""A semantic entry is read whichever version of the gateway wrote it, as an exact one is:
during a rolling upgrade an older process meets entries with fields it does not know."""

import pytest

from caching.semantic import _match
from caching.semantic_keys import ENTRY_PREFIX

pytestmark = pytest.mark.unit


def test_an_entry_written_with_a_field_this_process_does_not_know_still_answers():
    reply = {
        "content": "Paris.",
        "finish_reason": "stop",
        "prompt_tokens": 9,
        "completion_tokens": 2,
        "refusal": None,  # a field a later version added
    }
    entry = {"reply": reply, "question": "What is the capital of France?"}
    match = _match(entry, "e1", 0.97)
    assert match.reply.content == "Paris." and match.reply.completion_tokens == 2
    assert match.entry_key == ENTRY_PREFIX + "e1"
