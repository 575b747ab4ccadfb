"""Scale from zero: a request for a deployment whose autoscale policy allows zero replicas,
finding no worker, waits in the dispatch queue (which is published: the autoscaler's
`from_zero` signal) and is served once a replica is routable; with none in time it gets a
503 with Retry-After. A deployment that does not scale from zero still fails at once. And
end to end with the autoscale loop and the local actuator starting the replica."""

import http.client
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from foundation.redis_clients import sync_redis
from gateway.accounts import actions
from gateway.usage.ledger import ingest
from gateway.usage.models import UsageRecord
from inference import fleet
from inference.models import Worker
from scaling.autoscale.actuators.local import LocalProcessActuator
from scaling.autoscale.loop import AutoscaleLoop
from scaling.models import AutoscalePolicy
from scaling.routing.queue_depth import read_depths
from tests.conftest import MESSAGES
from tests.live import LiveGateway
from tests.sims import SimProcess
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.live]
TIMEOUT_S = 8
KEEPALIVE_S = 0.5


@pytest.fixture
def cold(redis_url: str) -> Iterator[dict[str, Any]]:
    team = actions.create_team("Cold", requests_per_minute=100, tokens_per_minute=100_000)
    deployment = fleet.ensure_deployment("cold-model", served_model_name="sim-upstream")
    AutoscalePolicy.objects.create(deployment=deployment, min_replicas=0, max_replicas=1)
    fleet.ensure_deployment("no-policy-model", served_model_name="sim-upstream")
    gateway = LiveGateway(
        redis_url, SCALE_FROM_ZERO_TIMEOUT_S=str(TIMEOUT_S), SSE_KEEPALIVE_S=str(KEEPALIVE_S)
    )
    try:
        key = actions.issue_api_key(team).plaintext
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)
        yield {"client": client, "deployment": deployment, "gateway": gateway, "key": key}
    finally:
        gateway.stop()


def test_the_first_request_waits_for_a_replica_and_is_served(cold):
    client: openai.OpenAI = cold["client"]
    sim = SimProcess(model="sim-upstream")
    replies: list[Any] = []

    def ask() -> None:
        started = time.monotonic()
        try:
            replies.append(
                client.chat.completions.create(model="cold-model", messages=MESSAGES, max_tokens=3)
            )
        except openai.APIError as exc:
            replies.append(exc)
        replies.append(time.monotonic() - started)

    try:
        asking = threading.Thread(target=ask)
        asking.start()
        time.sleep(2.0)  # waiting, not refused: what the actuator's replica arrives to
        assert asking.is_alive(), f"the request did not wait: {replies}"
        fleet.register_worker(cold["deployment"], sim.url, registered_by="test")
        asking.join(timeout=TIMEOUT_S + 10)
        reply, waited_s = replies
        assert not isinstance(reply, Exception), reply
        assert reply.choices[0].message.content and waited_s >= 2.0
    finally:
        sim.stop()


def stream_lines(cold: dict[str, Any], lines: list[str]) -> None:
    """POST a streamed chat completion for cold-model; its status, then each line read."""
    gateway = cold["gateway"]
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=TIMEOUT_S + 10)
    body = {"model": "cold-model", "messages": MESSAGES, "max_tokens": 3, "stream": True}
    headers = {"Authorization": f"Bearer {cold['key']}", "Content-Type": "application/json"}
    connection.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    response = connection.getresponse()
    lines.append(str(response.status))
    lines.extend(line.decode().rstrip("\n") for line in response if line.strip())


def test_a_held_stream_is_kept_alive_with_comments_then_served(cold):
    """Held for a replica, a stream gets its headers and an SSE comment every
    SSE_KEEPALIVE_S at once (a proxy would cut a connection silent for two minutes), then
    the chunks once a replica answers."""
    sim = SimProcess(model="sim-upstream")
    lines: list[str] = []
    try:
        asking = threading.Thread(target=stream_lines, args=(cold, lines))
        asking.start()
        wait_until(lambda: len(lines) >= 4, 5, "the headers and keep-alive comments")
        assert lines[0] == "200" and asking.is_alive()
        fleet.register_worker(cold["deployment"], sim.url, registered_by="test")
        asking.join(timeout=TIMEOUT_S + 10)
    finally:
        sim.stop()
    first_data = next(i for i, line in enumerate(lines) if line.startswith("data:"))
    assert first_data >= 4 and set(lines[1:first_data]) == {": waiting for a replica"}
    chunks = [json.loads(line[6:]) for line in lines[first_data:-1]]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert lines[-1] == "data: [DONE]"


def test_a_held_stream_without_a_replica_in_time_ends_with_an_error_event(cold):
    """Its status went out as 200 with the first comment: the refusal is an error event,
    which OpenAI's SDK raises as an APIError."""
    lines: list[str] = []
    stream_lines(cold, lines)
    assert lines[0] == "200" and lines[1] == ": waiting for a replica"
    error = json.loads(lines[-1][6:])["error"]
    assert error["code"] == "no_replica_ready"
    with pytest.raises(openai.APIError, match="starting"):
        for _ in cold["client"].chat.completions.create(
            model="cold-model", messages=MESSAGES, max_tokens=3, stream=True
        ):
            pass


def test_a_client_gone_while_its_stream_is_held_is_settled_and_leaves_the_queue(cold):
    """The keep-alives went out, then the client closed the connection: the held request
    is cancelled, settled (a usage record, billed nothing) and no longer waits, so the
    autoscaler is not asked for a replica on its behalf."""
    gateway = cold["gateway"]
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=10)
    body = {"model": "cold-model", "messages": MESSAGES, "max_tokens": 3, "stream": True}
    headers = {"Authorization": f"Bearer {cold['key']}", "Content-Type": "application/json"}
    connection.request("POST", "/v1/chat/completions", json.dumps(body), headers)
    response = connection.getresponse()
    assert response.readline().strip() == b": waiting for a replica"
    connection.sock.close()  # the client leaves while held
    connection.close()

    def settled() -> list[UsageRecord]:
        ingest("test-consumer")
        return list(UsageRecord.objects.filter(model="cold-model"))

    [record] = wait_until(settled, 5, "the held request to be settled")
    assert record.status == "cancelled" and record.prompt_tokens == 0
    wait_until(lambda: sum_queue_depth("cold-model") == 0, 5, "the held request to leave the queue")


def sum_queue_depth(deployment: str) -> int:
    return read_depths(sync_redis()).get(deployment, 0)


def test_without_a_replica_in_time_it_is_a_503_with_retry_after(cold):
    client: openai.OpenAI = cold["client"]
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model="cold-model", messages=MESSAGES, max_tokens=3)
    assert time.monotonic() - started >= TIMEOUT_S - 0.5
    assert refused.value.status_code == 503
    assert refused.value.response.headers["Retry-After"] == "5"
    assert refused.value.body["code"] == "no_replica_ready"  # type: ignore[index]

    started = time.monotonic()  # a deployment that does not scale from zero: at once
    with pytest.raises(openai.APIStatusError) as at_once:
        client.chat.completions.create(model="no-policy-model", messages=MESSAGES, max_tokens=3)
    assert at_once.value.status_code == 503 and time.monotonic() - started < 3
    assert at_once.value.body["code"] == "no_healthy_worker"  # type: ignore[index]


def test_the_autoscaler_starts_a_replica_for_the_waiting_request_which_it_then_serves(
    redis_url: str, settings: Any, tmp_path: Any
) -> None:
    """End to end: the gateway holds the request and publishes its queue; the autoscale
    loop's from_zero rule starts a replica (the local actuator, a simulator process); the
    scraper puts it in rotation; the held request is served by it."""
    settings.VAR_DIR = tmp_path
    team = actions.create_team("Zero", requests_per_minute=100, tokens_per_minute=100_000)
    deployment = fleet.ensure_deployment("sim-zero", worker_kind="simulated")
    AutoscalePolicy.objects.create(
        deployment=deployment, mode="reactive", min_replicas=0, max_replicas=1
    )
    actuator = LocalProcessActuator(sim_profile="h100-llama3-8b")
    loop = AutoscaleLoop(actuator, sync_redis())
    gateway = LiveGateway(redis_url, SCALE_FROM_ZERO_TIMEOUT_S="60")
    replies: list[Any] = []
    try:
        key = actions.issue_api_key(team).plaintext
        client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=key, max_retries=0)

        def ask() -> None:
            try:
                replies.append(
                    client.chat.completions.create(
                        model="sim-zero", messages=MESSAGES, max_tokens=3
                    )
                )
            except openai.APIError as exc:
                replies.append(exc)

        asking = threading.Thread(target=ask)
        asking.start()

        def started() -> Any:
            decisions = loop.tick() or []
            return next((d for d in decisions if d.action == "up" and d.actuated), None)

        up = wait_until(started, 20, "the loop to start a replica for the queue", poll_s=0.5)
        assert up.rule == "from_zero", up.reason
        asking.join(timeout=60)
        (reply,) = replies
        assert not isinstance(reply, Exception), reply
        assert reply.choices[0].message.content
        (worker,) = Worker.objects.filter(deployment=deployment).exclude(state="dead")
        assert worker.url in actuator.processes and worker.state == "ready"
    finally:
        gateway.stop()
        actuator.stop_all()
