"""The live parts of the reviewer pages (the inbox list, the timeline's runs) wait on a
notification sent when the deciding transaction commits, not on a timer: a headless Chromium
sees a change well within the old 5 s refresh.

The server runs with Redis as its broker, as in production, so its safety-net re-check is
GOVERNOR_WAIT_RECHECK_MS = 30 s: a page that shows a change sooner was woken by the notification.
The changes come from elsewhere: the agent API (in either of the server's two web processes)
and a Celery worker process finishing a run."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis
from playwright.sync_api import Page, Request

from tests.browser import PEOPLE, Server, assert_accessible, log_in, screenshot
from tests.integration.test_worker import celery_worker
from tests.live import REDIS_URL, live_server

pytestmark = pytest.mark.redis

QUICKLY = 3  # seconds from the commit to the page (a loaded 2-CPU machine included); the timer
# this replaces waited up to 5, and the safety-net recheck with Redis is 30
PROFILES = {"profiles": [{"id": "pause", "description": "sleeps for 2 s",
                          "argv": ["/bin/sh", "-c", "sleep 2"], "required": False}]}

# Records, in the page, the moment the element `selector` appears (or disappears): the
# browser's clock is the machine's, as is the test's and the server's.
WATCH = """([selector, present]) => {
  window.seenAt = null;
  const check = () => {
    if (window.seenAt === null && (document.querySelector(selector) !== null) === present) {
      window.seenAt = Date.now();
    }
  };
  new MutationObserver(check).observe(document.body,
                                      {subtree: true, childList: true, characterData: true});
  check();
}"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    redis.Redis.from_url(REDIS_URL).flushdb()
    tmp = tmp_path_factory.mktemp("live-pages")
    with live_server(tmp, extra_env={"GOVERNOR_BROKER_URL": REDIS_URL}) as live, \
            live.client() as agent:
        live.manage("collectstatic", "--no-input", "-v", "0")
        live.manage("shell", "-c", PEOPLE)
        profiles = tmp / "profiles.json"
        profiles.write_text(json.dumps(PROFILES))
        live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        yield Server(live, agent)


def watch(page: Page, selector: str, *, present: bool) -> None:
    page.evaluate(WATCH, [selector, present])


def seen_at(page: Page) -> float:
    page.wait_for_function("window.seenAt !== null", timeout=15_000)
    return float(page.evaluate("window.seenAt")) / 1000


def live_requests(page: Page) -> list[Request]:
    sent: list[Request] = []
    page.on("request", lambda request: sent.append(request) if "/live?" in request.url
            else None)
    return sent


def test_the_inbox_shows_a_new_and_a_withdrawn_proposal_within_a_moment(
    served: Server, page: Page
) -> None:
    log_in(page, served, "rita", "rita-password-1")
    with page.expect_request("**/reviews/live?*"):
        page.reload()
    sent = live_requests(page)
    page.wait_for_timeout(1500)
    assert sent == []  # nothing changed: the one request waits, no timer asks again

    watch(page, "#inbox-list a.objective-link", present=True)
    started = time.time()
    session_id, review_id = served.propose()
    arrived = seen_at(page) - started
    assert page.locator(f"#open-{review_id}").is_visible()
    assert arrived < QUICKLY, arrived

    watch(page, f"#open-{review_id}", present=False)
    started = time.time()
    assert served.agent.delete(f"/sessions/{session_id}/review").status_code == 200
    withdrawn = seen_at(page) - started
    assert withdrawn < QUICKLY, withdrawn
    assert page.locator("#inbox-status").text_content() == "0 proposals waiting"
    assert_accessible(page)
    print(f"inbox: a proposal shown {arrived * 1000:.0f} ms after it was sent, "
          f"its withdrawal {withdrawn * 1000:.0f} ms after")


def test_the_timeline_shows_a_run_finishing_within_a_moment(served: Server, page: Page) -> None:
    workspace = served.live.workspace_root / "run-watched"
    workspace.mkdir()
    session_id = served.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    log_in(page, served, "rita", "rita-password-1")
    with celery_worker(served.live.env):
        queued = served.agent.post(f"/sessions/{session_id}/code-verifications",
                                   json={"profile": "pause"})
        assert queued.status_code == 202, queued.text
        run_id = queued.json()["id"]
        with page.expect_request(f"**/sessions/{session_id}/live?*"):
            page.goto(f"{served.url}/sessions/{session_id}/")
        watch(page, "#runs .badge.ok", present=True)
        done = served.agent.get(f"/code-verifications/{run_id}", params={"wait": 60}).json()
        assert done["state"] == "finished" and done["result"]["passed"] is True, done
        shown = seen_at(page)
    finished = float(served.shell(
        "from verification.models import VerificationRun\n"
        f"print(VerificationRun.objects.get(pk={run_id!r}).finished_at.timestamp())"
    ).split()[-1])
    delay = shown - finished
    assert delay < QUICKLY, delay
    runs = page.locator("#runs")
    assert "queued or running" not in (runs.text_content() or "")
    # the run's event, and before it the session's reference (rules §17.1), which is written
    # just before a session's first governor event
    assert "2 events appended since this page was loaded" in (runs.text_content() or "")
    assert_accessible(page)
    screenshot(page, "timeline-live-run")  # var/screenshots, to look at
    print(f"timeline: a finished run shown {delay * 1000:.0f} ms after it committed")


def test_a_signed_out_page_stops_waiting_and_goes_to_the_login_page(
    served: Server, page: Page
) -> None:
    log_in(page, served, "rita", "rita-password-1")
    with page.expect_request("**/reviews/live?*"):
        page.reload()
    page.context.clear_cookies()  # signed out elsewhere; the live part's next ask is refused
    served.propose()  # wakes the waiting request, whose answer still shows the change
    page.wait_for_url("**/accounts/login/**", timeout=15_000)
