"""The projection always equals a fold over the log (ARCHITECTURE §4, SEMANTICS §3), after any
sequence of calls; `governor_refold --check` finds any difference."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.models import Project, Session, SessionState
from governor.services.refold import projection_differences
from governor.services.tokens import token_create
from tests.api.test_contracts import readme_contract
from tests.conftest import AgentClient
from tests.harness_builders import Trace

ACTIONS = st.lists(
    st.sampled_from(["tool_ok", "tool_error", "write_readme", "delete_readme", "begin", "verify",
                     "turn_stop", "abstain", "say"]),
    min_size=1, max_size=14,
)


def run(agent: AgentClient, workspace: Path, actions: list[str]) -> str:
    session = agent.create_session(workspace)
    sid = session["id"]
    trace = Trace()
    trace.start_turn()
    agent.append(sid, trace.flush())
    for action in actions:
        next_seq = agent.get(f"/sessions/{sid}").json()["next_seq"]
        trace.sync(next_seq)
        if action in ("tool_ok", "tool_error", "say", "write_readme", "delete_readme"):
            if action == "write_readme":
                (workspace / "README.md").write_text("## Install\n")
            if action == "delete_readme":
                (workspace / "README.md").unlink(missing_ok=True)
            if action == "say":
                trace.say()
            else:
                trace.tool("bash", ok=action != "tool_error")
            assert agent.append(sid, trace.flush()).status_code == 200
        elif action == "begin":
            agent.post(f"/sessions/{sid}/contracts", readme_contract(max_attempts=2))
        elif action == "verify":
            agent.post(f"/sessions/{sid}/verify")
        elif action == "turn_stop":
            agent.post(f"/sessions/{sid}/turn-stop")
        elif action == "abstain":
            agent.post(f"/sessions/{sid}/abstain", {"reason": "cannot prove it"})
    return sid


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(actions=ACTIONS)
def test_projection_equals_the_fold_after_any_call_sequence(
    actions: list[str], project: Project, tmp_path_factory: Any
) -> None:
    workspace = tmp_path_factory.mktemp("ws")
    project.workspace_roots = [str(workspace.parent)]
    project.save(update_fields=["workspace_roots"])
    _, secret = token_create(project=project, name="prop")
    sid = run(AgentClient(secret), workspace, actions)
    assert projection_differences(Session.objects.get(pk=sid)) == []


def test_refold_check_reports_a_tampered_projection(agent: AgentClient, workspace: Path) -> None:
    sid = run(agent, workspace, ["tool_ok", "begin", "turn_stop"])
    call_command("governor_refold", "--check", stdout=io.StringIO())
    SessionState.objects.filter(session_id=sid).update(last_mutation_seq=0, head="f" * 64)
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("governor_refold", "--check", stdout=out)
    assert f"{sid}: differs: head, last_mutation_seq" in out.getvalue()
    call_command("governor_refold", stdout=io.StringIO())
    assert projection_differences(Session.objects.get(pk=sid)) == []


def test_refold_reports_a_log_that_no_longer_folds_without_stopping(
    agent: AgentClient, workspace: Path, project: Project
) -> None:
    project.extra_event_types = ["acme/note"]
    project.save(update_fields=["extra_event_types"])
    sid = run(agent, workspace, ["say"])
    assert agent.append(sid, [{"type": "acme/note", "time": 0, "data": {}}]).status_code == 200
    project.extra_event_types = []
    project.save(update_fields=["extra_event_types"])
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("governor_refold", "--check", stdout=out)
    assert f"{sid}: cannot fold: log (no longer folds:" in out.getvalue()
