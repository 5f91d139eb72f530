"""README.md's first command, `make run`, as written: from a directory that stands for the
checkout (tests/docs/walkthrough.py), with the settings that keep it apart from this checkout's
own instance (its var directory, workspace root, address and the filesystem broker, so that it
takes no Redis database of another's), it migrates, bootstraps, prints what README says it
prints, and serves the API to the agent token it printed, with a worker, until it is stopped."""

from __future__ import annotations

import re
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import httpx

from tests.docs.markdown import fenced_blocks
from tests.docs.walkthrough import base_env, checkout, commands
from tests.live import ROOT, free_port, stop_process_group


def test_make_run_serves_and_prints_the_login_the_token_and_the_broker(tmp_path: Path) -> None:
    (two,) = [block for block in fenced_blocks(ROOT / "README.md")
              if block.heading == "Two commands"]
    assert "make run" in commands(two)
    here = checkout(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**base_env(), "GOVERNOR_VAR_DIR": str(tmp_path / "var"),
           "GOVERNOR_DEMO_WORKSPACE_ROOT": str(tmp_path / "workspaces"),
           "GOVERNOR_BIND": f"127.0.0.1:{port}", "GOVERNOR_PUBLIC_URL": url,
           "GOVERNOR_BROKER_URL": "filesystem://", "GOVERNOR_ADMIN_PASSWORD": "make-run-pass-1"}
    log = (tmp_path / "make-run.log").open("w+")
    process = subprocess.Popen(["make", "run"], cwd=here, env=env,  # noqa: S607
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, ready = time.monotonic() + 120, False
        while not ready and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            with suppress(httpx.HTTPError):
                ready = httpx.get(f"{url}/readyz", timeout=5).status_code == 200
        printed = Path(log.name).read_text()
        assert ready, printed
        assert "admin login:  admin / (from GOVERNOR_ADMIN_PASSWORD)" in printed
        token = re.search(r"agent token:\s+(gov_\S+)", printed)
        assert token, printed
        assert "broker: filesystem://" in printed
        workspaces = tmp_path / "workspaces"
        assert f"Agents of the demo project may bind workspaces under {workspaces}" in printed
        answer = httpx.get(f"{url}/api/v1/project", timeout=10,
                           headers={"Authorization": f"Bearer {token.group(1)}"})
        assert answer.status_code == 200, answer.text
        assert answer.json()["slug"] == "demo"
        assert httpx.get(f"{url}/api/v1/docs", timeout=10).status_code == 200  # README: the API
    finally:
        stop_process_group(process)
        log.close()
    assert (tmp_path / "var" / "governor.sqlite3").is_file()  # its own database, not this one's
