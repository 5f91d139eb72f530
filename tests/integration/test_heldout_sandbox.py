"""rules §18.2 and §18.3 at the sandbox: the held-out mount in bubblewrap's argv, stdin fed as
the command reads it (however much, and whether or not it reads), stdout kept whole up to the
cap and one byte more — with real bubblewrap."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from governor.domain.profiles import profile_definition, validate_profile
from governor.domain.verification import output_receipt
from governor.domain.workspace import identity_at
from verification.sandbox import HELDOUT, bwrap_argv, run_sandboxed, sandbox_env

pytestmark = pytest.mark.sandbox


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A directory the sandbox user can read (tmp_path is private to root)."""
    root = Path(tempfile.mkdtemp(prefix="governor-heldout-sandbox-"))
    root.chmod(0o755)
    (root / "workspace").mkdir(mode=0o755)
    (root / "suite").mkdir(mode=0o755)
    (root / "suite" / "hidden.txt").write_text("held out\n")
    (root / "suite" / "hidden.txt").chmod(0o444)
    try:
        yield root
    finally:
        shutil.rmtree(root)


def define(argv: list[str], **profile: object) -> dict:
    return dict(profile_definition(validate_profile(
        {"id": "heldout-sandbox", "description": "A held-out run.", "argv": argv, **profile})))


def test_rule_18_2_the_suite_is_bound_read_only_at_governor_heldout() -> None:
    definition = define(["/bin/true"], heldout="golden")
    argv = bwrap_argv(definition, "/srv/workspace", heldout="/srv/suite-copy")
    at = argv.index("/srv/suite-copy")
    assert argv[at - 1:at + 2] == ["--ro-bind", "/srv/suite-copy", HELDOUT]
    assert argv.index("--remount-ro") > at  # bound before / is made read-only
    assert sandbox_env(definition)["GOVERNOR_HELDOUT_DIR"] == HELDOUT
    assert "GOVERNOR_HELDOUT_DIR" not in sandbox_env(define(["/bin/true"]))


def test_rule_18_2_a_run_reads_the_suite_and_cannot_write_it(reachable: Path) -> None:
    workspace = str(reachable / "workspace")
    result = run_sandboxed(
        define(["/bin/sh", "-c", "cat /governor-heldout/hidden.txt && "
                                 "! touch /governor-heldout/new 2>/dev/null"], heldout="golden"),
        workspace, identity_at(workspace), heldout=str(reachable / "suite"), keep_stdout=100)
    assert result.passed, result.detail
    assert result.output == b"held out\n"


def test_rule_18_3_megabytes_of_stdin_reach_the_command_and_come_back_whole(
        reachable: Path) -> None:
    workspace = str(reachable / "workspace")
    data = os.urandom(3 * 1024 * 1024)
    result = run_sandboxed(define(["/bin/cat"]), workspace, identity_at(workspace),
                           stdin=data, keep_stdout=len(data))
    assert result.passed, result.detail
    assert result.output == data
    assert result.stdout.bytes == len(data)
    assert result.stdout.receipt == output_receipt("stdout", hashlib.sha256(data).hexdigest())


def test_rule_18_3_a_command_that_never_reads_its_stdin_ends_the_run_normally(
        reachable: Path) -> None:
    workspace = str(reachable / "workspace")
    result = run_sandboxed(define(["/bin/true"]), workspace, identity_at(workspace),
                           stdin=b"x" * (4 * 1024 * 1024), keep_stdout=10)
    assert result.passed and result.output == b""
    assert result.duration_ms < 10_000


def test_rule_18_3_stdout_is_kept_up_to_the_cap_and_one_byte_more(reachable: Path) -> None:
    workspace = str(reachable / "workspace")
    result = run_sandboxed(define(["/bin/sh", "-c", "head -c 5000 /dev/zero"]), workspace,
                           identity_at(workspace), stdin=b"", keep_stdout=1000)
    assert result.passed and result.output == b"\0" * 1001
    assert result.stdout.bytes == 5000
