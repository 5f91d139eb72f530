"""rules §11.1–§11.2: the blob store, on the filesystem and on a real S3-compatible server,
its API, and its garbage collection."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import storages
from django.core.management import call_command
from django.utils import timezone

from governor.domain.tree import blob_id
from governor.lib import blobstore
from governor.lib.errors import Unavailable
from governor.models import Blob, Project
from governor.services import blobs as blob_services
from tests.conftest import AgentClient, filesystem_store
from tests.s3_server import s3_server  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


@pytest.fixture(params=["filesystem", "s3"])
def store(request: Any, settings: Any, tmp_path: Path) -> str:
    """Every test here runs on both stores."""
    settings.VAR_DIR = tmp_path / "var"
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        storage = server.storage(server.bucket())
    else:
        storage = filesystem_store(tmp_path / "blobs")
    settings.STORAGES = {**settings.STORAGES, "governor_blobs": storage}
    return str(request.param)


def put(agent: AgentClient, blob: str, data: bytes) -> Any:
    return agent.client.put(f"/api/v1/blobs/{blob}", data=data,
                            content_type="application/octet-stream",
                            headers={"Authorization": f"Bearer {agent.secret}"})


def test_upload_is_content_addressed_and_idempotent(store: str, agent: AgentClient,
                                                    project: Project) -> None:
    data = b"print('hello')\n"
    blob = blob_id(data)
    assert agent.post("/blobs/missing", {"blobs": [blob, blob]}).json() == {"missing": [blob]}
    first = put(agent, blob, data)
    assert first.status_code == 201, first.content
    again = put(agent, blob, data)
    assert again.status_code == 200
    assert agent.post("/blobs/missing", {"blobs": [blob]}).json() == {"missing": []}
    assert blobstore.blob_read(project, blob) == data
    assert Blob.objects.get(project=project, blob_id=blob).size == len(data)


def test_an_empty_file_is_a_valid_blob(store: str, agent: AgentClient, project: Project) -> None:
    blob = blob_id(b"")
    assert put(agent, blob, b"").status_code == 201
    assert blobstore.blob_read(project, blob) == b""


def test_a_body_that_does_not_match_its_id_is_refused_and_nothing_is_stored(
        store: str, agent: AgentClient, project: Project) -> None:
    claimed = blob_id(b"what the id says")
    response = put(agent, claimed, b"other bytes")
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["details"][0]["path"] == "id"
    assert blob_id(b"other bytes") in error["message"]
    assert not Blob.objects.filter(blob_id=claimed).exists()
    assert not storages["governor_blobs"].exists(blobstore.blob_name(project, claimed))
    assert put(agent, claimed, b"what the id says").status_code == 201  # the next attempt works


def test_an_oversized_body_is_refused_413(store: str, agent: AgentClient, settings: Any) -> None:
    settings.GOVERNOR_MAX_BLOB_BYTES = 1024
    data = b"x" * 1025
    response = put(agent, blob_id(data), data)
    assert response.status_code == 413
    assert "1024" in response.json()["error"]["message"]
    assert not Blob.objects.exists()
    assert put(agent, blob_id(data[:1024]), data[:1024]).status_code == 201


def test_a_malformed_id_is_refused_naming_it(store: str, agent: AgentClient) -> None:
    assert put(agent, "ABC", b"x").status_code == 422
    response = agent.post("/blobs/missing", {"blobs": ["0" * 64, "nope"]})
    assert response.status_code == 422
    assert response.json()["error"]["details"] == [
        {"path": "blobs/1", "message": "must be 64 lowercase hex digits"}]


def test_a_blob_another_project_uploaded_is_missing_to_you(
        store: str, agent: AgentClient, other_agent: AgentClient, project: Project) -> None:
    """Security: per-project namespaces. Knowing an id proves nothing; you must hold the bytes."""
    data = b"secret of another project"
    blob = blob_id(data)
    assert put(other_agent, blob, data).status_code == 201
    assert agent.post("/blobs/missing", {"blobs": [blob]}).json() == {"missing": [blob]}
    assert put(agent, blob, data).status_code == 201  # stored again, in this project's namespace
    assert blobstore.blob_read(project, blob) == data


def test_a_storage_outage_answers_503_naming_the_cause_then_the_next_attempt_works(
        store: str, agent: AgentClient, project: Project, settings: Any, tmp_path: Path) -> None:
    data = b"during the outage"
    blob = blob_id(data)
    working = settings.STORAGES["governor_blobs"]
    if store == "s3":  # a bucket that does not exist: the server answers NoSuchBucket
        broken = {**working, "OPTIONS": {**working["OPTIONS"], "bucket_name": "gone-bucket"}}
    else:  # the store's directory is a file: nothing can be written below it
        (tmp_path / "not-a-directory").write_text("")
        broken = filesystem_store(tmp_path / "not-a-directory")
    settings.STORAGES = {**settings.STORAGES, "governor_blobs": broken}
    response = put(agent, blob, data)
    assert response.status_code == 503, response.content
    message = response.json()["error"]["message"]
    assert "blob store is unavailable" in message
    assert ("NoSuchBucket" in message) if store == "s3" else ("not a directory" in message.lower())
    assert not Blob.objects.exists()
    settings.STORAGES = {**settings.STORAGES, "governor_blobs": working}
    assert put(agent, blob, data).status_code == 201


def test_a_store_returning_other_bytes_is_an_outage_not_an_answer(
        store: str, agent: AgentClient, project: Project) -> None:
    data = b"kept bytes"
    blob = blob_id(data)
    assert put(agent, blob, data).status_code == 201
    name = blobstore.blob_name(project, blob)
    storage = storages["governor_blobs"]
    storage.delete(name)
    from django.core.files.base import ContentFile
    storage.save(name, ContentFile(b"tampered"))
    with pytest.raises(Unavailable, match="other bytes"):
        blobstore.blob_read(project, blob)


def test_gc_collects_unreferenced_blobs_after_the_grace_period_only(
        store: str, agent: AgentClient, project: Project) -> None:
    kept, young, old = b"in a tree", b"just uploaded", b"abandoned upload"
    for data in (kept, young, old):
        assert put(agent, blob_id(data), data).status_code == 201
    session = agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()
    response = agent.post(f"/sessions/{session['id']}/snapshots", {"entries": [
        {"path": "a.txt", "mode": "100644", "blob": blob_id(kept)}]})
    assert response.status_code == 201, response.content
    long_ago = timezone.now() - timedelta(days=2)
    Blob.objects.exclude(blob_id=blob_id(young)).update(touched_at=long_ago)
    call_command("governor_blobs", "gc")
    remaining = set(Blob.objects.values_list("blob_id", flat=True))
    assert remaining == {blob_id(kept), blob_id(young)}
    storage = storages["governor_blobs"]
    assert not storage.exists(blobstore.blob_name(project, blob_id(old)))
    assert storage.exists(blobstore.blob_name(project, blob_id(kept)))
    # Asking whether a blob is missing touches it: an upload in progress is spared.
    Blob.objects.update(touched_at=long_ago)
    agent.post("/blobs/missing", {"blobs": [blob_id(young)]})
    assert blob_services.blobs_collect()["deleted"] == 0


def test_the_periodic_task_collects(store: str, agent: AgentClient) -> None:
    from governor.tasks import collect_blobs

    data = b"orphan"
    assert put(agent, blob_id(data), data).status_code == 201
    Blob.objects.update(touched_at=timezone.now() - timedelta(days=2))
    assert collect_blobs() == {"snapshots": 0, "trees": 0, "kept": 0, "deleted": 1,
                               "bytes": len(data)}


def test_the_beat_schedule_names_the_collect_task() -> None:
    from django.conf import settings as django_settings

    from governor.celery import app

    app.loader.import_default_modules()
    entry = django_settings.CELERY_BEAT_SCHEDULE["collect-blobs"]
    assert entry["task"] in app.tasks


@pytest.mark.parametrize("single_put_bytes", [1 << 20, 16])
def test_small_and_large_objects_both_reach_the_s3_store_whole(
        request: Any, settings: Any, tmp_path: Path, agent: AgentClient, project: Project,
        monkeypatch: pytest.MonkeyPatch, single_put_bytes: int) -> None:
    """Below SINGLE_PUT_BYTES one PutObject, above it django-storages' managed transfer."""
    from governor import s3_storage

    server = request.getfixturevalue("s3_server")
    monkeypatch.setattr(s3_storage, "SINGLE_PUT_BYTES", single_put_bytes)
    settings.VAR_DIR = tmp_path / "var"
    settings.STORAGES = {**settings.STORAGES,
                         "governor_blobs": server.storage(server.bucket())}
    data = b"print('a blob')\n" * 8
    assert put(agent, blob_id(data), data).status_code == 201
    assert blobstore.blob_read(project, blob_id(data)) == data
    assert isinstance(storages["governor_blobs"], s3_storage.BlobS3Storage)
