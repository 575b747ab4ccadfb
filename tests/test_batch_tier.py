"""Model "auto" in a batch: its lines go to a batch-tier deployment first (spot capacity,
priced for batches), metered by that deployment's spare capacity, while an interactive
"auto" request never takes the batch tier. Live: a gateway, two simulator workers, Celery
running the batch, the official openai client."""

import asyncio
import json
from typing import Any

import pytest

from gateway.batches.input_file import read_line
from gateway.batches.models import Batch
from gateway.batches.runner import BatchRunner
from gateway.serving.admission import Caller, choose_target
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from inference.chat_request import chat_request_from
from inference.client import close_http_session
from tests.batch_stack import jsonl
from tests.sims import SimProcess

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]


def auto_line(custom_id: str, text: str) -> dict[str, Any]:
    body = {"model": "auto", "messages": [{"role": "user", "content": text}], "max_tokens": 6}
    return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}


def test_auto_lines_run_on_the_batch_tier_and_interactive_auto_never_does(stack):
    spot_sim = SimProcess(model="sim-upstream", fixed_ttft_ms=30, fixed_itl_ms=5)
    try:
        spot = fleet.ensure_deployment(
            "spot-pool", served_model_name="sim-upstream", tier="batch", max_in_flight_per_worker=5
        )
        fleet.register_worker(spot, spot_sim.url, registered_by="test")
        lines = [auto_line(f"a{n}", f"Summarize report number {n}") for n in range(4)]
        stack.start_worker()
        created = stack.client.batches.create(
            input_file_id=stack.upload(jsonl(lines)),
            endpoint="/v1/chat/completions",
            completion_window="24h",
        )
        batch = stack.wait_for(created.id, {"completed"})
        output = [line["response"] for line in stack.read(batch.output_file_id)]
        assert len(output) == 4 and {r["status_code"] for r in output} == {200}
        assert {r["body"]["model"] for r in output} == {"spot-pool"}
        ingest("test-consumer")
        records = UsageRecord.objects.filter(request_id__startswith="batch_req_")
        assert {r.model for r in records} == {"spot-pool"} and records.count() == 4

        # The runner meters an "auto" line by the deployment admission picks for it.
        runner = BatchRunner(Batch.objects.get(id=created.id), "probe")

        async def metered_and_interactive() -> tuple[str, str]:
            try:
                line = read_line(1, json.dumps(lines[0]).encode())
                interactive = Caller(stack.team.pk)  # the same request, not a batch line
                target = await choose_target(interactive, chat_request_from(lines[0]["body"]))
                return await runner.metered_model(line), target.deployment.name
            finally:
                await close_http_session()

        # An interactive "auto" request is classified among small and large only.
        assert asyncio.run(metered_and_interactive()) == ("spot-pool", "small-model")
        reply = stack.client.chat.completions.create(
            model="auto", messages=[{"role": "user", "content": "hello"}], max_tokens=3
        )
        assert reply.model == "small-model"
    finally:
        spot_sim.stop()
