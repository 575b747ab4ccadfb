"""A batch line admission changed says so in its output line, as an HTTP reply's x-sluice-*
headers would: a conversation trimmed to the context window under the team's trim policy
carries response.headers {"x-sluice-context-trimmed": N}; a line left as it was has no
headers. Live: a gateway, a simulator worker, Celery running the batch."""

import pytest

from gateway.accounts import actions
from gateway.serving.context_trim import TRIMMED_HEADER
from inference.models import ModelDeployment

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]

OLD_TURNS = [
    message
    for number in range(6)
    for message in (
        {"role": "user", "content": f"Tell me about river number {number}. " * 6},
        {"role": "assistant", "content": f"River number {number} is long and wide. " * 6},
    )
]


def line(custom_id: str, messages: list[dict[str, str]]) -> dict[str, object]:
    body = {"model": "small-model", "messages": messages, "max_tokens": 8}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def test_a_trimmed_line_says_how_many_messages_were_left_out(stack):
    ModelDeployment.objects.filter(name="small-model").update(context_length=200)
    actions.update_quota_policy(stack.team, max_tokens_policy="trim")
    question = {"role": "user", "content": "Which river is longest?"}
    stack.start_worker()
    batch_id = stack.submit([line("long", [*OLD_TURNS, question]), line("short", [question])])
    batch = stack.wait_for(batch_id, {"completed"})
    output = {row["custom_id"]: row["response"] for row in stack.read(batch.output_file_id)}
    assert {r["status_code"] for r in output.values()} == {200}
    dropped = int(output["long"]["headers"][TRIMMED_HEADER])
    assert 2 <= dropped <= len(OLD_TURNS) and dropped % 2 == 0  # whole turns, oldest first
    assert output["long"]["body"]["usage"]["prompt_tokens"] <= 200 - 8
    assert "headers" not in output["short"]
