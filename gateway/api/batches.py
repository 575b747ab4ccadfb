"""/v1/batches: create, list, retrieve and cancel a team's batches, as OpenAI's Batch API
does. Creating one checks everything that can be checked at once (the file is the team's,
the endpoint, the window, the models, the team's batch queue limit) and queues its run on
Celery (gateway/batches/tasks.py); its lines then run through the same pipeline as
interactive requests, at batch priority."""

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from gateway.accounts.records import KeyRecord
from gateway.api.batch_errors import refusal, refusing
from gateway.api.common import authorized_key
from gateway.batches import actions
from gateway.batches.models import Batch
from gateway.batches.tasks import queue_run
from gateway.list_pages import list_body, page
from inference.deployments import DeploymentInfo, catalog

MOST_PER_PAGE = 100
TIMES = (
    *("created_at", "in_progress_at", "expires_at", "finalizing_at", "completed_at"),
    *("failed_at", "expired_at", "cancelling_at", "cancelled_at"),
)


def _epoch(moment: datetime | None) -> int | None:
    return None if moment is None else int(moment.timestamp())


def batch_object(batch: Batch) -> dict[str, Any]:
    usage = {
        "input_tokens": batch.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": batch.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": batch.prompt_tokens + batch.completion_tokens,
    }
    return {
        "id": batch.id,
        "object": "batch",
        "endpoint": batch.endpoint,
        "errors": batch.errors,
        "input_file_id": batch.input_file_id,
        "completion_window": batch.completion_window,
        "status": batch.status,
        "output_file_id": batch.output_file_id or None,
        "error_file_id": batch.error_file_id or None,
        **{name: _epoch(getattr(batch, name)) for name in TIMES},
        "request_counts": {
            "total": batch.total,
            "completed": batch.completed,
            "failed": batch.failed,
        },
        "metadata": batch.metadata,
        "usage": usage,
    }


@csrf_exempt
@refusing
async def batches(request: HttpRequest) -> HttpResponseBase:
    key = await authorized_key(request)
    if request.method == "POST":
        deployments = await catalog.all()
        created = await sync_to_async(_create)(key, request.body, deployments)
        return JsonResponse(batch_object(created))
    if request.method != "GET":
        return refusal(405, "Use GET or POST.", "method_not_allowed")
    rows = Batch.objects.filter(team_id=key.team_id)
    found, more = await sync_to_async(page)(
        rows, request.GET.get("after"), request.GET.get("limit"), MOST_PER_PAGE
    )
    return JsonResponse(list_body([batch_object(b) for b in found], more))


def _create(key: KeyRecord, raw: bytes, deployments: Mapping[str, DeploymentInfo]) -> Batch:
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        message = "The body is not JSON (or nests too deep)."
        raise actions.BatchRefused(400, message, "invalid_json") from None
    if not isinstance(body, dict):
        raise actions.BatchRefused(400, "The body must be a JSON object.", "invalid_value")
    for name in ("input_file_id", "endpoint", "completion_window"):
        if not isinstance(body.get(name), str):
            raise actions.BatchRefused(400, f"{name} is required (a string).", "missing", name)
    with transaction.atomic():
        batch = actions.create_batch(
            key,
            body["input_file_id"],
            body["endpoint"],
            body["completion_window"],
            deployments,
            body.get("metadata"),
        )
        transaction.on_commit(lambda: queue_run(batch.id))
    return batch


@csrf_exempt
@refusing
async def batch(request: HttpRequest, batch_id: str) -> HttpResponseBase:
    if request.method != "GET":
        return refusal(405, "Use GET.", "method_not_allowed")
    key = await authorized_key(request)
    found = await Batch.objects.filter(id=batch_id, team_id=key.team_id).afirst()
    if found is None:
        return refusal(404, f"No such batch: {batch_id}", "not_found", "batch_id")
    return JsonResponse(batch_object(found))


@csrf_exempt
@refusing
async def cancel(request: HttpRequest, batch_id: str) -> HttpResponseBase:
    if request.method != "POST":
        return refusal(405, "Use POST.", "method_not_allowed")
    key = await authorized_key(request)
    cancelled = await sync_to_async(actions.cancel_batch)(batch_id, key.team_id)
    return JsonResponse(batch_object(cancelled))
