"""Binding a session's workspace: refusals quote the caller's input only, reveal nothing about
the file system outside the allowed roots, and are a 422 naming `workspace.path` whatever the
path does when resolved."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from governor.domain.workspace import identity_at
from governor.models import Session
from tests.conftest import AgentClient


def refusal(agent: AgentClient, path: str) -> str:
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": path}})
    assert response.status_code == 422, response.content
    details = response.json()["error"]["details"]
    assert [detail["path"] for detail in details] == ["workspace.path"]
    return str(details[0]["message"])


def test_a_refusal_never_shows_where_a_link_outside_leads(agent: AgentClient) -> None:
    message = refusal(agent, "/proc/self/exe")
    assert "'/proc/self/exe'" in message
    assert os.path.realpath(sys.executable) not in message
    assert "python" not in message.lower()


def test_existing_and_missing_paths_outside_the_roots_are_refused_alike(
    agent: AgentClient
) -> None:
    existing = refusal(agent, "/etc")
    missing = refusal(agent, "/etc-that-does-not-exist")
    assert existing.replace("'/etc'", "X") == missing.replace("'/etc-that-does-not-exist'", "X")


def test_a_link_under_the_root_to_a_file_outside_is_refused_like_a_missing_path(
    agent: AgentClient, workspace: Path
) -> None:
    (workspace.parent / "door").symlink_to("/etc/passwd")
    door = refusal(agent, str(workspace.parent / "door"))
    missing = refusal(agent, str(workspace.parent / "nothing"))
    assert door.replace("door", "X") == missing.replace("nothing", "X")
    assert "/etc/passwd" not in door


def test_a_session_records_the_identity_of_its_directory(
    agent: AgentClient, workspace: Path
) -> None:
    body = agent.create_session(workspace)
    session = Session.objects.get(id=body["id"])
    assert session.workspace_identity == identity_at(str(workspace.resolve()))


@pytest.mark.parametrize("path", ["/proc/1/cwd", "/proc/2/exe"])
def test_a_path_whose_resolution_fails_is_a_422_naming_the_field(
    agent: AgentClient, path: str
) -> None:
    """Resolving these raises (a link that cannot be read: pid 1 of another namespace, a kernel
    thread without an executable); it answered 500."""
    try:
        os.path.realpath(path)
    except OSError:
        pass
    else:
        pytest.skip(f"resolving {path} does not fail on this machine")
    assert f"{path!r}" in refusal(agent, path)
