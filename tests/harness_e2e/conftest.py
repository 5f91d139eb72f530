"""The real DeepSeek Harness (pinned in install.sh: dsh 0.1.0-rc.8, Node 24.22.3, the Claude-Code
hooks bridge 0.0.1-rc.5), installed once and cached outside the checkout, against one real
governor server (tests/live.py) for this package."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import PEOPLE
from tests.browser.conftest import browser, playwright  # noqa: F401 - this package's own
from tests.harness_e2e.rig import Harness, install
from tests.live import Live, live_server


@pytest.fixture(scope="session")
def harness_cache() -> Path:
    return install()


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    with live_server(tmp_path_factory.mktemp("harness-server")) as server:
        server.manage("collectstatic", "--no-input", "-v", "0")
        server.manage("shell", "-c", PEOPLE)
        yield server


@pytest.fixture
def review_off(live: Live) -> None:
    live.set_review_mode("off")


@pytest.fixture
def review_required(live: Live) -> Iterator[None]:
    live.set_review_mode("required")
    yield
    live.set_review_mode("off")


@pytest.fixture
def workspace(live: Live, request: pytest.FixtureRequest) -> Path:
    path = live.workspace_root / request.node.name[:60]
    path.mkdir()
    return path


@pytest.fixture
def harness(harness_cache: Path, tmp_path: Path) -> Harness:
    """A private HOME whose headless profile has the governor plugin mounted."""
    harness = Harness(harness_cache, tmp_path / "home")
    harness.home.mkdir()
    harness.create_profile()
    return harness
