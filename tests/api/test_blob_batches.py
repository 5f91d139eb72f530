"""rules §11.1: `POST /blobs`, many blobs in one body, stored whole or not at all — on the
filesystem store and on a real S3-compatible server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.files.storage import storages

from governor.domain.tree import blob_id
from governor.lib import blobstore
from governor.lib.errors import TooLarge
from governor.models import Blob, Project
from governor.services import blobs as blob_services
from tests.api import test_blob_store
from tests.conftest import AgentClient, filesystem_store
from tests.s3_server import s3_server  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db
store = test_blob_store.store  # every test here runs on both stores


def frame(*blobs: bytes) -> bytes:
    return b"".join(b"%s %d\n%s" % (blob_id(data).encode(), len(data), data) for data in blobs)


def send(agent: AgentClient, body: bytes) -> Any:
    return agent.post("/blobs", raw=body, content_type="application/octet-stream")


def assert_nothing_stored(project: Project, *blobs: bytes) -> None:
    assert not Blob.objects.filter(project=project).exists()
    for data in blobs:
        assert not storages["governor_blobs"].exists(
            blobstore.blob_name(project, blob_id(data)))


def test_a_batch_stores_every_blob_and_says_which_were_already_present(
        store: str, agent: AgentClient, project: Project) -> None:
    old, new, empty = b"held already\n", b"print('new')\n", b""
    assert send(agent, frame(old)).json() == {"stored": [blob_id(old)], "present": []}
    response = send(agent, frame(new, old, empty, new))
    assert response.status_code == 200, response.content
    assert response.json() == {"stored": [blob_id(new), blob_id(empty)],
                               "present": [blob_id(old)]}
    for data in (old, new, empty):
        assert blobstore.blob_read(project, blob_id(data)) == data
        assert Blob.objects.get(project=project, blob_id=blob_id(data)).size == len(data)
    ids = [blob_id(data) for data in (old, new, empty)]
    assert agent.post("/blobs/missing", {"blobs": ids}).json() == {"missing": []}
    # Idempotent: the same batch again stores nothing new.
    assert send(agent, frame(new, old)).json() == {
        "stored": [], "present": [blob_id(new), blob_id(old)]}


def test_a_blob_whose_bytes_do_not_match_its_id_refuses_the_whole_batch(
        store: str, agent: AgentClient, project: Project) -> None:
    good, claimed = b"a good blob", b"what the id says"
    body = frame(good) + b"%s %d\n%s" % (blob_id(claimed).encode(), 11, b"other bytes")
    response = send(agent, body)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["details"] == [{"path": "blobs/1", "blob": blob_id(claimed),
                                 "message": f"its bytes hash to {blob_id(b'other bytes')}"}]
    assert "nothing of this batch was stored" in error["message"]
    assert_nothing_stored(project, good, claimed)
    assert send(agent, frame(good, claimed)).status_code == 200  # the next attempt works


def test_a_blob_over_the_blob_cap_refuses_the_batch_413(
        store: str, agent: AgentClient, project: Project, settings: Any) -> None:
    settings.GOVERNOR_MAX_BLOB_BYTES = 1024
    small, big = b"small", b"x" * 1025
    response = send(agent, frame(small, big))
    assert response.status_code == 413
    assert response.json()["error"]["details"][0] == {
        "path": "blobs/1", "blob": blob_id(big), "message": "1025 bytes; the blob cap is 1024"}
    assert_nothing_stored(project, small, big)


def test_a_body_over_the_batch_cap_is_refused_413(
        store: str, agent: AgentClient, project: Project, settings: Any) -> None:
    settings.GOVERNOR_MAX_BLOB_BATCH_BYTES = 2048
    blobs = [b"%04d" % i * 100 for i in range(6)]  # 6 × 400 bytes plus headers
    response = send(agent, frame(*blobs))
    assert response.status_code == 413
    assert "GOVERNOR_MAX_BLOB_BATCH_BYTES" in response.json()["error"]["message"]
    assert_nothing_stored(project, *blobs)
    assert send(agent, frame(*blobs[:4])).status_code == 200


def test_a_body_past_the_batch_cap_without_a_length_is_refused_while_read(
        store: str, project: Project, settings: Any) -> None:
    """A body whose length the server was not told (a chunked upload) is cut at the cap."""
    import io

    settings.GOVERNOR_MAX_BLOB_BATCH_BYTES = 2048
    blobs = [b"%04d" % i * 100 for i in range(6)]
    with pytest.raises(TooLarge, match="batch cap of 2048"):
        blob_services.blobs_put_batch(project, io.BytesIO(frame(*blobs)), length=None)
    assert_nothing_stored(project, *blobs)


def test_more_blobs_than_the_count_cap_are_refused_413(
        store: str, agent: AgentClient, project: Project, settings: Any) -> None:
    settings.GOVERNOR_MAX_BLOB_BATCH_BLOBS = 3
    blobs = [b"blob %d" % i for i in range(4)]
    response = send(agent, frame(*blobs))
    assert response.status_code == 413
    assert response.json()["error"]["details"][0]["path"] == "blobs/3"
    assert "more than 3 blobs" in response.json()["error"]["message"]
    assert_nothing_stored(project, *blobs)


def test_one_blob_sent_more_times_than_the_count_cap_is_refused_413_naming_the_cap(
        store: str, agent: AgentClient, project: Project, settings: Any) -> None:
    """Issue 25 finding 8: the cap counted distinct ids, so 500,812 headers of the empty blob
    (32 MiB) passed a cap of 5,000 and cost 11 s of CPU. Every header line counts."""
    settings.GOVERNOR_MAX_BLOB_BATCH_BLOBS = 3
    empty = b""
    response = send(agent, frame(empty, empty, empty, empty, empty))
    assert response.status_code == 413, response.content
    [detail] = response.json()["error"]["details"]
    assert detail == {"path": "blobs/3", "blob": blob_id(empty),
                      "message": "more than 3 blobs in one batch, an id sent again counted "
                                 "again (GOVERNOR_MAX_BLOB_BATCH_BLOBS)"}
    assert_nothing_stored(project, empty)
    assert send(agent, frame(empty, empty, empty)).json() == {"stored": [blob_id(empty)],
                                                               "present": []}


@pytest.mark.parametrize("header", [
    b"not a header\n", b"%s\n" % blob_id(b"x").encode(), b"%s -1\n" % blob_id(b"x").encode(),
    b"%s 01\n" % blob_id(b"x").encode(), b"%s 1" % blob_id(b"x").encode(),
    b"%s 1\n" % blob_id(b"x").upper().encode()])
def test_malformed_framing_refuses_the_batch_naming_the_blob(
        store: str, agent: AgentClient, project: Project, header: bytes) -> None:
    good = b"before the bad header"
    response = send(agent, frame(good) + header + b"x")
    assert response.status_code == 422, response.content
    detail = response.json()["error"]["details"][0]
    assert detail["path"] == "blobs/1"
    assert detail["message"].startswith("malformed header")
    assert_nothing_stored(project, good)


def test_a_truncated_body_refuses_the_batch(store: str, agent: AgentClient,
                                            project: Project) -> None:
    good, cut = b"complete", b"this blob is cut short"
    response = send(agent, frame(good, cut)[:-5])
    assert response.status_code == 422
    assert response.json()["error"]["details"] == [{
        "path": "blobs/1", "blob": blob_id(cut),
        "message": f"the body ends after {len(cut) - 5} of its {len(cut)} bytes (truncated)"}]
    assert_nothing_stored(project, good, cut)


def test_an_empty_body_is_refused(store: str, agent: AgentClient) -> None:
    response = send(agent, b"")
    assert response.status_code == 422
    assert response.json()["error"]["details"] == [{"path": "body", "message": "no blob"}]


def test_a_batch_stores_into_the_callers_namespace_only(
        store: str, agent: AgentClient, other_agent: AgentClient, project: Project) -> None:
    """Security: per-project namespaces. Another project's copy makes nothing present to you."""
    data = b"both projects hold this"
    assert send(other_agent, frame(data)).json() == {"stored": [blob_id(data)], "present": []}
    assert agent.post("/blobs/missing", {"blobs": [blob_id(data)]}).json() == {
        "missing": [blob_id(data)]}
    assert send(agent, frame(data)).json() == {"stored": [blob_id(data)], "present": []}
    assert blobstore.blob_read(project, blob_id(data)) == data
    assert Blob.objects.filter(blob_id=blob_id(data)).count() == 2


def test_a_storage_outage_answers_503_and_the_next_attempt_works(
        store: str, agent: AgentClient, project: Project, settings: Any, tmp_path: Path) -> None:
    blobs = [b"during", b"the outage"]
    working = settings.STORAGES["governor_blobs"]
    if store == "s3":
        broken = {**working, "OPTIONS": {**working["OPTIONS"], "bucket_name": "gone-bucket"}}
    else:
        (tmp_path / "not-a-directory").write_text("")
        broken = filesystem_store(tmp_path / "not-a-directory")
    settings.STORAGES = {**settings.STORAGES, "governor_blobs": broken}
    response = send(agent, frame(*blobs))
    assert response.status_code == 503, response.content
    assert "blob store is unavailable" in response.json()["error"]["message"]
    assert not Blob.objects.exists()
    settings.STORAGES = {**settings.STORAGES, "governor_blobs": working}
    answer = send(agent, frame(*blobs))
    assert answer.status_code == 200
    assert answer.json()["stored"] == [blob_id(data) for data in blobs]


def test_the_project_answer_names_the_batch_caps(agent: AgentClient, settings: Any) -> None:
    answer = agent.get("/project").json()
    assert answer["max_batch_bytes"] == settings.GOVERNOR_MAX_BLOB_BATCH_BYTES
    assert answer["max_batch_blobs"] == settings.GOVERNOR_MAX_BLOB_BATCH_BLOBS
