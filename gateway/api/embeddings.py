"""POST /v1/embeddings: a thin adapter around the embeddings pipeline
(gateway/serving/embeddings.py), as views.chat_completions is around the chat one."""

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from foundation import metrics
from gateway.accounts.authentication import bearer_token
from gateway.serving.admission import ApiKeyCredential
from gateway.serving.embeddings import create_embeddings, new_embedding_id
from gateway.serving.errors import DOMAIN_ERRORS, api_error
from gateway.serving.pipeline import model_of, rate_limit_headers_of
from inference.embedding_request import parse_embedding_request


@csrf_exempt
@require_POST
async def embeddings(request: HttpRequest) -> HttpResponseBase:
    request_id = new_embedding_id()
    try:
        credential = ApiKeyCredential(bearer_token(request.headers.get("Authorization")))
        result = await create_embeddings(
            credential, lambda: parse_embedding_request(request.body), request_id
        )
    except DOMAIN_ERRORS as exc:
        refusal = api_error(exc).response()
        return _finish(refusal, request_id, rate_limit_headers_of(exc), model_of(exc))
    reply = JsonResponse(result.body())
    return _finish(reply, request_id, result.headers(), result.run.deployment.name)


def _finish(
    response: HttpResponseBase, request_id: str, headers: dict[str, str], model: str
) -> HttpResponseBase:
    metrics.requests.labels(model, str(response.status_code)).inc()
    response["x-request-id"] = request_id
    for name, value in headers.items():
        response[name] = value
    return response
