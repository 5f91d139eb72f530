"""Issue 25, finding 6: the served stack's open-files limit and the connection limit that fits
it (governor/serving.py), and the serving settings refused by name. Each runs in a process of
its own, whose limits it may lower."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from governor.serving import RESERVED_FILES
from tests.live import ROOT


def run(code: str, soft: int, **env: str) -> subprocess.CompletedProcess[str]:
    prologue = ("import resource\n"
                "_, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
                f"resource.setrlimit(resource.RLIMIT_NOFILE, (min({soft}, hard), hard))\n")
    return subprocess.run(  # noqa: S603
        [sys.executable, "-c", prologue + code], cwd=ROOT, capture_output=True, text=True,
        timeout=60, check=False, env={**os.environ, **env})


def test_start_up_raises_the_soft_open_files_limit_to_the_hard_one() -> None:
    result = run("from governor.serving import raise_open_files_limit\n"
                 "soft, hard = raise_open_files_limit()\n"
                 "assert (soft, hard) == resource.getrlimit(resource.RLIMIT_NOFILE)\n"
                 "print(soft == hard)", soft=256)
    assert result.stdout.strip() == "True", result.stdout + result.stderr


def test_a_web_process_holds_no_more_connections_than_its_open_files_limit_leaves_room_for(
) -> None:
    code = "from governor.serving import connection_limit\nprint(connection_limit())"
    assert run(code, soft=1024).stdout.strip() == str(1024 - RESERVED_FILES)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    default = min(4096, min(8192, hard) - RESERVED_FILES)  # GOVERNOR_MAX_CONNECTIONS: 4096
    assert run(code, soft=8192).stdout.strip() == str(default)
    assert run(code, soft=8192, GOVERNOR_MAX_CONNECTIONS="100").stdout.strip() == "100"
    refused = run(code, soft=RESERVED_FILES + 10)
    assert refused.returncode != 0
    assert f"the open-files limit (RLIMIT_NOFILE) is {RESERVED_FILES + 10}" in refused.stderr


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("GOVERNOR_HEADER_TIMEOUT_SECONDS", "0", "expected 1..600"),
    ("GOVERNOR_BODY_TIMEOUT_SECONDS", "soon", "expected an integer"),
    ("GOVERNOR_KEEP_ALIVE_SECONDS", "0", "expected 1..3600"),
    ("GOVERNOR_MAX_CONNECTIONS", "8", "expected 16..1000000"),
])
def test_a_bad_serving_setting_is_refused_naming_it(name: str, value: str, reason: str) -> None:
    result = run("import django\ndjango.setup()", soft=1024,
                 DJANGO_SETTINGS_MODULE="governor.settings", **{name: value})
    assert result.returncode != 0
    assert f"{name}=" in result.stderr and reason in result.stderr, result.stderr
