"""rules §11.1: the blob store and snapshots of a session's tree."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from ninja import Router, Status

from governor.api.auth import AgentOrGateBearer, agent_token
from governor.api.errors import ERROR_RESPONSES
from governor.api.schemas import (
    BatchOut,
    BlobIdsIn,
    BlobOut,
    MissingOut,
    ProjectOut,
    SnapshotIn,
    SnapshotOut,
    sent,
)
from governor.domain.runner_control import in_force
from governor.lib.downloads import file_response
from governor.selectors import treediff
from governor.selectors.access import session_for_token
from governor.selectors.snapshots import snapshot_out
from governor.services import blobs, snapshots

router = Router(tags=["snapshots"])


@router.get("/project", response={200: ProjectOut, **ERROR_RESPONSES},
            auth=AgentOrGateBearer())
def project(request: HttpRequest) -> dict[str, object]:
    """What an agent needs to compute the tree the server computes (rules §10.1): the
    project's exclusions, and the caps a snapshot must keep; and what it must not change (the
    protected paths, §14.3, and the runner control of §17.3), whether its evidence must tell
    done from not done (§14.5, §17.6) and, with review off, whether it must rest on operator
    evidence (§17.7)."""
    current = agent_token(request).project
    protected = in_force(current.runner_control_exempt)
    return {"slug": current.slug, "tree_exclusions": list(current.tree_exclusions),
            "protected_paths": list(current.protected_paths),
            "runner_control": sorted([*protected.paths, *protected.sections]),
            "runner_control_exempt": protected.exempt,
            "require_discriminating_evidence": current.require_discriminating_evidence,
            "unattended_evidence": current.unattended_evidence,
            "reference_ref": current.reference_ref,
            "tree_max_files": current.tree_max_files, "tree_max_bytes": current.tree_max_bytes,
            "max_blob_bytes": settings.GOVERNOR_MAX_BLOB_BYTES,
            "max_batch_bytes": settings.GOVERNOR_MAX_BLOB_BATCH_BYTES,
            "max_batch_blobs": settings.GOVERNOR_MAX_BLOB_BATCH_BLOBS}


@router.post("/blobs/missing", response={200: MissingOut, **ERROR_RESPONSES},
             auth=AgentOrGateBearer())
def blobs_missing(request: HttpRequest, payload: BlobIdsIn) -> dict[str, object]:
    """The ids of the project's store lacks, of those given (at most 10,000)."""
    return {"missing": blobs.blobs_missing(agent_token(request).project, payload.blobs)}


BLOB_BODY = {"requestBody": {"required": True, "content": {
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}


@router.put("/blobs/{blob_id}", response={201: BlobOut, 200: BlobOut, **ERROR_RESPONSES},
            openapi_extra=BLOB_BODY, auth=AgentOrGateBearer())
def blob_put(request: HttpRequest, blob_id: str) -> Status[dict[str, object]]:
    """The raw bytes of a blob; the id is recomputed. 201 stored, 200 already present."""
    created = blobs.blob_put(agent_token(request).project, blob_id, request)
    return Status(201 if created else 200, {"blob": blob_id})


BATCH_BODY = {"requestBody": {"required": True, "content": {"application/octet-stream": {
    "schema": {"type": "string", "format": "binary", "description": "for each blob a line "
               "`<64 hex id> <size>\\n`, then exactly `size` bytes"}}}}}


@router.post("/blobs", response={200: BatchOut, **ERROR_RESPONSES}, openapi_extra=BATCH_BODY,
             auth=AgentOrGateBearer())
def blobs_put_batch(request: HttpRequest) -> dict[str, list[str]]:
    """Many blobs in one raw body, all stored or none (each id recomputed first)."""
    length = request.META.get("CONTENT_LENGTH") or ""
    return blobs.blobs_put_batch(agent_token(request).project, request,
                                 length=int(length) if length.isdigit() else None)


@router.get("/sessions/{session_id}/trees/{tree}/files/{path:file_path}",
            response={200: None, **ERROR_RESPONSES})
def tree_file(request: HttpRequest, session_id: str, tree: str, file_path: str) -> HttpResponse:
    """A file of a tree the session named (contract start, attempt, run, snapshot), from the
    blob store: its raw bytes (a symlink's: its text), its mode in `X-Governor-Mode`."""
    session = session_for_token(agent_token(request), session_id)
    return file_response(*treediff.tree_file(session, tree, file_path))


@router.post("/sessions/{session_id}/snapshots", response={201: SnapshotOut, **ERROR_RESPONSES})
def snapshot_create(request: HttpRequest, session_id: str,
                    payload: SnapshotIn) -> Status[dict[str, object]]:
    session = session_for_token(agent_token(request), session_id)
    snapshot = snapshots.snapshot_create(session=session, body=sent(payload))
    return Status(201, snapshot_out(snapshot))
