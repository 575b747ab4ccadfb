"""/v1/files: upload, list, retrieve, delete and read a team's batch files, as OpenAI's
Files API does (the official client's files.* calls work unmodified). Only batch input
files are uploaded; batches write their output and error files here."""

import asyncio
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import IO, Any, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt

from gateway.accounts.models import Team
from gateway.api.batch_errors import refusal, refusing
from gateway.api.common import authorized_key
from gateway.batches import actions
from gateway.batches.models import BatchFile
from gateway.batches.storage import file_storage
from gateway.list_pages import list_body, page

CHUNK_BYTES = 1024 * 1024
MOST_PER_PAGE = 10_000  # OpenAI's most for a page of files
STORAGE_THREADS = 4  # per process: file downloads and deletes at once
_STORAGE_IO = ThreadPoolExecutor(STORAGE_THREADS, thread_name_prefix="file-storage")
UPLOAD_THREADS = 4  # per process: uploads checked and stored at once; the rest queue
_UPLOADS = ThreadPoolExecutor(UPLOAD_THREADS, thread_name_prefix="file-upload")
T = TypeVar("T")


def file_object(file: BatchFile) -> dict[str, Any]:
    return {
        "id": file.id,
        "object": "file",
        "bytes": file.bytes,
        "created_at": int(file.created_at.timestamp()),
        "expires_at": int(file.expires_at.timestamp()) if file.expires_at else None,
        "filename": file.filename,
        "purpose": file.purpose,
        "status": "processed",
        "status_details": None,
    }


@csrf_exempt
@refusing
async def files(request: HttpRequest) -> HttpResponseBase:
    key = await authorized_key(request)
    if request.method == "POST":
        # Not in the thread every request's database reads share (reading a large file
        # takes seconds), nor in the default executor, which the semantic cache's
        # embeddings and admission's prompt counting use: uploads wait for one of their
        # own few threads, so a flood of them slows only uploads.
        kept = await asyncio.get_running_loop().run_in_executor(
            _UPLOADS, _upload, request, key.team_id
        )
        return JsonResponse(file_object(kept))
    if request.method != "GET":
        return refusal(405, "Use GET or POST.", "method_not_allowed")
    rows = BatchFile.objects.filter(team_id=key.team_id)
    if purpose := request.GET.get("purpose"):
        rows = rows.filter(purpose=purpose)
    found, more = await sync_to_async(page)(
        rows,
        request.GET.get("after"),
        request.GET.get("limit"),
        MOST_PER_PAGE,
        order=request.GET.get("order"),
    )
    return JsonResponse(list_body([file_object(f) for f in found], more))


def _upload(request: HttpRequest, team_id: int) -> BatchFile:
    try:
        return _create_file(request, team_id)
    finally:
        connections.close_all()  # this thread's, which nothing else would close


def _create_file(request: HttpRequest, team_id: int) -> BatchFile:
    upload = request.FILES.get("file")
    if upload is None or upload.file is None:
        raise actions.BatchRefused(
            400, "Send the file as the multipart field 'file'.", "invalid_value", "file"
        )
    team = Team.objects.get(pk=team_id)
    name, purpose = upload.name or "upload.jsonl", request.POST.get("purpose", "")
    return actions.create_file(team, name, purpose, upload.file, upload.size or 0)


@csrf_exempt
@refusing
async def file(request: HttpRequest, file_id: str) -> HttpResponseBase:
    key = await authorized_key(request)
    found = await _team_file(file_id, key.team_id)
    if request.method == "DELETE":
        # The bytes on the storage threads: a slow object store must not hold the one
        # thread every database call of this process shares.
        await _on_storage_thread(file_storage().delete, found.id)
        await sync_to_async(actions.forget_file)(found)
        return JsonResponse({"id": found.id, "object": "file", "deleted": True})
    if request.method != "GET":
        return refusal(405, "Use GET or DELETE.", "method_not_allowed")
    return JsonResponse(file_object(found))


@csrf_exempt
@refusing
async def file_content(request: HttpRequest, file_id: str) -> HttpResponseBase:
    if request.method != "GET":
        return refusal(405, "Use GET.", "method_not_allowed")
    key = await authorized_key(request)
    found = await _team_file(file_id, key.team_id)
    # Opened before the answer starts, so storage that fails is a 503, not a cut stream;
    # off the event loop, since opening may fetch the whole file (object storage).
    opened = ExitStack()
    content = await _on_storage_thread(opened.enter_context, file_storage().open(found.id))
    response = StreamingHttpResponse(_content(content, opened), content_type="application/jsonl")
    response["Content-Length"] = str(found.bytes)
    return response


async def _content(content: IO[bytes], opened: ExitStack) -> AsyncIterator[bytes]:
    with opened:
        while chunk := await _on_storage_thread(content.read, CHUNK_BYTES):
            yield chunk


def _on_storage_thread(call: Callable[..., T], *args: Any) -> "asyncio.Future[T]":
    """File storage I/O on a few threads of its own: downloads (which copy a whole object
    first) wait for one of STORAGE_THREADS rather than fill the default executor that
    admission's prompt counting uses, and at most that many copies are made at once."""
    return asyncio.get_running_loop().run_in_executor(_STORAGE_IO, call, *args)


async def _team_file(file_id: str, team_id: int) -> BatchFile:
    """The team's file; another team's is as unknown as one that never existed."""
    found = await BatchFile.objects.filter(id=file_id, team_id=team_id).afirst()
    if found is None:
        raise actions.BatchRefused(404, f"No such File object: {file_id}", "not_found", "file_id")
    return found
