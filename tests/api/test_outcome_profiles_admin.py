"""Operators configure outcome profiles in the admin: every field checked by the outcome rules
(a refusal names the field), the network choice said plainly, another project's operator and a
reviewer kept out."""

from __future__ import annotations

from typing import Any

from governor.models import Project
from tests.api.test_profiles import admin_client
from verification.models import OutcomeProfile

ADD = "/admin/verification/outcomeprofile/add/"


def form(project: Project, **overrides: Any) -> dict[str, Any]:
    return {"project": project.pk, "profile_id": "checkout-conversion",
            "description": "Share of checkouts that complete",
            "argv": '["/usr/bin/cat", "/outcome-data/answer.json"]', "env": "{}",
            "timeout_ms": "120000", "metrics": '[{"name": "conversion", "unit": "ratio"}]',
            "target": '{"id": "conversion-up", "metric": "conversion", "operator": "gte", '
                      '"value": 0.031}',
            "guardrails": "[]", "minimum_sample_size": "", "max_data_age_ms": "86400000",
            "not_before_ms": "0", "deadline_ms": "604800000", "observe_every_ms": "3600000",
            "attribution": "correlational", "network": "none",
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0", **overrides}


def test_rule_1_an_operator_adds_an_outcome_profile_in_the_admin(project: Project) -> None:
    client = admin_client(project, "operator")
    page = client.get(ADD).content.decode()
    assert "it can then reach anything the worker can" in page  # network: host, said plainly
    response = client.post(ADD, form(project))
    assert response.status_code == 302, response.content.decode()[:3000]
    profile = OutcomeProfile.objects.get()
    assert profile.receipt.startswith("sha256:") and profile.network == "none"
    assert profile.versions.get().receipt == profile.receipt


def test_rule_1_the_admin_refuses_an_undeclared_target_metric_naming_it(
        project: Project) -> None:
    client = admin_client(project, "operator")
    response = client.post(ADD, form(project, target='{"id": "t", "metric": "revenue", '
                                                     '"operator": "gte", "value": 1}'))
    assert response.status_code == 200
    assert "target/metric" in response.content.decode()
    assert not OutcomeProfile.objects.exists()


def test_rule_1_a_reviewer_who_is_not_an_operator_cannot_manage_outcome_profiles(
        project: Project) -> None:
    client = admin_client(project, "reviewer")
    assert client.get("/admin/verification/outcomeprofile/").status_code == 403
    assert client.post(ADD, form(project)).status_code == 403
    assert not OutcomeProfile.objects.exists()
