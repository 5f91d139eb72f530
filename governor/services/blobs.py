"""rules §11.2: the content-addressed blob store.

Blobs are stored by their git blob id (SHA-256 object format, `governor.domain.tree.blob_id`)
in the Django storage backend `governor_blobs` (settings.STORAGES), under the project's own
prefix `<project id>/<2 hex>/<64 hex>`: a blob another project uploaded is missing to you, and
the same bytes are stored once per project. An upload is spooled to a private temporary file
while its id is recomputed, and reaches the store whole (the filesystem backend renames the
spooled file into place; S3 writes an object whole) before its `Blob` row is written: a row
means a complete blob, and a failed upload leaves nothing the governor would read. Every read
recomputes the id, so a store that returns other bytes is an outage, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from concurrent import futures
from datetime import timedelta
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from governor.domain.snapshots import BLOB_ID
from governor.lib.blobstore import (
    WRITERS,
    Spooled,
    blob_name,
    spool_directory,
    store,
    store_outage,
    store_spooled,
)
from governor.lib.errors import Invalid, TooLarge
from governor.models import Blob, Project, WorkspaceTree

log = logging.getLogger(__name__)

CHUNK = 1 << 20
MAX_IDS_PER_QUERY = 10_000


def _check_blob_id(value: Any, path: str = "blob") -> str:
    if type(value) is not str or not BLOB_ID.fullmatch(value):
        raise Invalid(f"{path}: must be a blob id, 64 lowercase hex digits",
                      details=[{"path": path, "message": "must be 64 lowercase hex digits"}])
    return value


def blobs_missing(project: Project, ids: Any) -> list[str]:
    """The ids of `ids` the project's store lacks, in the order given, each once. The present
    ones are touched, so garbage collection spares them while the snapshot naming them is
    built."""
    if type(ids) is not list:
        raise Invalid("blobs: required, a list of blob ids",
                      details=[{"path": "blobs", "message": "required: a list of blob ids"}])
    if len(ids) > MAX_IDS_PER_QUERY:
        raise Invalid(f"blobs: {len(ids)} ids; at most {MAX_IDS_PER_QUERY} per request",
                      details=[{"path": "blobs", "message": f"at most {MAX_IDS_PER_QUERY}"}])
    problems = [{"path": f"blobs/{index}", "message": "must be 64 lowercase hex digits"}
                for index, value in enumerate(ids)
                if type(value) is not str or not BLOB_ID.fullmatch(value)]
    if problems:
        raise Invalid("; ".join(f"{p['path']}: {p['message']}" for p in problems[:5]),
                      details=problems)
    wanted = list(dict.fromkeys(ids))
    present = blobs_touch(project, wanted)
    return [blob for blob in wanted if blob not in present]


def blobs_touch(project: Project, ids: Iterable[str]) -> set[str]:
    """Mark the project's blobs among `ids` as just used; the ids present."""
    present: set[str] = set()
    ids = list(ids)
    now = timezone.now()
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        rows = Blob.objects.filter(project=project, blob_id__in=chunk)
        present.update(rows.values_list("blob_id", flat=True))
        rows.update(touched_at=now)
    return present


def blob_sizes(project_id: int, blobs: Iterable[str]) -> dict[str, int]:
    """The size of each of the project's blobs among `blobs` (those it holds)."""
    ids = sorted(set(blobs))
    sizes: dict[str, int] = {}
    for start in range(0, len(ids), 5000):
        sizes.update(Blob.objects.filter(project_id=project_id, blob_id__in=ids[start:start + 5000])
                     .values_list("blob_id", "size"))
    return sizes


def _file_blob_id(path: str, size: int) -> str:
    digest = hashlib.sha256(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


class Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


def blob_put(project: Project, blob: Any, body: Readable) -> bool:
    """Store the bytes read from `body` as `blob` of `project`; True when it was new, False when
    the project already held it (the body is then not read). Invalid when the bytes' id is not
    `blob`, TooLarge over the cap, Unavailable when the store fails: then nothing is kept."""
    blob = _check_blob_id(blob, "id")
    if blobs_touch(project, [blob]):
        return False
    cap = settings.GOVERNOR_MAX_BLOB_BYTES
    fd, spooled = tempfile.mkstemp(dir=spool_directory(), prefix="upload-")
    try:
        size = 0
        with os.fdopen(fd, "wb") as handle:
            while chunk := body.read(CHUNK):
                size += len(chunk)
                if size > cap:
                    raise TooLarge(f"blob {blob}: the body is larger than the blob cap of "
                                   f"{cap} bytes",
                                   details=[{"path": "body", "message": f"over {cap} bytes"}])
                handle.write(chunk)
        actual = _file_blob_id(spooled, size)
        if actual != blob:
            raise Invalid(f"id: the body's blob id is {actual}, not {blob}",
                          details=[{"path": "id", "message": f"the body hashes to {actual}"}])
        try:
            with open(spooled, "rb") as handle:
                store().save(blob_name(project, blob), Spooled(handle, name=spooled))
        except Exception as exc:  # any backend failure: the store is unreachable or full
            raise store_outage("write", exc) from None
    finally:
        if os.path.exists(spooled):
            os.unlink(spooled)
    _row, created = Blob.objects.get_or_create(project=project, blob_id=blob,
                                               defaults={"size": size})
    return created


BATCH_HEADER = re.compile(rb"([0-9a-f]{64}) (0|[1-9][0-9]{0,18})\n")
BATCH_HEADER_MAX = 64 + 1 + 19 + 1


class _BatchBody:
    """A batch body read in chunks, at most `cap` bytes (TooLarge past it)."""

    def __init__(self, body: Readable, cap: int) -> None:
        self.body, self.cap = body, cap
        self.buffer, self.position, self.total = b"", 0, 0

    def _fill(self) -> bool:
        chunk = self.body.read(CHUNK)
        if not chunk:
            return False
        self.total += len(chunk)
        if self.total > self.cap:
            raise TooLarge(f"body: larger than the batch cap of {self.cap} bytes "
                           "(GOVERNOR_MAX_BLOB_BATCH_BYTES)",
                           details=[{"path": "body", "message": f"over {self.cap} bytes"}])
        self.buffer, self.position = self.buffer[self.position:] + chunk, 0
        return True

    def line(self) -> bytes:
        """The next header line with its newline (b"" at the end of the body); at most
        BATCH_HEADER_MAX bytes are looked at."""
        while True:
            end = self.buffer.find(b"\n", self.position, self.position + BATCH_HEADER_MAX)
            if end >= 0:
                line, self.position = self.buffer[self.position:end + 1], end + 1
                return line
            if len(self.buffer) - self.position >= BATCH_HEADER_MAX or not self._fill():
                line, self.position = self.buffer[self.position:], len(self.buffer)
                return line[:BATCH_HEADER_MAX]

    def chunks(self, size: int) -> Iterable[bytes]:
        """The next `size` bytes, in pieces; stops early at the end of the body."""
        while size > 0:
            if self.position == len(self.buffer) and not self._fill():
                return
            piece = self.buffer[self.position:self.position + size]
            self.position += len(piece)
            size -= len(piece)
            yield piece


def _batch_refusal(index: int, blob: str | None, message: str,
                   cls: type[Invalid | TooLarge] = Invalid) -> Invalid | TooLarge:
    named = f"blobs/{index}" + (f" ({blob})" if blob else "")
    detail: dict[str, Any] = {"path": f"blobs/{index}", "message": message}
    if blob:
        detail["blob"] = blob
    return cls(f"{named}: {message}; nothing of this batch was stored", details=[detail])


def blobs_put_batch(project: Project, body: Readable, *,
                    length: int | None = None) -> dict[str, list[str]]:
    """Store the blobs of a batch body — for each, a line `<64 hex id> <size>\n` then exactly
    `size` bytes — as the project's, all or none: each is spooled while its id is recomputed,
    and only once the whole body checked out (framing, ids, the caps) is anything written.
    {"stored": the ids new to the project, "present": those it held}, in body order."""
    cap, most = settings.GOVERNOR_MAX_BLOB_BATCH_BYTES, settings.GOVERNOR_MAX_BLOB_BATCH_BLOBS
    blob_cap = settings.GOVERNOR_MAX_BLOB_BYTES
    if length is not None and length > cap:
        raise TooLarge(f"body: {length} bytes; the batch cap is {cap} bytes "
                       "(GOVERNOR_MAX_BLOB_BATCH_BYTES)",
                       details=[{"path": "body", "message": f"over {cap} bytes"}])
    reader = _BatchBody(body, cap)
    spool = tempfile.mkdtemp(dir=spool_directory(), prefix="batch-")
    try:
        received: dict[str, tuple[int, str]] = {}  # id -> (size, spooled path)
        # The cap counts header lines, an id sent again too: each is read, hashed and spooled
        # (counting distinct ids let 500,812 headers of one empty blob past a cap of 5,000).
        for index in itertools.count():
            header = reader.line()
            if not header:
                break
            match = BATCH_HEADER.fullmatch(header)
            if match is None:
                raise _batch_refusal(index, None, "malformed header: expected a line "
                                     "\"<64 lowercase hex id> <size>\" ending in \\n")
            blob, size = match.group(1).decode(), int(match.group(2))
            if index >= most:
                raise _batch_refusal(index, blob, f"more than {most} blobs in one batch, an id "
                                     "sent again counted again (GOVERNOR_MAX_BLOB_BATCH_BLOBS)",
                                     TooLarge)
            if size > blob_cap:
                raise _batch_refusal(index, blob, f"{size} bytes; the blob cap is {blob_cap}",
                                     TooLarge)
            digest, got = hashlib.sha256(b"blob %d\0" % size), 0
            path = os.path.join(spool, f"{index}")
            with open(path, "wb") as handle:
                for piece in reader.chunks(size):
                    digest.update(piece)
                    handle.write(piece)
                    got += len(piece)
            if got < size:
                raise _batch_refusal(index, blob, f"the body ends after {got} of its {size} "
                                     "bytes (truncated)")
            if digest.hexdigest() != blob:
                raise _batch_refusal(index, blob, f"its bytes hash to {digest.hexdigest()}")
            received.setdefault(blob, (size, path))
        if not received:
            raise Invalid("body: no blob; a batch is, for each blob, a line \"<id> <size>\" and "
                          "its bytes", details=[{"path": "body", "message": "no blob"}])
        present = blobs_touch(project, received)
        new = [blob for blob in received if blob not in present]
        writes = [WRITERS.submit(store_spooled, project, blob, received[blob][1])
                  for blob in new]
        futures.wait(writes)
        for blob, write in zip(new, writes, strict=True):
            failure = write.exception()
            if failure is not None:  # any backend failure: the store is unreachable or full
                raise store_outage(f"write of {blob}", failure) from None
        with transaction.atomic():
            Blob.objects.bulk_create([Blob(project=project, blob_id=blob,
                                           size=received[blob][0]) for blob in new],
                                     batch_size=500, ignore_conflicts=True)
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    return {"stored": new, "present": [blob for blob in received if blob in present]}


def blobs_collect(*, now: Any = None, grace_seconds: int | None = None) -> dict[str, int]:
    """Delete the blobs no kept tree (`WorkspaceTree`) of their project references and nothing
    touched within the grace period: the row first (only if still untouched), then the bytes.
    Returns the counts {"kept", "deleted", "bytes"}."""
    now = now or timezone.now()
    grace = settings.GOVERNOR_BLOB_GRACE_SECONDS if grace_seconds is None else grace_seconds
    cutoff = now - timedelta(seconds=grace)
    kept = deleted = freed = 0
    for project_id in Blob.objects.values_list("project_id", flat=True).distinct():
        referenced: set[str] = set()
        manifests = WorkspaceTree.objects.filter(project_id=project_id).values_list(
            "manifest", flat=True)
        for manifest in manifests.iterator(chunk_size=50):
            referenced.update(entry[2] for entry in manifest)
        old = Blob.objects.filter(project_id=project_id, touched_at__lt=cutoff)
        for pk, blob, size in old.values_list("pk", "blob_id", "size").iterator():
            if blob in referenced:
                kept += 1
                continue
            # A snapshot that names the blob meanwhile touched it: then this deletes nothing.
            if Blob.objects.filter(pk=pk, touched_at__lt=cutoff).delete()[0]:
                try:
                    store().delete(blob_name(project_id, blob))
                except Exception as exc:
                    raise store_outage(f"delete of {blob}", exc) from None
                deleted += 1
                freed += size
    return {"kept": kept, "deleted": deleted, "bytes": freed}


def blobs_keep(project: Project, blobs: Iterable[tuple[str, bytes]]) -> int:
    """Keep bytes the server read itself, each already known to be its blob id (the files of a
    tree it hashed), in the project's store: spooled and written several at a time, then their
    rows in one statement once every write is done (a row still means a complete blob). The
    number kept; Unavailable when the store fails (rows are written for none of them)."""
    spool = tempfile.mkdtemp(dir=spool_directory(), prefix="keep-")
    try:
        pending: list[tuple[str, int, futures.Future[None]]] = []
        for index, (blob, data) in enumerate(blobs):
            path = os.path.join(spool, str(index))
            with open(path, "wb") as handle:
                handle.write(data)
            pending.append((blob, len(data), WRITERS.submit(store_spooled, project, blob,
                                                             path)))
        futures.wait([write for _blob, _size, write in pending])
        for blob, _size, write in pending:
            failure = write.exception()
            if failure is not None:  # any backend failure: the store is unreachable or full
                raise store_outage(f"write of {blob}", failure) from None
        Blob.objects.bulk_create([Blob(project=project, blob_id=blob, size=size)
                                  for blob, size, _write in pending],
                                 batch_size=500, ignore_conflicts=True)
    finally:
        shutil.rmtree(spool, ignore_errors=True)
    return len(pending)
