"""rules §4 rule 6: every file a check reads goes through the workspace layer."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from governor.domain import workspace as workspace_module
from governor.domain.workspace import Workspace, WorkspaceError, identity_at

LIMIT = 1024


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


def bound(root: Path) -> Workspace:
    """The workspace as a session binds it: its path and its identity now."""
    return Workspace(root, identity_at(str(root)))


def read(root: Path, relative: str, limit: int = LIMIT) -> str:
    return bound(root).read_text(relative, max_bytes=limit)


def refusal(root: Path, relative: str, limit: int = LIMIT) -> str:
    with pytest.raises(WorkspaceError) as caught:
        read(root, relative, limit)
    return str(caught.value)


def test_rule_4_6_reads_a_regular_utf8_file(root: Path) -> None:
    (root / "dir").mkdir()
    (root / "dir" / "a.txt").write_text("héllo\n", encoding="utf-8")
    assert read(root, "dir/a.txt") == "héllo\n"
    assert read(root, "./dir//a.txt") == "héllo\n"


def test_rule_4_6_symlink_to_outside_fails_outside_workspace(root: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (root / "leak").symlink_to(secret)
    assert refusal(root, "leak") == "outside workspace"


def test_rule_4_6_directory_symlink_to_outside_fails_outside_workspace(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("x")
    (root / "door").symlink_to(outside, target_is_directory=True)
    assert refusal(root, "door/f") == "outside workspace"


def test_rule_4_6_dangling_symlink_to_outside_fails_outside_workspace(
    root: Path, tmp_path: Path
) -> None:
    (root / "leak").symlink_to(tmp_path / "missing")
    assert refusal(root, "leak") == "outside workspace"


def test_rule_4_6_symlink_inside_the_workspace_is_followed(root: Path) -> None:
    (root / "real.txt").write_text("content")
    (root / "alias.txt").symlink_to("real.txt")
    (root / "sub").mkdir()
    (root / "sub" / "up.txt").symlink_to("../real.txt")
    assert read(root, "alias.txt") == "content"
    assert read(root, "sub/up.txt") == "content"


def test_rule_4_6_a_workspace_root_swapped_for_a_symlink_reads_nothing(
    root: Path, tmp_path: Path
) -> None:
    """Sessions bind the directory and its identity; replacing it with a link to elsewhere, or
    with another directory, must not carry the checks there."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a").write_text("secret")
    workspace = bound(root)
    root.rename(tmp_path / "moved")
    root.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="not its bound directory"):
        workspace.read_text("a", max_bytes=LIMIT)
    root.unlink()
    elsewhere.rename(root)
    with pytest.raises(WorkspaceError, match="not its bound directory"):
        workspace.read_text("a", max_bytes=LIMIT)


def test_rule_4_6_an_absolute_link_under_the_root_path_is_followed_inside(root: Path) -> None:
    (root / "real.txt").write_text("content")
    (root / "abs").symlink_to(root / "real.txt")
    (root / "loop").symlink_to("loop")
    assert read(root, "abs") == "content"
    assert "too many levels" in refusal(root, "loop")


def test_rule_4_6_a_relative_link_climbing_above_the_root_is_outside(root: Path) -> None:
    (root / "up").symlink_to("../..")
    (root / "sub").mkdir()
    (root / "sub" / "back").symlink_to("../README")
    (root / "README").write_text("r")
    assert refusal(root, "up/etc/passwd") == "outside workspace"
    assert read(root, "sub/back") == "r"


def test_rule_4_6_directory_is_not_a_regular_file(root: Path) -> None:
    (root / "d").mkdir()
    assert "directory" in refusal(root, "d")


def test_rule_4_6_fifo_fails_without_being_opened(root: Path) -> None:
    os.mkfifo(root / "pipe")
    outcome: list[str] = []
    reader = threading.Thread(target=lambda: outcome.append(refusal(root, "pipe")), daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert not reader.is_alive(), "reading a FIFO blocked"
    assert "FIFO" in outcome[0]


def test_rule_4_6_file_over_the_cap_fails_before_reading(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "big").write_bytes(b"x" * (LIMIT + 1))
    (root / "exact").write_bytes(b"x" * LIMIT)
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: str, flags: int, *args: int, **kwargs: int) -> int:
        opened.append(path)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(workspace_module.os, "open", recording_open)
    assert "over the 1024-byte limit" in refusal(root, "big")
    assert "big" not in opened
    assert len(read(root, "exact")) == LIMIT


def test_rule_4_6_invalid_utf8_fails(root: Path) -> None:
    (root / "latin1").write_bytes("café".encode("latin-1"))
    assert "not valid UTF-8 (byte offset 3)" in refusal(root, "latin1")


def test_rule_4_6_lone_surrogate_encoding_is_invalid_utf8(root: Path) -> None:
    (root / "surrogate").write_bytes(b"\xed\xa0\x80")
    assert "not valid UTF-8" in refusal(root, "surrogate")


def test_rule_4_6_nul_byte_fails(root: Path) -> None:
    (root / "bin").write_bytes(b"ab\x00cd")
    assert "NUL byte at offset 2" in refusal(root, "bin")


def test_rule_4_6_bom_is_kept_as_content(root: Path) -> None:
    (root / "bom").write_bytes(b"\xef\xbb\xbfhi")
    assert read(root, "bom") == "\ufeffhi"


def test_rule_4_6_missing_file_fails_not_found(root: Path) -> None:
    assert refusal(root, "nope") == "not found"
    (root / "file").write_text("x")
    assert refusal(root, "file/below") == "not found"


def test_rule_4_6_file_deleted_before_it_is_opened_fails_cleanly(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = root / "vanishing"
    target.write_text("x")
    real_open = os.open

    def delete_then_open(path: str, flags: int, *args: int, **kwargs: int) -> int:
        if path == target.name:
            target.unlink()
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(workspace_module.os, "open", delete_then_open)
    assert "deleted" in refusal(root, "vanishing")


def test_rule_4_6_file_swapped_for_another_between_check_and_open_fails(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = root / "swapped"
    target.write_text("x")
    real_open = os.open

    def swap_then_open(path: str, flags: int, *args: int, **kwargs: int) -> int:
        if path == target.name:
            target.rename(root / "old")  # keep the old inode alive so the new one gets another
            target.write_text("y")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(workspace_module.os, "open", swap_then_open)
    assert "changed" in refusal(root, "swapped")


def test_rule_4_6_file_replaced_by_a_symlink_after_the_check_is_not_followed(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s")
    target = root / "f"
    target.write_text("x")
    real_open = os.open

    def swap_then_open(path: str, flags: int, *args: int, **kwargs: int) -> int:
        if path == target.name:
            target.unlink()
            target.symlink_to(secret)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(workspace_module.os, "open", swap_then_open)
    refusal(root, "f")  # O_NOFOLLOW: the open itself is refused


@pytest.mark.parametrize("relative", ["/etc/passwd", "../x", "a/../../x", "..\\x", "", "a\x00"])
def test_rule_4_2_workspace_refuses_unsafe_paths_even_from_old_contracts(
    root: Path, relative: str
) -> None:
    assert "not a relative path" in refusal(root, relative)


def test_rule_4_6_entry_present_does_not_follow_a_dangling_link(root: Path) -> None:
    (root / "dangling").symlink_to("missing-target")
    ws = bound(root)
    assert ws.entry_present("dangling") is True
    assert ws.entry_present("missing-target") is False


def test_rule_4_6_entry_present_sees_a_link_to_outside_as_present(
    root: Path, tmp_path: Path
) -> None:
    (root / "out").symlink_to(tmp_path)
    assert bound(root).entry_present("out") is True


def test_rule_4_6_entry_present_refuses_a_parent_outside(root: Path, tmp_path: Path) -> None:
    (root / "door").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="outside workspace"):
        bound(root).entry_present("door/anything")


def test_rule_4_6_entry_present_under_a_regular_file_is_absent(root: Path) -> None:
    (root / "file").write_text("x")
    assert bound(root).entry_present("file/child") is False


# --- issue 25, finding 10: hard links to files the workspace's owner does not own ------------

OTHER_UID = 12345  # owns nothing of the workspace


def foreign_file(tmp_path: Path) -> Path:
    """A file of another user, outside the workspace, as /etc/shadow is root's. The tests run
    as root, who may link any file whatever fs.protected_hardlinks says (CAP_FOWNER); an agent
    could where that sysctl is 0."""
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$not-for-the-agent:19000:0:99999:7:::\n")
    os.chown(secret, OTHER_UID, OTHER_UID)
    secret.chmod(0o600)
    return secret


def test_issue_25_a_hard_link_to_another_owners_file_is_refused_naming_both_owners(
    root: Path, tmp_path: Path
) -> None:
    os.link(foreign_file(tmp_path), root / "copy")
    reason = refusal(root, "copy")
    assert reason.startswith("is a hard link (2 links) to a file owned by uid 12345, not by "
                             f"the workspace's owner (uid {root.stat().st_uid})"), reason


def test_issue_25_a_hard_link_between_two_files_of_the_workspace_owner_is_read(
    root: Path
) -> None:
    (root / "a.txt").write_text("shared\n")
    os.link(root / "a.txt", root / "b.txt")
    assert read(root, "b.txt") == "shared\n"
