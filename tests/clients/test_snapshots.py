"""Issue 14 item 5: the client uploads a directory the server cannot see as a snapshot — the tree
computed locally with the server's ids, only missing blobs sent, a small change sent small —
and the CLI, the hooks and the MCP server work in snapshot mode (GOVERNOR_WORKSPACE=snapshot)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from governor_client.snapshot import cache_dir

from governor.domain.tree import hash_tree
from tests.api.test_contracts import readme_contract
from tests.clients.conftest import agent_env, hook
from tests.clients.test_hooks import ClaudeCode
from tests.live import Live


@pytest.fixture
def laptop(tmp_path: Path) -> Path:
    """The agent's directory on a machine of its own: under none of the server's roots."""
    root = tmp_path / "laptop"
    (root / "src").mkdir(parents=True)
    for index in range(20):
        (root / "src" / f"m{index}.py").write_text(f"value = {index}\n")
    (root / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "run.sh", 0o755)
    os.symlink("src/m0.py", root / "main.py")
    (root / ".git").mkdir()  # the agent's own repository: never part of the tree
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return root


def snapshot_cli(live: Live, root: Path, *args: str,
                 **env: str) -> tuple[dict[str, Any], str]:
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", *args], cwd=root,
        env=agent_env(live, GOVERNOR_WORKSPACE="snapshot", **env), capture_output=True,
        text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return (json.loads(result.stdout) if result.stdout.strip() else {}), result.stderr


def expected_tree(root: Path) -> str:
    return hash_tree(str(root), max_files=1000, max_bytes=10**7).id


def test_the_cli_uploads_only_what_the_server_lacks(live: Live, laptop: Path) -> None:
    first, progress = snapshot_cli(live, laptop, "snapshot")
    assert first["tree"] == expected_tree(laptop)  # git's id is the server's id
    assert first["files"] == 22 and first["sent_blobs"] == 22
    assert "uploaded [" in progress and "22/22 blobs" in progress
    (laptop / "src" / "m7.py").write_text("value = 'changed'\n")
    second, _ = snapshot_cli(live, laptop, "snapshot")
    assert second["tree"] == expected_tree(laptop) != first["tree"]
    assert (second["sent_blobs"], second["sent_bytes"]) == (1, len("value = 'changed'\n"))
    assert second["number"] == first["number"] + 1
    again, _ = snapshot_cli(live, laptop, "snapshot")
    assert again == {"tree": second["tree"], "files": 22, "sent_blobs": 0, "sent_bytes": 0,
                     "unchanged": True}
    (laptop / "src" / "m3.py").unlink()
    third, _ = snapshot_cli(live, laptop, "snapshot")
    assert third["tree"] == expected_tree(laptop) and third["files"] == 21
    assert third["sent_blobs"] == 0


def test_a_snapshot_session_is_certified_from_the_cli(live: Live, laptop: Path,
                                                      review_off: None) -> None:
    contract = json.dumps(readme_contract())

    def run(*args: str, stdin: str | None = None) -> dict[str, Any]:
        result = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "governor_client", *args], cwd=laptop, input=stdin,
            env=agent_env(live, GOVERNOR_WORKSPACE="snapshot"), capture_output=True, text=True,
            timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        return dict(json.loads(result.stdout))

    begun = run("begin", "-", stdin=contract)
    assert begun["status"] == "active"
    assert begun["contract"]["startTree"]["id"] == expected_tree(laptop)
    assert run("turn-stop")["action"] == "steer"
    (laptop / "README.md").write_text("# Tool\n\n## Install\n")
    final = run("turn-stop")
    assert final["terminal"]["status"] == "certified", final
    assert final["attempt"]["tree"]["id"] == expected_tree(laptop)
    status = run("status")
    assert status["terminal"]["tree"]["id"] == expected_tree(laptop)


def test_the_clients_tree_keeps_the_projects_exclusions(live: Live, laptop: Path) -> None:
    live.manage("shell", "-c", "from governor.models import Project; "
                "Project.objects.filter(slug='demo').update(tree_exclusions=['build/**'])")
    try:
        (laptop / "build").mkdir()
        (laptop / "build" / "out.bin").write_bytes(b"\0" * 100)
        answer, _ = snapshot_cli(live, laptop, "snapshot")
        expected = hash_tree(str(laptop), exclusions=["build/**"], max_files=1000,
                             max_bytes=10**7)
        assert answer["tree"] == expected.id and answer["files"] == 22
    finally:
        live.manage("shell", "-c", "from governor.models import Project; "
                    "Project.objects.filter(slug='demo').update(tree_exclusions=[])")


def test_hooks_upload_as_the_agent_works_and_the_stop_names_the_tree(
        live: Live, laptop: Path, review_off: None) -> None:
    agent = ClaudeCode(laptop, "snap-hooks-1")
    env = {"GOVERNOR_WORKSPACE": "snapshot"}
    hook(live, agent.event("SessionStart", source="startup"), **env)
    hook(live, agent.event("UserPromptSubmit", prompt="write the README"), **env)
    (laptop / "README.md").write_text("# Tool\n\n## Install\n")
    hook(live, agent.tool_use("Write", {"file_path": "README.md"}, {"success": True}), **env)
    last = cache_dir(laptop.resolve()) / "snapshot.json"
    deadline = time.monotonic() + 60
    while not (last.exists() and json.loads(last.read_text())["tree"] == expected_tree(laptop)):
        assert time.monotonic() < deadline, (laptop / ".governor" / "upload.log").read_text()
        time.sleep(0.2)  # the background upload, after the tool use
    state = json.loads((laptop / ".governor" / "session.json").read_text())
    with live.client() as client:
        session = client.get(f"/sessions/{state['session_id']}").json()
        assert session["workspace"] == {"kind": "snapshot", "path": ""}
        begun = client.post(f"/sessions/{state['session_id']}/contracts",
                            json={**readme_contract(), "tree": expected_tree(laptop)})
        assert begun.status_code == 201, begun.text
    answer = hook(live, agent.stop(), **env)
    assert answer is not None and answer["decision"] == "block"  # steered: certified
    assert "certified" in answer["reason"]
    with live.client() as client:
        status = client.get(f"/sessions/{state['session_id']}").json()
    assert status["terminal"]["tree"]["id"] == expected_tree(laptop)


def test_a_stop_during_an_upload_that_does_not_finish_is_blocked_upload_in_progress(
        live: Live, laptop: Path, review_off: None) -> None:
    agent = ClaudeCode(laptop, "snap-hooks-2")
    env = {"GOVERNOR_WORKSPACE": "snapshot"}
    hook(live, agent.event("SessionStart", source="startup"), **env)
    state = json.loads((laptop / ".governor" / "session.json").read_text())
    snapshot_cli(live, laptop, "snapshot")
    with live.client() as client:
        tree = json.loads((cache_dir(laptop.resolve()) / "snapshot.json").read_text())["tree"]
        assert client.post(f"/sessions/{state['session_id']}/contracts",
                           json={**readme_contract(), "tree": tree}).status_code == 201
    hook(live, agent.event("UserPromptSubmit", prompt="go on"), **env)  # learns it is active
    # Another upload of this workspace holds the lock past the stop's budget.
    with open(cache_dir(laptop.resolve()) / "upload.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        answer = hook(live, agent.stop(), **env)
    assert answer is not None and answer["decision"] == "block"
    assert "upload in progress" in answer["reason"]
    assert "Unverified stop 1 in a row" in answer["reason"]


def test_the_mcp_server_in_snapshot_mode_verifies_the_uploaded_tree(
        live: Live, laptop: Path, review_off: None) -> None:
    from mcp import ClientSession

    from tests.clients.test_mcp_server import call, run_mcp

    async def scenario(client: ClientSession, initialized: Any) -> None:
        begun = await call(client, "reliability_begin", **readme_contract())
        assert begun["status"] == "active"
        assert begun["contract"]["startTree"]["id"] == expected_tree(laptop)
        (laptop / "README.md").write_text("# Tool\n\n## Install\n")
        verified = await call(client, "reliability_verify")
        assert verified["terminal"]["status"] == "certified", verified
        assert verified["attempt"]["tree"]["id"] == expected_tree(laptop)

    run_mcp(live, laptop, scenario, workspace_arg=f"snapshot:{laptop}")


def test_small_blobs_travel_in_batches_and_large_ones_by_put_with_a_right_progress_bar(
        live: Live, laptop: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from governor_client import snapshot
    from governor_client.client import GovernorClient
    from governor_client.config import Config

    monkeypatch.setattr(snapshot, "BATCH_BLOBS", 8)  # 21 small blobs: three batches
    nonce = os.urandom(8).hex()  # contents no other test uploaded to the shared server
    for index in range(20):
        (laptop / "src" / f"m{index}.py").write_text(f"value = {index}  # {nonce}\n")
    (laptop / "run.sh").write_text(f"#!/bin/sh\n# {nonce}\n")
    (laptop / "main.py").unlink()
    os.symlink(f"src/m0.py#{nonce}", laptop / "main.py")
    big = os.urandom(snapshot.LARGE_BLOB)
    (laptop / "big.bin").write_bytes(big)
    requests: list[tuple[str, str]] = []
    calls: list[tuple[int, int, int, int]] = []
    with GovernorClient(Config(url=live.url, token=live.token)) as client:
        client._http.event_hooks["request"].append(
            lambda request: requests.append((request.method, request.url.path)))
        session = client.create_session(None, external_id=f"batches-{os.getpid()}")["id"]
        answer = snapshot.upload(client, session, laptop,
                                 progress=lambda *args: calls.append(args))
    uploads = [(method, path) for method, path in requests if "/blobs" in path
               and not path.endswith("/missing")]
    assert sorted(method for method, _path in uploads) == ["POST"] * 3 + ["PUT"]
    assert answer["tree"] == expected_tree(laptop) and answer["sent_blobs"] == 23
    sizes = [(laptop / p).lstat().st_size for p in ("run.sh", "big.bin")]
    total = sum(sizes) + sum((laptop / "src" / f"m{i}.py").stat().st_size for i in range(20))
    total += len(f"src/m0.py#{nonce}")  # the symlink's text
    assert calls[0] == (0, 23, 0, total) and calls[-1] == (23, 23, total, total)
    assert [call[0] for call in calls] == sorted(call[0] for call in calls)


def test_a_server_that_names_no_batch_caps_gets_one_put_per_blob() -> None:
    from governor_client.snapshot import _groups

    sizes = {"a": 10, "b": 20}
    assert _groups(["a", "b"], sizes, {}) == [(False, ["a"]), (False, ["b"])]
    caps = {"max_batch_bytes": 1024, "max_batch_blobs": 1}
    assert _groups(["a", "b"], sizes, caps) == [(True, ["a"]), (True, ["b"])]
    assert _groups(["a", "b"], {"a": 10, "b": 2000}, {"max_batch_bytes": 1024,
                                                      "max_batch_blobs": 10}) == [
        (False, ["b"]), (True, ["a"])]
