"""Auxiliary-model drafting (rules §9) through the HTTP API, against a real local provider
that streams real server-sent events in the OpenAI and Anthropic formats (tests/sse_provider.py).

A refused draft records nothing; a begin in this mode needs the latest draft's receipt and an
exact match; a receipt opens one contract ever; the private context, the reasoning text and the
credential never reach the log, the export or an error text."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governor.domain import drafting
from governor.domain.canonical import receipt
from governor.models import DraftRoute, Event, Project
from reviews.models import Review, Stage
from tests.api.test_contracts import Agent
from tests.conftest import INTENT, AgentClient
from tests.pages import press, reviewer_client
from tests.sse_provider import FakeProvider, Reply, anthropic_events, events_for, openai_events
from verification.models import VerifierProfile

KEY = "sk-test-Q7f2abcdefghijklmnopSECRET"
KEY_ENV = "GOVERNOR_TEST_DRAFT_KEY"
PRIVATE = "PRIVATE-CONTEXT-91c4: the customer is Initech, budget 12k"
REASONING = "REASONING-TEXT-55e1: I should mention Initech"
OBJECTIVE = "Write README.md with an Install section"
PLAN: dict[str, Any] = {
    "claims": [{"id": "readme", "statement": "README.md documents installation",
                "importance": "critical", "verification": "deterministic",
                "check_ids": ["readme-exists", "readme-install"],
                "minimum_independent_sources": 1}],
    "checks": [{"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
               {"id": "readme-install", "kind": "file_contains", "path": "README.md",
                "text": "## Install"}],
}
PROVIDERS = ["openai-chat", "anthropic-messages"]


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    server = FakeProvider()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def route(project: Project, provider: FakeProvider, kind: str = "openai-chat",
          **fields: Any) -> DraftRoute:
    base = provider.origin + ("/v1" if kind == "openai-chat" else "")
    values = {"provider": kind, "base_url": base, "model": "draft-model-1",
              "reasoning_effort": "low", "max_output_tokens": 2048, "timeout_seconds": 10,
              "max_input_bytes": 16 * 1024, "credential_env": KEY_ENV, "credential_file": "",
              **fields}
    row, _ = DraftRoute.objects.update_or_create(project=project, defaults=values)
    row.full_clean()
    return row


@pytest.fixture
def aux(project: Project) -> Project:
    project.authoring_mode = "auxiliary-model"
    project.save(update_fields=["authoring_mode"])
    return project


@pytest.fixture
def worker(agent: AgentClient, workspace: Path, aux: Project) -> Agent:
    return Agent(agent, workspace)


def answer(kind: str, plan: Any = PLAN, **options: Any) -> Reply:
    text = plan if isinstance(plan, str) else json.dumps(plan, indent=2)
    return Reply(events=events_for(kind, text, **options))


def draft(worker: Agent, kind: str = "general", context: str = PRIVATE,
          objective: str = OBJECTIVE) -> Any:
    return worker.client.post(f"/sessions/{worker.id}/drafts",
                              {"contract_kind": kind, "objective": objective,
                               "context": context})


def log_text(worker: Agent) -> str:
    return json.dumps([[e.type, e.data, e.raw] for e in Event.objects.filter(
        session_id=worker.id).order_by("seq")])


def export_text(worker: Agent) -> str:
    response = worker.client.get(f"/sessions/{worker.id}/export")
    assert response.status_code == 200
    return b"".join(response.streaming_content).decode()


# --- a good draft ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PROVIDERS)
def test_rule_9_a_good_draft_activates_a_contract_that_certifies(
    kind: str, worker: Agent, aux: Project, provider: FakeProvider,
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route(aux, provider, kind)
    reasoning = {"reasoning": REASONING} if kind == "openai-chat" else {"thinking": REASONING}
    provider.reply(answer(kind, **reasoning))
    response = draft(worker)
    assert response.status_code == 201, response.content
    body = response.json()
    document = body["draft"]
    assert body["receipt"] == document["receipt"] == receipt(
        "contract-draft", {k: v for k, v in document.items() if k != "receipt"})
    assert body["coverage"] == document["coverage"] and body["coverage"]["status"] == "ready"
    assert document["kind"] == "general" and document["objective"] == OBJECTIVE
    assert [c["id"] for c in document["checks"]] == ["readme-exists", "readme-install"]
    host = provider.origin.removeprefix("http://")
    [seen] = provider.seen
    block = {"contractKind": "general", "objective": OBJECTIVE, "context": PRIVATE,
             "availableCodeProfiles": []}
    assert document["authorship"] == {
        "mode": "auxiliary-model",
        "route": {"provider": kind, "model": "draft-model-1", "baseUrlHost": host,
                  "reasoningEffort": "low"},
        "promptVersion": drafting.PROMPT_VERSION,
        "inputReceipt": receipt("contract-author-input", block),
        "inputBytes": len(drafting.user_text(block).encode()),
    }
    assert document["usage"]["inputTokens"] == 321 and document["usage"]["outputTokens"] == 123

    # exactly one streamed request: the fixed prompt, one user block, no tools, the key in the
    # header only
    assert "tools" not in seen.body and seen.body["stream"] is True
    if kind == "openai-chat":
        assert seen.path == "/v1/chat/completions"
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        assert seen.body["messages"] == [
            {"role": "system", "content": drafting.SYSTEM_PROMPT},
            {"role": "user", "content": drafting.user_text(block)}]
        assert seen.body["reasoning_effort"] == "low"
        assert seen.body["max_completion_tokens"] == 2048
    else:
        assert seen.path == "/v1/messages"
        assert seen.headers["x-api-key"] == KEY
        assert seen.headers["anthropic-version"] == drafting.ANTHROPIC_VERSION
        assert seen.body["system"] == drafting.SYSTEM_PROMPT
        assert seen.body["messages"] == [{"role": "user", "content": [
            {"type": "text", "text": drafting.user_text(block)}]}]
        assert seen.body["output_config"] == {"effort": "low"}
        assert seen.body["max_tokens"] == 2048

    status = worker.status()
    assert status["latest_draft"]["receipt"] == document["receipt"]
    begun = worker.begin(body["begin"])
    assert begun.status_code == 201, begun.content
    contract = begun.json()["contract"]
    assert contract["draftReceipt"] == document["receipt"]
    assert contract["authorship"] == {
        "mode": "auxiliary-model", "route": document["authorship"]["route"],
        "promptVersion": drafting.PROMPT_VERSION, "draftReceipt": document["receipt"]}
    worker.write("README.md", "# Tool\n\n## Install\n")
    assert worker.turn_stop()["terminal"]["status"] == "certified"

    for text in (log_text(worker), export_text(worker), caplog.text):
        assert PRIVATE not in text and "Initech" not in text
        assert REASONING not in text
        assert KEY not in text


# --- refusals: nothing is recorded ----------------------------------------------------------------

FENCED = "```json\n" + json.dumps(PLAN) + "\n```"
BIG = "x" * (300 * 1024)

REFUSALS = [
    # name, provider, reply, status, code, reason
    ("fenced-openai", "openai-chat", answer("openai-chat", FENCED), 502, "DRAFT_OUTPUT",
     "markdown-fence"),
    ("fenced-anthropic", "anthropic-messages", answer("anthropic-messages", FENCED), 502,
     "DRAFT_OUTPUT", "markdown-fence"),
    ("extra-root-key", "openai-chat", answer("openai-chat", {**PLAN, "summary": "x"}), 502,
     "DRAFT_OUTPUT", "plan-invalid"),
    ("unknown-check-kind", "anthropic-messages",
     answer("anthropic-messages", {**PLAN, "checks": [
         PLAN["checks"][0], {**PLAN["checks"][1], "kind": "file_matches_regex"}]}),
     502, "DRAFT_OUTPUT", "plan-invalid"),
    ("empty-answer", "openai-chat", answer("openai-chat", ""), 502, "DRAFT_OUTPUT", "empty"),
    ("prose-around", "anthropic-messages",
     answer("anthropic-messages", "Sure! " + json.dumps(PLAN)), 502, "DRAFT_OUTPUT", "not-json"),
    ("tool-call-openai", "openai-chat", answer("openai-chat", tool_call=True, finish="tool_calls"),
     502, "DRAFT_STREAM", "tool-call"),
    ("tool-call-anthropic", "anthropic-messages",
     answer("anthropic-messages", tool_use=True, stop_reason="tool_use"), 502, "DRAFT_STREAM",
     "tool-call"),
    ("truncated-openai", "openai-chat", answer("openai-chat", finish=None, usage=False,
                                               done=False), 502, "DRAFT_STREAM", "truncated"),
    ("truncated-anthropic", "anthropic-messages",
     answer("anthropic-messages", stop_reason=None, stop=False), 502, "DRAFT_STREAM",
     "truncated"),
    ("connection-dropped", "openai-chat",
     Reply(events=openai_events(json.dumps(PLAN))[:4], abort=True), 502, "DRAFT_UPSTREAM",
     "transport"),
    ("length-finish", "openai-chat", answer("openai-chat", finish="length"), 502,
     "DRAFT_STREAM", "finish"),
    ("max-tokens-stop", "anthropic-messages",
     answer("anthropic-messages", stop_reason="max_tokens"), 502, "DRAFT_STREAM", "finish"),
    ("refusal-stop", "anthropic-messages", answer("anthropic-messages", stop_reason="refusal"),
     502, "DRAFT_STREAM", "finish"),
    ("oversize-openai", "openai-chat",
     Reply(events=openai_events(BIG, pieces=64)), 502, "DRAFT_STREAM", "oversize"),
    ("oversize-anthropic", "anthropic-messages",
     Reply(events=anthropic_events(BIG, pieces=64)), 502, "DRAFT_STREAM", "oversize"),
    ("provider-error-event", "anthropic-messages",
     Reply(events=anthropic_events(json.dumps(PLAN), error={"type": "overloaded_error",
                                                            "message": "Overloaded"})),
     502, "DRAFT_UPSTREAM", "provider-error"),
    ("http-500", "openai-chat", Reply(status=500, body=b'{"error": {"type": "server_error"}}',
                                      content_type="application/json"),
     502, "DRAFT_UPSTREAM", "http-status"),
    ("not-an-event-stream", "openai-chat",
     Reply(body=json.dumps({"choices": []}).encode(), content_type="application/json"),
     502, "DRAFT_STREAM", "content-type"),
    ("slow-server", "openai-chat",
     Reply(events=openai_events(json.dumps(PLAN)), delay=4), 504, "DRAFT_TIMEOUT",
     "timeout"),
    ("trickling-server", "anthropic-messages",
     Reply(events=anthropic_events(json.dumps(PLAN)), gap=0.25), 504, "DRAFT_TIMEOUT",
     "timeout"),
]


@pytest.mark.parametrize(("kind", "reply", "status", "code", "reason"),
                         [case[1:] for case in REFUSALS], ids=[case[0] for case in REFUSALS])
def test_rule_9_refused_answers_record_nothing(
    kind: str, reply: Reply, status: int, code: str, reason: str, worker: Agent, aux: Project,
    provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route(aux, provider, kind, timeout_seconds=2)
    provider.reply(reply)
    before = worker.status()
    response = draft(worker)
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["code"] == code and error["details"]["reason"] == reason, error
    assert error["message"]
    after = worker.status()
    assert after["next_seq"] == before["next_seq"] and after["latest_draft"] is None
    assert len(provider.seen) == 1  # no retry, no fallback
    for text in (response.content.decode(), caplog.text, log_text(worker)):
        assert PRIVATE not in text and KEY not in text


def test_rule_9_a_refused_plan_names_the_fields(worker: Agent, aux: Project,
                                                provider: FakeProvider) -> None:
    route(aux, provider)
    provider.reply(answer("openai-chat", {**PLAN, "summary": "x", "checks": [
        PLAN["checks"][0], {**PLAN["checks"][1], "kind": "file_matches_regex"}]}))
    error = draft(worker).json()["error"]
    paths = [item["path"] for item in error["details"]["errors"]]
    assert "summary" in paths and "checks/1/kind" in paths
    assert "file_matches_regex" in error["message"]


def test_rule_9_input_over_the_cap_is_refused_before_any_call(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    route(aux, provider, max_input_bytes=1024)
    provider.reply(answer("openai-chat"))
    response = draft(worker, context="c" * 2000)
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["details"][0]["path"] == "context" and "1024" in error["message"]
    assert provider.seen == []
    assert worker.status()["latest_draft"] is None


def test_rule_9_bad_draft_requests_name_the_field_and_call_nothing(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    route(aux, provider)
    response = worker.client.post(f"/sessions/{worker.id}/drafts",
                                  {"contract_kind": "general", "objective": "x", "tools": []})
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "tools"
    assert provider.seen == []


# --- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", PROVIDERS)
def test_a_provider_echoing_the_key_never_leaks_it(
    kind: str, worker: Agent, aux: Project, provider: FakeProvider,
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route(aux, provider, kind)
    provider.reply(Reply(status=401, echo_headers=True))
    response = draft(worker)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "DRAFT_UPSTREAM" and "HTTP 401" in error["message"]
    assert KEY not in response.content.decode() and KEY[:12] not in response.content.decode()
    assert KEY not in caplog.text and KEY[:12] not in caplog.text
    assert KEY not in log_text(worker)


def test_an_in_stream_error_echoing_the_key_never_leaks_it(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    route(aux, provider, "anthropic-messages")
    provider.reply(Reply(events=anthropic_events("{}", error={"type": KEY, "message": KEY})))
    response = draft(worker)
    assert response.status_code == 502 and KEY not in response.content.decode()


def test_a_missing_credential_is_refused_before_any_call(
    worker: Agent, aux: Project, provider: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV)
    route(aux, provider)
    response = draft(worker)
    assert response.status_code == 503
    assert KEY_ENV in response.json()["error"]["message"]
    assert provider.seen == []


def test_the_key_can_come_from_a_file(worker: Agent, aux: Project, provider: FakeProvider,
                                      tmp_path: Path) -> None:
    key_file = tmp_path / "draft.key"
    key_file.write_text("file-key-0123456789\n")
    route(aux, provider, "anthropic-messages", credential_env="",
          credential_file=str(key_file))
    provider.reply(answer("anthropic-messages"))
    assert draft(worker).status_code == 201
    assert provider.seen[0].headers["x-api-key"] == "file-key-0123456789"
    assert "file-key" not in log_text(worker)


def test_no_route_is_503_and_other_modes_cannot_draft(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    response = draft(worker)
    assert response.status_code == 503 and "route" in response.json()["error"]["message"]
    route(aux, provider)
    for mode in ("current-agent", "manual"):
        aux.authoring_mode = mode
        aux.save(update_fields=["authoring_mode"])
        response = draft(worker)
        assert response.status_code == 409
        assert "caller" in response.json()["error"]["message"]
    assert provider.seen == []


# --- begin in auxiliary-model mode --------------------------------------------------------------


@pytest.fixture
def drafted(worker: Agent, aux: Project, provider: FakeProvider) -> dict[str, Any]:
    route(aux, provider)
    provider.reply(answer("openai-chat"))
    response = draft(worker)
    assert response.status_code == 201, response.content
    return dict(response.json())


def _refused_and_nothing_written(worker: Agent, response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert worker.status()["contract"] is None or status == 409
    return dict(response.json()["error"])


def test_rule_9_a_changed_check_path_at_begin_is_refused(
    worker: Agent, drafted: dict[str, Any]
) -> None:
    body = json.loads(json.dumps(drafted["begin"]))
    body["checks"][1]["path"] = "docs/README.md"
    before = worker.status()["next_seq"]
    error = _refused_and_nothing_written(worker, worker.begin(body), 422)
    assert error["details"] == [{"path": "checks/1/path",
                                 "message": "differs from the draft (check 'readme-install')"}]
    assert worker.status()["next_seq"] == before and worker.status()["state"] == "idle"


@pytest.mark.parametrize("change", ["objective", "claim", "extra-check", "min-count"])
def test_rule_9_any_other_difference_from_the_draft_is_refused(
    worker: Agent, drafted: dict[str, Any], change: str
) -> None:
    body = json.loads(json.dumps(drafted["begin"]))
    if change == "objective":
        body["objective"] += "."
    elif change == "claim":
        body["claims"][0]["importance"] = "important"
    elif change == "extra-check":
        body["checks"].append({"id": "no-errors", "kind": "no_tool_errors"})
    else:
        body["claims"][0]["minimum_independent_sources"] = 2
    error = _refused_and_nothing_written(worker, worker.begin(body), 422)
    assert "does not match the draft" in error["message"]


def test_rule_9_begin_needs_the_latest_drafts_receipt(
    worker: Agent, drafted: dict[str, Any], provider: FakeProvider
) -> None:
    body = dict(drafted["begin"])
    without = {k: v for k, v in body.items() if k != "draft_receipt"}
    error = _refused_and_nothing_written(worker, worker.begin(without), 422)
    assert error["details"][0]["path"] == "draft_receipt"
    provider.reply(answer("openai-chat"))
    newer = draft(worker).json()
    assert newer["receipt"] != drafted["receipt"]  # every draft is its own record
    error = _refused_and_nothing_written(worker, worker.begin(body), 422)
    assert "latest draft" in error["message"]
    assert worker.begin(newer["begin"]).status_code == 201


def test_rule_9_a_receipt_opens_at_most_one_contract_even_after_abstain(
    worker: Agent, drafted: dict[str, Any]
) -> None:
    first = worker.begin(drafted["begin"])
    assert first.status_code == 201
    abstained = worker.client.post(f"/sessions/{worker.id}/abstain", {"reason": "wrong plan"})
    assert abstained.json()["terminal"]["status"] == "abstained"
    before = worker.status()["next_seq"]
    again = worker.begin(drafted["begin"])
    assert again.status_code == 409, again.content
    assert first.json()["contract"]["contractId"] in again.json()["error"]["message"]
    assert worker.status()["next_seq"] == before and worker.status()["state"] == "abstained"


def test_outside_auxiliary_mode_a_draft_receipt_is_refused(
    worker: Agent, drafted: dict[str, Any], aux: Project
) -> None:
    aux.authoring_mode = "current-agent"
    aux.save(update_fields=["authoring_mode"])
    error = _refused_and_nothing_written(worker, worker.begin(drafted["begin"]), 422)
    assert error["details"][0]["path"] == "draft_receipt"
    body = {k: v for k, v in drafted["begin"].items() if k != "draft_receipt"}
    begun = worker.begin(body)
    assert begun.status_code == 201
    assert begun.json()["contract"]["authorship"] == {"mode": "current-agent",
                                                      "declaredBy": "caller"}


# --- code drafts ----------------------------------------------------------------------------------


def profile(project: Project, profile_id: str, *, required: bool = True) -> VerifierProfile:
    return VerifierProfile.objects.create(
        project=project, profile_id=profile_id, description=f"{profile_id} suite",
        argv=["pytest", "-q"], required=required, receipt="sha256:" + "7" * 64)


def test_rule_9_a_code_draft_gets_the_required_profiles_and_begins_as_code(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    profile(aux, "unit-tests")
    profile(aux, "lint", required=False)
    route(aux, provider, "anthropic-messages")
    provider.reply(answer("anthropic-messages"))
    response = draft(worker, "code")
    assert response.status_code == 201, response.content
    body = response.json()
    document = body["draft"]
    assert document["kind"] == "code"
    assert [c["id"] for c in document["checks"]] == ["code-profile-unit-tests", "readme-exists",
                                                     "readme-install"]
    assert document["claims"][0]["id"] == "required-code-verification"
    sent = json.loads(provider.seen[0].body["messages"][0]["content"][0]["text"])
    assert sent["availableCodeProfiles"] == [
        {"id": "lint", "description": "lint suite", "required": False},
        {"id": "unit-tests", "description": "unit-tests suite", "required": True}]
    assert [c["id"] for c in body["begin"]["checks"]] == ["readme-exists", "readme-install"]
    wrong_route = worker.begin(body["begin"])
    assert wrong_route.status_code == 422 and "/code-contracts" in wrong_route.content.decode()
    begun = worker.client.post(f"/sessions/{worker.id}/code-contracts", body["begin"])
    assert begun.status_code == 201, begun.content
    # The draft's checks, between the protected paths check and the tamper scan's begin adds
    # (rules §14.3, §17.3, §17.5).
    [protected, *drafted, scan] = begun.json()["contract"]["checks"]
    assert protected["id"] == "protected-paths" and drafted == document["checks"]
    assert scan["id"] == "tamper-free"


def test_rule_9_a_code_draft_without_a_required_profile_calls_nothing(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    profile(aux, "lint", required=False)
    route(aux, provider)
    provider.reply(answer("openai-chat"))
    response = draft(worker, "code")
    assert response.status_code == 422 and "required" in response.json()["error"]["message"]
    assert provider.seen == [] and worker.status()["latest_draft"] is None


def test_rule_9_a_code_draft_missing_a_now_required_profile_cannot_begin(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    profile(aux, "unit-tests")
    route(aux, provider)
    provider.reply(answer("openai-chat"))
    body = draft(worker, "code").json()
    profile(aux, "type-check")  # required after the draft was made
    begun = worker.client.post(f"/sessions/{worker.id}/code-contracts", body["begin"])
    assert begun.status_code == 422, begun.content
    paths = [item["path"] for item in begun.json()["error"]["details"]]
    assert paths == ["claims/0/check_ids", "checks"]  # the injected claim and checks grew
    assert worker.status()["contract"] is None


def test_rule_9_a_code_draft_using_a_reserved_id_is_refused(
    worker: Agent, aux: Project, provider: FakeProvider
) -> None:
    profile(aux, "unit-tests")
    route(aux, provider)
    shadow = {"claims": [{**PLAN["claims"][0], "check_ids": ["code-profile-unit-tests"]}],
              "checks": [{"id": "code-profile-unit-tests", "kind": "file_exists",
                          "path": "README.md"}]}
    provider.reply(answer("openai-chat", shadow))
    response = draft(worker, "code")
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "DRAFT_OUTPUT"
    assert error["details"]["errors"][0]["path"] == "checks/0/id"
    assert worker.status()["latest_draft"] is None


# --- two-stage review shows the authorship ------------------------------------------------------


def test_rule_9_the_evidence_page_shows_route_prompt_version_and_draft_receipt(
    worker: Agent, aux: Project, provider: FakeProvider, reviewer: Any
) -> None:
    aux.review_mode = "required"
    aux.save(update_fields=["review_mode"])
    route(aux, provider, "anthropic-messages")
    provider.reply(answer("anthropic-messages"))
    drafted = draft(worker).json()
    begun = worker.begin({**drafted["begin"], "intent": INTENT})
    assert begun.status_code == 202, begun.content
    rita = reviewer_client("rita", "rita-password-1")
    intent = Review.objects.get(pk=begun.json()["review"]["id"])
    assert press(rita, f"/reviews/{intent.pk}/", "Approve").status_code == 302
    evidence = Review.objects.get(session_id=worker.id, stage=Stage.EVIDENCE)
    html = rita.get(f"/reviews/{evidence.pk}/").content.decode()
    host = provider.origin.removeprefix("http://")
    for text in ("auxiliary-model", "anthropic-messages", "draft-model-1", host,
                 drafting.PROMPT_VERSION, drafted["receipt"]):
        assert text in html
    assert "declared by the caller" not in html
    assert press(rita, f"/reviews/{evidence.pk}/", "Approve").status_code == 302
    contract = worker.status()["contract"]
    assert contract["version"] == 5
    assert contract["authorship"] == evidence.proposal["authorship"]
    assert contract["authorship"]["draftReceipt"] == drafted["receipt"]
    timeline = rita.get(f"/sessions/{worker.id}/").content.decode()
    assert drafted["receipt"] in timeline and PRIVATE not in timeline


def test_caller_declared_modes_are_labelled_so(worker: Agent, aux: Project) -> None:
    aux.authoring_mode = "manual"
    aux.save(update_fields=["authoring_mode"])
    begun = worker.begin({"objective": OBJECTIVE, **PLAN})
    assert begun.status_code == 201
    assert begun.json()["contract"]["authorship"] == {"mode": "manual", "declaredBy": "caller"}


# --- operators set the route in the admin -------------------------------------------------------


def _project_form(project: Project, **route_fields: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "slug": project.slug, "name": project.name, "max_attempts": "3", "max_checks": "20",
        "max_file_bytes": str(project.max_file_bytes), "review_mode": "off",
        "delivery_review": "off", "unattended_evidence": "any",
        "authoring_mode": "auxiliary-model", "review_ttl_seconds": "86400",
        "required_approvals": "1", "workspace_roots": json.dumps(project.workspace_roots),
        "extra_event_types": "[]", "webhook_url": "", "webhook_secret": "",
        "tree_max_files": str(project.tree_max_files),
        "tree_max_bytes": str(project.tree_max_bytes), "tree_exclusions": "[]",
        "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
        "draft_route-TOTAL_FORMS": "1", "draft_route-INITIAL_FORMS": "0",
        "draft_route-MAX_NUM_FORMS": "1",
    }
    data.update({f"draft_route-0-{name}": value for name, value in route_fields.items()})
    return data


def test_an_operator_sets_the_route_in_the_admin_and_never_the_key(project: Project) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client

    admin = get_user_model().objects.create_superuser("olga", "olga@example.com", "pw-12345678")
    client = Client()
    client.force_login(admin)
    url = f"/admin/governor/project/{project.pk}/change/"
    page = client.get(url).content.decode().lower()
    assert "drafting route (auxiliary-model authoring)" in page
    listing = client.get("/admin/governor/project/").content.decode()
    assert "current-agent (caller-declared)" in listing
    fields = {"provider": "openai-chat", "base_url": "https://api.example.com/v1",
              "model": "gpt-x", "reasoning_effort": "", "max_output_tokens": "4096",
              "timeout_seconds": "120", "max_input_bytes": "32768", "credential_file": ""}
    refused = client.post(url, _project_form(project, credential_env="sk-live-abc123", **fields))
    assert refused.status_code == 200 and "not the key itself" in refused.content.decode()
    assert not DraftRoute.objects.exists()
    saved = client.post(url, _project_form(project, credential_env="OPENAI_API_KEY", **fields))
    assert saved.status_code == 302, saved.content.decode()[:3000]
    row = DraftRoute.objects.get(project=project)
    assert row.credential_env == "OPENAI_API_KEY" and row.model == "gpt-x"
