"""vLLM's own sampling fields reach only a deployment that takes them (its `extra_fields`
allowlist; by default every one for a vLLM deployment, none for an OpenAI-compatible one):
another is refused at admission, naming the field, before any quota is spent."""

from typing import Any

import openai
import pytest
from django.core.exceptions import ValidationError

from inference.deployments import DeploymentInfo
from inference.models import ModelDeployment, validate_extra_fields
from tests.conftest import MESSAGES
from tests.waiting import wait_until


@pytest.mark.unit
def test_a_deployment_takes_every_vllm_field_unless_it_fronts_another_server():
    def info(**fields: Any) -> DeploymentInfo:
        return DeploymentInfo("m", 0, 0, 0, **fields)  # type: ignore[arg-type]

    assert {"top_k", "min_p", "guided_json"} <= info().extra_fields
    assert info(worker_kind="openai").extra_fields == frozenset()
    listed = info(worker_kind="openai", allowed_extra_fields=frozenset({"top_k"}))
    assert listed.extra_fields == {"top_k"}


@pytest.mark.unit
def test_an_allowlist_names_only_vllm_fields():
    validate_extra_fields(["top_k", "min_p"])
    validate_extra_fields(None)
    with pytest.raises(ValidationError, match="temperature"):
        validate_extra_fields(["top_k", "temperature"])
    with pytest.raises(ValidationError):
        validate_extra_fields("top_k")


@pytest.mark.django_db(transaction=True)
@pytest.mark.live
def test_a_field_off_the_list_is_refused_by_name_and_a_listed_one_passes(platform):
    client: openai.OpenAI = platform["client"]

    def ask(**extra: Any) -> Any:
        return client.chat.completions.create(
            model="small-model", messages=MESSAGES, max_tokens=2, extra_body=extra
        )

    ask(top_k=5, min_p=0.1)  # a vLLM deployment takes them all by default
    ModelDeployment.objects.filter(name="small-model").update(extra_fields=["top_k"])

    def refused() -> Any:
        try:
            ask(min_p=0.1)
        except openai.BadRequestError as exc:
            return exc
        return None

    error = wait_until(refused, 10, "the gateway to read the allowlist", poll_s=0.3)
    assert error.body["param"] == "min_p"
    assert "does not take 'min_p'" in error.body["message"]
    assert "top_k" in error.body["message"]  # what it does take
    assert ask(top_k=5).choices[0].message.content
