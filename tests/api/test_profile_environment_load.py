"""Rules §17.8 at profile load (issue 38 and issue 40, "Bad input"): where a profile's
environment lies is judged against the project when it is loaded — by `governor_profiles load`
and by the admin's profile form. An operator directory that does not exist or lies inside a
workspace root (or holds one) is refused naming it, and nothing is stored; a workspace directory
that the project does not exclude, or that none of the project's workspaces holds, is stored
with a warning that says why (a later workspace could hold it)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from governor.models import Project
from governor.services.projects import project_set
from tests.api.test_profiles import admin_client, form
from tests.conftest import AgentClient
from verification.models import VerifierProfile


def load(tmp_path: Path, environment: list[str]) -> tuple[str, str]:
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps({"profiles": [{
        "id": "unit-tests", "description": "The unit tests",
        "argv": ["/usr/bin/python3", "-m", "pytest"], "environment": environment}]}))
    out, err = io.StringIO(), io.StringIO()
    call_command("governor_profiles", "load", str(path), "--project", "acme", stdout=out,
                 stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def operator_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("operator-venv")


def test_rule_17_8_an_operator_environment_outside_every_workspace_loads_without_a_word(
        project: Project, tmp_path: Path, operator_directory: Path) -> None:
    out, err = load(tmp_path, [str(operator_directory)])
    assert "1 changed" in out and "warning" not in out and err == ""
    assert VerifierProfile.objects.get().environment == [str(operator_directory)]


def test_rule_17_8_an_operator_environment_that_does_not_exist_is_refused_naming_it(
        project: Project, tmp_path: Path) -> None:
    with pytest.raises(CommandError) as refused:
        load(tmp_path, ["/srv/no-such-governor-environment"])
    assert ("profiles/0: environment/0: the operator environment directory "
            "/srv/no-such-governor-environment does not exist") in str(refused.value)
    assert not VerifierProfile.objects.exists()


def test_rule_17_8_an_operator_environment_inside_a_workspace_root_is_refused_naming_both(
        project: Project, tmp_path: Path, workspace: Path) -> None:
    inside = workspace / "venv"  # the project's workspace root is workspace.parent
    inside.mkdir()
    with pytest.raises(CommandError) as refused:
        load(tmp_path, [str(inside)])
    message = str(refused.value)
    assert f"environment/0: the operator environment directory {inside} is inside the " \
           f"workspace root {workspace.parent}" in message
    assert "it must lie outside every workspace" in message
    assert not VerifierProfile.objects.exists()


def test_rule_17_8_an_operator_environment_holding_a_workspace_root_is_refused(
        project: Project, tmp_path: Path, workspace: Path) -> None:
    with pytest.raises(CommandError, match=f"holds the workspace root {workspace.parent}"):
        load(tmp_path, [str(workspace.parent.parent)])
    assert not VerifierProfile.objects.exists()


def test_rule_17_8_a_workspace_environment_no_workspace_holds_loads_with_a_warning_saying_why(
        project: Project, tmp_path: Path) -> None:
    project_set(project=project, tree_exclusions=[".venv/**"])
    out, err = load(tmp_path, [".venv"])
    assert "1 changed, 1 warning(s)" in out
    assert ("warning: profiles/0 (unit-tests): environment/0: '.venv' is a workspace directory, "
            "and the project has no workspace yet") in err
    assert "Loaded, because a later workspace could hold it" in err
    assert VerifierProfile.objects.get().environment == [".venv"]


def test_rule_17_8_a_workspace_environment_the_project_does_not_exclude_is_said(
        project: Project, tmp_path: Path, agent: AgentClient, workspace: Path) -> None:
    (workspace / ".venv").mkdir()
    agent.create_session(workspace)  # a workspace that holds it: no warning of that
    out, err = load(tmp_path, [".venv"])
    assert "1 warning(s)" in out
    assert "'.venv' is not excluded by project acme's tree exclusions" in err
    assert "add '.venv/**'" in err
    assert "no workspace" not in err


def admin_form(project: Project, environment: list[str]) -> dict[str, str]:
    return form(project=project.pk, environment=json.dumps(environment))


def test_rule_17_8_the_admin_refuses_an_operator_environment_inside_a_workspace_root(
        project: Project, workspace: Path) -> None:
    response = admin_client(project, "operator").post("/admin/verification/verifierprofile/add/",
                                    admin_form(project, [str(workspace)]))
    assert response.status_code == 200  # the form again, with the error on its field
    page = response.content.decode()
    assert f"environment/0: the operator environment directory {workspace} is inside the " \
           f"workspace root {workspace.parent}" in page
    assert not VerifierProfile.objects.exists()


def test_rule_17_8_the_admin_saves_a_workspace_environment_with_its_warning(
        project: Project) -> None:
    response = admin_client(project, "operator").post("/admin/verification/verifierprofile/add/",
                                    admin_form(project, [".venv"]), follow=True)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Saved with a warning: environment/0: &#x27;.venv&#x27; is not excluded" in page
    assert VerifierProfile.objects.get().environment == [".venv"]
