"""rules §4 rules 6–10: evaluating checks against the workspace and the session log."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from governor.domain.checks import (
    CheckResult,
    LogEvidence,
    VerificationRecord,
    awaits_run,
    evaluate_check,
    evaluate_checks,
    resolve_pointer,
)
from governor.domain.harness import is_governor_tool
from governor.domain.workspace import Workspace, identity_at

START = 10
RECEIPT = "sha256:" + "a" * 64
OLD_RECEIPT = "sha256:" + "b" * 64
LIMIT = 4096
EXCLUSIONS = "sha256:" + "e" * 64
TREE = {"id": "gittree:sha256:" + "ab12" * 16, "exclusions": EXCLUSIONS}


# --- event builders (shapes as in tests/fixtures/harness/logs) -----------------------------


def call(seq: int, call_id: str, name: str, arguments: str = "{}") -> dict[str, Any]:
    return {
        "seq": seq,
        "type": "tool/call",
        "origin": "agent",
        "data": {"turn": 1, "step": 1, "callId": call_id, "name": name, "arguments": arguments},
    }


def result(
    seq: int, call_id: str, *, is_error: bool = False, error: dict[str, Any] | None = None
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": 1,
        "step": 1,
        "message": {
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": "out"}],
                    "isError": is_error,
                }
            ],
            "role": "user",
            "id": f"m{seq}",
        },
    }
    if error is not None:
        data["error"] = error
    return {"seq": seq, "type": "tool/result", "origin": "agent", "data": data}


def dispatch(seq: int, name: str) -> dict[str, Any]:
    return {
        "seq": seq,
        "type": "tool/code-dispatch-start",
        "origin": "agent",
        "data": {
            "rootCallId": "r",
            "parentCallId": "r",
            "subCallId": "r:1",
            "name": name,
            "arguments": {},
        },
    }


def verification(
    seq: int,
    profile: str = "tests",
    *,
    passed: bool = True,
    receipt: str = RECEIPT,
    mode: str = "read-only",
    tree: dict[str, str] | None = TREE,
) -> dict[str, Any]:
    stream = {"bytes": 0, "truncated": False, "receipt": "sha256:" + "0" * 64}
    return {
        "seq": seq,
        "type": "reliability/code-verification",
        "origin": "governor",
        "data": {
            "verificationId": f"v{seq}",
            "profile": profile,
            "profileReceipt": receipt,
            "passed": passed,
            "failureKind": None if passed else "exit",
            "exitCode": 0 if passed else 1,
            "signal": None,
            "durationMs": 25,
            "sandboxMode": mode,
            "stdout": stream,
            "stderr": stream,
            "treeBefore": tree,
            "tree": tree,
        },
    }


def bound(root: Path) -> Workspace:
    return Workspace(root, identity_at(str(root)))


def run(
    check: dict[str, Any],
    *,
    events: list[dict[str, Any]] | None = None,
    root: Path | None = None,
    receipts: dict[str, str] | None = None,
    limit: int = LIMIT,
    tree: dict[str, str] | None = TREE,
) -> CheckResult:
    return evaluate_check(
        check,
        after_seq=START,
        evidence=LogEvidence(events or []),
        workspace=bound(root) if root else Workspace("/nonexistent-workspace", ""),
        tree=tree,
        current_profile_receipts=receipts if receipts is not None else {"tests": RECEIPT},
        max_file_bytes=limit,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


# --- result shape and crash handling ------------------------------------------------------


def test_rule_4_result_has_id_kind_passed_and_one_sentence_of_evidence(ws: Path) -> None:
    (ws / "a").write_text("x")
    outcome = run({"id": "a-exists", "kind": "file_exists", "path": "a"}, root=ws)
    assert set(outcome) == {"id", "kind", "passed", "evidence"}
    assert outcome["id"] == "a-exists" and outcome["kind"] == "file_exists"
    assert outcome["passed"] is True
    assert outcome["evidence"].endswith(".") and "\n" not in outcome["evidence"]


def test_rule_4_a_check_that_raises_fails_with_the_error_as_evidence(ws: Path) -> None:
    class Exploding(LogEvidence):
        def tool_call_count(self, tool: str, after_seq: int) -> int:
            raise RuntimeError("database went away")

    outcome = evaluate_check(
        {"id": "x", "kind": "tool_not_called", "tool": "rm"},
        after_seq=START,
        evidence=Exploding([]),
        workspace=bound(ws),
        tree=TREE,
        current_profile_receipts={},
        max_file_bytes=LIMIT,
    )
    assert outcome["passed"] is False
    assert "RuntimeError: database went away" in outcome["evidence"]


def test_rule_4_a_malformed_stored_check_fails_instead_of_passing(ws: Path) -> None:
    assert run({"id": "x", "kind": "file_contains", "path": "a"}, root=ws)["passed"] is False
    outcome = run({"id": "x", "kind": "file_teleports"}, root=ws)
    assert outcome["passed"] is False and "unknown check kind" in outcome["evidence"]


def test_rule_4_one_crashing_check_does_not_stop_the_others(ws: Path) -> None:
    (ws / "a").write_text("x")
    contract = {
        "startedAtSeq": START,
        "checks": [
            {"id": "broken", "kind": "json_equals", "path": "a", "pointer": "", "value": {1, 2}},
            {"id": "fine", "kind": "file_exists", "path": "a"},
        ],
    }
    results = evaluate_checks(
        contract,
        evidence=LogEvidence([]),
        workspace=bound(ws),
        tree=TREE,
        current_profile_receipts={},
        max_file_bytes=LIMIT,
    )
    assert [(r["id"], r["passed"]) for r in results] == [("broken", False), ("fine", True)]


# --- rules 4.6 / 4.7 file checks ----------------------------------------------------------


def test_rule_4_6_symlink_outside_the_workspace_fails_outside_workspace(
    ws: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret").write_text("password")
    (ws / "link").symlink_to(tmp_path / "secret")
    for kind, extra in (("file_exists", {}), ("file_contains", {"text": "pass"})):
        outcome = run({"id": "x", "kind": kind, "path": "link", **extra}, root=ws)
        assert outcome["passed"] is False
        assert "outside workspace" in outcome["evidence"]


def test_rule_4_6_symlink_inside_the_workspace_is_followed(ws: Path) -> None:
    (ws / "real").write_text("hello world")
    (ws / "alias").symlink_to("real")
    assert run({"id": "x", "kind": "file_contains", "path": "alias", "text": "world"}, root=ws)[
        "passed"
    ]


def test_rule_4_6_directory_fails_file_exists(ws: Path) -> None:
    (ws / "d").mkdir()
    outcome = run({"id": "x", "kind": "file_exists", "path": "d"}, root=ws)
    assert not outcome["passed"] and "directory" in outcome["evidence"]


def test_rule_4_6_fifo_fails_file_exists(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    outcome = run({"id": "x", "kind": "file_exists", "path": "pipe"}, root=ws)
    assert not outcome["passed"] and "FIFO" in outcome["evidence"]


def test_rule_4_6_file_over_max_file_bytes_fails(ws: Path) -> None:
    (ws / "big").write_text("x" * 11)
    outcome = run(
        {"id": "x", "kind": "file_contains", "path": "big", "text": "x"}, root=ws, limit=10
    )
    assert not outcome["passed"] and "over the 10-byte limit" in outcome["evidence"]


def test_rule_4_6_invalid_utf8_fails(ws: Path) -> None:
    (ws / "bad").write_bytes(b"ok \xff")
    outcome = run({"id": "x", "kind": "file_contains", "path": "bad", "text": "ok"}, root=ws)
    assert not outcome["passed"] and "not valid UTF-8" in outcome["evidence"]


def test_rule_4_6_nul_byte_fails(ws: Path) -> None:
    (ws / "nul").write_bytes(b"ok\x00")
    outcome = run({"id": "x", "kind": "file_not_contains", "path": "nul", "text": "zz"}, root=ws)
    assert not outcome["passed"] and "NUL" in outcome["evidence"]


def test_rule_4_6_bom_is_content_so_file_equals_sees_it(ws: Path) -> None:
    (ws / "bom").write_bytes(b"\xef\xbb\xbfhi")
    assert not run({"id": "x", "kind": "file_equals", "path": "bom", "text": "hi"}, root=ws)[
        "passed"
    ]
    assert run({"id": "x", "kind": "file_equals", "path": "bom", "text": "\ufeffhi"}, root=ws)[
        "passed"
    ]


def test_rule_4_6_binary_file_fails_file_exists(ws: Path) -> None:
    (ws / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    assert not run({"id": "x", "kind": "file_exists", "path": "logo.png"}, root=ws)["passed"]


def test_rule_4_6_file_deleted_between_checks_fails_cleanly(ws: Path) -> None:
    (ws / "a").write_text("x")
    assert run({"id": "x", "kind": "file_exists", "path": "a"}, root=ws)["passed"]
    (ws / "a").unlink()
    outcome = run({"id": "x", "kind": "file_contains", "path": "a", "text": "x"}, root=ws)
    assert not outcome["passed"] and outcome["evidence"] == "a: not found."


def test_rule_4_6_file_absent_does_not_follow_a_dangling_link(ws: Path) -> None:
    (ws / "dangling").symlink_to("nowhere")
    assert not run({"id": "x", "kind": "file_absent", "path": "dangling"}, root=ws)["passed"]
    assert run({"id": "x", "kind": "file_absent", "path": "nowhere"}, root=ws)["passed"]


def test_rule_4_6_file_absent_through_a_link_outside_fails(ws: Path, tmp_path: Path) -> None:
    (ws / "door").symlink_to(tmp_path, target_is_directory=True)
    outcome = run({"id": "x", "kind": "file_absent", "path": "door/gone"}, root=ws)
    assert not outcome["passed"] and "outside workspace" in outcome["evidence"]


def test_rule_4_7_file_contains_is_exact_and_case_sensitive(ws: Path) -> None:
    (ws / "a").write_text("Hello, World\n")
    check = {"id": "x", "kind": "file_contains", "path": "a", "text": "hello"}
    assert not run(check, root=ws)["passed"]
    check["text"] = "Hello, W"
    assert run(check, root=ws)["passed"]


def test_rule_4_7_file_not_contains(ws: Path) -> None:
    (ws / "a").write_text("TODO: later")
    check = {"id": "x", "kind": "file_not_contains", "path": "a", "text": "TODO"}
    assert not run(check, root=ws)["passed"]
    check["text"] = "todo"
    assert run(check, root=ws)["passed"]


def test_rule_4_7_file_not_contains_on_a_missing_file_fails(ws: Path) -> None:
    check = {"id": "x", "kind": "file_not_contains", "path": "missing", "text": "TODO"}
    assert not run(check, root=ws)["passed"]


def test_rule_4_7_file_equals_does_not_normalise_newlines(ws: Path) -> None:
    (ws / "crlf").write_bytes(b"a\r\nb\r\n")
    check = {"id": "x", "kind": "file_equals", "path": "crlf", "text": "a\nb\n"}
    assert not run(check, root=ws)["passed"]
    check["text"] = "a\r\nb\r\n"
    assert run(check, root=ws)["passed"]


def test_rule_4_7_file_equals_empty_text_matches_an_empty_file(ws: Path) -> None:
    (ws / "empty").write_bytes(b"")
    assert run({"id": "x", "kind": "file_equals", "path": "empty", "text": ""}, root=ws)["passed"]


# --- rule 4.8 json_equals -------------------------------------------------------------------

DOC = {"a/b": 1, "~": 2, "list": [10, 20], "s": "text", "t": True, "n": None, "": "empty-key"}


@pytest.mark.parametrize(
    ("pointer", "expected"),
    [
        ("", DOC),
        ("/a~1b", 1),
        ("/~0", 2),
        ("/list/0", 10),
        ("/list/1", 20),
        ("/n", None),
        ("/", "empty-key"),
    ],
)
def test_rule_4_8_pointer_resolves(pointer: str, expected: Any) -> None:
    assert resolve_pointer(DOC, pointer) == (True, expected)


@pytest.mark.parametrize(
    "pointer",
    [
        "/list/01",
        "/list/-",
        "/list/2",
        "/list/-1",
        "/list/+1",
        "/list/ 1",
        "/s/0",
        "/t/x",
        "/missing",
        "/a/b",
        "/~2",
        "list",
    ],
)
def test_rule_4_8_pointer_resolves_to_nothing(pointer: str) -> None:
    assert resolve_pointer(DOC, pointer) == (False, None)


def test_rule_4_8_pointer_01_resolves_to_nothing() -> None:
    assert resolve_pointer([5, 6], "/01") == (False, None)
    assert resolve_pointer({"01": "key"}, "/01") == (True, "key")


def test_rule_4_8_pointer_unescapes_tilde_1_before_tilde_0() -> None:
    assert resolve_pointer({"~1": "x", "/": "y"}, "/~01") == (True, "x")


def json_check(pointer: str, value: Any) -> dict[str, Any]:
    return {
        "id": "j",
        "kind": "json_equals",
        "path": "config.json",
        "pointer": pointer,
        "value": value,
    }


def test_rule_4_8_json_equals_compares_by_canonical_form(ws: Path) -> None:
    (ws / "config.json").write_text('{"n": 1.0, "b": true, "o": {"y": 2, "x": 1}}')
    assert run(json_check("/n", 1), root=ws)["passed"]
    assert run(json_check("/o", {"x": 1, "y": 2.0}), root=ws)["passed"]


def test_rule_4_8_true_differs_from_1(ws: Path) -> None:
    (ws / "config.json").write_text('{"b": true, "one": 1}')
    outcome = run(json_check("/b", 1), root=ws)
    assert not outcome["passed"] and "is true, expected 1" in outcome["evidence"]
    assert not run(json_check("/one", True), root=ws)["passed"]
    assert not run(json_check("/one", 1.5), root=ws)["passed"]


def test_rule_4_8_one_equals_one_point_zero(ws: Path) -> None:
    (ws / "config.json").write_text('{"v": 1}')
    assert run(json_check("/v", 1.0), root=ws)["passed"]


def test_rule_4_8_missing_pointer_fails(ws: Path) -> None:
    (ws / "config.json").write_text('{"list": [1]}')
    outcome = run(json_check("/list/1", 1), root=ws)
    assert not outcome["passed"] and "resolves to nothing" in outcome["evidence"]


def test_rule_4_8_pointer_into_a_string_resolves_to_nothing(ws: Path) -> None:
    (ws / "config.json").write_text('{"s": "abc"}')
    assert not run(json_check("/s/0", "a"), root=ws)["passed"]


@pytest.mark.parametrize(
    "content",
    [
        '{"a": 1,}',
        "{'a': 1}",
        '{"a": NaN}',
        '{"a": 1, "a": 2}',
        '{"a": -0}',
        '{"a": 9007199254740993}',
        "",
        '{"a": Infinity}',
    ],
)
def test_rule_4_8_invalid_json_content_fails(ws: Path, content: str) -> None:
    (ws / "config.json").write_text(content)
    outcome = run(json_check("", {"a": 1}), root=ws)
    assert not outcome["passed"] and "not valid JSON" in outcome["evidence"]


def test_rule_4_8_json_file_with_a_bom_is_not_strict_json(ws: Path) -> None:
    (ws / "config.json").write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert not run(json_check("/a", 1), root=ws)["passed"]


# --- rule 4.9 tool checks --------------------------------------------------------------------


def test_rule_4_9_tool_succeeded_counts_calls_answered_without_error() -> None:
    events = [
        call(11, "c1", "write_file"),
        result(12, "c1"),
        call(13, "c2", "write_file"),
        result(14, "c2", is_error=True),
        call(15, "c3", "write_file"),
    ]
    outcome = run(
        {"id": "t", "kind": "tool_succeeded", "tool": "write_file", "minCount": 1}, events=events
    )
    assert outcome["passed"] and "succeeded at least once" in outcome["evidence"]
    assert not run(
        {"id": "t", "kind": "tool_succeeded", "tool": "write_file", "minCount": 2}, events=events
    )["passed"]


def test_rule_4_9_only_events_after_the_contract_start_count() -> None:
    events = [call(9, "c1", "write_file"), result(11, "c1")]
    assert not run({"id": "t", "kind": "tool_succeeded", "tool": "write_file"}, events=events)[
        "passed"
    ]


def test_rule_4_9_a_result_with_data_error_is_not_a_success() -> None:
    error = {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    events = [call(11, "c1", "write_remote"), result(12, "c1", is_error=False, error=error)]
    assert not run({"id": "t", "kind": "tool_succeeded", "tool": "write_remote"}, events=events)[
        "passed"
    ]


def test_rule_4_9_arguments_contain_matches_the_raw_arguments_text() -> None:
    events = [
        call(11, "c1", "shell", '{"cmd": "pytest -q"}'),
        result(12, "c1"),
        call(13, "c2", "shell", '{"cmd": "ls"}'),
        result(14, "c2"),
    ]
    check = {
        "id": "t",
        "kind": "tool_succeeded",
        "tool": "shell",
        "argumentsContain": '"cmd": "pytest',
        "minCount": 1,
    }
    assert run(check, events=events)["passed"]
    check["minCount"] = 2
    assert not run(check, events=events)["passed"]


def test_rule_4_9_a_result_answers_the_latest_call_with_its_id() -> None:
    events = [
        call(11, "same", "shell"),
        result(12, "same", is_error=True),
        call(13, "same", "shell"),
        result(14, "same"),
    ]
    evidence = LogEvidence(events)
    assert evidence.tool_success_count("shell", START, None, 100) == 1
    assert evidence.tool_success_count("shell", 12, None, 100) == 1


def test_rule_4_9_tool_not_called() -> None:
    events = [call(11, "c1", "rm"), result(12, "c1", is_error=True)]
    outcome = run({"id": "t", "kind": "tool_not_called", "tool": "rm"}, events=events)
    assert not outcome["passed"] and "was called once" in outcome["evidence"]
    assert run({"id": "t", "kind": "tool_not_called", "tool": "rmdir"}, events=events)["passed"]
    assert run({"id": "t", "kind": "tool_not_called", "tool": "rm"}, events=[call(10, "c", "rm")])[
        "passed"
    ]


def test_rule_4_9_no_tool_errors_names_the_first_errored_result() -> None:
    events = [
        call(11, "c1", "ok_tool"),
        result(12, "c1"),
        call(13, "c2", "bad_tool"),
        result(14, "c2", is_error=True),
        call(15, "c3", "worse_tool"),
        result(16, "c3", is_error=True),
    ]
    outcome = run({"id": "t", "kind": "no_tool_errors"}, events=events)
    assert not outcome["passed"]
    assert outcome["evidence"] == "The tool result of tool 'bad_tool' at seq 14 is an error."
    assert run({"id": "t", "kind": "no_tool_errors"}, events=events[:2])["passed"]


def test_rule_4_9_not_started_result_without_a_call_is_an_error() -> None:
    events = [
        result(
            11, "ghost", is_error=True, error={"name": "ToolNotStarted", "code": "TOOL_NOT_STARTED"}
        )
    ]
    assert LogEvidence(events).first_tool_error(START) == (11, None)


REAL_LOG = [  # tests/fixtures/harness/logs/examples/headless-agent/tests/snapshots/pty-tools
    r'{"type":"tool/call","data":{"turn":1,"step":1,"callId":"pty-spawn","name":"terminal_open","arguments":"{\"type\":\"shell\",\"name\":\"main\"}"}}',  # noqa: E501
    r'{"type":"tool/result","data":{"turn":1,"step":1,"message":{"source":{"kind":"tool","callId":"pty-spawn"},"content":[{"type":"tool-result","toolCallId":"pty-spawn","content":[{"type":"text","text":"started terminal session pty-1 (main) [type: shell]\ndsh> "}],"isError":false}],"role":"user","id":"2da21b47-7fb3-444c-99a6-2c21743731ee"}},"sourceEventSeqs":[15],"surfaceOp":"append"}',  # noqa: E501
    r'{"type":"tool/call","data":{"turn":1,"step":4,"callId":"pty-signal","name":"terminal_signal","arguments":"{\"sessionId\":\"pty-missing\",\"signal\":\"SIGINT\"}"}}',  # noqa: E501
    r'{"type":"tool/result","data":{"turn":1,"step":4,"message":{"source":{"kind":"tool","callId":"pty-signal"},"content":[{"type":"tool-result","toolCallId":"pty-signal","content":[{"type":"text","text":"Error: unknown PTY session pty-missing"}],"isError":true}],"role":"user","id":"16fc1ca2-0eca-42d7-85d0-31794424c260"}},"sourceEventSeqs":[45],"surfaceOp":"append"}',  # noqa: E501
]  # fmt: skip


def test_rule_4_9_log_evidence_reads_recorded_harness_events() -> None:
    events = [
        {**json.loads(line), "seq": 20 + i, "origin": "agent"} for i, line in enumerate(REAL_LOG)
    ]
    evidence = LogEvidence(events)
    assert evidence.tool_success_count("terminal_open", START, '"shell"', 100) == 1
    assert evidence.tool_success_count("terminal_signal", START, None, 100) == 0
    assert evidence.tool_call_count("terminal_signal", START) == 1
    assert evidence.first_tool_error(START) == (23, "terminal_signal")


# --- rule 4.10 code verification freshness -------------------------------------------------

CODE_CHECK = {
    "id": "code-profile-tests",
    "kind": "code_verification_succeeded",
    "profile": "tests",
    "minCount": 1,
}


def test_rule_4_10_a_fresh_passing_run_passes() -> None:
    outcome = run(CODE_CHECK, events=[call(11, "c", "edit"), verification(12)])
    assert outcome["passed"]
    assert "1 of the last 1 run of profile 'tests' after seq 11" in outcome["evidence"]
    assert "stale result" not in outcome["evidence"]  # said only when one was ignored


def test_rule_4_10_no_run_yet_is_a_check_that_awaits_its_run_not_one_that_failed() -> None:
    outcome = run(CODE_CHECK, events=[call(11, "c", "edit")])
    assert not outcome["passed"] and awaits_run(outcome)
    assert outcome["evidence"] == ("No run of profile 'tests' after seq 11 (the last workspace "
                                   "change) on this tree.")
    assert not awaits_run(run(CODE_CHECK, events=[verification(12, passed=False)]))


def test_rule_4_10_later_edit_makes_a_pass_stale() -> None:
    events = [verification(11), call(12, "c", "edit_file"), result(13, "c")]
    outcome = run(CODE_CHECK, events=events)
    assert not outcome["passed"] and "No run of profile 'tests' after seq 12" in outcome["evidence"]


def test_rule_4_10_code_dispatch_is_a_mutation() -> None:
    assert not run(CODE_CHECK, events=[verification(11), dispatch(12, "write_file")])["passed"]


def test_rule_4_10_governor_tool_calls_are_not_mutations() -> None:
    events = [
        verification(11),
        call(12, "g", "mcp__governor__reliability_verify"),
        call(13, "h", "reliability_status"),
        dispatch(14, "governor.reliability_code_verify"),
    ]
    assert run(CODE_CHECK, events=events)["passed"]


def test_rule_4_10_workspace_write_run_of_another_profile_is_a_mutation() -> None:
    events = [verification(11), verification(12, "format", mode="workspace-write")]
    assert not run(CODE_CHECK, events=events)["passed"]


def test_rule_4_10_read_only_run_of_another_profile_is_not_a_mutation() -> None:
    events = [verification(11), verification(12, "lint", mode="read-only")]
    assert run(CODE_CHECK, events=events)["passed"]


def test_rule_4_10_workspace_write_run_of_the_same_profile_is_not_a_mutation() -> None:
    events = [verification(11, mode="workspace-write")]
    assert run(CODE_CHECK, events=events)["passed"]


def test_rule_4_10_the_last_run_decides() -> None:
    assert not run(CODE_CHECK, events=[verification(11), verification(12, passed=False)])["passed"]
    assert run(CODE_CHECK, events=[verification(11, passed=False), verification(12)])["passed"]


def test_rule_4_10_the_last_min_count_runs_must_all_pass() -> None:
    check = {**CODE_CHECK, "minCount": 2}
    assert not run(check, events=[verification(11)])["passed"]
    assert run(check, events=[verification(11), verification(12)])["passed"]
    outcome = run(
        check, events=[verification(11), verification(12, passed=False), verification(13)]
    )
    assert not outcome["passed"] and "1 of the last 2 runs" in outcome["evidence"]


def test_rule_4_10_a_run_of_an_edited_profile_is_stale_and_ignored() -> None:
    outcome = run(CODE_CHECK, events=[verification(11, receipt=OLD_RECEIPT)])
    assert not outcome["passed"]
    assert "1 stale result of an edited profile ignored" in outcome["evidence"]
    outcome = run(CODE_CHECK, events=[verification(11), verification(12, receipt=OLD_RECEIPT)])
    assert outcome["passed"] and "1 stale result" in outcome["evidence"]


def test_rule_4_10_runs_before_the_contract_start_do_not_count() -> None:
    assert not run(CODE_CHECK, events=[verification(START)])["passed"]


def test_rule_4_10_a_profile_that_no_longer_exists_fails() -> None:
    outcome = run(CODE_CHECK, events=[verification(11)], receipts={})
    assert not outcome["passed"] and "not configured" in outcome["evidence"]


def test_rule_4_10_mutation_boundary_defaults_to_the_contract_start() -> None:
    evidence = LogEvidence(
        [
            call(5, "c", "edit"),
            verification(12, "other", mode="workspace-write"),
            verification(13, "tests", mode="workspace-write"),
        ]
    )
    assert evidence.mutation_boundary(START, "tests") == 12
    assert evidence.mutation_boundary(START, "other") == 13
    assert evidence.mutation_boundary(13, "tests") == 13
    assert LogEvidence([call(5, "c", "edit")]).mutation_boundary(START, "tests") == START
    assert evidence.verifications_after("tests", START) == [
        VerificationRecord(
            seq=13,
            verification_id="v13",
            profile="tests",
            profile_receipt=RECEIPT,
            passed=True,
            failure_kind=None,
            sandbox_mode="workspace-write",
            started_after_seq=12,
            tree=(TREE["id"], TREE["exclusions"]),
        )
    ]


# --- governor tool names (§2) -------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "reliability_verify",
        "mcp__governor__reliability_begin_code",
        "gov.reliability_status",
        "a.b__reliability_code_profiles",
        "reliability_abstain",
    ],
)
def test_governor_tools_are_recognised_by_their_last_segment(name: str) -> None:
    assert is_governor_tool(name)


@pytest.mark.parametrize(
    "name",
    [
        "my_reliability_verify",
        "reliability_verify_x",
        "mcp__reliability__verify",
        "reliability",
        "write_file",
        "reliability_verify.sh",
    ],
)
def test_other_tools_are_not_governor_tools(name: str) -> None:
    assert not is_governor_tool(name)
