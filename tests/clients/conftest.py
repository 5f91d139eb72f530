"""The agent-side client (clients/python) against a real server: one gunicorn server from
tests/live.py for this package, the client imported from its source tree and its CLI run as
`python -m governor_client` — so `make test` needs no extra install step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live import Live, free_port, live_server

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("client-server")) as server:
        yield server


@pytest.fixture(scope="session")
def live_with_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    """A server with its Celery worker, for trusted verifier runs (bubblewrap sandbox)."""
    with live_server(tmp_path_factory.mktemp("worker-server"), worker=True) as server:
        server.set_review_mode("off")
        yield server


@pytest.fixture
def review_off(live: Live) -> Iterator[None]:
    live.set_review_mode("off")
    yield


@pytest.fixture
def review_required(live: Live) -> Iterator[None]:
    live.set_review_mode("required")
    yield


@pytest.fixture(autouse=True)
def user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's cache directory (where snapshot mode keeps its git repository) of each test's
    own, handed on to every client process the test starts."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache


_workspaces = iter(range(1_000_000))


@pytest.fixture
def workspace(live: Live, request: pytest.FixtureRequest) -> Path:
    """A fresh directory under the demo project's workspace roots."""
    path = live.workspace_root / f"{request.node.name[:60]}-{next(_workspaces)}"
    path.mkdir()
    return path


def unreachable_url() -> str:
    """A loopback address nothing listens on."""
    return f"http://127.0.0.1:{free_port()}"


def agent_env(live: Live, *, url: str | None = None, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("GOVERNOR_", "CLAUDE_"))}
    return {**env, "GOVERNOR_URL": url or live.url, "GOVERNOR_TOKEN": live.token,
            "PYTHONPATH": str(CLIENT_SRC), **extra}


def cli(live: Live, workspace: Path, *args: str, stdin: str | None = None,
        url: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", *args], cwd=workspace, input=stdin,
        env=agent_env(live, url=url), capture_output=True, text=True, timeout=120, check=False)


def cli_json(live: Live, workspace: Path, *args: str, stdin: str | None = None) -> Any:
    result = cli(live, workspace, *args, stdin=stdin)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def hook(live: Live, payload: dict[str, Any], *, agent: str = "claude-code",
         url: str | None = None, cwd: Path | None = None,
         **env: str) -> dict[str, Any] | None:
    """Run the hook command as the coding agent would: the event on stdin, the decision (if
    any) on stdout, and exit status 0."""
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "hook", agent], input=json.dumps(payload),
        cwd=cwd or payload["cwd"], env=agent_env(live, url=url, **env), capture_output=True,
        text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None
