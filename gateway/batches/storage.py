"""Where batch files' bytes live. One small base class (FileStorage) per backend; the
BATCH_FILE_STORAGE setting names the class. The default keeps files on local disk under
BATCH_FILE_DIR, which every process of a single-machine install shares. Several machines
need a backend they share: S3FileStorage (gateway/batches/object_storage.py) keeps them in
an S3-compatible bucket; another store is a subclass of FileStorage with its three methods."""

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import IO

from django.conf import settings
from django.utils.module_loading import import_string

_SAFE_NAME = re.compile(r"^file-[0-9a-f]{24}$")


class StorageUnavailable(RuntimeError):
    """The storage could not be reached, or refused us (credentials, a missing bucket).
    Unlike FileNotFoundError it says nothing about the file: the batch runner and the API
    must not take it for a deleted file (the API answers 503, a runner leaves the batch to
    the sweep's next try). Its message names where, never a credential."""


def checked_file_id(file_id: str) -> str:
    """The id, if it is one of ours: a path or an object key is built from it."""
    if not _SAFE_NAME.match(file_id):
        raise ValueError(f"not a file id: {file_id!r}")
    return file_id


class FileStorage:
    """Stores a file's bytes by its id; nothing else (who owns it is in the database).

    open raises FileNotFoundError for a file that is not there (the runner fails a batch
    whose input is gone), and save never lets a reader see half a file."""

    def save(self, file_id: str, content: IO[bytes]) -> None:
        raise NotImplementedError

    @contextmanager
    def open(self, file_id: str) -> Iterator[IO[bytes]]:
        raise NotImplementedError
        yield  # pragma: no cover - makes this a generator for contextmanager

    def delete(self, file_id: str) -> None:
        """Deleting a file that is not there is not an error."""
        raise NotImplementedError


class LocalFileStorage(FileStorage):
    """A directory; files are written to a temporary name and renamed, so a reader never
    sees half a file."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or settings.BATCH_FILE_DIR)

    def _path(self, file_id: str) -> Path:
        return self.root / checked_file_id(file_id)

    def save(self, file_id: str, content: IO[bytes]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        target = self._path(file_id)
        handle, temporary = tempfile.mkstemp(dir=self.root, prefix=".upload-")
        try:
            with os.fdopen(handle, "wb") as out:
                shutil.copyfileobj(content, out, 1024 * 1024)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    @contextmanager
    def open(self, file_id: str) -> Iterator[IO[bytes]]:
        with self._path(file_id).open("rb") as content:
            yield content

    def delete(self, file_id: str) -> None:
        self._path(file_id).unlink(missing_ok=True)


@cache
def file_storage() -> FileStorage:
    storage: FileStorage = import_string(settings.BATCH_FILE_STORAGE)()
    return storage
