"""The diff a reviewer reads in a real browser (issue 28 item 3): a file list with counts and
jump links, unified and side-by-side views with line numbers and marked lines, Pygments
highlighting, renames, large files collapsed, binaries by size, a file of a tree as a page; and
a comment on a diff line that reaches the agent with the revision request, bound into the
decision's receipt and shown in the next round as answered or not. axe-core finds no
violation in any of these states."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.api.test_contracts import readme_contract
from tests.browser import Server, assert_accessible, log_in, screenshot
from tests.browser.test_delivery import deliveries  # noqa: F401 - the fixture

pytestmark = pytest.mark.browser

MODULE = 'def greet(name):\n    """Say hello."""\n    return "Hello, " + name\n'
MOVED = "".join(f"moved line {index}\n" for index in range(30))
BIG = "".join(f"row {index}\n" for index in range(400))


def workspace_with_work(server: Server, name: str) -> Path:
    workspace = server.live.workspace_root / name
    workspace.mkdir()
    (workspace / "README.md").write_text("# Demo\n\nA small demo package.\n")
    (workspace / "greet.py").write_text(MODULE)
    (workspace / "old_name.txt").write_text(MOVED)
    (workspace / "logo.png").write_bytes(b"\x89PNG\0\0\0\x01")
    (workspace / "big.txt").write_text(BIG)
    return workspace


def do_the_work(workspace: Path) -> None:
    (workspace / "README.md").write_text(
        "# Demo\n\nA small demo package.\n\n## Install\n\n    pip install demo\n")
    (workspace / "greet.py").write_text(MODULE.replace('"Hello, " + name', 'f"Hello, {name}!"'))
    (workspace / "old_name.txt").rename(workspace / "new_name.txt")
    (workspace / "logo.png").write_bytes(b"\x89PNG\0\0\0\x02\x03")
    (workspace / "big.txt").write_text(BIG.upper())


def delivered_work(server: Server, name: str) -> tuple[str, str, Path]:
    workspace = workspace_with_work(server, name)
    session_id = server.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    begun = server.agent.post(f"/sessions/{session_id}/contracts", json=readme_contract())
    assert begun.status_code == 201, begun.text
    do_the_work(workspace)
    server.agent.post(f"/sessions/{session_id}/turn-stop")
    review = server.review(session_id)
    assert review["stage"] == "delivery", review
    return session_id, review["id"], workspace


def test_the_delivered_diff_lists_files_and_shows_them_unified_and_side_by_side(
        deliveries: Server, page: Page) -> None:  # noqa: F811 - the fixture
    server = deliveries
    _, review_id, _ = delivered_work(server, "diff-views")
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    changes = page.locator("#changes")
    expect(changes).to_contain_text("5 files changed")
    files = changes.locator("table.file-list")
    expect(files).to_contain_text("old_name.txt → new_name.txt")  # the same blob: a rename
    expect(files.get_by_role("row").filter(has_text="greet.py")).to_contain_text("+1 −1")
    expect(changes).to_contain_text("8 B → 9 B — binary")
    changes.get_by_role("link", name="greet.py", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"#file-\d+$"))
    greet = page.locator("li.change", has_text="greet.py").first
    added = greet.locator("tr.line-added")
    expect(added).to_have_count(1)
    expect(added.locator("td.mark")).to_contain_text("added")  # marked, not only coloured
    expect(added.locator("td.num").nth(1)).to_have_text(re.compile(r"^\s*3"))
    expect(greet.locator("tr.line-removed td.code .k")).to_have_text("return")  # Pygments
    big = page.locator("li.change", has_text="big.txt").first
    expect(big.locator("table.diff")).not_to_be_visible()  # a large change is collapsed
    assert_accessible(page)
    screenshot(page, "diff-unified-1280")
    big.get_by_text(re.compile("^Show the diff")).click()
    expect(big.locator("table.diff")).to_be_visible()

    page.get_by_role("link", name="side by side").click()
    expect(page).to_have_url(re.compile(r"diff=split"))
    split = page.locator("li.change", has_text="greet.py").first.locator("table.diff-split")
    expect(split.locator("td.code.line-removed")).to_contain_text('"Hello, " + name')
    expect(split.locator("td.code.line-added")).to_contain_text('f"Hello, {name}!"')
    assert_accessible(page)
    screenshot(page, "diff-split-1280")


def test_a_file_of_a_tree_opens_as_a_page_with_line_anchors_and_a_separate_download(
        deliveries: Server, page: Page) -> None:  # noqa: F811
    server = deliveries
    _, review_id, _ = delivered_work(server, "file-view")
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    page.locator("li.change h3").filter(has_text="greet.py").get_by_role(
        "link", name="greet.py").click()
    expect(page.get_by_role("heading", name="greet.py")).to_be_visible()
    expect(page.locator("#L3 td.code")).to_contain_text('return f"Hello, {name}!"')
    expect(page.locator("#L1 td.code .k")).to_have_text("def")
    page.locator("#L3 a").click()
    expect(page).to_have_url(re.compile("#L3$"))
    download = page.get_by_role("link", name="Download the file")
    with page.expect_download() as fetched:
        download.click()
    assert Path(fetched.value.path()).read_text().endswith('f"Hello, {name}!"\n')
    assert_accessible(page)
    screenshot(page, "file-view-1280")


def test_a_comment_on_a_diff_line_reaches_the_agent_with_the_revision_request(
        deliveries: Server, page: Page) -> None:  # noqa: F811
    server = deliveries
    session_id, review_id, workspace = delivered_work(server, "diff-comment")
    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/reviews/{review_id}/")
    page.get_by_role("link", name="Comment on line 3 of greet.py").click()
    form = page.locator("#comment-form")
    form.get_by_label("Comment on line 3 of greet.py").fill("Keep the comma-free greeting.")
    expect(form).to_contain_text("Every reviewer of this project sees it")
    assert_accessible(page)
    form.get_by_role("button", name="Add comment").click()
    expect(page.locator("tr.line-comment")).to_contain_text("Keep the comma-free greeting.")
    assert_accessible(page)
    screenshot(page, "diff-comment-1280")
    page.get_by_label("Comment for the agent").fill("See my comment on greet.py.")
    page.get_by_role("button", name="Request revision").click()
    expect(page.get_by_text("A revision was requested.")).to_be_visible()

    review = server.review(session_id)  # what the agent reads
    assert review["status"] == "revision-requested"
    assert review["feedback"] == "See my comment on greet.py."
    assert [(c["path"], c["side"], c["line"], c["body"]) for c in review["comments"]] == [
        ("greet.py", "new", 3, "Keep the comma-free greeting.")]
    events = server.agent.get(f"/sessions/{session_id}/events").json()["events"]
    decided = [event for event in events if event["type"] == "reliability/delivery-review"]
    assert decided[-1]["data"]["commentsCount"] == 1
    assert decided[-1]["data"]["commentsReceipt"].startswith("sha256:")

    (workspace / "README.md").write_text("# Demo\n\n## Install\n\n    pip install demo\n")
    server.agent.post(f"/sessions/{session_id}/turn-stop")
    second = server.review(session_id)
    assert second["stage"] == "delivery" and second["status"] == "pending", second
    page.goto(f"{server.url}/reviews/{second['id']}/")
    earlier = page.locator(".round-comments")
    expect(earlier).to_contain_text("Keep the comma-free greeting.")
    expect(earlier.locator(".badge")).to_have_text("not answered")  # greet.py is unchanged
    assert_accessible(page)
