"""Sessions: bearer auth, project isolation, idempotent create, workspace binding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from governor.models import AgentToken, Project
from governor.services.projects import bootstrap
from governor.services.tokens import token_revoke
from tests.conftest import AgentClient


def test_create_session_binds_the_canonical_workspace(agent: AgentClient, workspace: Path) -> None:
    body = agent.create_session(workspace)
    assert body["workspace"] == {"kind": "path", "path": str(workspace.resolve())}
    assert body["next_seq"] == 0
    assert body["head"] == "0" * 64


def test_create_is_idempotent_on_external_id(agent: AgentClient, workspace: Path) -> None:
    first = agent.post("/sessions", {"external_id": "run-1",
                                     "workspace": {"kind": "path", "path": str(workspace)}})
    again = agent.post("/sessions", {"external_id": "run-1",
                                     "workspace": {"kind": "path", "path": str(workspace)}})
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json()["id"] == again.json()["id"]


def test_workspace_outside_the_allowed_roots_is_refused(agent: AgentClient) -> None:
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": "/etc"}})
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "workspace.path"


def test_relative_workspace_path_is_refused(agent: AgentClient) -> None:
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": "work"}})
    assert response.status_code == 422
    assert "absolute" in response.json()["error"]["message"]


def test_symlinked_workspace_escaping_the_root_is_refused(
    agent: AgentClient, workspace: Path
) -> None:
    link = workspace.parent / "escape"
    link.symlink_to("/etc")
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": str(link)}})
    assert response.status_code == 422


def test_unknown_body_field_is_refused_by_name(agent: AgentClient, workspace: Path) -> None:
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": str(workspace)},
                                        "colour": "blue"})
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "colour"


def test_missing_token_is_401(agent: AgentClient) -> None:
    response = agent.client.get("/api/v1/sessions/00000000-0000-0000-0000-000000000000/events")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHENTICATED"


def test_revoked_token_is_401(agent: AgentClient, workspace: Path) -> None:
    token_revoke(token=AgentToken.objects.get())
    response = agent.post("/sessions", {"workspace": {"kind": "path", "path": str(workspace)}})
    assert response.status_code == 401


def test_token_records_last_use_and_is_stored_hashed(agent: AgentClient, workspace: Path) -> None:
    agent.create_session(workspace)
    token = AgentToken.objects.get()
    assert token.last_used_at is not None
    assert agent.secret not in (token.digest, token.prefix)
    assert len(token.digest) == 64


def test_another_projects_session_is_404_not_403(
    agent: AgentClient, other_agent: AgentClient, session: dict
) -> None:
    for response in (
        other_agent.get(f"/sessions/{session['id']}/events"),
        other_agent.append(session["id"], [{"type": "turn/start", "time": 0,
                                            "data": {"turn": 1}}]),
        other_agent.get(f"/sessions/{session['id']}/export"),
    ):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "NOT_FOUND"


def test_public_keys_need_no_token(agent: AgentClient) -> None:
    response = agent.client.get("/api/v1/keys")
    assert response.status_code == 200
    [key] = response.json()["keys"]
    assert key["algorithm"] == "ed25519" and key["active"] is True


def test_openapi_declares_every_error_response(agent: AgentClient) -> None:
    schema = agent.client.get("/api/v1/openapi.json").json()
    append = schema["paths"]["/api/v1/sessions/{session_id}/events"]["post"]
    assert {"401", "404", "409", "413", "422"} <= set(append["responses"])


def test_the_servers_workspace_roots_count_only_for_a_project_with_the_setting(
    agent: AgentClient, project: Project, tmp_path_factory: Any, settings: Any
) -> None:
    served = tmp_path_factory.mktemp("served")  # outside the project's own root
    (served / "work").mkdir()
    settings.GOVERNOR_WORKSPACE_ROOTS = [str(served)]
    body = {"workspace": {"kind": "path", "path": str(served / "work")}}
    assert agent.post("/sessions", body).status_code == 422
    project.server_workspace_roots = True
    project.save(update_fields=["server_workspace_roots"])
    assert agent.post("/sessions", body).status_code == 201


def test_bootstrap_gives_the_demo_project_the_servers_workspace_roots(
    db: Any, settings: Any, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path
    settings.GOVERNOR_DEMO_WORKSPACE_ROOT = tmp_path / "workspaces"
    made = bootstrap()
    assert made is not None and made.project.server_workspace_roots is True
