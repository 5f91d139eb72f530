"""Every agent token has an owner, the person who runs the agent (they may not approve what it
proposes): the command, the admin and the bootstrap all name one."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from governor.lib.errors import Invalid
from governor.models import AgentToken, Membership, Project, Role
from governor.services.projects import DEMO_AGENT_USERNAME, bootstrap
from governor.services.tokens import token_authenticate, token_create

pytestmark = pytest.mark.django_db


def test_the_token_command_refuses_to_create_a_token_without_an_owner(project: Project) -> None:
    with pytest.raises(CommandError, match="arguments are required: --owner"):
        call_command("governor_token", "create", "--project", project.slug)
    assert not AgentToken.objects.exists()


def test_the_token_command_names_an_unknown_owner(project: Project) -> None:
    with pytest.raises(CommandError, match="--owner: no user 'nobody'"):
        call_command("governor_token", "create", "--project", project.slug, "--owner", "nobody")
    assert not AgentToken.objects.exists()


def test_the_token_command_creates_a_token_its_owner_owns(
    project: Project, agent_owner: Any, capsys: Any
) -> None:
    call_command("governor_token", "create", "--project", project.slug, "--owner", "ada")
    token = token_authenticate(capsys.readouterr().out.strip())
    assert token is not None and token.owner == agent_owner


def test_the_service_refuses_a_token_without_an_owner(project: Project) -> None:
    with pytest.raises(Invalid, match="owner"):
        token_create(project=project, name="agent", owner=None)


@pytest.fixture
def operator(project: Project) -> Client:
    user = get_user_model().objects.create_superuser("otto", "otto@example.com", "otto-pass-1")
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_requires_an_owner_for_a_new_token(operator: Client, project: Project) -> None:
    response = operator.post("/admin/governor/agenttoken/add/",
                             {"project": project.pk, "name": "agent", "owner": ""})
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["owner"] == ["This field is required."]
    assert not AgentToken.objects.exists()


def test_the_admin_creates_a_token_with_its_owner(
    operator: Client, project: Project, agent_owner: Any
) -> None:
    response = operator.post("/admin/governor/agenttoken/add/",
                             {"project": project.pk, "name": "agent", "owner": agent_owner.pk})
    assert response.status_code == 200  # the page that shows the new secret once
    assert AgentToken.objects.get().owner == agent_owner


def test_the_bootstrap_token_belongs_to_an_agent_user_so_the_admin_reviews_it(
    settings: Any, tmp_path: Any
) -> None:
    settings.VAR_DIR = tmp_path
    settings.GOVERNOR_DEMO_WORKSPACE_ROOT = tmp_path / "workspaces"
    created = bootstrap()
    assert created is not None and created.token_owner == DEMO_AGENT_USERNAME
    token = token_authenticate(created.token)
    assert token is not None and token.owner is not None
    assert token.owner.username == DEMO_AGENT_USERNAME
    assert not token.owner.has_usable_password()
    assert not Membership.objects.filter(user=token.owner).exists()
    assert Membership.objects.filter(user__username="admin", project=token.project,
                                     role=Role.REVIEWER).exists()


def test_rule_19_2_the_admin_creates_a_gate_token_of_that_kind(
    operator: Client, project: Project, agent_owner: Any
) -> None:
    response = operator.post("/admin/governor/agenttoken/add/", {
        "project": project.pk, "name": "ci", "owner": agent_owner.pk, "kind": "gate"})
    assert response.status_code == 200
    assert AgentToken.objects.get().kind == "gate"
