"""What every /v1/ adapter does around its pipeline: read the bearer key, and finish the
response (the request counter, x-request-id and the pipeline's headers)."""

from django.http import HttpRequest
from django.http.response import HttpResponseBase

from foundation import metrics
from gateway.accounts.authentication import authenticate_key, bearer_token
from gateway.accounts.records import KeyRecord
from gateway.serving.admission import INFERENCE_SCOPE, ApiKeyCredential


def credential(request: HttpRequest) -> ApiKeyCredential:
    return ApiKeyCredential(bearer_token(request.headers.get("Authorization")))


def finish(
    response: HttpResponseBase, request_id: str, headers: dict[str, str], model: str = "-"
) -> HttpResponseBase:
    metrics.requests.labels(model, str(response.status_code)).inc()
    response["x-request-id"] = request_id
    for name, value in headers.items():
        response[name] = value
    return response


async def authorized_key(request: HttpRequest) -> KeyRecord:
    """The bearer key of a request to the files and batches endpoints (inference scope)."""
    return await authenticate_key(
        bearer_token(request.headers.get("Authorization")), INFERENCE_SCOPE
    )
