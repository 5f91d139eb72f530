"""Downloads the API and the pages both serve: a session's export, a file of a kept tree."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import quote

from django.http import HttpResponse, StreamingHttpResponse

from governor.domain.tree import ManifestEntry

NDJSON = "application/x-ndjson"


def attachment(chunks: Iterable[bytes], filename: str, content_type: str) -> StreamingHttpResponse:
    """A streamed download saved as `filename`."""
    response = StreamingHttpResponse(chunks, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def file_response(entry: ManifestEntry, data: bytes) -> HttpResponse:
    """A file of a kept tree as raw bytes a browser never renders: an attachment of an opaque
    type, `nosniff`, its mode and blob id in headers."""
    response = HttpResponse(data, content_type="application/octet-stream")
    response["Content-Disposition"] = (
        f"attachment; filename*=UTF-8''{quote(entry.path.rsplit('/', 1)[-1])}")
    response["X-Content-Type-Options"] = "nosniff"
    response["X-Governor-Mode"] = entry.mode
    response["X-Governor-Blob"] = entry.blob
    return response
