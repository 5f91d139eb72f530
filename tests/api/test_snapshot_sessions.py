"""rules §10.2 and §11.3: a snapshot session's begin, turn-stops and checks name its latest
snapshot, and file checks read the snapshot materialised privately; the server keeps the blobs
of every tree it judges, path sessions' too (issue 14 item 3)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from governor.domain.tree import blob_id, hash_tree
from governor.lib.blobstore import blob_read
from governor.models import Blob, Event, WorkspaceTree
from tests.api.test_blob_store import put
from tests.api.test_contracts import readme_contract
from tests.conftest import AgentClient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]


def upload_directory(agent: AgentClient, session: str, root: Path) -> dict[str, Any]:
    """What the client does: hash the directory as the server would, send the missing blobs,
    then the manifest."""
    tree = hash_tree(str(root), max_files=1000, max_bytes=10**7)
    contents = {}
    for entry in tree.manifest:
        path = root / entry.path
        contents[entry.blob] = (os.fsencode(os.readlink(path)) if entry.mode == "120000"
                                else path.read_bytes())
    missing = agent.post("/blobs/missing", {"blobs": sorted(contents)}).json()["missing"]
    for blob in missing:
        assert put(agent, blob, contents[blob]).status_code == 201
    response = agent.post(f"/sessions/{session}/snapshots", {"entries": [
        {"path": e.path, "mode": e.mode, "blob": e.blob} for e in tree.manifest]})
    assert response.status_code == 201, response.content
    assert response.json()["tree"] == tree.id
    return dict(response.json())


@pytest.fixture
def remote(tmp_path: Path) -> Path:
    """The agent's directory on its own machine: not under any workspace root."""
    root = tmp_path / "laptop"
    root.mkdir()
    (root / "main.py").write_text("print('hi')\n")
    return root


@pytest.fixture
def session(agent: AgentClient) -> str:
    return str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])


def test_a_snapshot_session_is_judged_on_its_latest_snapshot(
        agent: AgentClient, session: str, remote: Path, settings: Any) -> None:
    first = upload_directory(agent, session, remote)
    refused = agent.post(f"/sessions/{session}/contracts", readme_contract())
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["path"] == "tree"
    begun = agent.post(f"/sessions/{session}/contracts", {**readme_contract(max_attempts=3),
                                                         "tree": first["tree"]})
    assert begun.status_code == 201, begun.content
    assert begun.json()["contract"]["startTree"]["id"] == first["tree"]
    stop = agent.post(f"/sessions/{session}/turn-stop", {"tree": first["tree"]}).json()
    assert stop["action"] == "steer" and stop["attempt"]["tree"]["id"] == first["tree"]
    assert "readme-exists" in stop["message"]

    (remote / "README.md").write_text("# Tool\n\n## Install\n")
    second = upload_directory(agent, session, remote)
    stale = agent.post(f"/sessions/{session}/turn-stop", {"tree": first["tree"]})
    assert stale.status_code == 409
    assert second["tree"] in stale.json()["error"]["message"]
    final = agent.post(f"/sessions/{session}/turn-stop", {"tree": second["tree"]}).json()
    assert final["terminal"]["status"] == "certified", final
    assert final["attempt"]["tree"]["id"] == second["tree"]
    status = agent.get(f"/sessions/{session}").json()
    assert status["terminal"]["tree"]["id"] == second["tree"]
    materialised = Path(settings.VAR_DIR) / "materialised"
    assert materialised.is_dir() and list(materialised.iterdir()) == []  # each one deleted


def test_another_sessions_snapshot_is_404(agent: AgentClient, session: str,
                                          remote: Path) -> None:
    other = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    (remote / "other.txt").write_text("only in the other session\n")
    theirs = upload_directory(agent, other, remote)
    (remote / "other.txt").unlink()
    upload_directory(agent, session, remote)
    response = agent.post(f"/sessions/{session}/contracts", {**readme_contract(),
                                                            "tree": theirs["tree"]})
    assert response.status_code == 404


def test_a_path_session_names_no_tree(agent: AgentClient, workspace: Path) -> None:
    session = agent.create_session(workspace)["id"]
    response = agent.post(f"/sessions/{session}/contracts",
                          {**readme_contract(), "tree": "gittree:sha256:" + "0" * 64})
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "tree"


def test_a_symlink_out_of_the_snapshot_is_never_followed(agent: AgentClient, session: str,
                                                          remote: Path, tmp_path: Path) -> None:
    """Security: a snapshot's symlink is stored as its text; materialised, it is a symlink that
    file checks follow inside the tree only."""
    secret = tmp_path / "secret.txt"
    secret.write_text("## Install\n")
    os.symlink(str(secret), remote / "README.md")
    snap = upload_directory(agent, session, remote)
    stored = WorkspaceTree.objects.get(tree_id=snap["tree"]).manifest
    link = next(entry for entry in stored if entry[0] == "README.md")
    assert link[1] == "120000" and blob_read(link_project(agent), link[2]) == str(secret).encode()
    agent.post(f"/sessions/{session}/contracts", {**readme_contract(max_attempts=1),
                                                 "tree": snap["tree"]})
    final = agent.post(f"/sessions/{session}/turn-stop", {"tree": snap["tree"]}).json()
    assert final["terminal"]["status"] == "exhausted"
    results = {r["id"]: r for r in final["attempt"]["results"]}
    assert "outside" in results["readme-install"]["evidence"]


def link_project(agent: AgentClient) -> int:
    return int(Blob.objects.values_list("project_id", flat=True).first() or 0)


def test_a_cache_holding_other_bytes_judges_nothing(agent: AgentClient, session: str,
                                                    remote: Path, settings: Any) -> None:
    """The materialised snapshot must hash to the snapshot's id: a blob cache or store that
    returns other bytes fails the attempt closed instead of judging another tree."""
    (remote / "README.md").write_text("# Tool\n")
    snap = upload_directory(agent, session, remote)
    agent.post(f"/sessions/{session}/contracts", {**readme_contract(max_attempts=2),
                                                 "tree": snap["tree"]})
    cache = Path(settings.VAR_DIR) / "blob-cache"
    stop = agent.post(f"/sessions/{session}/turn-stop", {"tree": snap["tree"]}).json()
    assert stop["attempt"]["tree"]["id"] == snap["tree"]
    readme = next(cache.rglob(blob_id(b"# Tool\n")))
    os.chmod(readme, 0o644)
    readme.write_text("# Tool\n\n## Install\n")  # the cache lies: README now passes
    final = agent.post(f"/sessions/{session}/turn-stop", {"tree": snap["tree"]}).json()
    assert final["attempt"]["tree"] is None
    assert final["terminal"]["status"] == "exhausted"
    assert all(f"not {snap['tree']}: the blob store or cache holds other bytes" in r["evidence"]
               for r in final["attempt"]["results"])


def test_the_server_keeps_the_blobs_of_the_path_trees_it_judges(
        agent: AgentClient, workspace: Path, project: Any) -> None:
    (workspace / "README.md").write_text("# Tool\n\n## Install\n")
    (workspace / "bin").mkdir()
    (workspace / "bin" / "run").write_bytes(b"#!/bin/sh\n")
    os.chmod(workspace / "bin" / "run", 0o755)
    os.symlink("README.md", workspace / "DOCS")
    session = agent.create_session(workspace)["id"]
    agent.post(f"/sessions/{session}/contracts", readme_contract())
    final = agent.post(f"/sessions/{session}/turn-stop").json()
    assert final["terminal"]["status"] == "certified"
    for tree_id in (final["attempt"]["tree"]["id"],
                    Event.objects.filter(session_id=session, type="reliability/contract")
                    .get().data["startTree"]["id"]):
        manifest = WorkspaceTree.objects.get(tree_id=tree_id).manifest
        assert manifest
        for _path, _mode, blob in manifest:
            assert blob_id(blob_read(project, blob)) == blob
