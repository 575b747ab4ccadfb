"""Refusals of the files and batches endpoints, in OpenAI's error shape."""

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase

from gateway.batches.actions import BatchRefused
from gateway.batches.storage import StorageUnavailable
from gateway.list_pages import BadPage
from gateway.serving.errors import DOMAIN_ERRORS, ApiError, api_error

logger = logging.getLogger(__name__)
View = Callable[..., Coroutine[Any, Any, HttpResponseBase]]


def refusal(status: int, message: str, code: str, param: str | None = None) -> JsonResponse:
    return ApiError(status, message, code, param).response()


def refusing(view: View) -> View:
    """Domain refusals (a bad key, a foreign file, a full batch queue) become their 4xx;
    file storage that cannot be reached a 503 (what went wrong is in the log, not the
    answer: it names the operator's storage)."""

    @functools.wraps(view)
    async def answer(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponseBase:
        try:
            return await view(request, *args, **kwargs)
        except BatchRefused as exc:
            return refusal(exc.status, exc.message, exc.code, exc.param)
        except BadPage as exc:
            return refusal(400, str(exc), "invalid_value", exc.param)
        except DOMAIN_ERRORS as exc:
            return api_error(exc).response()
        except FileNotFoundError as exc:  # a row whose bytes are gone (deleted meanwhile)
            logger.error("%s %s: %s", request.method, request.path, exc)
            return refusal(404, "The file's content is gone.", "not_found", "file_id")
        except StorageUnavailable as exc:
            logger.error("%s %s: %s", request.method, request.path, exc)
            return refusal(
                503, "File storage is unavailable; try again later.", "storage_unavailable"
            )

    return answer
