"""Applying a workspace-write run's changes never writes outside the workspace, whatever links
the workspace holds by then (verification/overlay.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from verification.overlay import DIRECTORY, apply_changes


def apply(upper: Path, target: Path) -> None:
    source, destination = os.open(upper, DIRECTORY), os.open(target, DIRECTORY)
    try:
        apply_changes(source, destination)
    finally:
        os.close(source)
        os.close(destination)


@pytest.fixture
def layers(tmp_path: Path) -> tuple[Path, Path, Path]:
    upper, target, outside = tmp_path / "upper", tmp_path / "workspace", tmp_path / "outside"
    for directory in (upper, target, outside):
        directory.mkdir()
    (outside / "secret").write_text("outside\n")
    return upper, target, outside


def test_a_directory_that_became_a_link_to_outside_is_replaced_not_followed(
    layers: tuple[Path, Path, Path],
) -> None:
    upper, target, outside = layers
    (upper / "sub").mkdir()
    (upper / "sub" / "secret").write_text("from the run\n")
    (target / "sub").symlink_to(outside, target_is_directory=True)
    apply(upper, target)
    assert (outside / "secret").read_text() == "outside\n"
    assert not (target / "sub").is_symlink()
    assert (target / "sub" / "secret").read_text() == "from the run\n"


def test_a_file_that_became_a_hard_link_to_outside_is_replaced_not_written_through(
    layers: tuple[Path, Path, Path],
) -> None:
    upper, target, outside = layers
    (upper / "notes").write_text("from the run\n")
    os.link(outside / "secret", target / "notes")
    apply(upper, target)
    assert (outside / "secret").read_text() == "outside\n"
    assert (target / "notes").read_text() == "from the run\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="a whiteout is a 0:0 device, made by root")
def test_a_whiteout_removes_the_entry_and_a_link_is_removed_not_followed(
    layers: tuple[Path, Path, Path],
) -> None:
    upper, target, outside = layers
    os.mknod(upper / "gone", stat.S_IFCHR, os.makedev(0, 0))
    (target / "gone").symlink_to(outside, target_is_directory=True)
    apply(upper, target)
    assert not os.path.lexists(target / "gone")
    assert (outside / "secret").read_text() == "outside\n"
