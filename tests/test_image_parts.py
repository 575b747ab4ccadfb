"""Image parts reach only a deployment that takes them: a text model's worker is never
asked to fetch a URL (docs/security.md), through a live gateway with the openai client."""

from typing import Any

import openai
import pytest

from inference import fleet
from tests.sims import SimProcess
from tests.waiting import wait_until

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
PICTURE: list[Any] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        ],
    }
]


@pytest.fixture
def vision_sim():
    sim = SimProcess(model="sim-vision")
    yield sim
    sim.stop()


def test_a_text_model_refuses_an_image_part_before_spending_quota(platform):
    client = platform["client"]
    before = client.chat.completions.with_raw_response.create(
        model="small-model", messages=[{"role": "user", "content": "Hi"}], max_tokens=1
    )
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="small-model", messages=PICTURE, max_tokens=2)
    assert refused.value.body["param"] == "messages.0.content.1.type"  # type: ignore[index]
    assert "takes text only" in refused.value.message
    after = client.chat.completions.with_raw_response.create(
        model="small-model", messages=[{"role": "user", "content": "Hi"}], max_tokens=1
    )
    remaining = [int(r.headers["x-ratelimit-remaining-requests"]) for r in (before, after)]
    assert remaining[1] == remaining[0] - 1  # the refused request reserved nothing


def test_a_deployment_that_accepts_images_gets_them(platform, vision_sim):
    deployment = fleet.ensure_deployment(
        "vision-model", served_model_name="sim-vision", accepts_images=True
    )
    fleet.register_worker(deployment, vision_sim.url, registered_by="test")
    client = platform["client"]

    def answered() -> Any:
        return client.chat.completions.create(model="vision-model", messages=PICTURE, max_tokens=3)

    reply = wait_until(
        answered,
        10,
        "the gateway to know the vision deployment and its worker",
        ignoring=(openai.NotFoundError, openai.InternalServerError),
    )
    assert reply.choices[0].message.content
    assert reply.usage is not None and reply.usage.prompt_tokens > 64  # the image counted
