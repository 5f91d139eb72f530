"""Honest status (issue 15, item 5): the coverage badge carries its findings — "ready" never
stands alone above warnings that the checks may not prove the claims."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.models import Project
from reviews.models import Review, Stage
from tests.conftest import AgentClient
from tests.pages import press, propose, reviewer_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def test_the_coverage_badge_carries_the_warnings(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    _, intent = propose(agent, workspace)
    assert press(rita, f"/reviews/{intent.pk}/", "Approve").status_code == 302
    evidence = Review.objects.get(session_id=intent.session_id, stage=Stage.EVIDENCE)
    html = rita.get(f"/reviews/{evidence.pk}/").content.decode()
    warnings = [finding for finding in evidence.proposal["coverage"]["findings"]
                if finding["severity"] == "warning"]
    assert len(warnings) == 3  # structural, presence only, exact literal
    badges = re.findall(r'<a href="#coverage-findings" class="badge (\w+)">([^<]*)</a>', html)
    assert badges == [("warn", "ready · 3 warnings")] * 2  # the plan's facts and the assessment
    assert '<span class="badge ok">ready</span>' not in html
    assert 'id="coverage-findings"' in html
