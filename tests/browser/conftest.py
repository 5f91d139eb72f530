"""A real server and a real browser for the reviewer flows.

pytest-django's `live_server` cannot be used here: it empties the database between tests with
DELETE, and the events table's append-only triggers refuse that on SQLite. So the server is
`tests.live.live_server` — gunicorn started by `manage.py governor_serve` in a subprocess against
its own SQLite database under a temporary GOVERNOR_VAR_DIR, migrated and bootstrapped by the real
management commands. Reviewers and projects are created with `manage.py shell -c`; proposals
through the agent HTTP API, as an agent makes them.

The browser: one sync Playwright driver and one headless Chromium per package (this one and
tests/harness_e2e import them), stopped when a process's tests leave the package. Between its
calls the sync driver marks its event loop as running in the main thread, and Django refuses
database access there as if from async code: under pytest-xdist an in-process test may follow
a browser test in the same process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from tests.browser import CHROMIUM, CHROMIUM_ARGS, DESKTOP, PEOPLE, SIGNED_APPROVALS, Server
from tests.live import live_server


@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    """A second sync driver refuses to start in this thread while one is alive."""
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """Debian's Chromium, headless (Playwright cannot download its own browser here)."""
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with live_server(tmp_path_factory.mktemp("browser")) as live, live.client() as agent:
        live.manage("collectstatic", "--no-input", "-v", "0")
        live.manage("shell", "-c", PEOPLE)
        yield Server(live, agent)


@pytest.fixture(scope="session")
def localhost_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server reached as `localhost`, as passkeys need (an IP address cannot be a WebAuthn
    relying-party id), whose demo project requires signed approvals."""
    with live_server(tmp_path_factory.mktemp("localhost"), host="localhost") as live, \
            live.client() as agent:
        live.manage("collectstatic", "--no-input", "-v", "0")
        live.manage("shell", "-c", PEOPLE + SIGNED_APPROVALS)
        yield Server(live, agent)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=DESKTOP)
    yield context.new_page()
    context.close()
