"""rules §10.2: file checks read the tree the attempt judged. `Workspace.hash` names the
tree; every later read is checked against it (blob id and mode, symlinks on the way), fails
closed when the disk differs, and resolves symlinks within the tree only."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from governor.domain.checks import LogEvidence, evaluate_checks
from governor.domain.tree import TreeError
from governor.domain.workspace import Workspace, WorkspaceError, identity_at

LIMIT = 1 << 20


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("alpha\n")
    return root


def hashed(root: Path, exclusions: tuple[str, ...] = ()) -> Workspace:
    workspace = Workspace(root, identity_at(str(root)))
    workspace.hash(exclusions=exclusions, cache=None, max_files=LIMIT, max_bytes=LIMIT)
    return workspace


def refusal(workspace: Workspace, path: str) -> str:
    with pytest.raises(WorkspaceError) as refused:
        workspace.read_text(path, max_bytes=LIMIT)
    return str(refused.value)


def test_rule_10_2_a_file_read_as_the_tree_holds_it_passes(ws: Path) -> None:
    with hashed(ws) as workspace:
        assert workspace.read_text("a.txt", max_bytes=LIMIT) == "alpha\n"


def test_rule_10_2_a_file_changed_between_hash_and_read_fails_closed(ws: Path) -> None:
    with hashed(ws) as workspace:
        (ws / "a.txt").write_text("ALPHA\n")  # same size: only the content tells
        assert refusal(workspace, "a.txt") == "changed since the workspace tree was hashed"


def test_rule_10_2_an_exec_bit_set_between_hash_and_read_fails_closed(ws: Path) -> None:
    with hashed(ws) as workspace:
        (ws / "a.txt").chmod(0o755)
        assert refusal(workspace, "a.txt") == "changed since the workspace tree was hashed"


def test_rule_10_2_a_file_created_after_the_hash_is_not_in_the_tree(ws: Path) -> None:
    with hashed(ws) as workspace:
        (ws / "late.txt").write_text("late\n")
        assert "is not in the workspace tree judged" in refusal(workspace, "late.txt")
        assert not workspace.entry_present("never.txt")
        with pytest.raises(WorkspaceError, match="not in the workspace tree judged"):
            workspace.entry_present("late.txt")


def test_rule_10_2_a_file_deleted_after_the_hash_fails_file_absent_closed(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "gone.txt").write_text("x")
    with hashed(ws) as workspace:
        (ws / "d" / "gone.txt").unlink()
        with pytest.raises(WorkspaceError, match="changed since the workspace tree"):
            workspace.entry_present("d/gone.txt")
        os.rmdir(ws / "d")
        with pytest.raises(WorkspaceError, match="changed since the workspace tree"):
            workspace.entry_present("d")


def test_rule_10_2_a_symlink_into_an_excluded_place_fails_outside_workspace(ws: Path) -> None:
    (ws / "vendor").mkdir()
    (ws / "vendor" / "lib.txt").write_text("vendored\n")
    (ws / "alias").symlink_to("vendor/lib.txt")
    (ws / "door").symlink_to("vendor", target_is_directory=True)
    with hashed(ws, ("vendor/**",)) as workspace:
        assert refusal(workspace, "alias") == "outside workspace"
        assert refusal(workspace, "door/lib.txt") == "outside workspace"
        assert "not in the workspace tree judged" in refusal(workspace, "vendor/lib.txt")


def test_rule_10_2_a_symlink_into_dot_git_fails_outside_workspace(ws: Path) -> None:
    (ws / ".git").mkdir()
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "cfg").symlink_to(".git/config")
    with hashed(ws) as workspace:
        assert refusal(workspace, "cfg") == "outside workspace"


def test_rule_10_2_a_symlink_retargeted_after_the_hash_fails_closed(ws: Path) -> None:
    (ws / "b.txt").write_text("beta\n")
    (ws / "alias").symlink_to("a.txt")
    with hashed(ws) as workspace:
        assert workspace.read_text("alias", max_bytes=LIMIT) == "alpha\n"
        (ws / "alias").unlink()
        (ws / "alias").symlink_to("b.txt")
        assert refusal(workspace, "alias") == (
            "the symlink alias changed since the workspace tree was hashed")
        (ws / "late").symlink_to("a.txt")
        assert refusal(workspace, "late") == (
            "the symlink late is not in the workspace tree judged (it is excluded, or appeared "
            "after the tree was hashed)")


def test_rule_10_2_reads_use_the_descriptor_the_tree_was_hashed_through(
    ws: Path, tmp_path: Path
) -> None:
    with hashed(ws) as workspace:
        ws.rename(tmp_path / "moved")
        ws.mkdir()
        (ws / "a.txt").write_text("impostor\n")
        assert workspace.read_text("a.txt", max_bytes=LIMIT) == "alpha\n"


def test_rule_10_2_a_check_reading_a_changed_file_fails_with_the_reason(ws: Path) -> None:
    contract = {"startedAtSeq": 0, "checks": [
        {"id": "has-alpha", "kind": "file_contains", "path": "a.txt", "text": "alpha"}]}
    with hashed(ws) as workspace:
        (ws / "a.txt").write_text("alpha\nand more\n")  # still contains the text
        [result] = evaluate_checks(contract, evidence=LogEvidence([]), workspace=workspace,
                                   tree={"id": "t", "exclusions": "e"},
                                   current_profile_receipts={}, max_file_bytes=LIMIT)
    assert not result["passed"]
    assert result["evidence"] == "a.txt: changed since the workspace tree was hashed."


def test_rule_10_hashing_a_workspace_over_its_limit_is_refused_naming_the_limit(
    ws: Path
) -> None:
    workspace = Workspace(ws, identity_at(str(ws)))
    with workspace, pytest.raises(TreeError, match="max_files=0"):
        workspace.hash(exclusions=(), cache=None, max_files=0, max_bytes=LIMIT)


def test_rule_10_hashing_a_swapped_workspace_is_refused(ws: Path, tmp_path: Path) -> None:
    workspace = Workspace(ws, identity_at(str(ws)))
    ws.rename(tmp_path / "moved")
    os.mkdir(ws)
    with workspace, pytest.raises(WorkspaceError, match="not its bound directory"):
        workspace.hash(exclusions=(), cache=None, max_files=LIMIT, max_bytes=LIMIT)
