"""The projection always equals a fold over the log (docs/architecture.md, rules §3), after any
sequence of calls through the real API and services: agent events, contracts, attempts and
terminals; two-stage reviews (proposal, approval, rejection, revision, expiry, withdrawal);
verification runs in the real sandbox (passed and failed); auxiliary-model drafts from a real
local provider; and imports of the log so far. `governor_refold --check` finds any difference."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.domain.chain import ENVELOPE_TO_META
from governor.models import Event, Project, Session, SessionState
from governor.selectors.projection import projection_differences
from governor.services.reviews import StaleReceipt, review_decide
from governor.services.tokens import token_create
from reviews.models import Review
from reviews.tasks import expire_due_reviews
from tests.api.test_code_verification import add_profile
from tests.api.test_contracts import readme_contract
from tests.api.test_drafting import KEY, KEY_ENV, answer, route
from tests.conftest import INTENT, AgentClient
from tests.harness_builders import Trace
from tests.sse_provider import FakeProvider

# Four groups drawn alike, so that proposals meet reviewers often: the agent's work, proposals,
# the reviewer and the review clock, and verification (runs, attempts, imports of the log).
GROUPS = (["tool_ok", "tool_error", "write_readme", "rewrite_readme", "delete_readme", "say"],
          ["draft", "begin", "begin_code"],
          ["approve", "reject", "revise", "expire", "withdraw"],
          ["run_passing", "run_failing", "verify", "turn_stop", "abstain", "import_log"])
ACTIONS = st.lists(st.one_of(*(st.sampled_from(group) for group in GROUPS)),
                   min_size=4, max_size=16)
MODES = st.fixed_dictionaries({"review_mode": st.sampled_from(["off", "required"]),
                               "delivery_review": st.sampled_from(["off", "required"]),
                               "authoring_mode": st.sampled_from(["current-agent",
                                                                  "auxiliary-model"])})


class Scenario:
    """One live session driven by its agent (HTTP API), a reviewer (the review service) and the
    review clock; `imports` are the sessions imported from its log along the way."""

    def __init__(self, agent: AgentClient, workspace: Path, reviewer: Any = None,
                 provider: FakeProvider | None = None) -> None:
        self.agent, self.workspace = agent, workspace
        self.reviewer, self.provider = reviewer, provider
        self.id = agent.create_session(workspace)["id"]
        self.trace = Trace()
        self.draft_begin: dict[str, Any] | None = None
        self.imports: list[str] = []
        self._agent_step(lambda trace: trace.start_turn())

    def play(self, actions: list[str]) -> Scenario:
        for action in actions:
            getattr(self, action)()
        return self

    def _agent_step(self, build: Any) -> None:
        self.trace.sync(self.agent.get(f"/sessions/{self.id}").json()["next_seq"])
        build(self.trace)
        response = self.agent.append(self.id, self.trace.flush())
        assert response.status_code == 200, response.content

    # --- the agent ------------------------------------------------------------------------------

    def tool_ok(self) -> None:
        self._agent_step(lambda trace: trace.tool("bash"))

    def tool_error(self) -> None:
        self._agent_step(lambda trace: trace.tool("bash", ok=False))

    def write_readme(self) -> None:
        (self.workspace / "README.md").write_text("## Install\n")
        self.tool_ok()

    def rewrite_readme(self) -> None:
        """Another passing README: a stop after a revision request is then an attempt (issue
        40: on the tree the person reviewed it is none)."""
        (self.workspace / "README.md").write_text("## Install\n\npip install demo\n")
        self.tool_ok()

    def delete_readme(self) -> None:
        (self.workspace / "README.md").unlink(missing_ok=True)
        self.tool_ok()

    def say(self) -> None:
        self._agent_step(lambda trace: trace.say())

    def draft(self) -> None:
        assert self.provider is not None
        self.provider.reply(answer("openai-chat"))
        response = self.agent.post(f"/sessions/{self.id}/drafts", {
            "contract_kind": "general", "objective": "Write README.md with an Install section"})
        if response.status_code == 201:
            self.draft_begin = response.json()["begin"]

    def _begin(self, route: str) -> Any:
        project = Session.objects.get(pk=self.id).project
        if project.authoring_mode == "auxiliary-model":
            body = dict(self.draft_begin or {})  # the latest draft, exactly, or a refusal
        else:
            body = readme_contract(max_attempts=2)
        if project.review_mode == "required":
            body["intent"] = INTENT
        return self.agent.post(f"/sessions/{self.id}/{route}", body)

    def begin(self) -> None:
        self._begin("contracts")

    def begin_code(self) -> None:
        self._begin("code-contracts")

    def verify(self) -> None:
        self.agent.post(f"/sessions/{self.id}/verify")

    def turn_stop(self) -> None:
        self.agent.post(f"/sessions/{self.id}/turn-stop")

    def abstain(self) -> None:
        self.agent.post(f"/sessions/{self.id}/abstain", {"reason": "cannot prove it"})

    def withdraw(self) -> None:
        self.agent.delete(f"/sessions/{self.id}/review")

    def _run(self, profile: str, passed: bool) -> None:
        response = self.agent.post(f"/sessions/{self.id}/code-verifications",
                                   {"profile": profile})
        assert response.status_code == 202, response.content
        run = self.agent.get(f"/code-verifications/{response.json()['id']}", wait=5).json()
        assert (run["state"], run["result"]["passed"]) == ("finished", passed), run

    def run_passing(self) -> None:
        self._run("passes", True)

    def run_failing(self) -> None:
        self._run("fails", False)

    def import_log(self) -> None:
        """The log so far (its open turn ended) as a new, imported session."""
        lines = [{"type": e.type, "time": e.time, "data": e.data,
                  **{wire: e.meta[stored] for wire, stored in ENVELOPE_TO_META
                     if e.meta and stored in e.meta}}
                 for e in Event.objects.filter(session_id=self.id).order_by("seq")]
        lines.append({"type": "turn/end", "time": 0,
                      "data": {"turn": self.trace.turn, "reason": {"kind": "completed"}}})
        text = "\n".join(json.dumps(line) for line in lines) + "\n"
        response = self.agent.post("/sessions/import", raw=text,
                                   content_type="application/x-ndjson")
        assert response.status_code == 201, response.content
        self.imports.append(response.json()["id"])

    # --- the reviewer and the review clock --------------------------------------------------------

    def _decide(self, decision: str) -> None:
        review = Review.objects.filter(session_id=self.id).order_by("-created_at").first()
        if review is None:
            return
        if review.status != "pending":
            with pytest.raises(StaleReceipt):
                review_decide(user=self.reviewer, review=review, receipt=review.receipt,
                              decision=decision)
            return
        review_decide(user=self.reviewer, review=review, receipt=review.receipt,
                      decision=decision)

    def approve(self) -> None:
        self._decide("approved")

    def reject(self) -> None:
        self._decide("rejected")

    def revise(self) -> None:
        self._decide("revision-requested")

    def expire(self) -> None:
        Review.objects.filter(session_id=self.id, status="pending").update(
            expires_at=timezone.now())
        expire_due_reviews()

    def sessions(self) -> list[str]:
        return [self.id, *self.imports]


def run(agent: AgentClient, workspace: Path, actions: list[str]) -> str:
    return Scenario(agent, workspace).play(actions).id


def play_checking_the_fold(scenario: Scenario, actions: list[str]) -> Scenario:
    """Each action, then every session of the scenario: its projection equals its fold."""
    for action in actions:
        scenario.play([action])
        for sid in scenario.sessions():
            assert projection_differences(Session.objects.get(pk=sid)) == [], (action, sid)
    return scenario


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    server = FakeProvider()
    yield server
    server.close()


@pytest.fixture
def world(project: Project, reviewer: Any, provider: FakeProvider,
          monkeypatch: pytest.MonkeyPatch) -> Project:
    """The project with a passing (required) and a failing verifier profile, a drafting route
    to the local provider, and a reviewer."""
    monkeypatch.setenv(KEY_ENV, KEY)
    add_profile(project, "passes", ["/bin/sh", "-c", "exit 0"], required=True)
    add_profile(project, "fails", ["/bin/sh", "-c", "exit 7"], required=False)
    route(project, provider)
    return project


@pytest.fixture
def owned_agent(world: Project, settings: Any) -> AgentClient:
    """The agent, its token owned by someone other than the reviewer (who may then approve).
    Every example ends with an import under the one token: the per-minute import cap is lifted."""
    settings.GOVERNOR_MAX_IMPORTS_PER_MINUTE = 10_000
    owner = get_user_model().objects.create_user("ada", "ada@example.com", "ada-password-1")
    _, secret = token_create(project=world, name="prop", owner=owner)
    return AgentClient(secret)


@pytest.mark.sandbox
@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(modes=MODES, actions=ACTIONS)
def test_projection_equals_the_fold_after_any_call_sequence(
    modes: dict[str, str], actions: list[str], world: Project, owned_agent: AgentClient,
    reviewer: Any, provider: FakeProvider, tmp_path_factory: Any
) -> None:
    workspace = tmp_path_factory.mktemp("ws")
    workspace.chmod(0o755)  # as a plain mkdir makes it: the sandbox's user reads it
    Project.objects.filter(pk=world.pk).update(workspace_roots=[str(workspace.parent)], **modes)
    scenario = Scenario(owned_agent, workspace, reviewer, provider)
    play_checking_the_fold(scenario, [*actions, "import_log"])


def governor_events(sid: str) -> list[tuple[str, Any]]:
    """(type, what it says) of each governor event of a session's log."""
    said = {"reliability/intent-review": "decision", "reliability/contract-review": "decision",
            "reliability/delivery-review": "decision",
            "reliability/code-verification": "passed", "reliability/terminal": "status"}
    return [(e.type, e.data.get(said.get(e.type, ""))) for e in Event.objects.filter(
        session_id=sid, type__startswith="reliability/").order_by("seq")]


@pytest.mark.sandbox
def test_the_operations_do_what_they_say_so_the_property_covers_them(
    world: Project, owned_agent: AgentClient, reviewer: Any, provider: FakeProvider,
    workspace: Path
) -> None:
    """Every kind of governor event, each review decision and both run results come out of
    the scenario's operations, and imports of the log carry them over."""
    Project.objects.filter(pk=world.pk).update(review_mode="required")
    reviewed = play_checking_the_fold(Scenario(owned_agent, workspace, reviewer, provider), [
        "begin", "reject", "begin", "revise", "begin", "withdraw", "begin", "expire",
        "begin_code", "approve", "approve", "write_readme", "run_failing", "verify",
        "run_passing", "turn_stop", "import_log"])
    assert governor_events(reviewed.id) == [
        ("reliability/reference", None),
        ("reliability/intent-review", "rejected"),
        ("reliability/intent-review", "revision-requested"),
        ("reliability/intent-review", "cancelled"),
        ("reliability/intent-review", "expired"),
        ("reliability/intent-review", "approved"),
        ("reliability/contract-review", "approved"),
        ("reliability/contract", None),
        ("reliability/code-verification", False),
        ("reliability/attempt", None),
        ("reliability/code-verification", True),
        ("reliability/attempt", None),
        ("reliability/terminal", "certified"),
    ]
    [imported] = reviewed.imports
    assert governor_events(imported) == governor_events(reviewed.id)
    assert Session.objects.get(pk=imported).imported

    Project.objects.filter(pk=world.pk).update(review_mode="off",
                                               authoring_mode="auxiliary-model")
    (workspace / "README.md").unlink()
    drafted = play_checking_the_fold(Scenario(owned_agent, workspace, reviewer, provider), [
        "draft", "begin", "write_readme", "turn_stop", "import_log"])
    assert [kind for kind, _ in governor_events(drafted.id)] == [
        "reliability/reference", "reliability/contract-draft", "reliability/contract",
        "reliability/attempt", "reliability/terminal"]

    Project.objects.filter(pk=world.pk).update(authoring_mode="current-agent",
                                               delivery_review="required")
    (workspace / "README.md").unlink()
    delivered = play_checking_the_fold(Scenario(owned_agent, workspace, reviewer, provider), [
        "begin", "write_readme", "turn_stop", "revise", "verify", "rewrite_readme", "verify",
        "approve", "import_log"])
    assert governor_events(delivered.id) == [
        ("reliability/reference", None),
        ("reliability/contract", None),
        ("reliability/attempt", None),
        ("reliability/delivery-review", "revision-requested"),
        ("reliability/attempt", None),
        ("reliability/delivery-review", "approved"),
        ("reliability/terminal", "certified"),
    ]
    [imported] = delivered.imports
    assert governor_events(imported) == governor_events(delivered.id)


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
