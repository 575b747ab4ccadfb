"""POST /v1/embeddings: a thin adapter around the embeddings pipeline
(gateway/serving/embeddings.py), as views.chat_completions is around the chat one."""

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from gateway.api.common import credential, finish
from gateway.serving.embeddings import create_embeddings, new_embedding_id
from gateway.serving.errors import DOMAIN_ERRORS, api_error
from gateway.serving.pipeline import model_of, rate_limit_headers_of
from inference.embedding_request import parse_embedding_request


@csrf_exempt
@require_POST
async def embeddings(request: HttpRequest) -> HttpResponseBase:
    request_id = new_embedding_id()
    try:
        result = await create_embeddings(
            credential(request), lambda: parse_embedding_request(request.body), request_id
        )
    except DOMAIN_ERRORS as exc:
        refusal = api_error(exc).response()
        return finish(refusal, request_id, rate_limit_headers_of(exc), model_of(exc))
    reply = JsonResponse(result.body())
    return finish(reply, request_id, result.headers(), result.run.deployment.name)
