"""docs/outcomes.md's worked example, step by step: its probe over an analytics export, its
profile file, a delivery certified, observed before the window opens and after a week of new
data, the signed `achieved` terminal, and the export verified offline."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from governor.domain.outcomes import DAY_MS
from governor.models import Project
from governor.services import outcome_contracts as outcomes
from governor.verify import verify_export
from tests.api.test_export_and_verify import export_text
from tests.conftest import AgentClient
from verification.models import OutcomeContract

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "outcomes"
CONTRACT = {
    "objective": "Show the delivery estimate on the checkout page",
    "intent": {"constraints": ["keep the checkout API"], "assumptions": [], "non_goals": [],
               "ambiguities": []},
    "claims": [{"id": "estimate", "statement": "the checkout template shows the estimate",
                "importance": "critical", "verification": "deterministic",
                "check_ids": ["estimate-shown"]}],
    "checks": [{"id": "estimate-shown", "kind": "file_contains", "path": "checkout.html",
                "text": "delivery-estimate"}],
    "outcome_profile": "checkout-conversion",
}


@pytest.fixture
def data_dir(settings: Any) -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="outcome-data-", dir="/tmp"))  # noqa: S108
    directory.chmod(0o755)
    for name in ("conversion_probe.py", "checkouts.csv"):
        shutil.copy(EXAMPLE / name, directory / name)
        (directory / name).chmod(0o644)
    settings.GOVERNOR_OUTCOME_DATA_DIR = str(directory)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def test_the_worked_example_runs(agent: AgentClient, workspace: Path, project: Project,
                                 data_dir: Path) -> None:
    call_command("governor_profiles", "load", str(EXAMPLE / "profiles.yaml"), "--project",
                 project.slug)
    [view] = agent.get("/outcome-profiles").json()["profiles"]
    assert view["summary"].startswith("after delivery: conversion ≥ 0.031 between day 1 and "
                                      "day 7; correlational")
    session = agent.create_session(workspace)["id"]
    assert agent.post(f"/sessions/{session}/contracts", CONTRACT).status_code == 201
    (workspace / "checkout.html").write_text('<p class="delivery-estimate"></p>\n')
    verified = agent.post(f"/sessions/{session}/verify").json()
    assert verified["decision"] == "certified"
    assert "delivery-certified; outcome: observing" in verified["message"]

    first = agent.post(f"/sessions/{session}/outcome/observations").json()
    [observation] = first["observations"]
    assert first["status"] == "observing"
    assert observation["result"]["metrics"] == {"conversion": 0.027945, "error_rate": 0.002887}
    assert observation["result"]["sampleSize"] == 8660
    assert first["contract"]["baseline"]["metrics"]["conversion"] == 0.027945

    row = OutcomeContract.objects.get()
    assert row.started_at_ms is not None
    day2 = row.started_at_ms + 2 * DAY_MS
    shutil.copy(EXAMPLE / "checkouts-after.csv", data_dir / "checkouts.csv")
    os.utime(data_dir / "checkouts.csv", (day2 / 1000, day2 / 1000))  # the export's time
    assert outcomes.outcomes_observe_due(now=day2) == 1
    status = agent.get(f"/sessions/{session}/outcome").json()
    assert status["status"] == "achieved"
    assert "correlated with the certified delivery" in status["terminal"]["reason"]
    assert verify_export(export_text(agent, session).splitlines()).ok
