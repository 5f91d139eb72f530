"""Operators (docs/security.md): in the admin, an operator sees and manages the verifier profiles
of the projects they operate, and nothing of another project's: not in the list, not on the
change, history or delete pages, and not by adding or moving a profile into it. The attack is
made as a browser would make it, with the operator's own session and CSRF token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from governor.domain.profiles import validate_profile
from governor.models import Membership, Project, Role
from governor.services.profiles import profile_store
from tests.html_forms import forms_on
from verification.models import ProfileVersion, VerifierProfile

pytestmark = pytest.mark.django_db

PROFILES = "/admin/verification/verifierprofile/"
SECRET_ARGV = "acme-internal-lint"


@pytest.fixture
def acme_profile(project: Project) -> VerifierProfile:
    raw = {"id": "acme-lint", "description": "Acme's own lint", "argv": [SECRET_ARGV, "-q"]}
    return profile_store(model=VerifierProfile, project=project,
                         validated=validate_profile(raw))[0]


@pytest.fixture
def elsewhere(tmp_path: Path) -> Project:
    return Project.objects.create(slug="elsewhere", name="Elsewhere",
                                  workspace_roots=[str(tmp_path)])


def operator_of(project: Project, username: str) -> Client:
    user = get_user_model().objects.create_user(username, f"{username}@example.com",
                                                f"{username}-password-1", is_staff=True)
    Membership.objects.create(user=user, project=project, role=Role.OPERATOR)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


@pytest.fixture
def otto(elsewhere: Project) -> Client:
    """An operator of another project only."""
    return operator_of(elsewhere, "otto")


def save_form(client: Client, url: str) -> dict[str, Any]:
    page = client.get(url)
    assert page.status_code == 200
    [form] = [form for form in forms_on(page.content.decode()) if "_save" in form["fields"]]
    return form


def fields(**overrides: Any) -> dict[str, Any]:
    return {"profile_id": "acme-lint", "description": "taken over", "argv": '["/bin/true"]',
            "timeout_ms": "30000", "sandbox_mode": "read-only", "required": "on", "env": "{}",
            "limits": "{}", "rootfs": "", "versions-TOTAL_FORMS": "0",
            "versions-INITIAL_FORMS": "0", **overrides}


def unchanged(profile: VerifierProfile) -> bool:
    stored = VerifierProfile.objects.get(pk=profile.pk)
    return (stored.project_id, stored.argv, stored.receipt, stored.description) == (
        profile.project_id, profile.argv, profile.receipt, profile.description
    ) and ProfileVersion.objects.filter(profile=profile).count() == 1


def test_control_the_projects_own_operator_sees_and_changes_its_profile(
    project: Project, acme_profile: VerifierProfile
) -> None:
    olga = operator_of(project, "olga")
    assert SECRET_ARGV in olga.get(f"{PROFILES}{acme_profile.pk}/change/").content.decode()
    assert "acme-lint" in olga.get(PROFILES).content.decode()
    assert olga.get(f"{PROFILES}{acme_profile.pk}/history/").status_code == 200
    form = save_form(olga, f"{PROFILES}{acme_profile.pk}/change/")
    response = olga.post(form["action"] or f"{PROFILES}{acme_profile.pk}/change/",
                         {**form["fields"], "project": project.pk, "sandbox_mode": "read-only",
                          "description": "Acme's lint, edited"})  # the selects as shown
    assert response.status_code == 302, response.content.decode()
    assert VerifierProfile.objects.get(pk=acme_profile.pk).description == "Acme's lint, edited"


def test_another_projects_operator_does_not_see_the_profile_or_the_project(
    otto: Client, project: Project, acme_profile: VerifierProfile
) -> None:
    listing = otto.get(PROFILES)
    assert listing.status_code == 200
    html = listing.content.decode()
    assert "acme-lint" not in html and SECRET_ARGV not in html
    assert f"project__id__exact={project.pk}" not in html  # not even as a filter choice
    assert "acme-lint" not in otto.get(PROFILES, {"q": "acme"}).content.decode()
    assert "acme-lint" not in otto.get(PROFILES, {"project__id__exact": acme_profile.project_id}
                                       ).content.decode()


@pytest.mark.parametrize("page", ["change", "history", "delete"])
def test_another_projects_operator_cannot_open_the_profiles_pages(
    otto: Client, acme_profile: VerifierProfile, page: str
) -> None:
    response = otto.get(f"{PROFILES}{acme_profile.pk}/{page}/", follow=True)
    html = response.content.decode()
    assert SECRET_ARGV not in html and "Acme&#x27;s own lint" not in html
    assert response.redirect_chain == [("/admin/", 302)] or response.status_code == 403
    assert unchanged(acme_profile)


def test_another_projects_operator_cannot_change_or_delete_the_profile(
    otto: Client, elsewhere: Project, acme_profile: VerifierProfile
) -> None:
    csrf = save_form(otto, f"{PROFILES}add/")["fields"]["csrfmiddlewaretoken"]
    change = otto.post(f"{PROFILES}{acme_profile.pk}/change/",
                       fields(project=acme_profile.project_id, csrfmiddlewaretoken=csrf))
    moved = otto.post(f"{PROFILES}{acme_profile.pk}/change/",
                      fields(project=elsewhere.pk, csrfmiddlewaretoken=csrf))
    deleted = otto.post(f"{PROFILES}{acme_profile.pk}/delete/",
                        {"post": "yes", "csrfmiddlewaretoken": csrf})
    for response in (change, moved, deleted):
        assert response.status_code in (302, 403)
        assert response.status_code == 403 or response["Location"] == "/admin/"
    assert unchanged(acme_profile)
    assert not VerifierProfile.objects.filter(project=elsewhere).exists()


def test_another_projects_operator_cannot_add_a_profile_to_the_project(
    otto: Client, project: Project, acme_profile: VerifierProfile
) -> None:
    form = save_form(otto, f"{PROFILES}add/")
    assert f'<option value="{project.pk}"' not in otto.get(f"{PROFILES}add/").content.decode()
    for profile_id in ("acme-lint", "acme-new"):
        response = otto.post(f"{PROFILES}add/", fields(
            project=project.pk, profile_id=profile_id,
            csrfmiddlewaretoken=form["fields"]["csrfmiddlewaretoken"]))
        assert response.status_code == 200
        assert "Select a valid choice" in response.content.decode()
    assert unchanged(acme_profile)
    assert list(VerifierProfile.objects.all()) == [acme_profile]
