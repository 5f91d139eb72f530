"""The blob store's plumbing (rules §11.2): where a blob lives in the Django storage backend
`governor_blobs` (settings.STORAGES) — under the project's own prefix `<project id>/<2 hex>/<64
hex>` —, reading one back checked against its id, and writing spooled files into it. What is
kept, and when, is decided by the write paths in `governor/services/blobs.py`."""

from __future__ import annotations

import hashlib
import logging
import secrets
from concurrent import futures

from django.conf import settings
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages

from governor.lib.errors import Unavailable
from governor.models import Project

log = logging.getLogger(__name__)

STORAGE_ALIAS = "governor_blobs"


def store() -> Storage:
    return storages[STORAGE_ALIAS]


def blob_name(project: Project | int, blob: str) -> str:
    project_id = project if isinstance(project, int) else project.pk
    return f"{project_id}/{blob[:2]}/{blob}"


def store_outage(action: str, exc: BaseException) -> Unavailable:
    """A storage failure as a 503 naming the cause (the backend's own message)."""
    log.warning("blob store: %s failed: %r", action, exc)
    return Unavailable(f"the blob store is unavailable ({action}): "
                       f"{type(exc).__name__}: {exc}",
                       details=[{"path": "blob store", "message": str(exc) or type(exc).__name__}])


class Spooled(File[bytes]):
    """A spooled upload; FileSystemStorage moves it into place by its path (one rename)."""

    def temporary_file_path(self) -> str:
        return str(self.name)


def spool_directory() -> str:
    # Beside the filesystem store (both under var/), so the final move is one rename.
    directory = settings.VAR_DIR / "blob-incoming"
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return str(directory)


# A batch's objects are written several at a time: an object store answers each write after a
# round trip (S3: tens of ms), which one at a time would dominate a batch of small files.
WRITERS = futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="blob-write")


def store_spooled(project: Project, blob: str, path: str) -> None:
    with open(path, "rb") as handle:
        store().save(blob_name(project, blob), Spooled(handle, name=path))


def heldout_blob_name(project: Project | int, blob: str) -> str:
    """Where a held-out suite's file lives (rules §18.1): a prefix of its own, apart from the
    blobs agents upload and name (`blob_name`), so no agent route can ask whether it is there,
    and garbage collection, which walks `Blob` rows, never sees it."""
    project_id = project if isinstance(project, int) else project.pk
    return f"heldout/{project_id}/{blob[:2]}/{blob}"


def blob_read(project: Project | int, blob: str, *, heldout: bool = False) -> bytes:
    """The bytes of a blob the project holds (a held-out one under its own prefix), checked
    against its id; Unavailable when the store fails or returns other bytes."""
    name = heldout_blob_name(project, blob) if heldout else blob_name(project, blob)
    try:
        with store().open(name, "rb") as handle:
            data: bytes = handle.read()
    except Exception as exc:
        raise store_outage(f"read of {blob}", exc) from None
    digest = hashlib.sha256(b"blob %d\0" % len(data))
    digest.update(data)
    if digest.hexdigest() != blob:
        raise Unavailable(f"the blob store returned other bytes for {blob}",
                          details=[{"path": "blob store", "message": f"{blob} is corrupt"}])
    return data




READINESS_PROBE = "readiness/probe"


def store_probe() -> None:
    """Write, read back and delete a small object under a name no blob can take (blobs live
    under a project id) and no other probe takes (one per call: concurrent probes of one
    process each have their own): raises what the store raises, or ValueError when it returns
    other bytes."""
    content = secrets.token_hex(16).encode()
    name = f"{READINESS_PROBE}-{content.decode()}"
    storage = store()
    saved = storage.save(name, ContentFile(content))
    try:
        with storage.open(saved, "rb") as handle:
            if handle.read() != content:
                raise ValueError("the blob store returned other bytes than were written")
    finally:
        storage.delete(saved)
