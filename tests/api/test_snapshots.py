"""rules §11.1: snapshots of a session bound {"kind": "snapshot"}, refused whole, naming the
entry; the tree id the same as hashing the directory would give."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from governor.domain.fields import FieldsInvalid
from governor.domain.snapshots import snapshot_manifest
from governor.domain.tree import MAX_DEPTH, TreeError, blob_id, hash_tree
from governor.models import Snapshot, WorkspaceTree
from tests.api.test_blob_store import put
from tests.conftest import AgentClient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]


@pytest.fixture
def session(agent: AgentClient) -> str:
    response = agent.post("/sessions", {"workspace": {"kind": "snapshot"}})
    assert response.status_code == 201, response.content
    assert response.json()["workspace"] == {"kind": "snapshot", "path": ""}
    return str(response.json()["id"])


def upload(agent: AgentClient, *contents: bytes) -> list[str]:
    ids = [blob_id(data) for data in contents]
    missing = agent.post("/blobs/missing", {"blobs": ids}).json()["missing"]
    for data in contents:
        if blob_id(data) in missing:
            assert put(agent, blob_id(data), data).status_code == 201
    return ids


def entry(path: str, blob: str | None, mode: str = "100644") -> dict[str, Any]:
    return {"path": path, "mode": mode, "blob": blob}


def snapshot(agent: AgentClient, session: str, entries: list[dict[str, Any]],
             **extra: Any) -> Any:
    return agent.post(f"/sessions/{session}/snapshots", {"entries": entries, **extra})


def test_the_snapshot_tree_id_equals_the_hash_of_the_directory(
        agent: AgentClient, session: str, tmp_path: Path) -> None:
    root = tmp_path / "copy"
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_bytes(b"print(1)\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "empty").write_bytes(b"")
    os.symlink("src/main.py", root / "link")
    main, run, empty, link = upload(agent, b"print(1)\n", b"#!/bin/sh\n", b"",
                                    b"src/main.py")
    response = snapshot(agent, session, [
        entry("src/main.py", main), entry("run.sh", run, "100755"), entry("empty", empty),
        entry("link", link, "120000")])
    assert response.status_code == 201, response.content
    body = response.json()
    expected = hash_tree(str(root), max_files=100, max_bytes=10**6)
    assert body["tree"] == expected.id
    assert body["exclusions"] == expected.exclusions_digest
    assert (body["files"], body["bytes"], body["number"]) == (4, expected.size, 1)
    stored = WorkspaceTree.objects.get(tree_id=body["tree"])
    assert [tuple(e) for e in stored.manifest] == [tuple(e) for e in expected.manifest]


def test_base_plus_changed_entries_and_null_deletes(agent: AgentClient, session: str) -> None:
    a, b, c = upload(agent, b"a", b"b", b"c")
    first = snapshot(agent, session, [entry("a", a), entry("dir/b", b)]).json()
    second = snapshot(agent, session, [entry("dir/b", None), entry("c", c)], base=first["tree"])
    assert second.status_code == 201, second.content
    whole = snapshot(agent, session, [entry("a", a), entry("c", c)]).json()
    assert second.json()["tree"] == whole["tree"]
    assert second.json()["bytes"] == whole["bytes"] == 2  # sizes counted over the base
    assert [s.number for s in Snapshot.objects.order_by("number")] == [1, 2, 3]


@pytest.mark.parametrize(("path", "reason"), [
    ("/etc/passwd", "must be relative"),
    ("../outside", "'..'"),
    ("a/../../outside", "'..'"),
    ("a//b", "empty"),
    ("./a", "'.'"),
    (".git/config", ".git"),
    ("sub/.GIT/hooks/x", "git refuses"),
    ("git~1/x", "git refuses"),
    (".governor/state", ".governor/"),
])
def test_a_bad_path_is_refused_naming_the_entry(agent: AgentClient, session: str, path: str,
                                                reason: str) -> None:
    """Security: path traversal in a snapshot — no path can leave the tree when materialised."""
    (good, bad) = upload(agent, b"fine", b"evil")
    response = snapshot(agent, session, [entry("ok.txt", good), entry(path, bad)])
    assert response.status_code == 422, response.content
    details = response.json()["error"]["details"]
    assert details[0]["path"] == "entries/1/path"
    assert reason in details[0]["message"]
    assert not Snapshot.objects.exists() and not WorkspaceTree.objects.exists()


def test_a_missing_blob_is_refused_naming_the_entry(agent: AgentClient, session: str) -> None:
    (present,) = upload(agent, b"present")
    absent = blob_id(b"never uploaded")
    response = snapshot(agent, session, [entry("a", present), entry("b", absent)])
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["details"] == [{"path": "entries/1/blob",
                                 "message": f"blob {absent} of 'b' is missing: PUT it first"}]
    assert not Snapshot.objects.exists()


def test_a_blob_of_another_project_is_missing(agent: AgentClient, other_agent: AgentClient,
                                              session: str) -> None:
    """Security: a snapshot cannot name another project's blob to read it back."""
    (theirs,) = upload(other_agent, b"their secret")
    response = snapshot(agent, session, [entry("stolen", theirs)])
    assert response.status_code == 422
    assert "missing" in response.json()["error"]["message"]


def test_duplicates_and_file_directory_conflicts_are_refused(agent: AgentClient,
                                                             session: str) -> None:
    (a,) = upload(agent, b"a")
    twice = snapshot(agent, session, [entry("x", a), entry("x", a, "100755")])
    assert twice.status_code == 422
    assert twice.json()["error"]["details"][0]["path"] == "entries/1/path"
    assert "listed twice" in twice.json()["error"]["message"]
    both = snapshot(agent, session, [entry("x", a), entry("x/y", a)])
    assert both.status_code == 422
    assert "'x/y' lies below 'x', which is a file" in both.json()["error"]["message"]
    # Through a base: a new file under a path the base holds as a file.
    base = snapshot(agent, session, [entry("x", a)]).json()["tree"]
    below = snapshot(agent, session, [entry("x/z", a)], base=base)
    assert below.status_code == 422
    assert below.json()["error"]["details"][0]["path"] == "entries/0/path"


def test_modes_and_blob_ids_are_checked(agent: AgentClient, session: str) -> None:
    (a,) = upload(agent, b"a")
    response = snapshot(agent, session, [entry("x", a, "100666"), entry("y", "A" * 64),
                                         entry("z", None)])
    assert response.status_code == 422
    assert [d["path"] for d in response.json()["error"]["details"]] == [
        "entries/0/mode", "entries/1/blob", "entries/2/blob"]


def test_caps_are_enforced(agent: AgentClient, session: str, project: Any) -> None:
    project.tree_max_files = 2
    project.tree_max_bytes = 5
    project.save()
    a, b, c = upload(agent, b"aa", b"bb", b"cc")
    many = snapshot(agent, session, [entry("a", a), entry("b", b), entry("c", c)])
    assert many.status_code == 422 and "tree_max_files" in many.json()["error"]["message"]
    (big,) = upload(agent, b"123456")
    heavy = snapshot(agent, session, [entry("big", big)])
    assert heavy.status_code == 422 and "tree_max_bytes" in heavy.json()["error"]["message"]


def test_excluded_paths_are_refused(agent: AgentClient, session: str, project: Any) -> None:
    project.tree_exclusions = ["node_modules/**"]
    project.save()
    (a,) = upload(agent, b"a")
    response = snapshot(agent, session, [entry("node_modules/x/index.js", a)])
    assert response.status_code == 422
    assert "excluded" in response.json()["error"]["message"]


def test_base_must_be_a_snapshot_of_this_session(agent: AgentClient, session: str) -> None:
    (a,) = upload(agent, b"a")
    other = agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"]
    theirs = snapshot(agent, other, [entry("a", a)]).json()["tree"]
    response = snapshot(agent, session, [entry("b", a)], base=theirs)
    assert response.status_code == 404
    assert response.json()["error"]["details"][0]["path"] == "base"


def test_a_path_session_takes_no_snapshots(agent: AgentClient, workspace: Path) -> None:
    session = agent.create_session(workspace)
    (a,) = upload(agent, b"a")
    response = snapshot(agent, session["id"], [entry("a", a)])
    assert response.status_code == 409


def test_a_base_recorded_under_other_exclusions_is_refused(agent: AgentClient, session: str,
                                                           project: Any) -> None:
    (a,) = upload(agent, b"a")
    base = snapshot(agent, session, [entry("a", a)]).json()["tree"]
    project.tree_exclusions = ["build/**"]
    project.save()
    response = snapshot(agent, session, [entry("b", a)], base=base)
    assert response.status_code == 404
    assert "other tree exclusions" in response.json()["error"]["message"]


def test_a_path_nested_deeper_than_the_tree_hashers_256_directories_is_refused_naming_it(
        agent: AgentClient, session: str) -> None:
    """Issue 25 finding 4: no tree `hash_tree` hashes holds a path below 256 directories
    (MAX_DEPTH), so neither does a snapshot."""
    (a,) = upload(agent, b"a")
    deepest = "/".join(["d"] * MAX_DEPTH + ["f"])
    assert snapshot(agent, session, [entry(deepest, a)]).status_code == 201
    too_deep = "/".join(["d"] * (MAX_DEPTH + 1) + ["f"])
    response = snapshot(agent, session, [entry("ok", a), entry(too_deep, a)])
    assert response.status_code == 422, response.content
    [detail] = response.json()["error"]["details"]
    assert detail["path"] == "entries/1/path"
    assert detail["message"].endswith(
        f"is nested {MAX_DEPTH + 1} directories deep; at most {MAX_DEPTH} (the tree "
        "hasher's nesting limit)")
    assert Snapshot.objects.count() == 1


def test_the_attack_body_of_paths_2040_names_deep_is_refused_before_any_other_work(
        agent: AgentClient, session: str, project: Any) -> None:
    """Issue 25 finding 4: 408 KB of 4,080-byte paths 2,040 names deep cost 7.6 s of CPU to
    validate (every directory of every path tested on its own); each is now refused for its
    depth first, in a fraction of a second."""
    project.tree_exclusions = ["node_modules/**", "**/cache/**", "*.pyc"]
    project.save()
    entries = [entry(f"{index:03x}" + "/a" * 2039, "0" * 64) for index in range(100)]
    assert len(entries[0]["path"]) == 4081
    started = time.process_time()
    response = snapshot(agent, session, entries)
    spent = time.process_time() - started
    assert response.status_code == 422, response.content
    details = response.json()["error"]["details"]
    assert [d["path"] for d in details] == [f"entries/{i}/path" for i in range(100)]
    assert all("2039 directories deep; at most 256" in d["message"] for d in details)
    assert spent < 1.0, f"{spent:.2f} s of CPU"
    assert not Snapshot.objects.exists()


def manifest_cost(depth: int, exclusions: list[str]) -> float:
    """The least CPU time, of five, to validate ~800 KB of 4,000-byte paths `depth` deep."""
    name = "n" * (4000 // (depth + 1) - 1)
    entries = [entry(f"{index:06x}" + f"/{name}" * depth, "0" * 64) for index in range(200)]
    best = float("inf")
    for _ in range(5):
        started = time.process_time()
        snapshot_manifest(entries, base=None, exclusions=exclusions, max_entries=100_000)
        best = min(best, time.process_time() - started)
    return best


def test_validating_paths_256_deep_costs_what_the_same_bytes_8_deep_cost() -> None:
    """Issue 25 finding 4: each directory was tested as a string of its own (exclusions and
    file/directory clashes), so a path cost its depth times its length: the same bytes 256
    deep cost 12 times what they cost 8 deep. Now one pass per path, whatever its depth."""
    exclusions = ["node_modules/**", "**/cache/**", "*.pyc", "build"]
    shallow, deep = manifest_cost(8, exclusions), manifest_cost(MAX_DEPTH, exclusions)
    assert deep < 3 * shallow, f"8 deep {shallow * 1000:.1f} ms, 256 deep {deep * 1000:.1f} ms"


def test_a_symlink_below_a_name_git_refuses_for_symlinks_is_refused_as_hash_tree_refuses_it(
        agent: AgentClient, session: str, tmp_path: Path) -> None:
    """git (and `hash_tree`) refuse a symlink anywhere below `.gitmodules:x` (NTFS reads it as
    .gitmodules), not only one named so."""
    os.makedirs(tmp_path / ".gitmodules:x")
    os.symlink("target", tmp_path / ".gitmodules:x" / "link")
    with pytest.raises(TreeError, match="git refuses a symlink"):
        hash_tree(str(tmp_path), max_files=10, max_bytes=100)
    (link,) = upload(agent, b"target")
    response = snapshot(agent, session, [entry(".gitmodules:x/link", link, "120000")])
    assert response.status_code == 422, response.content
    assert response.json()["error"]["details"] == [{
        "path": "entries/0/path",
        "message": "'.gitmodules:x/link' git refuses the name '.gitmodules:x'"}]


def test_a_snapshot_of_more_directories_than_the_file_cap_is_refused_before_its_trees_are_built(
) -> None:
    """Issue 25 finding 4, the residue: paths of distinct directories, each a git tree object
    to build (11 s of CPU at the 8 MiB cap); the project's tree_max_files bounds them too."""
    blob = "0" * 64
    entries = [{"path": f"d{index}/e/f/file", "mode": "100644", "blob": blob}
               for index in range(100)]
    with pytest.raises(FieldsInvalid) as refused:
        snapshot_manifest(entries, base=None, exclusions=[], max_entries=250)
    assert refused.value.errors == [{
        "path": "entries", "message": "the snapshot holds more than 250 directories (the "
        "project's tree_max_files bounds its directories too: each is a tree object to build)"}]
    assert len(snapshot_manifest(entries, base=None, exclusions=[], max_entries=300)) == 100
