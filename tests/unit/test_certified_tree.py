"""rules §10.2: a signed terminal names the tree its deciding attempt judged as a second
in-toto subject (`gitTree`), the export carries that tree's manifest, and the offline verifier
recomputes the tree id from the manifest, checks it against the signed subject and the recorded
exclusions digest, and says which files of a directory differ from it (`--tree DIR`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from governor.domain.attestation import (
    AttestationError,
    build_statement,
    check_statement,
    key_id,
    sign,
    verify_envelope,
    workspace_tree_of,
)
from governor.domain.export import manifest_line, serialise_line
from governor.domain.tree import (
    ManifestEntry,
    TreeError,
    exclusions_digest,
    hash_tree,
    manifest_tree_id,
)
from governor.verify import check_tree, verify_export
from tests.unit.test_offline_verify import (
    CHECKS,
    PASSED,
    SERVER_KEY,
    SESSION,
    Export,
    assert_fails_at_line,
    assert_fails_at_seq,
    attempt_data,
    contract_document,
    public_keys,
    run_cli,
    terminal_data,
)
from tests.unit.test_tree import git_in_copy, materialise, tree_strategy

LIMIT = 10**9
EXCLUSIONS = ["build/**", "*.log"]


# --- the tree id of a manifest ------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=tree_strategy)
def test_a_manifest_hashes_to_the_tree_id_stock_git_writes(spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="manifest-") as scratch:
        root = Path(scratch) / "ws"
        root.mkdir()
        materialise(root, spec)
        git_id, listing = git_in_copy(root)
        from_git = [ManifestEntry(path, mode, blob) for path, (mode, blob) in listing.items()]
        assert manifest_tree_id(from_git) == git_id
        assert manifest_tree_id(reversed(from_git)) == git_id  # the order given does not matter
        hashed = hash_tree(str(root), max_files=LIMIT, max_bytes=LIMIT)
        assert manifest_tree_id(hashed.manifest) == hashed.id == git_id


def test_the_empty_manifest_is_git_s_empty_tree(tmp_path: Path) -> None:
    assert manifest_tree_id([]) == git_in_copy(tmp_path)[0]


BLOB = "ab" * 32


@pytest.mark.parametrize(("entries", "path", "reason"), [
    ([("a", "100644", BLOB), ("a", "100755", BLOB)], "a", "listed twice"),
    ([("a", "100644", BLOB), ("a/b", "100644", BLOB)], "a/b", "below a file"),
    ([("a/b", "100644", BLOB), ("a", "100644", BLOB)], "a", "both a file and a directory"),
    ([("/a", "100644", BLOB)], "/a", "relative"),
    ([("a//b", "100644", BLOB)], "a//b", "relative"),
    ([("a/../b", "100644", BLOB)], "a/../b", "relative"),
    ([("a/", "100644", BLOB)], "a/", "relative"),
    ([("", "100644", BLOB)], "", "non-empty"),
    ([("a", "040000", BLOB)], "a", "mode"),
    ([("a", "100664", BLOB)], "a", "mode"),
    ([("a", "100644", BLOB.upper())], "a", "64 lowercase hex"),
    ([("a", "100644", "ab")], "a", "64 lowercase hex"),
])
def test_a_malformed_manifest_is_refused_naming_the_entry(
        entries: list[tuple[str, str, str]], path: str, reason: str) -> None:
    with pytest.raises(TreeError) as caught:
        manifest_tree_id([ManifestEntry(*entry) for entry in entries])
    assert caught.value.path == path
    assert reason in caught.value.reason


# --- the second subject -------------------------------------------------------------------------


def terminal_statement(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "session_id": SESSION, "contract_id": "c", "chain_head": "cd" * 32, "kind": "terminal",
        "event_seq": 3, "contract_receipt": "sha256:" + "ef" * 32, "status": "certified",
        "reason": "all checks passed", "terminal_receipt": "sha256:" + "01" * 32,
        "workspace_tree": "23" * 32}
    return build_statement(**{**fields, **overrides})


def test_a_terminal_names_its_tree_as_a_second_in_toto_subject() -> None:
    statement = terminal_statement()
    assert statement["subject"][1] == {"name": "workspace", "digest": {"gitTree": "23" * 32}}
    envelope = sign(statement, private_key=SERVER_KEY, keyid=key_id(SERVER_KEY.public_key()))
    assert workspace_tree_of(verify_envelope(envelope, public_keys(SERVER_KEY))) == "23" * 32
    assert workspace_tree_of(terminal_statement(workspace_tree=None)) is None


@pytest.mark.parametrize("second", [
    {"name": "workspace", "digest": {"sha256": "23" * 32}},
    {"name": "workspace", "digest": {"gitTree": "23" * 31}},
    {"name": "workspace", "digest": {"gitTree": "23" * 32, "sha256": "23" * 32}},
    {"name": "tree", "digest": {"gitTree": "23" * 32}},
    {"name": "workspace", "digest": {"gitTree": "23" * 32}, "x": 1},
])
def test_a_second_subject_of_another_shape_is_refused(second: dict[str, Any]) -> None:
    statement = terminal_statement()
    statement["subject"][1] = second
    with pytest.raises(AttestationError, match="second entry"):
        check_statement(statement)


def test_only_a_terminal_may_name_a_tree_and_only_one() -> None:
    statement = terminal_statement()
    statement["subject"].append(statement["subject"][1])
    with pytest.raises(AttestationError, match="exactly one entry"):
        check_statement(statement)
    contract = build_statement(session_id=SESSION, contract_id="c", chain_head="cd" * 32,
                               kind="contract", event_seq=0,
                               contract_receipt="sha256:" + "ef" * 32)
    contract["subject"].append(statement["subject"][1])
    with pytest.raises(AttestationError, match="exactly one entry"):
        check_statement(contract)
    with pytest.raises(AttestationError, match="terminal fields"):
        build_statement(session_id=SESSION, contract_id="c", chain_head="cd" * 32,
                        kind="contract", event_seq=0, contract_receipt="sha256:" + "ef" * 32,
                        workspace_tree="23" * 32)


# --- exports that carry a certified tree --------------------------------------------------------


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "build").mkdir()
    (root / "README.md").write_text("## Größe\n")
    (root / "src" / "run.sh").write_text("#!/bin/sh\n")
    (root / "src" / "run.sh").chmod(0o755)
    (root / "src" / "lib.py").write_text("x = 1\n")
    os.symlink("src/lib.py", root / "lib")
    (root / "build" / "out.o").write_bytes(b"\0")
    (root / "debug.log").write_text("noise\n")
    return root


class TreeExport(Export):
    """An export whose deciding attempt judged `tree`, with its terminal signed naming it and the
    manifest line the server writes (`manifests`, written between the keys and the head)."""

    manifests: list[dict[str, Any]]

    def lines(self) -> list[str]:
        lines = super().lines()
        extra = [serialise_line(line) for line in self.manifests]
        return lines[:-1] + extra + lines[-1:] if self.head_key else lines + extra


def tree_export(workspace: Path, *, signed_tree: str | None = "same",
                status: str = "certified") -> tuple[TreeExport, Any]:
    tree = hash_tree(str(workspace), exclusions=EXCLUSIONS, max_files=LIMIT, max_bytes=LIMIT)
    export = TreeExport()
    contract_seq = export.add("reliability/contract", contract_document(CHECKS[:1]),
                              origin="governor")
    attempt = attempt_data(1, True, PASSED[:1])
    del attempt["receipt"]
    attempt["tree"] = {"id": tree.id, "exclusions": tree.exclusions_digest}
    attempt = {**attempt, "receipt": _receipt("attempt", attempt)}
    export.add("reliability/attempt", attempt, origin="governor")
    terminal = terminal_data(attempt)
    if status != "certified":
        del terminal["receipt"]
        terminal = {**terminal, "status": status}
        terminal["receipt"] = _receipt("terminal", terminal)
    terminal_seq = export.add("reliability/terminal", terminal, origin="governor")
    export.attest_contract(contract_seq)
    hex_id = tree.id.removeprefix("gittree:sha256:") if signed_tree == "same" else signed_tree
    export.attest_terminal(terminal_seq, contract_seq, workspace_tree=hex_id)
    export.publish(SERVER_KEY)
    export.manifests = [manifest_line(tree=tree.id, exclusions=sorted(EXCLUSIONS),
                                      entries=tree.manifest)] if status == "certified" else []
    return export, tree


def _receipt(kind: str, payload: dict[str, Any]) -> str:
    from governor.domain.canonical import receipt

    return receipt(kind, payload)


def test_an_export_with_a_certified_tree_and_its_manifest_verifies(workspace: Path) -> None:
    export, tree = tree_export(workspace)
    report = verify_export(export.lines(), public_keys(SERVER_KEY))
    assert report.ok, report.summary()
    [certified] = report.certified
    assert (certified.seq, certified.tree, certified.exclusions) == (2, tree.id,
                                                                     ("*.log", "build/**"))
    assert certified.entries == tree.manifest
    assert {entry.path for entry in certified.entries} == {"README.md", "lib", "src/lib.py",
                                                           "src/run.sh"}


def test_a_terminal_signed_without_the_tree_its_attempt_judged_fails(workspace: Path) -> None:
    export, _ = tree_export(workspace, signed_tree=None)
    assert_fails_at_line(verify_export(export.lines()), 6, "attestation of seq 2",
                         "workspace subject")


def test_a_terminal_signed_naming_another_tree_fails(workspace: Path) -> None:
    export, _ = tree_export(workspace, signed_tree="45" * 32)
    assert_fails_at_line(verify_export(export.lines()), 6, "workspace subject")


def test_a_certified_tree_without_its_manifest_fails(workspace: Path) -> None:
    export, tree = tree_export(workspace)
    export.manifests = []
    assert_fails_at_seq(verify_export(export.lines()), 2, tree.id, "no manifest line")


def test_a_manifest_whose_entries_were_altered_fails(workspace: Path) -> None:
    export, _ = tree_export(workspace)
    export.manifests[0]["entries"][0]["blob"] = "00" * 32
    assert_fails_at_line(verify_export(export.lines()), 8, "its entries make the tree")
    export, _ = tree_export(workspace)
    export.manifests[0]["entries"].pop()
    assert_fails_at_line(verify_export(export.lines()), 8, "its entries make the tree")
    export, _ = tree_export(workspace)
    export.manifests[0]["entries"][1]["mode"] = "100755"
    assert_fails_at_line(verify_export(export.lines()), 8, "its entries make the tree")


def test_a_manifest_with_other_exclusions_than_recorded_fails(workspace: Path) -> None:
    export, tree = tree_export(workspace)
    export.manifests[0]["exclusions"] = ["*.log"]
    report = verify_export(export.lines())
    assert_fails_at_seq(report, 2, "no manifest line", exclusions_digest(EXCLUSIONS))


def test_a_manifest_of_a_tree_no_certified_terminal_names_fails(workspace: Path) -> None:
    export, tree = tree_export(workspace, status="exhausted")
    export.manifests = [manifest_line(tree=tree.id, exclusions=sorted(EXCLUSIONS),
                                      entries=tree.manifest)]
    assert_fails_at_line(verify_export(export.lines()), 8, "no signed certified terminal")
    export.manifests = []
    report = verify_export(export.lines())
    assert report.ok and report.certified == ()  # the subject is signed, nothing is certified


def test_a_manifest_line_out_of_place_or_malformed_fails(workspace: Path) -> None:
    export, _ = tree_export(workspace)
    lines = export.lines()
    moved = lines[:5] + [lines[7]] + lines[5:7] + lines[8:]
    assert_fails_at_line(verify_export(moved), 7, "attestation line after the manifest lines")
    export.manifests[0]["exclusions"] = ["build/**", "*.log"]
    assert_fails_at_line(verify_export(export.lines()), 8, "sorted and distinct")
    export.manifests[0] = {**export.manifests[0], "exclusions": sorted(EXCLUSIONS), "x": 1}
    assert_fails_at_line(verify_export(export.lines()), 8, "exactly the keys")


# --- a directory against the certified tree ----------------------------------------------------


def test_the_certified_directory_is_recognised_with_its_exclusions(workspace: Path) -> None:
    export, tree = tree_export(workspace)
    report = verify_export(export.lines())
    (workspace / "build" / "new.o").write_bytes(b"excluded")  # exclusions still apply
    checked = check_tree(report.certified, str(workspace))
    assert checked.ok, checked.summary
    assert checked.summary == f"OK: {workspace} is {tree.id}, the tree the terminal at seq 2 " \
                              "certified"


def test_a_changed_directory_names_every_file_that_differs(workspace: Path) -> None:
    export, tree = tree_export(workspace)
    report = verify_export(export.lines())
    (workspace / "README.md").write_text("## Size\n")
    (workspace / "src" / "lib.py").chmod(0o755)
    (workspace / "src" / "run.sh").unlink()
    (workspace / "src" / "run.sh").write_text("#!/bin/bash\n")  # content and mode both change
    (workspace / "lib").unlink()
    (workspace / "NOTES.md").write_text("new\n")
    checked = check_tree(report.certified, str(workspace))
    assert not checked.ok
    assert checked.summary.startswith(f"FAIL: {workspace} is gittree:sha256:")
    assert f"not {tree.id}, the tree the terminal at seq 2 certified; 5 differences:" in \
        checked.summary
    assert checked.differences == (
        "added: NOTES.md",
        "changed: README.md",
        "removed: lib",
        "mode changed: src/lib.py (100644 -> 100755)",
        "changed: src/run.sh (mode 100755 -> 100644)",
    )


def test_a_directory_that_cannot_be_hashed_fails_naming_the_path(workspace: Path) -> None:
    export, _ = tree_export(workspace)
    report = verify_export(export.lines())
    os.mkfifo(workspace / "src" / "pipe")
    checked = check_tree(report.certified, str(workspace))
    assert not checked.ok
    assert "cannot be hashed" in checked.summary and "src/pipe" in checked.summary
    assert not check_tree((), str(workspace)).ok


def test_the_command_line_checks_a_tree_and_lists_the_differences(
        workspace: Path, tmp_path: Path) -> None:
    export, tree = tree_export(workspace)
    path = tmp_path / "export.jsonl"
    path.write_text(export.text(), encoding="utf-8")
    result = run_cli(path, "--tree", workspace, block_django=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1] == (f"OK: {workspace} is {tree.id}, the tree the "
                                              "terminal at seq 2 certified")
    (workspace / "README.md").write_text("## Size\n")
    result = run_cli(path, "--tree", workspace)
    assert result.returncode == 1
    assert result.stdout.splitlines()[-2:] == [
        result.stdout.splitlines()[-2], "  changed: README.md"]
    assert "certified; 1 difference:" in result.stdout
    path.write_text(export.text().replace('"100755"', '"100644"'), encoding="utf-8")
    result = run_cli(path, "--tree", workspace)  # the export itself fails first
    assert result.returncode == 1 and result.stdout.startswith("FAIL: line 8:")

