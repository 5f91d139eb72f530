"""Export and offline verification, and the database refusing to rewrite history."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.db import DatabaseError, connection, transaction

from governor.domain.attestation import key_id, sign
from governor.domain.canonical import loads_strict, receipt
from governor.domain.chain import GENESIS, META_KEYS, event_hash
from governor.domain.export import key_line, serialise_line
from governor.models import Event, Project
from governor.verify import verify_export
from tests.api.test_code_verification import add_profile
from tests.api.test_contracts import Agent, readme_contract
from tests.conftest import AgentClient
from tests.harness_builders import Trace
from verification.models import VerificationRun, VerifierProfile

ROOT = Path(__file__).resolve().parents[2]


def export_text(agent: AgentClient, session_id: str) -> str:
    response = agent.get(f"/sessions/{session_id}/export")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    return b"".join(response.streaming_content).decode()


def test_export_verifies_offline(agent: AgentClient, session: dict) -> None:
    agent.append(session["id"], Trace().start_turn().tool("bash").say().end_turn().flush())
    report = verify_export(export_text(agent, session["id"]).splitlines())
    assert report.ok, report.failure
    assert report.events == 11


def test_flipping_a_byte_of_an_exported_event_fails_naming_its_seq(
    agent: AgentClient, session: dict, tmp_path: Path
) -> None:
    agent.append(session["id"], Trace().start_turn().tool("bash").end_turn().flush())
    lines = export_text(agent, session["id"]).splitlines()
    assert '"time":0' in lines[4]
    lines[4] = lines[4].replace('"time":0', '"time":1')
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor.verify", str(path)], cwd=ROOT, capture_output=True,
        text=True, timeout=60,
    )
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL: seq 3:") or "FAIL: seq 3:" in result.stdout


def test_database_trigger_refuses_updating_an_event(agent: AgentClient, session: dict) -> None:
    agent.append(session["id"], Trace().start_turn().flush())
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        Event.objects.filter(session_id=session["id"]).update(type="tampered")


def test_database_trigger_refuses_deleting_an_event(agent: AgentClient, session: dict) -> None:
    agent.append(session["id"], Trace().start_turn().flush())
    with (pytest.raises(DatabaseError, match="append-only"), transaction.atomic(),
          connection.cursor() as cursor):
        cursor.execute("DELETE FROM governor_event")


def test_model_refuses_saving_an_existing_event(agent: AgentClient, session: dict) -> None:
    agent.append(session["id"], Trace().start_turn().flush())
    event = Event.objects.get(session_id=session["id"], seq=0)
    with pytest.raises(PermissionError):
        event.save()
    with pytest.raises(PermissionError):
        event.delete()


def test_management_command_verifies_with_the_servers_own_keys(
    agent: AgentClient, session: dict, tmp_path: Path
) -> None:
    from django.core.management import CommandError, call_command

    agent.append(session["id"], Trace().start_turn().tool("bash").end_turn().flush())
    path = tmp_path / "export.jsonl"
    path.write_text(export_text(agent, session["id"]))
    call_command("governor_verify", str(path), "--server-keys")
    path.write_text(path.read_text().replace('"bash"', '"BASH"', 1))
    with pytest.raises(CommandError):
        call_command("governor_verify", str(path), "--server-keys")


# --- rules §12: the signed head ------------------------------------------------------------


def certified_then_more(agent: AgentClient, workspace: Path) -> Agent:
    """A certified contract (two attestations) and then more work after the terminal: events
    no attestation covers, only the signed head."""
    worker = Agent(agent, workspace)
    worker.begin(readme_contract())
    worker.write("README.md", "## Install\n")
    assert worker.turn_stop()["terminal"]["status"] == "certified"
    worker.write("NOTES.md", "later work\n")
    return worker


def lines_of(agent: AgentClient, session_id: str) -> list[dict[str, Any]]:
    return [loads_strict(line) for line in export_text(agent, session_id).splitlines()]


def rehashed(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a forger does after editing event lines: chain every event again from GENESIS."""
    prev = GENESIS
    for obj in objects:
        if obj["kind"] != "event":
            continue
        meta = {key: obj[key] for key in META_KEYS if key in obj}
        obj["prev"] = prev
        obj["hash"] = prev = event_hash(
            session=obj["session"], seq=obj["seq"], type=obj["type"], time=obj["time"],
            origin=obj["origin"], data=obj["data"], prev=obj["prev"], meta=meta)
    return objects


def verify_cli(tmp_path: Path, objects: list[dict[str, Any]],
               *key_args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(serialise_line(obj) + "\n" for obj in objects))
    return subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor.verify", str(path), *key_args], cwd=ROOT,
        capture_output=True, text=True, timeout=60,
    )


@pytest.fixture
def keys_body(agent: AgentClient, tmp_path: Path) -> str:
    """The body of GET /api/v1/keys, saved as it comes."""
    path = tmp_path / "keys.json"
    path.write_bytes(agent.get("/keys").content)
    return str(path)


def test_rule_12_an_export_ends_with_a_head_signed_over_its_last_event(
    agent: AgentClient, workspace: Path, tmp_path: Path, keys_body: str
) -> None:
    worker = certified_then_more(agent, workspace)
    objects = lines_of(agent, worker.id)
    header, head = objects[0], objects[-1]
    events = [obj for obj in objects if obj["kind"] == "event"]
    assert header["format"] == "reliability-governor-export/3"
    assert head["kind"] == "head"
    assert (head["session"], head["seq"], head["hash"]) == (
        worker.id, events[-1]["seq"], events[-1]["hash"])
    result = verify_cli(tmp_path, objects, "--key", keys_body)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"OK: session {worker.id}:")
    assert "WARNING" not in result.stderr


def test_rule_12_an_event_edited_after_the_last_attestation_and_rehashed_is_refused(
    agent: AgentClient, workspace: Path, tmp_path: Path, keys_body: str
) -> None:
    worker = certified_then_more(agent, workspace)
    objects = lines_of(agent, worker.id)
    events = [obj for obj in objects if obj["kind"] == "event"]
    terminal_seq = next(obj["seq"] for obj in events if obj["type"] == "reliability/terminal")
    [later_call] = [obj for obj in events[terminal_seq:] if obj["type"] == "tool/call"]
    later_call["data"]["name"] = "delete_file"
    result = verify_cli(tmp_path, rehashed(objects), "--key", keys_body)
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {events[-1]['seq']}: the chain hash is not the "
                                    "signed head's"), result.stdout
    assert f"one of the events after seq {terminal_seq} (the last attested) was altered" in (
        result.stdout)


def test_rule_12_an_event_appended_after_the_signed_head_is_refused_naming_its_seq(
    agent: AgentClient, workspace: Path, tmp_path: Path, keys_body: str
) -> None:
    worker = certified_then_more(agent, workspace)
    objects = lines_of(agent, worker.id)
    events = [obj for obj in objects if obj["kind"] == "event"]
    forged = {**events[-1], "seq": events[-1]["seq"] + 1, "data": {
        **events[-1]["data"], "name": "approve_release"}}
    objects.insert(objects.index(events[-1]) + 1, forged)
    result = verify_cli(tmp_path, rehashed(objects), "--key", keys_body)
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {forged['seq']}: event after the signed head")


def test_rule_12_dropping_trailing_events_is_refused(
    agent: AgentClient, workspace: Path, tmp_path: Path, keys_body: str
) -> None:
    worker = certified_then_more(agent, workspace)
    objects = lines_of(agent, worker.id)
    events = [obj for obj in objects if obj["kind"] == "event"]
    for dropped in events[-2:]:
        objects.remove(dropped)
    result = verify_cli(tmp_path, objects, "--key", keys_body)
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {events[-2]['seq']}: missing: the signed head "
                                    f"ends at seq {events[-1]['seq']}"), result.stdout


def test_rule_12_a_head_re_signed_by_another_key_passes_only_with_a_loud_warning_without_key(
    agent: AgentClient, workspace: Path, tmp_path: Path, keys_body: str
) -> None:
    """A forger who rewrites the tail and re-signs everything with a key of their own gets past
    a verifier that trusts the export's keys — which is why it says so — but not past --key."""
    worker = certified_then_more(agent, workspace)
    objects = rehashed(lines_of(agent, worker.id))
    forger = Ed25519PrivateKey.generate()
    keyid = key_id(forger.public_key())
    for obj in objects:
        if obj["kind"] in ("attestation", "head"):
            statement = json.loads(base64.b64decode(obj["envelope"]["payload"]))
            obj["envelope"] = sign(statement, private_key=forger, keyid=keyid)
    objects = [obj for obj in objects if obj["kind"] != "key"]
    after_keys = next(i for i, obj in enumerate(objects) if obj["kind"] in ("manifest", "head"))
    objects.insert(after_keys, key_line(forger.public_key()))
    trusting = verify_cli(tmp_path, objects)
    assert trusting.returncode == 0, trusting.stdout
    assert "WARNING: no --key given: trusted only the keys inside the export" in trusting.stderr
    refused = verify_cli(tmp_path, objects, "--key", keys_body)
    assert refused.returncode == 1
    assert "unknown or untrusted key" in refused.stdout


def test_rule_12_a_format_1_export_still_verifies_with_a_warning_that_its_tail_is_unprotected(
    agent: AgentClient, workspace: Path, tmp_path: Path, keys_body: str
) -> None:
    worker = certified_then_more(agent, workspace)
    objects = lines_of(agent, worker.id)
    objects[0]["format"] = "reliability-governor-export/1"
    old = objects[:-1]  # /1 had no head line
    result = verify_cli(tmp_path, old, "--key", keys_body)
    assert result.returncode == 0, result.stdout
    assert "WARNING: format reliability-governor-export/1 has no signed head" in result.stderr
    assert "no --key given" not in result.stderr
    with_head = verify_cli(tmp_path, objects, "--key", keys_body)
    assert with_head.returncode == 1 and "head line in a reliability-governor-export/1" in (
        with_head.stdout)


def test_rule_12_the_management_command_warns_when_it_trusts_the_exports_keys(
    agent: AgentClient, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from django.core.management import call_command

    worker = certified_then_more(agent, workspace)
    path = tmp_path / "export.jsonl"
    path.write_text(export_text(agent, worker.id))
    call_command("governor_verify", str(path))
    assert "WARNING: no --key given" in capsys.readouterr().err
    call_command("governor_verify", str(path), "--server-keys")
    assert "WARNING" not in capsys.readouterr().err


# --- every receipt: runs carry theirs, terminals name the runs they counted ---------------------


def finished_run(worker: Agent, profile: VerifierProfile, passed: bool) -> dict[str, Any]:
    """A run of `profile` claimed and finished as a worker does (the sandbox is not the point)."""
    from governor.services.runs import run_claim, run_finish
    from governor.services.trees import session_tree_reference

    queued = VerificationRun.objects.create(
        session_id=worker.id, profile=profile, profile_receipt=profile.receipt,
        definition=profile.definition())
    claimed = run_claim(str(queued.pk))
    assert claimed is not None
    stream = {"bytes": 0, "truncated": False, "receipt": "sha256:" + "0" * 64}
    run_finish(run=claimed, record={
        "passed": passed, "failureKind": None if passed else "exit", "exitCode": 0 if passed
        else 1, "signal": None, "durationMs": 5, "sandboxMode": "read-only", "stdout": stream,
        "stderr": stream, **dict.fromkeys(("treeBefore", "tree"), session_tree_reference(
            claimed.session))})
    return Event.objects.filter(session_id=worker.id, type="reliability/code-verification"
                                ).order_by("-seq").values_list("data", flat=True)[0]


def statement_of(objects: list[dict[str, Any]], event_type: str) -> dict[str, Any]:
    seqs = {obj["seq"] for obj in objects if obj["kind"] == "event" and obj["type"] == event_type}
    [envelope] = [obj["envelope"] for obj in objects
                  if obj["kind"] == "attestation" and obj["seq"] in seqs]
    return json.loads(base64.b64decode(envelope["payload"]))


def test_rule_15_a_run_result_carries_its_receipt_and_the_terminal_names_the_runs_it_counted(
    agent: AgentClient, workspace: Path, project: Project
) -> None:
    profile = add_profile(project, "unit-tests", ["/bin/true"])
    worker = Agent(agent, workspace)
    worker.write("README.md", "## Install\n")
    assert worker.client.post(f"/sessions/{worker.id}/code-contracts",
                              readme_contract()).status_code == 201
    failed = finished_run(worker, profile, passed=False)
    counted = finished_run(worker, profile, passed=True)
    assert counted["receipt"] == receipt(
        "code-verification-result", {k: v for k, v in counted.items() if k != "receipt"})
    assert counted["receipt"] != failed["receipt"]
    assert worker.client.post(f"/sessions/{worker.id}/verify").json()["decision"] == "certified"
    # The profile changes after the terminal: the attestation still names what was run.
    add_profile(project, "unit-tests", ["/bin/true", "edited"])
    objects = lines_of(agent, worker.id)
    predicate = statement_of(objects, "reliability/terminal")["predicate"]
    assert predicate["runReceipts"] == [counted["receipt"]]
    assert predicate["profileReceipts"] == [profile.receipt]
    report = verify_export(serialise_line(obj) for obj in objects)
    assert report.ok, report.summary()


def test_rule_12_an_export_of_an_empty_session_verifies_with_its_signed_head(
    agent: AgentClient, session: dict
) -> None:
    objects = lines_of(agent, session["id"])
    assert [obj["kind"] for obj in objects] == ["header", "key", "head"]
    assert (objects[-1]["seq"], objects[-1]["hash"]) == (-1, GENESIS)
    report = verify_export(export_text(agent, session["id"]).splitlines())
    assert report.ok, report.summary()
