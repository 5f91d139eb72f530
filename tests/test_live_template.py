"""The served stack of the tests starts from one bootstrapped database per run (tests/live.py):
each copy is what `make run` would have made in its place."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from django.contrib.auth.hashers import PBKDF2PasswordHasher

from tests.live import ADMIN_PASSWORD, copy_template


def test_a_copy_is_owner_only_and_its_demo_project_works_under_its_own_root(
    tmp_path: Path,
) -> None:
    first = copy_template(tmp_path / "one" / "var", tmp_path / "one" / "workspaces")
    second = copy_template(tmp_path / "two" / "var", tmp_path / "two" / "workspaces")
    assert first == second and first.startswith("gov_")
    database = tmp_path / "two" / "var" / "governor.sqlite3"
    assert database.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "two" / "var").stat().st_mode & 0o777 == 0o700
    with closing(sqlite3.connect(database)) as copy:
        [(roots,)] = copy.execute("SELECT workspace_roots FROM governor_project "
                                  "WHERE slug = 'demo'").fetchall()
    assert json.loads(roots) == [str(tmp_path / "two" / "workspaces")]


def test_a_real_installation_hashes_passwords_with_djangos_default_not_the_tests_md5(
    tmp_path: Path,
) -> None:
    copy_template(tmp_path / "var", tmp_path / "workspaces")
    with closing(sqlite3.connect(tmp_path / "var" / "governor.sqlite3")) as copy:
        [(encoded,)] = copy.execute("SELECT password FROM auth_user "
                                    "WHERE username = 'admin'").fetchall()
    assert encoded.startswith("pbkdf2_sha256$")
    assert PBKDF2PasswordHasher().verify(ADMIN_PASSWORD, encoded)
