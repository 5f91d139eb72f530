"""rules §9, the pure part: the user block and its receipt, the provider requests, the
event-stream decoder, both providers' stream readers and the strict parse of the answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from governor.domain import contracts, drafting
from governor.domain.canonical import receipt
from governor.domain.drafting import DraftError
from governor.lib.provider_streams import SSEDecoder, SSEEvent, StreamResult, stream_reader
from tests.sse_provider import anthropic_events, openai_events

PLAN: dict[str, Any] = {
    "claims": [{"id": "readme", "statement": "README.md documents installation",
                "importance": "critical", "verification": "deterministic",
                "check_ids": ["readme-install"]}],
    "checks": [{"id": "readme-install", "kind": "file_contains", "path": "README.md",
                "text": "## Install"}],
}
ROUTE = drafting.Route(provider=drafting.OPENAI, base_url="http://127.0.0.1:9/v1",
                       model="m-1", reasoning_effort="low", max_output_tokens=1000,
                       timeout_seconds=5, max_input_bytes=4096)


# --- the user block and the requests ------------------------------------------------------------



def read_stream(provider: str, chunks: Sequence[bytes]) -> StreamResult:
    """A whole recorded stream through the decoder and the provider's reader, as the drafting
    service feeds it chunk by chunk."""
    decoder, reader = SSEDecoder(), stream_reader(provider)
    for chunk in chunks:
        for event in decoder.feed(chunk):
            reader.event(event)
    for event in decoder.close():
        reader.event(event)
    return reader.result()


def test_rule_9_user_block_is_canonical_and_its_receipt_is_contract_author_input() -> None:
    request = drafting.draft_request({"contract_kind": "code", "objective": "Fix it",
                                      "context": "secret"})
    block = drafting.user_block(request, [
        {"id": "z-lint", "description": "ruff", "required": False},
        {"id": "a-tests", "description": "pytest", "required": True}])
    assert [p["id"] for p in block["availableCodeProfiles"]] == ["a-tests", "z-lint"]
    text = drafting.user_text(block)
    assert json.loads(text) == block and " " not in text.replace("Fix it", "")
    assert drafting.input_receipt(block) == receipt("contract-author-input", block)


@pytest.mark.parametrize(("body", "path"), [
    ({"objective": "x"}, "contract_kind"),
    ({"contract_kind": "other", "objective": "x"}, "contract_kind"),
    ({"contract_kind": "general", "objective": "  "}, "objective"),
    ({"contract_kind": "general", "objective": "x" * 4097}, "objective"),
    ({"contract_kind": "general", "objective": "x", "context": 3}, "context"),
    ({"contract_kind": "general", "objective": "x", "tools": []}, "tools"),
])
def test_rule_9_draft_request_names_the_bad_field(body: dict[str, Any], path: str) -> None:
    with pytest.raises(contracts.ContractError) as refused:
        drafting.draft_request(body)
    assert path in [error["path"] for error in refused.value.errors]


def test_rule_9_openai_request_is_one_streamed_call_without_tools() -> None:
    url, headers, body = drafting.provider_request(ROUTE, "USER")
    sent = json.loads(body)
    assert url == "http://127.0.0.1:9/v1/chat/completions"
    assert headers["Accept"] == "text/event-stream" and "Authorization" not in headers
    assert sent == {"model": "m-1", "stream": True, "stream_options": {"include_usage": True},
                    "max_completion_tokens": 1000, "reasoning_effort": "low",
                    "messages": [{"role": "system", "content": drafting.SYSTEM_PROMPT},
                                 {"role": "user", "content": "USER"}]}


def test_rule_9_anthropic_request_is_one_streamed_call_without_tools() -> None:
    route = drafting.Route(provider=drafting.ANTHROPIC, base_url="https://api.example.com/",
                           model="c-1", reasoning_effort=None, max_output_tokens=2000,
                           timeout_seconds=5, max_input_bytes=4096)
    url, headers, body = drafting.provider_request(route, "USER")
    assert url == "https://api.example.com/v1/messages"
    assert headers["anthropic-version"] == drafting.ANTHROPIC_VERSION
    assert json.loads(body) == {
        "model": "c-1", "max_tokens": 2000, "system": drafting.SYSTEM_PROMPT, "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "USER"}]}]}
    assert drafting.credential_headers(drafting.ANTHROPIC, "k") == {"x-api-key": "k"}


def test_the_system_prompt_is_versioned_and_names_every_check_kind() -> None:
    assert drafting.PROMPT_VERSION in drafting.SYSTEM_PROMPT
    for kind in contracts.CHECK_KINDS:
        assert kind in drafting.SYSTEM_PROMPT
    assert "{" in drafting.SYSTEM_PROMPT and "{{" not in drafting.SYSTEM_PROMPT


def test_route_public_names_only_the_host() -> None:
    assert ROUTE.public() == {"provider": "openai-chat", "model": "m-1",
                              "baseUrlHost": "127.0.0.1:9", "reasoningEffort": "low"}


@pytest.mark.parametrize(("changes", "field"), [
    ({"base_url": "https://user:pw@api.example.com"}, "base_url"),
    ({"base_url": "ftp://api.example.com"}, "base_url"),
    ({"credential_env": "", "credential_file": ""}, "credential_env"),
    ({"credential_env": "X", "credential_file": "/k"}, "credential_env"),
    ({"credential_env": "sk-live-abc"}, "credential_env"),
    ({"credential_env": "", "credential_file": "key.txt"}, "credential_file"),
    ({"reasoning_effort": "max"}, "reasoning_effort"),
])
def test_route_problems_name_the_field(changes: dict[str, str], field: str) -> None:
    values = {"provider": "openai-chat", "base_url": "https://api.example.com/v1",
              "model": "m", "reasoning_effort": "", "credential_env": "KEY",
              "credential_file": "", **changes}
    assert field in [name for name, _ in drafting.route_problems(**values)]


def test_redaction_removes_the_key_and_pieces_of_it() -> None:
    key = "sk-abcdefghijklmnop"
    assert key not in drafting.redact(f"bad key {key}", key)
    assert drafting.redact("Incorrect key sk-abcdefgh***", key) == "[redacted]"
    assert drafting.provider_error_type({"error": {"type": key}}, key) is None
    assert drafting.provider_error_type({"error": {"type": "authentication_error"}},
                                        key) == "authentication_error"
    assert drafting.provider_error_type({"error": {"type": "has spaces in it"}}, key) is None


# --- server-sent events -------------------------------------------------------------------------


def test_sse_decoder_handles_every_line_ending_comments_and_multiline_data() -> None:
    stream = (b"\xef\xbb\xbf: comment\r\nevent: one\r\ndata: a\r\ndata: b\r\n\r\n"
              b"data: c\n\nid: 7\rretry: 10\rdata:d\r\r"
              b"data: unterminated")
    events = SSEDecoder().feed(stream)
    assert events == [SSEEvent("one", "a\nb"), SSEEvent("message", "c"),
                      SSEEvent("message", "d")]


def test_sse_decoder_is_split_agnostic_even_inside_utf8_and_crlf() -> None:
    stream = "data: h\u00e9llo \u2603\r\n\r\nevent: x\r\ndata: 2\r\n\r\n".encode()
    for size in range(1, 9):
        decoder = SSEDecoder()
        events: list[SSEEvent] = []
        for start in range(0, len(stream), size):
            events += decoder.feed(stream[start:start + size])
        events += decoder.close()
        assert events == [SSEEvent("message", "h\u00e9llo \u2603"), SSEEvent("x", "2")], size


def test_sse_decoder_refuses_invalid_utf8() -> None:
    with pytest.raises(DraftError) as refused:
        SSEDecoder().feed(b"data: \xff\n\n")
    assert refused.value.reason == "sse-malformed"


# --- the provider streams -----------------------------------------------------------------------


def test_openai_stream_text_finish_and_usage_without_reasoning() -> None:
    result = read_stream("openai-chat", openai_events('{"a": 1}', reasoning="THINKING"))
    assert result.text == '{"a": 1}' and result.finish == "stop"
    assert result.usage == {"inputTokens": 321, "outputTokens": 123, "reasoningTokens": 45}


def test_anthropic_stream_text_finish_and_usage_without_thinking() -> None:
    result = read_stream("anthropic-messages", anthropic_events('{"a": 1}', thinking="HMM"))
    assert result.text == '{"a": 1}' and result.finish == "end_turn"
    assert result.usage == {"inputTokens": 321, "outputTokens": 123}


@pytest.mark.parametrize(("provider", "events", "reason"), [
    ("openai-chat", openai_events("{}", done=False), "truncated"),
    ("openai-chat", openai_events("{}", finish=None, usage=False), "truncated"),
    ("openai-chat", openai_events("{}", finish="length"), "finish"),
    ("openai-chat", openai_events("{}", finish="content_filter"), "finish"),
    ("openai-chat", openai_events("{}", tool_call=True), "tool-call"),
    ("openai-chat", [b'data: {"error": {"type": "overloaded"}}\n\n'], "provider-error"),
    ("openai-chat", [b"data: not json\n\n"], "sse-malformed"),
    ("openai-chat", openai_events("{}") + [b"data: {}\n\n"], "sse-malformed"),
    ("anthropic-messages", anthropic_events("{}", stop=False), "truncated"),
    ("anthropic-messages", anthropic_events("{}", stop_reason=None), "truncated"),
    ("anthropic-messages", anthropic_events("{}", stop_reason="max_tokens"), "finish"),
    ("anthropic-messages", anthropic_events("{}", stop_reason="refusal"), "finish"),
    ("anthropic-messages", anthropic_events("{}", stop_reason="tool_use"), "tool-call"),
    ("anthropic-messages", anthropic_events("{}", tool_use=True), "tool-call"),
    ("anthropic-messages", anthropic_events("{}", error={"type": "overloaded_error",
                                                         "message": "Overloaded"}),
     "provider-error"),
    ("anthropic-messages", anthropic_events("{}")[2:], "sse-malformed"),
])
def test_rule_9_streams_that_are_not_one_normal_text_answer_are_refused(
    provider: str, events: list[bytes], reason: str
) -> None:
    with pytest.raises(DraftError) as refused:
        read_stream(provider, events)
    assert refused.value.reason == reason


# --- the answer ---------------------------------------------------------------------------------


def test_rule_9_a_bare_plan_parses_to_stored_form() -> None:
    claims, checks = drafting.parse_plan_text("\n " + json.dumps(PLAN) + "\n", max_checks=20)
    assert claims[0]["checkIds"] == ["readme-install"]
    assert checks[0] == {"id": "readme-install", "kind": "file_contains", "path": "README.md",
                         "text": "## Install"}


@pytest.mark.parametrize(("text", "reason", "path"), [
    ("", "empty", None),
    ("   \n", "empty", None),
    ("```json\n" + json.dumps(PLAN) + "\n```", "markdown-fence", None),
    ("Here is the plan: " + json.dumps(PLAN), "not-json", None),
    (json.dumps(PLAN) + json.dumps(PLAN), "not-json", None),
    ('{"claims": [], "claims": []}', "not-json", None),
    (json.dumps({**PLAN, "notes": "x"}), "plan-invalid", "notes"),
    (json.dumps({**PLAN, "checks": [{**PLAN["checks"][0], "kind": "file_matches"}]}),
     "plan-invalid", "checks/0/kind"),
    (json.dumps({**PLAN, "checks": [{**PLAN["checks"][0], "weight": 2}]}),
     "plan-invalid", "checks/0/weight"),
    (json.dumps({"claims": PLAN["claims"]}), "plan-invalid", "checks"),
    ('{"claims": [], "checks": [NaN]}', "not-json", None),
])
def test_rule_9_only_one_strict_plan_object_is_accepted(
    text: str, reason: str, path: str | None
) -> None:
    with pytest.raises(DraftError) as refused:
        drafting.parse_plan_text(text, max_checks=20)
    assert refused.value.code == drafting.OUTPUT and refused.value.reason == reason
    if path is not None:
        assert path in [error["path"] for error in refused.value.errors or []]


def test_rule_9_a_code_draft_gets_the_required_profiles_injected() -> None:
    claims, checks = drafting.parse_plan_text(json.dumps(PLAN), max_checks=20)
    request = drafting.DraftRequest(kind="code", objective="o", context="")
    proposal = drafting.draft_proposal(request, claims, checks,
                                       required_profile_ids=["unit-tests"], max_checks=20)
    assert [c["id"] for c in proposal.checks] == ["code-profile-unit-tests", "readme-install"]
    assert proposal.claims[0]["id"] == contracts.REQUIRED_CODE_CLAIM_ID
    reserved = {**PLAN, "checks": [{**PLAN["checks"][0], "id": "code-profile-x"}],
                "claims": [{**PLAN["claims"][0], "check_ids": ["code-profile-x"]}]}
    claims, checks = drafting.parse_plan_text(json.dumps(reserved), max_checks=20)
    with pytest.raises(DraftError) as refused:
        drafting.draft_proposal(request, claims, checks, required_profile_ids=["unit-tests"],
                                max_checks=20)
    assert refused.value.errors and refused.value.errors[0]["path"] == "checks/0/id"


def _document(kind: str = "general") -> dict[str, Any]:
    claims, checks = drafting.parse_plan_text(json.dumps(PLAN), max_checks=20)
    request = drafting.DraftRequest(kind=kind, objective="Write README.md", context="")
    proposal = drafting.draft_proposal(request, claims, checks,
                                       required_profile_ids=["unit-tests"], max_checks=20)
    return drafting.draft_document(
        draft_id="draft-1", session_id="s-1", proposal=proposal, coverage={"status": "ready"},
        route=ROUTE, input_receipt="sha256:" + "0" * 64, input_bytes=10,
        usage={"outputTokens": 3})


def test_rule_9_the_draft_receipt_covers_the_whole_document() -> None:
    document = _document()
    body = {k: v for k, v in document.items() if k != "receipt"}
    assert document["receipt"] == receipt("contract-draft", body)
    assert document["authorship"]["promptVersion"] == drafting.PROMPT_VERSION
    assert "context" not in json.dumps(document)


@pytest.mark.parametrize("kind", ["general", "code"])
def test_rule_9_the_begin_body_reproduces_the_draft_exactly(kind: str) -> None:
    document = _document(kind)
    body = drafting.begin_body(document)
    proposal = contracts.validate_proposal(body, max_checks=20, max_attempts_cap=3,
                                           allow_empty_checks=kind == "code",
                                           allow_empty_claims=kind == "code")
    if kind == "code":
        proposal = contracts.inject_code_profiles(proposal, ["unit-tests"], max_checks=20)
    assert proposal.draft_receipt == document["receipt"]
    assert drafting.plan_differences(document, proposal.plan()) == []


def test_rule_9_plan_differences_name_the_changed_field() -> None:
    document = _document()
    plan = {"objective": document["objective"], "claims": document["claims"],
            "checks": [{**document["checks"][0], "path": "docs/README.md"}]}
    assert drafting.plan_differences(document, plan) == [
        {"path": "checks/0/path", "message": "differs from the draft (check 'readme-install')"}]
    plan = {**plan, "objective": "Other", "checks": []}
    assert [d["path"] for d in drafting.plan_differences(document, plan)] == ["objective",
                                                                              "checks"]
