"""Serve plotly.js from the installed `plotly` package (it ships plotly.min.js in
package_data) as the static file dashboard/vendor/plotly.min.js: no CDN, no vendored copy
to keep in step with the Python package, and collectstatic picks it up like any other."""

from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PATH = "dashboard/vendor/plotly.min.js"
SOURCE = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(SOURCE.parent))
        self.storage.prefix = str(Path(PATH).parent)  # type: ignore[attr-defined]

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        if path != PATH:
            return [] if find_all else None
        return [str(SOURCE)] if find_all else str(SOURCE)

    def list(self, ignore_patterns: Any) -> Any:
        yield SOURCE.name, self.storage
