"""rules §19.2 for people: each gated change has a page reviewers open from the inbox and the
reliability page (base and head, the diff, what proved each rule, the findings), and the
reliability page and its downloads count gated changes by verdict, rule and mode."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.models import Membership, Project, Role
from tests.api.test_gate import gate, gated  # noqa: F401 - the gate token fixture
from tests.conftest import AgentClient
from tests.pages import reviewer_client

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]
NO_PROFILES = {"calc.py": "x = 1\n", ".governor-gate.toml": 'protected_paths = ["tests/**"]\n'}


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def two_changes(client: AgentClient) -> tuple[str, str]:
    honest = gated(client, {"calc.py": "x = 2\n"}, base=NO_PROFILES)
    cheat = gated(client, {"tests/test_x.py": "def test_x():\n    pass\n"}, base=NO_PROFILES,
                  observe=True)
    assert honest.status_code == cheat.status_code == 201
    return honest.json()["id"], cheat.json()["id"]


def test_rule_19_2_a_gated_change_has_a_page_with_its_diff_proofs_and_findings(
        gate: AgentClient, rita: Client) -> None:  # noqa: F811
    honest, cheat = two_changes(gate)
    page = rita.get(f"/projects/acme/changes/{cheat}/").content.decode()
    assert "not certified" in page and "observe mode" in page
    assert "protected-paths" in page and "tests/test_x.py (added)" in page
    assert "diff-unified" in page and ">test_x<" in page  # the diff, as the delivery page shows it
    assert "1" * 40 in page and "2" * 40 in page  # base and head commits
    page = rita.get(f"/projects/acme/changes/{honest}/").content.decode()
    assert "certified" in page and "none of the 1 changed paths is protected" in page
    inbox = rita.get("/reviews/").content.decode()
    assert all(f"/projects/acme/changes/{change}/" in inbox for change in (honest, cheat))
    listing = rita.get("/projects/acme/changes/").content.decode()
    assert listing.count("/projects/acme/changes/") >= 2


def test_rule_19_2_the_reliability_page_counts_gated_changes_by_verdict_rule_and_mode(
        gate: AgentClient, rita: Client) -> None:  # noqa: F811
    two_changes(gate)
    summary = rita.get("/projects/acme/reliability", {"format": "json"}).json()
    assert summary["gate"] == {"total": 2, "certified": 1, "not_certified": 1, "running": 0,
                               "observe": 1, "by_rule": {"protected-paths": 1}}
    assert "gate,protected-paths,not_certified,1" in rita.get(
        "/projects/acme/reliability", {"format": "csv"}).content.decode()
    page = rita.get("/projects/acme/reliability").content.decode()
    assert "Changes gated at the pull request" in page and "/projects/acme/changes/" in page


def test_rule_19_2_another_projects_reviewer_cannot_open_a_change(
        gate: AgentClient) -> None:  # noqa: F811
    honest, _ = two_changes(gate)
    other = Project.objects.create(slug="other", name="Other")
    user = get_user_model().objects.create_user("olga", "olga@example.com", "olga-password-1")
    Membership.objects.create(user=user, project=other, role=Role.REVIEWER)
    client = reviewer_client("olga", "olga-password-1")
    assert client.get(f"/projects/acme/changes/{honest}/").status_code == 404
    assert client.get(f"/projects/other/changes/{honest}/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_rule_19_2_the_metrics_count_gated_changes_by_verdict_rule_and_mode(
        gate: AgentClient, settings: Any) -> None:  # noqa: F811
    settings.GOVERNOR_METRICS_TOKEN = "metrics-token-for-this-test-0123456789"  # noqa: S105
    two_changes(gate)
    text = Client().get("/metrics", headers={
        "Authorization": f"Bearer {settings.GOVERNOR_METRICS_TOKEN}"}).content.decode()
    lines = [line for line in text.splitlines()
             if line.startswith("governor_gated_changes_total{") and 'project="acme"' in line]
    assert any('mode="enforce"' in line and 'verdict="certified"' in line
               for line in lines), lines
    assert any('mode="observe"' in line and 'rule="protected-paths"' in line
               and 'verdict="not-certified"' in line for line in lines), lines
