"""Shared personas: a project with a workspace, its agent, a reviewer, an outsider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from governor.models import Membership, Project, Role
from governor.services.tokens import token_create


def pytest_configure(config: pytest.Config) -> None:
    """Django's default hasher costs ~0.5 s a password here, on purpose, and the suite makes
    thousands of users: in-process tests hash with MD5. The served stack (tests/live.py) keeps
    the default, and tests/test_live_template.py holds that a real installation uses it."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# `make test` runs the whole suite on SQLite, then the tests marked `postgres` (they need it:
# concurrency, the pool, stateless nodes) and these modules again on PostgreSQL, for what the
# two databases do differently. The rest of tests/api exercises the same statements through
# the same code paths, and ran twice cost ~5 minutes.
BOTH_DATABASES = {
    "tests/api/test_events.py": "appends under the row lock, the append-only triggers",
    "tests/api/test_import_writes.py": "imports committed by concurrent writers",
    "tests/api/test_import_caps.py": "import slots a token claims a minute (rows, 429)",
    "tests/api/test_task_queue.py": "tasks queued when real transactions commit",
    "tests/api/test_run_recording.py": "a NUL byte in output (PostgreSQL text refuses it), leases",
    "tests/api/test_huge_integer_literals.py": "numbers past what jsonb and bigint hold",
    "tests/api/test_evidence_agreement.py": "the evidence's indexed SQL against the log",
    "tests/api/test_fold_equals_projection.py": "the projection stored as jsonb after any calls",
    "tests/api/test_snapshots.py": "manifests stored whole, their bases looked up",
    "tests/api/test_blob_batches.py": "blob rows already present found or added in one batch",
    "tests/api/test_sessions.py": "creation idempotent on a unique external id",
    "tests/api/test_review_api.py": "decisions and expiry under the session's lock",
    "tests/api/test_delivery_review.py": "delivery decisions and expiry under the row locks",
    "tests/api/test_turn_stop_reads.py": "a turn-stop's one locked read of state and reviews",
    "tests/api/test_outcomes.py": "observations claimed once by compare-and-set updates",
}


# `make test` spreads the modules over pytest-xdist processes in this order (--dist loadfile
# --no-loadscope-reorder), each process taking the next module when it is done with one: the
# packages whose modules start real stacks (servers, workers, sandboxes, browsers) and take
# minutes come first, so that the many quick in-process modules fill the gaps at the end instead
# of a long module running alone there.
SLOW_FIRST = ("tests/bench/", "tests/integration/", "tests/clients/", "tests/browser/",
              "tests/harness_e2e/", "tests/docs/")


def _slow_first(item: pytest.Item) -> int:
    return next((rank for rank, package in enumerate(SLOW_FIRST)
                 if item.nodeid.startswith(package)), len(SLOW_FIRST))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.split("::")[0] in BOTH_DATABASES:
            item.add_marker(pytest.mark.both_databases)
    items.sort(key=_slow_first)  # stable: each package's own order (pytest-django's) stays


class AgentClient:
    """The agent's side of the HTTP API, as a coding agent would call it."""

    def __init__(self, secret: str) -> None:
        self.client = Client()
        self.secret = secret

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self.secret}"}
        headers.update(extra or {})
        return headers

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get("/api/v1" + path, params, headers=self._headers())

    def post(self, path: str, body: Any = None, *, raw: bytes | str | None = None,
             headers: dict[str, str] | None = None,
             content_type: str = "application/json") -> Any:
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post("/api/v1" + path, data=data, content_type=content_type,
                                headers=self._headers(headers))

    def delete(self, path: str) -> Any:
        return self.client.delete("/api/v1" + path, headers=self._headers())

    def create_session(self, workspace: Path, **extra: Any) -> dict[str, Any]:
        response = self.post("/sessions", {"workspace": {"kind": "path", "path": str(workspace)},
                                           **extra})
        assert response.status_code in (200, 201), response.content
        return response.json()

    def append(self, session_id: str, events: list[dict[str, Any]], **extra: Any) -> Any:
        return self.post(f"/sessions/{session_id}/events", {"events": events, **extra})


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


@pytest.fixture
def project(db: Any, workspace: Path) -> Project:
    return Project.objects.create(slug="acme", name="Acme", review_mode="off",
                                  workspace_roots=[str(workspace.parent)])


@pytest.fixture
def agent_owner(db: Any) -> Any:
    """The person who runs the agents (every token has an owner); she reviews nothing."""
    return get_user_model().objects.create_user("ada", "ada@example.com", "ada-password-1")


@pytest.fixture
def agent(project: Project, agent_owner: Any) -> AgentClient:
    _, secret = token_create(project=project, name="agent", owner=agent_owner)
    return AgentClient(secret)


@pytest.fixture
def other_agent(tmp_path: Path, agent_owner: Any) -> AgentClient:
    other = Project.objects.create(slug="other", name="Other", review_mode="off",
                                   workspace_roots=[str(tmp_path)])
    _, secret = token_create(project=other, name="other agent", owner=agent_owner)
    return AgentClient(secret)


@pytest.fixture
def reviewer(project: Project) -> Any:
    user = get_user_model().objects.create_user("rita", "rita@example.com", "rita-password-1")
    Membership.objects.create(user=user, project=project, role=Role.REVIEWER)
    return user


@pytest.fixture
def session(agent: AgentClient, workspace: Path) -> dict[str, Any]:
    return agent.create_session(workspace)


def filesystem_store(location: Path) -> dict[str, Any]:
    """A blob store on the filesystem at `location` (settings.STORAGES["governor_blobs"])."""
    return {"BACKEND": "django.core.files.storage.FileSystemStorage",
            "OPTIONS": {"location": str(location), "allow_overwrite": True,
                        "file_permissions_mode": 0o600, "directory_permissions_mode": 0o700}}


@pytest.fixture
def private_store(settings: Any, tmp_path: Path) -> None:
    """The test's own var directory and filesystem blob store."""
    settings.VAR_DIR = tmp_path / "var"
    settings.STORAGES = {**settings.STORAGES,
                         "governor_blobs": filesystem_store(tmp_path / "blobs")}


@pytest.fixture(autouse=True)
def _tasks_run_inline(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Unit and API tests run Celery tasks in-process; integration tests use a real worker. A
    test wrapped in a transaction never commits it, so tasks queued "on commit" are sent at
    once there (tests/api/test_task_queue.py holds the real order, with real commits)."""
    from governor.celery import app
    from governor.lib import queue

    marker = request.node.get_closest_marker("django_db")
    if not (marker and marker.kwargs.get("transaction")):
        monkeypatch.setattr(queue, "on_commit", lambda send: send())
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


INTENT = {"constraints": ["keep the public API"], "assumptions": ["Python 3.11"],
          "non_goals": ["no new dependencies"], "ambiguities": ["which README section?"]}
