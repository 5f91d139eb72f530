"""Admin for operators (issue 15, item 9): every project and verifier-profile setting says what
it does, and the webhook secret is a password field that is never shown again."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from governor.models import Project
from tests.pages.test_admin_operations import operator, submit  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

SECRET = "whsec-do-not-show-9f2c"
PROJECT_FIELDS = ("slug", "max_attempts", "max_checks", "max_file_bytes", "review_mode",
                  "delivery_review", "unattended_evidence",
                  "authoring_mode", "review_ttl_seconds", "required_approvals",
                  "workspace_roots", "webhook_url", "webhook_secret")


def help_of(html: str, field: str) -> str:
    marker = f'id="id_{field}_helptext"'
    assert marker in html, f"{field} has no help text"
    return html.split(marker)[1].split("</div>")[0]


def test_every_project_setting_has_help_and_the_secret_is_a_password_field(
    operator: Client, project: Project  # noqa: F811
) -> None:
    Project.objects.filter(pk=project.pk).update(webhook_secret=SECRET)
    url = f"/admin/governor/project/{project.pk}/change/"
    html = operator.get(url).content.decode()
    for field in PROJECT_FIELDS:
        assert help_of(html, field).strip()
    assert "every contract waits for a person twice" in help_of(html, "review_mode")
    assert "The agent's token owner never counts" in help_of(html, "required_approvals")
    assert "The careful choice is operator" in help_of(html, "unattended_evidence")
    assert 'type="password" name="webhook_secret"' in html and SECRET not in html

    selects = {"review_mode": project.review_mode, "authoring_mode": project.authoring_mode,
               "delivery_review": project.delivery_review,
               "unattended_evidence": project.unattended_evidence}
    assert submit(operator, url, **selects).status_code == 302  # saved without typing a secret
    assert Project.objects.get(pk=project.pk).webhook_secret == SECRET
    assert submit(operator, url, webhook_secret="new-secret-1", **selects).status_code == 302
    assert Project.objects.get(pk=project.pk).webhook_secret == "new-secret-1"


def test_every_profile_setting_has_help(operator: Client, project: Any) -> None:  # noqa: F811
    html = operator.get("/admin/verification/verifierprofile/add/").content.decode()
    for field in ("profile_id", "description", "argv", "timeout_ms", "sandbox_mode",
                  "required", "env", "limits", "rootfs", "show_output_to_reviewers"):
        assert help_of(html, field).strip()
    assert "1,000–900,000" in help_of(html, "timeout_ms")
    assert "Added to every code contract" in help_of(html, "required")
