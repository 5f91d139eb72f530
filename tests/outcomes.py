"""Outcome contracts in tests: the profile, the probe's answers (a file the test writes in the
operator's data directory, which every probe sees read-only at /outcome-data) and a session
whose delivery is certified."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from governor.domain.outcomes import DAY_MS, HOUR_MS, validate_outcome_profile
from governor.lib.clock import now_ms
from governor.models import Project
from governor.services.profiles import profile_store
from tests.api.test_contracts import readme_contract
from tests.conftest import AgentClient
from verification.models import OutcomeProfile

PROFILE = {
    "id": "checkout-conversion", "description": "Share of checkouts that complete",
    "argv": ["/usr/bin/cat", "/outcome-data/answer.json"],
    "metrics": [{"name": "conversion", "unit": "ratio"}],
    "target": {"id": "conversion-up", "metric": "conversion", "operator": "gte",
               "value": 0.031},
    "not_before_ms": DAY_MS, "observe_every_ms": HOUR_MS,
}


class Answers:
    """The probe's answer: what the test writes, the probe prints."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "answer.json"

    def write(self, text: str) -> None:
        self.path.write_text(text)
        self.path.chmod(0o644)

    def metrics(self, conversion: float, *, as_of: int | None = None) -> None:
        self.write(json.dumps({"dataAsOf": as_of or now_ms(),
                               "metrics": {"conversion": conversion}}))


def answers_in(settings: Any) -> Iterator[Answers]:
    """The probe's answers (for a fixture to yield from); every probe reads them at
    /outcome-data/answer.json."""
    directory = Path(tempfile.mkdtemp(prefix="outcome-data-", dir="/tmp"))  # noqa: S108
    directory.chmod(0o755)  # the sandbox's user reads it
    settings.GOVERNOR_OUTCOME_DATA_DIR = str(directory)
    yield Answers(directory)
    shutil.rmtree(directory, ignore_errors=True)


def outcome_profile_saved(project: Project) -> dict[str, Any]:
    profile_store(model=OutcomeProfile, project=project,
                  validated=validate_outcome_profile(PROFILE))
    return PROFILE


def certified(agent: AgentClient, workspace: Path, answers: Answers,
              baseline: float = 0.028) -> dict[str, Any]:
    """A session whose README contract, watching the outcome, is certified."""
    answers.metrics(baseline)
    session = agent.create_session(workspace)
    (workspace / "README.md").write_text("# Tool\n\n## Install\n")
    begun = agent.post(f"/sessions/{session['id']}/contracts",
                       readme_contract(outcome_profile="checkout-conversion"))
    assert begun.status_code == 201, begun.content
    verified = agent.post(f"/sessions/{session['id']}/verify").json()
    assert verified["decision"] == "certified", verified
    session["verify"] = verified
    return session
