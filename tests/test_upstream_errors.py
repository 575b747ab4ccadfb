"""What a client is told when a worker refuses or fails: what it can act on, never the
worker's own words."""

import pytest

from gateway.serving.errors import api_error
from inference.client import UpstreamError

pytestmark = pytest.mark.unit
WORKER = "http://10.0.0.7:8000"


def test_a_context_overflow_names_the_models_context_and_what_to_change():
    vllm_says = (
        'worker answered 400: {"error": {"message": "This model\'s maximum context length '
        'is 2048 tokens. However, you requested 4100 tokens in /models/smollm2."}}'
    )
    error = api_error(UpstreamError(vllm_says, WORKER, True, status=400))
    assert (error.status, error.code) == (400, "context_length_exceeded")
    assert "2048 tokens" in error.message and "max_tokens" in error.message
    assert "/models/" not in error.message and "10.0.0.7" not in error.message


def test_any_other_refusal_is_reported_without_the_workers_body():
    says = 'worker answered 422: {"detail": "bad grammar at /srv/weights/internal"}'
    error = api_error(UpstreamError(says, WORKER, True, status=422))
    assert (error.status, error.code) == (400, "invalid_request")
    assert "HTTP 422" in error.message and "/srv" not in error.message


def test_a_worker_failure_is_a_502_without_its_address():
    error = api_error(UpstreamError("stream broke: reset", WORKER, False))
    assert (error.status, error.code) == (502, "upstream_error")
    assert "10.0.0.7" not in error.message


@pytest.mark.parametrize("status", [401, 403, 429])
def test_a_worker_refusing_the_platform_is_a_502_tried_elsewhere_not_the_clients_400(status):
    """The deployment's key wrong or unset (401, 403), or the worker's own rate limit (429),
    is the platform's failure: never reported as a bad request, and another worker is tried."""
    failure = UpstreamError(f"worker answered {status}: denied", WORKER, True, status=status)
    error = api_error(failure)
    assert (error.status, error.code) == (502, "upstream_error")
    assert failure.retryable and not failure.client_error
