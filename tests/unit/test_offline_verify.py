"""rules §1.5: the offline verifier checks an export's chain, receipts and attestations, and a
tampered byte anywhere in an event makes it fail at that event's seq."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from governor.domain.attestation import build_head_statement, build_statement, key_id, sign
from governor.domain.canonical import JSONValueError, loads_strict, receipt
from governor.domain.chain import GENESIS, META_KEYS, event_hash
from governor.domain.export import (
    FORMAT,
    attestation_line,
    event_line,
    head_line,
    header_line,
    key_line,
    serialise_line,
)
from governor.domain.review import decision_payload
from governor.verify import Report, load_trusted_keys, verify_export

REPO = Path(__file__).resolve().parents[2]
SESSION = "3f2b8c1e-7d4a-4e9b-a1c2-5d6e7f8a9b0c"
CONTRACT = "9d1e5b7a-0c3f-4a2e-8b6d-1f0e2d3c4b5a"
SERVER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
OLD_SERVER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(64, 96)))
ATTACKER_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))


def with_receipt(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "receipt": receipt(kind, payload)}


def contract_document(checks: list[dict[str, Any]]) -> dict[str, Any]:
    return with_receipt(
        "contract",
        {
            "contractId": CONTRACT,
            "version": 3,
            "kind": "general",
            "objective": "Write README.md with a Größe section (€ prices)",
            "claims": [
                {
                    "id": "readme",
                    "statement": "README.md documents the sizes",
                    "importance": "critical",
                    "verification": "deterministic",
                    "check_ids": [check["id"] for check in checks],
                    "minimum_independent_sources": 1,
                }
            ],
            "checks": checks,
            "maxAttempts": 3,
            "startedAtSeq": 0,
            "review": "off",
        },
    )


CHECKS = [
    {"id": "readme-exists", "kind": "file_exists", "path": "README.md"},
    {"id": "readme-size", "kind": "file_contains", "path": "README.md", "text": "## Größe"},
]


@dataclass
class Export:
    """An export under construction: events are chained as they are added."""

    header: dict[str, Any] = field(
        default_factory=lambda: header_line(
            session=SESSION,
            project="demo",
            harness={"formatVersion": 0, "agent": "test-agent"},
            exported_at=1_700_000_100_000,
        )
    )
    events: list[dict[str, Any]] = field(default_factory=list)
    attestations: list[dict[str, Any]] = field(default_factory=list)
    keys: list[dict[str, Any]] = field(default_factory=list)
    head_key: Ed25519PrivateKey | None = SERVER_KEY
    """Who signs the head line (§12) over the events as they are when the lines are written;
    None writes no head line."""

    @property
    def head(self) -> str:
        return self.events[-1]["hash"] if self.events else GENESIS

    def add(
        self, type: str, data: Any, *, origin: str = "agent", meta: dict[str, Any] | None = None
    ) -> int:
        seq = len(self.events)
        time = 1_700_000_000_000 + 1000 * seq
        hashed = event_hash(
            session=SESSION,
            seq=seq,
            type=type,
            time=time,
            origin=origin,
            data=data,
            prev=self.head,
            meta=meta,
        )
        self.events.append(
            event_line(
                session=SESSION,
                seq=seq,
                type=type,
                time=time,
                origin=origin,
                data=data,
                prev=self.head,
                hash=hashed,
                meta=meta,
            )
        )
        return seq

    def attest_contract(
        self, seq: int, key: Ed25519PrivateKey = SERVER_KEY, **overrides: Any
    ) -> None:
        document = self.events[seq]["data"]
        fields: dict[str, Any] = {
            "session_id": SESSION,
            "contract_id": document["contractId"],
            "chain_head": self.events[seq]["hash"],
            "kind": "contract",
            "event_seq": seq,
            "contract_receipt": document["receipt"],
        }
        self.attest(seq, {**fields, **overrides}, key)

    def attest_terminal(
        self, seq: int, contract_seq: int, key: Ed25519PrivateKey = SERVER_KEY, **overrides: Any
    ) -> None:
        data = self.events[seq]["data"]
        fields: dict[str, Any] = {
            "session_id": SESSION,
            "contract_id": data["contractId"],
            "chain_head": self.events[seq]["hash"],
            "kind": "terminal",
            "event_seq": seq,
            "contract_receipt": self.events[contract_seq]["data"]["receipt"],
            "status": data["status"],
            "reason": data["reason"],
            "terminal_receipt": data["receipt"],
            "attempt_receipt": data.get("attemptReceipt"),
        }
        self.attest(seq, {**fields, **overrides}, key)

    def attest(self, seq: int, fields: dict[str, Any], key: Ed25519PrivateKey) -> None:
        envelope = sign(build_statement(**fields), private_key=key, keyid=key_id(key.public_key()))
        self.attestations.append(attestation_line(seq=seq, envelope=envelope))

    def publish(self, *keys: Ed25519PrivateKey) -> None:
        lines = [key_line(key.public_key()) for key in keys]
        self.keys = sorted(lines, key=lambda line: line["keyid"])

    def head_line(self) -> dict[str, Any]:
        assert self.head_key is not None
        seq = len(self.events) - 1
        statement = build_head_statement(
            session_id=SESSION, seq=seq, head=self.head, project=self.header["project"],
            harness=self.header["harness"])
        envelope = sign(statement, private_key=self.head_key,
                        keyid=key_id(self.head_key.public_key()))
        return head_line(session=SESSION, seq=seq, hash=self.head, envelope=envelope)

    def lines(self) -> list[str]:
        objects = [self.header, *self.events, *self.attestations, *self.keys]
        if self.head_key is not None:
            objects.append(self.head_line())
        return [serialise_line(obj) for obj in objects]

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines())


def attempt_data(number: int, passed: bool, results: list[dict[str, Any]]) -> dict[str, Any]:
    payload = {
        "contractId": CONTRACT,
        "attempt": number,
        "trigger": "manual" if number == 1 else "turn-stop",
        "passed": passed,
        "results": results,
    }
    return with_receipt("attempt", payload)


def terminal_data(attempt: dict[str, Any]) -> dict[str, Any]:
    payload = {
        "contractId": CONTRACT,
        "status": "certified",
        "reason": "all 2 checks passed",
        "attemptReceipt": attempt["receipt"],
    }
    return with_receipt("terminal", payload)


PASSED = [
    {"id": "readme-exists", "kind": "file_exists", "passed": True, "evidence": "README.md exists"},
    {
        "id": "readme-size",
        "kind": "file_contains",
        "passed": True,
        "evidence": "README.md contains the text",
    },
]


def realistic_export() -> Export:
    """A session: user asks, agent works, contract activates, a failed attempt, a repair,
    a passing attempt and a certified terminal; an old and a current signing key."""
    export = Export()
    export.add(
        "user/message",
        {"message": {"role": "user", "content": "Add README.md with a Größe section, 4.5 €"}},
        meta={"sourceSeq": 1, "surfaceOp": "append", "sourceEventSeqs": []},
    )
    export.add("turn/start", {"turn": 1}, meta={"sourceSeq": 2})
    export.add("step/start", {"turn": 1, "step": 1}, meta={"sourceSeq": 3})
    contract_seq = export.add(
        "reliability/contract", contract_document(CHECKS), origin="governor"
    )
    export.add(
        "tool/call",
        {
            "turn": 1,
            "step": 1,
            "callId": "call-1",
            "name": "write_file",
            "arguments": '{"path":"README.md","text":"# Demo\\n"}',
        },
        meta={"sourceSeq": 4},
    )
    export.add("x-vendor/telemetry", {"latencyMs": 12.5}, meta={"ignorable": True})
    failed = attempt_data(
        1,
        False,
        [
            PASSED[0],
            {
                "id": "readme-size",
                "kind": "file_contains",
                "passed": False,
                "evidence": "README.md does not contain the text",
            },
        ],
    )
    export.add("reliability/attempt", failed, origin="governor")
    export.add(
        "tool/result",
        {"turn": 1, "step": 1, "message": {"role": "user", "source": {"callId": "call-1"}}},
        meta={"sourceSeq": 5, "surfaceOp": "append", "sourceEventSeqs": [4]},
    )
    passed = attempt_data(2, True, PASSED)
    export.add("reliability/attempt", passed, origin="governor")
    terminal_seq = export.add("reliability/terminal", terminal_data(passed), origin="governor")
    export.add("step/end", {"turn": 1, "step": 1}, meta={"sourceSeq": 6})
    export.attest_contract(contract_seq)
    export.attest_terminal(terminal_seq, contract_seq)
    export.publish(SERVER_KEY, OLD_SERVER_KEY)
    return export


def small_export() -> Export:
    """Four events, two attestations, one key: small enough to flip every byte."""
    export = Export()
    export.add("user/message", {"text": "Größe €"}, meta={"surfaceOp": "append"})
    contract_seq = export.add(
        "reliability/contract", contract_document(CHECKS[:1]), origin="governor"
    )
    passed = attempt_data(1, True, PASSED[:1])
    export.add("reliability/attempt", passed, origin="governor")
    terminal_seq = export.add("reliability/terminal", terminal_data(passed), origin="governor")
    export.attest_contract(contract_seq)
    export.attest_terminal(terminal_seq, contract_seq)
    export.publish(SERVER_KEY)
    return export


def seq_of(export: Export, type: str) -> int:
    return next(event["seq"] for event in export.events if event["type"] == type)


def assert_fails_at_seq(report: Report, seq: int, *words: str) -> None:
    assert not report.ok, report.summary()
    assert report.failure is not None and report.failure.seq == seq, report.summary()
    assert report.summary().startswith(f"FAIL: seq {seq}: ")
    for word in words:
        assert word in report.summary()


def assert_fails_at_line(report: Report, line: int, *words: str) -> None:
    assert not report.ok, report.summary()
    assert report.failure is not None and report.failure.line == line, report.summary()
    assert report.summary().startswith(f"FAIL: line {line}: ")
    for word in words:
        assert word in report.summary()


def public_keys(*keys: Ed25519PrivateKey) -> dict[str, Ed25519PublicKey]:
    return {key_id(key.public_key()): key.public_key() for key in keys}


# --- a good export -----------------------------------------------------------------------------


def test_rule_1_5_a_complete_export_verifies() -> None:
    export = realistic_export()
    report = verify_export(export.lines())
    assert report.ok, report.summary()
    assert (report.session, report.events, report.attestations, report.keys) == (SESSION, 11, 2, 2)
    assert report.head == export.events[-1]["hash"]
    assert report.summary() == (
        f"OK: session {SESSION}: 11 events, 2 attestations, 2 keys, head {report.head}"
    )


def test_rule_1_5_the_export_format_is_one_canonical_object_per_line() -> None:
    lines = realistic_export().text().splitlines(keepends=True)
    assert all(line.endswith("\n") for line in lines)
    objects = [loads_strict(line) for line in lines]
    assert objects[0]["kind"] == "header" and objects[0]["format"] == FORMAT
    kinds = [obj["kind"] for obj in objects]
    assert kinds == ["header"] + ["event"] * 11 + ["attestation"] * 2 + ["key"] * 2 + ["head"]
    assert verify_export(lines).ok


def test_rule_1_5_meta_keys_are_top_level_and_covered_by_the_hash() -> None:
    export = realistic_export()
    first = export.events[0]
    assert first["sourceSeq"] == 1 and first["surfaceOp"] == "append"
    assert "meta" not in first
    first["surfaceOp"] = {"op": "replace", "start": 0, "end": 0}
    assert_fails_at_seq(verify_export(export.lines()), 0, "hash does not recompute")


def test_rule_1_5_an_event_without_meta_keys_hashes_without_meta() -> None:
    export = realistic_export()
    contract = export.events[seq_of(export, "reliability/contract")]
    assert not set(META_KEYS) & set(contract)


def test_rule_1_5_an_export_signed_by_an_old_key_still_verifies_with_its_key_published() -> None:
    export = Export()
    contract_seq = export.add(
        "reliability/contract", contract_document(CHECKS), origin="governor"
    )
    export.attest_contract(contract_seq, OLD_SERVER_KEY)
    export.publish(SERVER_KEY, OLD_SERVER_KEY)
    assert verify_export(export.lines()).ok


def test_rule_1_5_imported_governor_events_need_no_attestation() -> None:
    export = Export()
    export.add(
        "reliability/contract",
        contract_document(CHECKS),
        origin="governor",
        meta={"imported": True},
    )
    export.publish(SERVER_KEY)
    assert verify_export(export.lines()).ok


def test_rule_1_5_an_attestation_of_an_imported_event_is_refused() -> None:
    export = Export()
    seq = export.add(
        "reliability/contract",
        contract_document(CHECKS),
        origin="governor",
        meta={"imported": True},
    )
    export.attest_contract(seq)
    export.publish(SERVER_KEY)
    assert_fails_at_line(verify_export(export.lines()), 3, "attestation of seq 0", "not attested")


def test_rule_1_5_trusting_only_the_servers_key_file_verifies_a_good_export() -> None:
    export = realistic_export()
    assert verify_export(export.lines(), trusted_keys=public_keys(SERVER_KEY)).ok


# --- the command line, without Django ---------------------------------------------------------


def run_cli(*args: str | Path, block_django: bool = False) -> subprocess.CompletedProcess[str]:
    """`python -m governor.verify` isolated like `-I` (no PYTHON* env, no user site) but with the
    repository on the path; with `block_django`, any import of Django raises ImportError."""
    if block_django:
        launcher = (
            "import runpy, sys; sys.modules['django'] = None; "
            "runpy.run_module('governor.verify', run_name='__main__', alter_sys=True)"
        )
        command = [sys.executable, "-E", "-s", "-c", launcher]
    else:
        command = [sys.executable, "-E", "-s", "-m", "governor.verify"]
    return subprocess.run(  # noqa: S603 - our own interpreter and arguments
        [*command, *map(str, args)], cwd=REPO, capture_output=True, text=True, timeout=60
    )


def test_rule_1_5_importing_the_verifier_loads_no_django() -> None:
    probe = "import sys, governor.verify; print(sorted(m for m in sys.modules if 'django' in m))"
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-E", "-s", "-c", probe], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_rule_1_5_python_m_governor_verify_accepts_a_good_export(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(realistic_export().text(), encoding="utf-8")
    result = run_cli(path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"OK: session {SESSION}: 11 events, 2 attestations, 2 keys")


def test_rule_1_5_the_verifier_runs_with_django_unimportable(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(realistic_export().text(), encoding="utf-8")
    result = run_cli(path, block_django=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rule_1_5_the_command_line_names_the_first_bad_seq_and_exits_1(tmp_path: Path) -> None:
    export = realistic_export()
    export.events[4]["data"]["name"] = "delete_file"
    export.events[7]["data"]["turn"] = 2
    path = tmp_path / "export.jsonl"
    path.write_text(export.text(), encoding="utf-8")
    result = run_cli(path, block_django=True)
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL: seq 4: hash does not recompute")


def test_rule_1_5_the_command_line_trusts_only_the_key_file(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(realistic_export().text(), encoding="utf-8")
    trusted = tmp_path / "trusted.json"
    trusted.write_text(json.dumps([key_line(SERVER_KEY.public_key())]), encoding="utf-8")
    single = tmp_path / "single.json"
    single.write_text(json.dumps(key_line(SERVER_KEY.public_key())), encoding="utf-8")
    attacker = tmp_path / "attacker.json"
    attacker.write_text(json.dumps(key_line(ATTACKER_KEY.public_key())), encoding="utf-8")
    assert run_cli(path, "--key", trusted).returncode == 0
    assert run_cli(path, "--key", single).returncode == 0
    refused = run_cli(path, "--key", attacker)
    assert refused.returncode == 1
    assert "unknown or untrusted key" in refused.stdout


def test_rule_1_5_a_malformed_key_file_is_refused(tmp_path: Path) -> None:
    line = key_line(SERVER_KEY.public_key())
    with pytest.raises(ValueError, match="not derived from the key"):
        load_trusted_keys(json.dumps({**line, "keyid": key_id(ATTACKER_KEY.public_key())}))
    with pytest.raises(ValueError, match="no keys"):
        load_trusted_keys("[]")
    path = tmp_path / "export.jsonl"
    path.write_text(realistic_export().text(), encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text("[{", encoding="utf-8")
    result = run_cli(path, "--key", bad)
    assert result.returncode == 1 and result.stdout.startswith("FAIL: key file")


# --- tampering -------------------------------------------------------------------------------


def substitutes(byte: int) -> list[int]:
    """Printable replacements for one byte: one of the same class (digit, lower, upper), which
    tends to keep the JSON valid, and one that often breaks it."""
    char = chr(byte)
    candidates = []
    for alphabet in ("0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
        if char in alphabet:
            candidates.append(ord(alphabet[(alphabet.index(char) + 1) % len(alphabet)]))
    candidates.append(ord("x") if char != "x" else ord("}"))
    return candidates


def test_rule_1_5_flipping_any_byte_of_any_event_line_fails_at_that_seq() -> None:
    export = small_export()
    lines = [line.encode("utf-8") for line in export.lines()]
    assert verify_export(lines).ok
    still_json = not_json = 0
    for seq in range(len(export.events)):
        index = 1 + seq
        original = lines[index]
        for position, byte in enumerate(original):
            for replacement in substitutes(byte):
                tampered = original[:position] + bytes([replacement]) + original[position + 1 :]
                try:
                    loads_strict(tampered)
                    still_json += 1
                except JSONValueError:
                    not_json += 1
                report = verify_export([*lines[:index], tampered, *lines[index + 1 :]])
                where = f"seq {seq} byte {position} {chr(byte)!r}->{chr(replacement)!r}"
                assert not report.ok, where
                assert report.failure is not None and report.failure.seq == seq, (
                    where,
                    report.summary(),
                )
    assert still_json > 400 and not_json > 400, (still_json, not_json)


def test_rule_1_5_a_reordered_event_line_fails_at_the_first_displaced_seq() -> None:
    lines = realistic_export().lines()
    lines[3], lines[4] = lines[4], lines[3]
    assert_fails_at_seq(verify_export(lines), 2, "expected seq 2, found 3")


def test_rule_1_5_an_attestation_line_moved_among_the_events_fails() -> None:
    lines = realistic_export().lines()
    attestation = lines.pop(12)
    lines.insert(5, attestation)
    report = verify_export(lines)
    assert_fails_at_line(report, 7, "event line after the attestation lines")


def test_rule_1_5_reordered_attestation_or_key_lines_fail() -> None:
    lines = realistic_export().lines()
    swapped = [*lines[:12], lines[13], lines[12], *lines[14:]]
    assert_fails_at_line(verify_export(swapped), 14, "out of seq order")
    swapped = [*lines[:14], lines[15], lines[14]]
    assert_fails_at_line(verify_export(swapped), 16, "out of keyid order")


def test_rule_1_5_a_dropped_event_fails_at_its_seq() -> None:
    lines = realistic_export().lines()
    del lines[1 + 5]
    assert_fails_at_seq(verify_export(lines), 5, "expected seq 5, found 6")


def test_rule_1_5_a_dropped_attestation_fails_at_the_unattested_seq() -> None:
    export = realistic_export()
    del export.attestations[1]
    terminal_seq = seq_of(export, "reliability/terminal")
    assert_fails_at_seq(
        verify_export(export.lines()), terminal_seq, "reliability/terminal event has no attestation"
    )


def test_rule_1_5_a_duplicated_attestation_fails() -> None:
    export = realistic_export()
    export.attestations.append(export.attestations[1])
    assert_fails_at_line(verify_export(export.lines()), 15, "out of seq order")


def test_rule_1_5_a_signature_by_a_key_the_export_does_not_publish_fails() -> None:
    export = realistic_export()
    export.attestations.pop()
    export.attest_terminal(seq_of(export, "reliability/terminal"), 3, key=ATTACKER_KEY)
    assert_fails_at_line(verify_export(export.lines()), 14, "unknown or untrusted key")


def test_rule_1_5_a_signature_by_an_untrusted_key_fails_even_when_the_export_publishes_it() -> None:
    export = realistic_export()
    export.attestations.pop()
    export.attest_terminal(seq_of(export, "reliability/terminal"), 3, key=ATTACKER_KEY)
    export.publish(SERVER_KEY, ATTACKER_KEY)
    assert verify_export(export.lines()).ok  # self-consistent, which is why --key exists
    report = verify_export(export.lines(), trusted_keys=public_keys(SERVER_KEY))
    assert_fails_at_line(report, 14, "attestation of seq 9", "unknown or untrusted key")


def test_rule_1_5_the_export_keys_are_not_used_when_keys_are_trusted() -> None:
    report = verify_export(realistic_export().lines(), trusted_keys=public_keys(ATTACKER_KEY))
    assert_fails_at_line(report, 13, "attestation of seq 3", "unknown or untrusted key")


def test_rule_1_5_a_key_line_whose_keyid_is_not_derived_from_the_key_fails() -> None:
    export = realistic_export()
    export.keys[0]["keyid"] = "ed25519:" + "0" * 16
    assert_fails_at_line(verify_export(export.lines()), 15, "not derived from the key")


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"terminal_receipt": receipt("terminal", {"forged": True})}, "terminalReceipt"),
        ({"contract_receipt": receipt("contract", {"forged": True})}, "contractReceipt"),
        ({"attempt_receipt": receipt("attempt", {"forged": True})}, "attemptReceipt"),
        ({"attempt_receipt": None}, "attemptReceipt"),
        ({"status": "exhausted"}, "status"),
        ({"reason": "something else"}, "reason"),
        ({"event_seq": 8}, "eventSeq"),
        ({"contract_id": "another-contract"}, "subject"),
        ({"session_id": "00000000-0000-4000-8000-000000000000"}, "subject"),
        ({"chain_head": "ab" * 32}, "subject digest"),
    ],
    ids=lambda value: ",".join(value) if isinstance(value, dict) else None,
)
def test_rule_1_5_a_validly_signed_terminal_predicate_that_differs_from_the_event_fails(
    overrides: dict[str, Any], words: str
) -> None:
    export = realistic_export()
    export.attestations.pop()
    export.attest_terminal(seq_of(export, "reliability/terminal"), 3, **overrides)
    assert_fails_at_line(verify_export(export.lines()), 14, "attestation of seq 9", words)


def test_rule_1_5_a_validly_signed_contract_predicate_with_a_wrong_receipt_fails() -> None:
    export = realistic_export()
    export.attestations.pop(0)
    export.attest_contract(3, contract_receipt=receipt("contract", {"forged": True}))
    export.attestations.sort(key=lambda line: line["seq"])
    assert_fails_at_line(
        verify_export(export.lines()), 13, "attestation of seq 3", "contractReceipt"
    )


def test_rule_1_5_an_attestation_naming_the_wrong_seq_fails() -> None:
    export = realistic_export()
    export.attestations[1]["seq"] = 8
    assert_fails_at_line(verify_export(export.lines()), 14, "attestation of seq 8", "not attested")


@pytest.mark.parametrize(
    "type", ["reliability/attempt", "reliability/terminal", "reliability/contract"]
)
def test_rule_1_5_a_receipt_that_does_not_recompute_fails_even_in_a_consistent_chain(
    type: str,
) -> None:
    original = realistic_export()
    export = Export()
    for event in original.events:
        data = json.loads(json.dumps(event["data"]))
        if event["type"] == type:
            data["receipt"] = receipt("other", {})
        meta = {key: event[key] for key in META_KEYS if key in event}
        export.add(event["type"], data, origin=event["origin"], meta=meta or None)
    assert_fails_at_seq(verify_export(export.lines()), seq_of(export, type), "does not recompute")


RUN_STREAM = {"bytes": 0, "truncated": False, "receipt": receipt("code-verification-output", "")}


def run_data(passed: bool) -> dict[str, Any]:
    return with_receipt("code-verification-result", {
        "verificationId": "6a1aa112-e079-469c-99cb-3d30781c31a3", "profile": "unit-tests",
        "profileReceipt": receipt("code-verification-profile", {"argv": ["/bin/true"]}),
        "startedAfterSeq": 2, "passed": passed, "failureKind": None if passed else "exit",
        "exitCode": 0 if passed else 1, "signal": None, "durationMs": 5,
        "sandboxMode": "read-only", "stdout": RUN_STREAM, "stderr": RUN_STREAM})


def review_data(stage: str) -> dict[str, Any]:
    return decision_payload(stage=stage, proposal_receipt=receipt("intent-proposal", {}),
                            decision="approved", decided_by={"kind": "reviewer", "userId": 7},
                            feedback="looks right")


def draft_data() -> dict[str, Any]:
    return with_receipt("contract-draft", {
        "draftId": "draft-1", "sessionId": SESSION, "kind": "general",
        "objective": "Write README.md", "claims": [], "checks": CHECKS, "coverage": {},
        "authorship": {"mode": "auxiliary-model", "promptVersion": 1,
                       "inputReceipt": receipt("contract-author-input", "{}"), "inputBytes": 2},
        "usage": {}})


RECEIPT_KINDS = {
    "reliability/contract-draft": ("contract-draft", "objective", "Delete README.md"),
    "reliability/intent-review": ("intent-review", "decision", "rejected"),
    "reliability/contract-review": ("contract-review", "decision", "rejected"),
    "reliability/contract": ("contract", "objective", "Delete README.md"),
    "reliability/code-verification": ("code-verification-result", "passed", True),
    "reliability/attempt": ("attempt", "passed", False),
    "reliability/terminal": ("terminal", "status", "exhausted"),
}


def every_receipt_export(
    key: Ed25519PrivateKey = SERVER_KEY, altered: str | None = None
) -> Export:
    """A session with one event of every receipt-bearing kind, signed by `key`. With `altered`,
    that event's field is changed after its receipt was made — the chain, the attestations and
    the head are all made over the altered event, as a forger holding `key` would make them."""
    export = Export(head_key=key)

    def add(type: str, data: dict[str, Any]) -> int:
        if type == altered:
            _, field, value = RECEIPT_KINDS[type]
            data = {**data, field: value}
        return export.add(type, data, origin="governor")

    add("reliability/contract-draft", draft_data())
    add("reliability/intent-review", review_data("intent"))
    add("reliability/contract-review", review_data("evidence"))
    code_check = {"id": "code-profile-unit-tests", "kind": "code_verification_succeeded",
                  "profile": "unit-tests", "minCount": 1}
    contract_seq = add("reliability/contract", contract_document([code_check]))
    add("reliability/code-verification", run_data(passed=False))
    run_seq = add("reliability/code-verification", run_data(passed=True))
    attempt = attempt_data(1, True, [{**code_check, "passed": True, "evidence": "1 of 1"}])
    add("reliability/attempt", attempt)
    terminal_seq = add("reliability/terminal", terminal_data(attempt))
    export.attest_contract(contract_seq, key)
    run = export.events[run_seq]["data"]
    export.attest_terminal(terminal_seq, contract_seq, key, run_receipts=[run["receipt"]],
                           profile_receipts=[run["profileReceipt"]])
    export.publish(key)
    return export


def test_rule_1_5_every_receipt_kind_recomputes_in_an_export_that_verifies() -> None:
    export = every_receipt_export()
    assert {event["type"] for event in export.events} == set(RECEIPT_KINDS)
    report = verify_export(export.lines(), trusted_keys=public_keys(SERVER_KEY))
    assert report.ok, report.summary()
    assert report.warnings == ()


@pytest.mark.parametrize("type", list(RECEIPT_KINDS))
def test_rule_1_5_an_altered_field_of_any_receipted_event_fails_naming_its_seq_and_kind(
    type: str,
) -> None:
    """The forger re-hashed the chain and re-signed everything with a key the verifier trusts:
    only the receipt still tells."""
    export = every_receipt_export(ATTACKER_KEY, altered=type)
    report = verify_export(export.lines(), trusted_keys=public_keys(ATTACKER_KEY))
    kind = RECEIPT_KINDS[type][0]
    assert_fails_at_seq(report, seq_of(export, type), type, "does not recompute", f"{kind!r}")


def test_rule_1_5_a_run_recorded_before_runs_carried_receipts_verifies_with_a_warning() -> None:
    export = Export()
    data = {key: value for key, value in run_data(passed=True).items() if key != "receipt"}
    export.add("reliability/code-verification", data, origin="governor")
    export.publish(SERVER_KEY)
    report = verify_export(export.lines(), trusted_keys=public_keys(SERVER_KEY))
    assert report.ok, report.summary()
    assert report.warnings == (
        "seq 0: reliability/code-verification has no 'code-verification-result' receipt "
        "(recorded before it carried one)",)


def test_rule_1_5_a_terminal_naming_a_run_that_is_not_in_the_log_fails() -> None:
    export = every_receipt_export()
    terminal_seq = seq_of(export, "reliability/terminal")
    export.attestations.pop()
    export.attest_terminal(terminal_seq, seq_of(export, "reliability/contract"),
                           run_receipts=[receipt("code-verification-result", {"forged": 1})])
    report = verify_export(export.lines(), trusted_keys=public_keys(SERVER_KEY))
    assert not report.ok and "is not the receipt of a reliability/code-verification event" in (
        report.summary()), report.summary()


def test_rule_1_5_a_governor_event_without_its_receipt_fails() -> None:
    export = Export()
    export.add("reliability/attempt", {"contractId": CONTRACT, "attempt": 1}, origin="governor")
    assert_fails_at_seq(verify_export(export.lines()), 0, "must be an object with a receipt")


def test_rule_1_5_a_terminal_for_a_contract_missing_from_the_export_fails() -> None:
    export = Export()
    passed = attempt_data(1, True, PASSED)
    seq = export.add("reliability/terminal", terminal_data(passed), origin="governor")
    export.attest(
        seq,
        {
            "session_id": SESSION,
            "contract_id": CONTRACT,
            "chain_head": export.events[seq]["hash"],
            "kind": "terminal",
            "event_seq": seq,
            "contract_receipt": receipt("contract", {}),
            "status": "certified",
            "reason": "all 2 checks passed",
            "terminal_receipt": export.events[seq]["data"]["receipt"],
            "attempt_receipt": passed["receipt"],
        },
        SERVER_KEY,
    )
    export.publish(SERVER_KEY)
    assert_fails_at_line(verify_export(export.lines()), 3, "no contract event")


# --- strict lines ----------------------------------------------------------------------------


def test_rule_1_5_a_line_that_is_not_canonical_fails() -> None:
    lines = realistic_export().lines()
    lines[3] = json.dumps(json.loads(lines[3]))  # same value, with spaces
    assert_fails_at_seq(verify_export(lines), 2, "canonical")


def test_rule_1_5_a_line_with_a_duplicate_key_fails() -> None:
    lines = realistic_export().lines()
    lines[1] = lines[1][:-1] + ',"kind":"event"}'
    assert_fails_at_seq(verify_export(lines), 0, "duplicate object key")


def test_rule_1_5_an_unknown_key_on_an_event_line_fails() -> None:
    export = realistic_export()
    export.events[2]["note"] = "unhashed"
    assert_fails_at_seq(verify_export(export.lines()), 2, "unknown ['note']")


def test_rule_1_5_an_event_of_another_session_fails() -> None:
    export = realistic_export()
    export.header["session"] = "00000000-0000-4000-8000-000000000000"
    assert_fails_at_seq(verify_export(export.lines()), 0, "is not the header's")


def test_rule_1_5_the_header_must_come_first_and_name_the_format() -> None:
    lines = realistic_export().lines()
    assert_fails_at_line(verify_export(lines[1:]), 1, "first line must be the header")
    export = realistic_export()
    export.header["format"] = "reliability-governor-export/4"
    assert_fails_at_line(verify_export(export.lines()), 1, "format")


def test_rule_1_5_an_empty_export_fails() -> None:
    assert_fails_at_line(verify_export([]), 1, "empty")


def test_rule_1_5_a_blank_line_fails() -> None:
    lines = realistic_export().lines()
    lines.insert(2, "")
    assert_fails_at_seq(verify_export(lines), 1, "not strict JSON")


def test_rule_1_5_a_flipped_byte_in_an_attestation_or_key_line_fails_at_that_line() -> None:
    lines = realistic_export().lines()
    for index in (12, 13, 14, 15, 16):
        for position in range(0, len(lines[index]), 7):
            char = lines[index][position]
            tampered = (
                lines[index][:position]
                + ("x" if char != "x" else "y")
                + lines[index][position + 1 :]
            )
            report = verify_export([*lines[:index], tampered, *lines[index + 1 :]])
            assert not report.ok, (index, position)
            assert report.failure is not None and report.failure.line == index + 1, report.summary()


# --- rules §12: the signed head ----------------------------------------------------------


def test_rule_12_an_attestation_envelope_cannot_stand_in_for_the_head_or_the_reverse() -> None:
    export = realistic_export()
    lines = [loads_strict(line) for line in export.lines()]
    head, attestation = lines[-1], lines[12]
    swapped_head = serialise_line({**head, "envelope": attestation["envelope"]})
    report = verify_export([*export.lines()[:-1], swapped_head])
    assert_fails_at_line(report, 17, "head:", "predicateType")
    swapped = serialise_line({**attestation, "envelope": head["envelope"]})
    report = verify_export([*export.lines()[:12], swapped, *export.lines()[13:]])
    assert_fails_at_line(report, 13, "attestation of seq 3", "predicateType")


def test_rule_12_a_head_signed_for_another_project_or_missing_fails() -> None:
    export = realistic_export()
    export.header["project"] = "elsewhere"
    signed_for_demo = realistic_export().lines()[-1]
    assert_fails_at_line(verify_export([*export.lines()[:-1], signed_for_demo]), 17,
                         "the signed project is not the export's")
    assert_fails_at_line(verify_export(export.lines()[:-1]), 17, "no signed head line")
    assert_fails_at_line(verify_export([*export.lines(), export.lines()[-1]]), 18,
                         "a second head line")


def test_rule_12_an_empty_log_has_a_head_at_seq_minus_1_over_genesis() -> None:
    export = Export()
    export.publish(SERVER_KEY)
    lines = export.lines()
    assert loads_strict(lines[-1])["seq"] == -1 and loads_strict(lines[-1])["hash"] == GENESIS
    assert verify_export(lines, trusted_keys=public_keys(SERVER_KEY)).ok
