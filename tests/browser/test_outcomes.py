"""An outcome contract in a real browser: a certified delivery watching checkout conversion,
a reviewer presses Observe now twice (the probe's answer changes in between), sees each
observation on the server-drawn chart and the signed `achieved` terminal; axe-core finds no
violation on the page."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.api.test_contracts import readme_contract
from tests.browser import PEOPLE, Server, assert_accessible, log_in, screenshot
from tests.live import live_server
from tests.outcomes import Answers

pytestmark = pytest.mark.browser

PROFILE = {
    "id": "checkout-conversion", "description": "Share of checkouts that complete",
    "argv": ["/usr/bin/cat", "/outcome-data/answer.json"],
    "metrics": [{"name": "conversion", "unit": "ratio"}],
    "target": {"id": "conversion-up", "metric": "conversion", "operator": "gte",
               "value": 0.031},
}


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="outcome-data-", dir="/tmp"))  # noqa: S108
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def outcome_server(tmp_path_factory: pytest.TempPathFactory, data_dir: Path
                   ) -> Iterator[Server]:
    with live_server(tmp_path_factory.mktemp("outcomes"), worker=True,
                     extra_env={"GOVERNOR_OUTCOME_DATA_DIR": str(data_dir),
                                # no scheduled observation between the reviewer's two
                                "GOVERNOR_OUTCOME_TICK_SECONDS": "3600"}) as live, \
            live.client() as agent:
        live.manage("collectstatic", "--no-input", "-v", "0")
        live.manage("shell", "-c", PEOPLE)
        profiles = live.workspace_root.parent / "outcome-profiles.json"
        profiles.write_text(json.dumps({"outcome_profiles": [PROFILE]}))
        live.manage("governor_profiles", "load", str(profiles), "--project", "demo")
        live.manage("governor_project", "set", "demo", "--review-mode", "off")
        yield Server(live, agent)


def test_certify_observe_twice_and_see_the_chart_and_the_achieved_terminal(
        outcome_server: Server, data_dir: Path, page: Page) -> None:
    server = outcome_server
    workspace = server.live.workspace_root / "outcome"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    Answers(data_dir).metrics(0.028)
    session_id = server.agent.post("/sessions", json={
        "workspace": {"kind": "path", "path": str(workspace)}}).json()["id"]
    begun = server.agent.post(f"/sessions/{session_id}/contracts",
                              json=readme_contract(outcome_profile="checkout-conversion"))
    assert begun.status_code == 201, begun.text
    verified = server.agent.post(f"/sessions/{session_id}/verify").json()
    assert "delivery-certified; outcome: observing" in verified["message"], verified

    log_in(page, server, "rita", "rita-password-1")
    page.goto(f"{server.url}/sessions/{session_id}/")
    panel = page.locator("#outcome")
    expect(panel).to_contain_text("after delivery: conversion ≥ 0.031")
    expect(page.locator("#outcome-status")).to_have_text("observing")
    Answers(data_dir).metrics(0.02)
    expect(page.get_by_role("button", name="Observe now")).to_have_class("secondary")
    page.get_by_role("button", name="Observe now").click()
    # A worker runs the probe; the panel updates itself when it has answered.
    expect(panel.locator("table")).to_contain_text("conversion = 0.02", timeout=30_000)
    expect(page.locator("#outcome-status")).to_have_text("observing")
    Answers(data_dir).metrics(0.04)
    page.get_by_role("button", name="Observe now").click(timeout=30_000)
    expect(page.locator("#outcome-status")).to_have_text("achieved", timeout=30_000)
    expect(page.locator("#outcome-terminal")).to_contain_text("correlated with")
    chart = panel.locator("svg[role=img]")
    expect(chart).to_be_visible()
    expect(chart.locator("rect[width='10']")).to_have_count(1)   # 0.02: did not hold
    expect(chart.locator("circle")).to_have_count(1)             # 0.04: held
    expect(chart).to_contain_text("target conversion-up: 0.031 (dashed)")
    chart_box = chart.bounding_box()
    assert chart_box is not None
    for tick in chart.locator("text[text-anchor='end']").all()[:2]:  # the y-axis labels
        tick_box = tick.bounding_box()
        assert tick_box is not None and tick_box["x"] >= chart_box["x"]  # not clipped
    assert_accessible(page)
    screenshot(page, "outcome-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "outcome-390")
    assert server.agent.get(f"/sessions/{session_id}/outcome").json()["status"] == "achieved"
