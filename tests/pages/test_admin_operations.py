"""What operators do in the admin: a new agent token's secret is shown once on the page and
travels in no cookie and no session; a token's project is fixed; project workspace roots must
be absolute paths."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages.storage.cookie import CookieStorage
from django.contrib.sessions.models import Session as WebSession
from django.core.management import CommandError, call_command
from django.http import HttpRequest
from django.test import Client

from governor.models import AgentToken, Project
from governor.services.tokens import token_authenticate, token_create
from tests.html_forms import forms_on


@pytest.fixture
def operator(db: Any) -> Client:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-1")
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    return client


def submit(client: Client, url: str, **fields: Any) -> Any:
    """The admin form of `url` as shown, with `fields` filled in, posted as a browser would."""
    page = client.get(url)
    assert page.status_code == 200
    [form] = [form for form in forms_on(page.content.decode())
              if "csrfmiddlewaretoken" in form["fields"] and "_save" in form["fields"]]
    return client.post(form["action"] or url, {**form["fields"], **fields})


def everything_stored_client_side(client: Client) -> str:
    """Every cookie as sent, the messages in the messages cookie, and every stored session."""
    stored = [cookie.value for cookie in client.cookies.values()]
    if "messages" in client.cookies:
        decoded = CookieStorage(HttpRequest())._decode(client.cookies["messages"].value) or []
        stored += [str(message) for message in decoded]
    stored += [str(session.get_decoded()) for session in WebSession.objects.all()]
    return "\n".join(stored)


def test_a_new_token_is_shown_once_on_the_page_and_never_in_a_cookie_or_the_session(
    operator: Client, project: Project,
) -> None:
    owner = get_user_model().objects.get(username="root")
    answer = submit(operator, "/admin/governor/agenttoken/add/", project=project.pk,
                    name="ci agent", owner=owner.pk)
    assert answer.status_code == 200
    html = answer.content.decode()
    [secret] = re.findall(r'<code id="new-token-secret">(gov_[^<]+)</code>', html)
    assert "shown only on this page, this once" in html
    assert "no-store" in answer["Cache-Control"]
    token = token_authenticate(secret)
    assert token is not None and token.name == "ci agent" and token.project == project

    assert secret not in everything_stored_client_side(operator)
    for later in ("/admin/governor/agenttoken/", f"/admin/governor/agenttoken/{token.pk}/change/"):
        assert secret not in operator.get(later).content.decode()
    assert secret not in everything_stored_client_side(operator)


def test_a_tokens_project_is_read_only_after_creation(
    operator: Client, project: Project, tmp_path: Path,
) -> None:
    elsewhere = Project.objects.create(slug="elsewhere", name="Elsewhere",
                                       workspace_roots=[str(tmp_path)])
    owner = get_user_model().objects.get(username="root")
    token, _ = token_create(project=project, name="agent", owner=owner)
    url = f"/admin/governor/agenttoken/{token.pk}/change/"
    assert 'name="project"' not in operator.get(url).content.decode()
    answer = submit(operator, url, project=elsewhere.pk, name="renamed", owner=owner.pk)
    assert answer.status_code == 302
    token.refresh_from_db()
    assert token.name == "renamed" and token.project == project


@pytest.mark.parametrize(("roots", "message"), [
    ('["relative", 5]', 'item 0 (&quot;relative&quot;) is not an absolute directory path'),
    ('["/srv/agents", 5]', "item 1 (5) is not an absolute directory path"),
    ('"/srv/agents"', "must be a list of absolute directory paths"),
])
def test_project_workspace_roots_must_be_absolute_paths(
    operator: Client, roots: str, message: str
) -> None:
    answer = submit(operator, "/admin/governor/project/add/", slug="bad-roots", name="Bad",
                    review_mode="required", authoring_mode="current-agent",
                    workspace_roots=roots)
    assert answer.status_code == 200
    html = answer.content.decode()
    errors = re.search(r'<div class="form-row errors field-workspace_roots">(.*?)</div>', html,
                       re.DOTALL)
    assert errors and message in errors.group(1), html
    assert not Project.objects.filter(slug="bad-roots").exists()


def test_the_project_command_refuses_a_relative_root_and_creates_nothing(db: Any) -> None:
    with pytest.raises(CommandError, match=r'workspace_roots: item 0 \("agents"\) is not an '
                                           r"absolute directory path"):
        call_command("governor_project", "create", "relative", "--workspace-root", "agents")
    assert not Project.objects.filter(slug="relative").exists()
    assert not AgentToken.objects.exists()
