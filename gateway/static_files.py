"""Static files under content-hashed names, so browsers and CDNs may keep them for good.

`manage.py collectstatic` (`make run` runs it, so does the image build) copies every static
file into STATIC_ROOT twice: as itself and under a name carrying a hash of its content
(`chat/chat.3f2a1b9c0d4e.js`), with gzip copies, and writes the manifest that maps one to
the other. `{% static %}` then points pages at the hashed names, and WhiteNoise (a
middleware of the full Django stack only: /v1/ requests never meet it, gateway/api_handler.py)
serves those with `Cache-Control: max-age=315360000, public, immutable`: a new release has
new names, so nothing stale can be served from a cache. Unhashed names (what an old page,
a bookmark or `curl` asks for) get a short max-age (settings.WHITENOISE_MAX_AGE).

The manifest is only trusted while it is current: every file the finders see is in it and
none is newer than it. A checkout where collectstatic has not run since a file under
static/ changed (tests, an edited chat.js) gets plain names, served from the source files
through the finders, instead of links to stale copies or a missing-entry error on every
page. Module imports between the chat's scripts are rewritten to the hashed names too
(`support_js_module_import_aggregation`), so chat.js's dependencies are immutable as well.
"""

import functools
import json
import logging
import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any, cast

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.apps import apps
from django.conf import settings
from django.contrib.staticfiles import finders
from django.contrib.staticfiles.storage import StaticFilesStorage
from django.http import HttpRequest, StreamingHttpResponse
from django.http.response import HttpResponseBase
from whitenoise.middleware import WhiteNoiseMiddleware
from whitenoise.storage import CompressedManifestStaticFilesStorage

logger = logging.getLogger(__name__)


@functools.cache
def manifest_is_current() -> bool:
    """Whether STATIC_ROOT's manifest covers every static file as it is now. Checked once
    per process (a few hundred stat calls): a gateway serves what it started with."""
    manifest = Path(settings.STATIC_ROOT) / HashedStaticFilesStorage.manifest_name
    try:
        collected_at = manifest.stat().st_mtime
        hashed = json.loads(manifest.read_text())["paths"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    ignore = apps.get_app_config("staticfiles").ignore_patterns  # type: ignore[attr-defined]
    for finder in finders.get_finders():
        for path, storage in finder.list(ignore):
            prefix = getattr(storage, "prefix", None)
            name = f"{prefix}/{path}" if prefix else path
            try:
                changed = os.stat(storage.path(path)).st_mtime > collected_at
            except (OSError, NotImplementedError):
                changed = True
            if name.replace(os.sep, "/") not in hashed or changed:
                logger.warning(
                    "static files: %s changed since collectstatic; serving unhashed names "
                    "(run `manage.py collectstatic` for immutable ones)",
                    name,
                )
                return False
    return True


class HashedStaticFilesStorage(CompressedManifestStaticFilesStorage):  # type: ignore[misc]
    """WhiteNoise's hashed and compressed storage, with ES module imports rewritten, that
    falls back to plain names while the manifest is not current (manifest_is_current)."""

    support_js_module_import_aggregation = True

    def url(self, name: Any, force: bool = False) -> str:
        if force:
            return str(super().url(name, force))
        if manifest_is_current():
            try:
                return str(super().url(name, force))
            except ValueError:
                # In no finder's reach either: a typo, no `make frontend`, or WhiteNoise
                # asking whether a name is a hashed one. Its URL answers 404, as before.
                pass
        return str(StaticFilesStorage.url(self, name))


class StaticFilesMiddleware(WhiteNoiseMiddleware):  # type: ignore[misc]
    """WhiteNoise, quiet about a STATIC_ROOT that collectstatic has not made yet (the
    finders serve everything under plain names then), and async under ASGI: a static file
    is answered on the event loop, without the thread hop of the sync middlewares after it,
    its bytes read in one worker-thread call (as Django's own ASGI static handler does;
    WhiteNoise's sync file iterator would draw Django's warning on every response)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any, settings: Any = settings) -> None:
        super().__init__(get_response, settings)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def add_files(self, root: str, prefix: str | None = None) -> None:
        if self.autorefresh or os.path.isdir(root):
            super().add_files(root, prefix)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self._serve_async(request)
        return super().__call__(request)

    async def _serve_async(self, request: HttpRequest) -> HttpResponseBase:
        if self.autorefresh:  # DEBUG: looks on disk, in a thread
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is None:
            return cast(HttpResponseBase, await self.get_response(request))
        response = self.serve(static_file, request)
        if response.streaming:
            parts = await sync_to_async(_read_all, thread_sensitive=False)(response)
            response.streaming_content = _replay(parts)
        return cast(HttpResponseBase, response)


def _read_all(response: StreamingHttpResponse) -> list[bytes]:
    return list(cast(Iterable[bytes], response.streaming_content))  # WhiteNoise's: sync


async def _replay(parts: list[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part
