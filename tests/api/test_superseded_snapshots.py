"""rules §11.4: a snapshot session's superseded snapshots that nothing names are collected
after the grace period, and then their blobs; what a contract start, an attempt or a run names,
and each session's latest snapshot, stay."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.storage import storages
from django.core.management import call_command
from django.utils import timezone

from governor.domain.tree import blob_id
from governor.lib.blobstore import blob_name
from governor.models import Blob, Project, Snapshot, WorkspaceTree
from governor.services.snapshots import snapshots_collect
from tests.api.test_contracts import readme_contract
from tests.api.test_snapshot_sessions import upload_directory
from tests.conftest import AgentClient
from verification.models import VerificationRun, VerifierProfile

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]
LONG_AGO = timedelta(days=2)


def version(agent: AgentClient, session: str, root: Path, text: str) -> str:
    (root / "notes.txt").write_text(text)
    return str(upload_directory(agent, session, root)["tree"])


def age_everything() -> None:
    Snapshot.objects.update(created_at=timezone.now() - LONG_AGO)
    Blob.objects.update(touched_at=timezone.now() - LONG_AGO)


def stored(project: Project, text: str) -> bool:
    blob = blob_id(text.encode())
    return (Blob.objects.filter(project=project, blob_id=blob).exists()
            and storages["governor_blobs"].exists(blob_name(project, blob)))


@pytest.fixture
def laptop(tmp_path: Path) -> Path:
    root = tmp_path / "laptop"
    root.mkdir()
    (root / "main.py").write_text("print('kept in every version')\n")
    return root


def test_superseded_snapshots_nothing_names_are_collected_then_their_blobs(
        agent: AgentClient, project: Project, laptop: Path) -> None:
    session = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    reference = version(agent, session, laptop, "v1 the session's reference\n")
    unnamed = version(agent, session, laptop, "v1b nobody names\n")
    started = version(agent, session, laptop, "v2 the contract starts here\n")
    begun = agent.post(f"/sessions/{session}/contracts", {**readme_contract(max_attempts=3),
                                                         "tree": started})
    assert begun.status_code == 201, begun.content
    attempted = version(agent, session, laptop, "v3 an attempt judges this\n")
    stop = agent.post(f"/sessions/{session}/turn-stop", {"tree": attempted}).json()
    assert stop["attempt"]["tree"]["id"] == attempted
    run_on = version(agent, session, laptop, "v4 a run runs on this\n")
    VerificationRun.objects.create(
        session_id=session, profile=VerifierProfile.objects.create(
            project=project, profile_id="unit", description="unit", argv=["true"],
            receipt="sha256:" + "7" * 64),
        profile_receipt="sha256:" + "7" * 64, definition={}, tree=run_on)
    also_unnamed = version(agent, session, laptop, "v5 nobody names either\n")
    latest = version(agent, session, laptop, "v6 the latest\n")

    # Within the grace period nothing goes, however superseded.
    assert snapshots_collect() == {"snapshots": 0, "trees": 0}
    age_everything()
    call_command("governor_blobs", "gc")
    left = set(Snapshot.objects.values_list("tree__tree_id", flat=True))
    assert left == {reference, started, attempted, run_on, latest}
    assert not WorkspaceTree.objects.filter(tree_id__in=[unnamed, also_unnamed]).exists()
    assert not stored(project, "v1b nobody names\n")
    assert not stored(project, "v5 nobody names either\n")
    for text in ("v1 the session's reference\n", "v2 the contract starts here\n",
                 "v3 an attempt judges this\n", "v4 a run runs on this\n", "v6 the latest\n",
                 "print('kept in every version')\n"):
        assert stored(project, text), text
    # The session goes on: its latest snapshot is the base of the next upload.
    assert agent.get(f"/sessions/{session}").status_code == 200
    after = version(agent, session, laptop, "v7 after the collection\n")
    assert agent.post(f"/sessions/{session}/turn-stop", {"tree": after}).status_code == 200


def test_the_latest_snapshot_is_kept_however_old(agent: AgentClient, project: Project,
                                                 laptop: Path) -> None:
    session = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    only = version(agent, session, laptop, "the only version\n")
    age_everything()
    assert snapshots_collect() == {"snapshots": 0, "trees": 0}
    assert Snapshot.objects.get().tree.tree_id == only
    call_command("governor_blobs", "gc")
    assert stored(project, "the only version\n")


def test_a_snapshot_superseded_only_recently_is_kept(agent: AgentClient, laptop: Path) -> None:
    """The grace period runs from when a later snapshot replaced it, not from its upload."""
    session = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    version(agent, session, laptop, "old\n")
    age_everything()
    version(agent, session, laptop, "new, just now\n")
    assert snapshots_collect() == {"snapshots": 0, "trees": 0}
    assert Snapshot.objects.count() == 2


def test_a_tree_another_session_still_holds_is_kept_with_its_blobs(
        agent: AgentClient, project: Project, laptop: Path) -> None:
    first = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    second = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    version(agent, first, laptop, "the first session's reference (rules §17.1), kept\n")
    shared = version(agent, first, laptop, "the same tree in two sessions\n")
    assert version(agent, second, laptop, "the same tree in two sessions\n") == shared
    version(agent, first, laptop, "the first session moved on\n")
    age_everything()
    assert snapshots_collect() == {"snapshots": 1, "trees": 0}
    assert WorkspaceTree.objects.filter(tree_id=shared).exists()
    call_command("governor_blobs", "gc")
    assert stored(project, "the same tree in two sessions\n")
