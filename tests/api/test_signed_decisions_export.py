"""Issue 18, the offline verifier's side: what `python -m governor.verify` refuses in the signed
decisions of an export, each failure naming its seq or line — also when whoever holds the
server's key re-seals the export (tests/signed_exports.py). The reviewer signs through the pages
with a software authenticator whose key the test holds, so it can sign what a broken or cloned
authenticator would."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.core.management import call_command

from governor.domain.canonical import loads_strict
from governor.domain.passkey import REVIEW_STAGES, assertion_digest, b64url, challenge, statement
from governor.models import Project
from governor.services.keys import key_active
from governor.verify import FORMAT_V2, serialise_line, verify_export
from reviews.models import Review
from tests.api.test_export_and_verify import export_text
from tests.conftest import AgentClient
from tests.pages import propose, reviewer_client
from tests.pages.test_passkeys import ORIGIN, register, signed_press
from tests.passkey_authenticator import SoftAuthenticator
from tests.signed_exports import decision_events, reseal, verify_cli


class Signed:
    def __init__(self, objects: list[dict[str, Any]], soft: SoftAuthenticator,
                 server_key: Ed25519PrivateKey, keys: Path, reviewer_keys: Path) -> None:
        self.objects, self.soft, self.server_key = objects, soft, server_key
        self.keys, self.reviewer_keys = keys, reviewer_keys

    def copy(self) -> list[dict[str, Any]]:
        return json.loads(json.dumps(self.objects))

    def resign(self, objects: list[dict[str, Any]], event: dict[str, Any]) -> None:
        """`event`'s signature made again by the reviewer's own authenticator as it is now."""
        entry = event["data"]["signatures"][0]
        signed = statement(proposal_receipt=event["data"]["proposalReceipt"],
                           stage=REVIEW_STAGES[event["type"]], decision=event["data"]["decision"],
                           reviewer=entry["userId"], nonce=entry["nonce"])
        answer = self.soft.assert_challenge(b64url(challenge(signed)))["response"]
        line = next(obj for obj in objects if obj["kind"] == "assertion"
                    and obj["seq"] == event["seq"])
        line.update(authenticatorData=answer["authenticatorData"],
                    clientDataJSON=answer["clientDataJSON"], signature=answer["signature"])
        entry["assertion"] = assertion_digest(line)


@pytest.fixture
def signed(agent: AgentClient, workspace: Path, project: Project, reviewer: Any, settings: Any,
           tmp_path: Path) -> Signed:
    settings.WEBAUTHN_RP_ID, settings.WEBAUTHN_ORIGIN = "localhost", ORIGIN
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    rita = reviewer_client("rita", "rita-password-1")
    soft = SoftAuthenticator(rp_id="localhost", origin=ORIGIN)
    assert register(rita, soft).status_code == 201
    session_id, intent = propose(agent, workspace)
    assert signed_press(rita, intent, "Approve", soft).status_code == 302
    evidence = Review.objects.get(session_id=session_id, stage="evidence")
    assert signed_press(rita, evidence, "Approve", soft).status_code == 302
    keys = tmp_path / "keys.json"
    keys.write_bytes(agent.get("/keys").content)
    reviewer_keys = tmp_path / "reviewer-keys.json"
    reviewer_keys.write_bytes(rita.get("/reviews/passkeys/reviewer-keys.json").content)
    objects = [loads_strict(line) for line in export_text(agent, session_id).splitlines()]
    server = Ed25519PrivateKey.from_private_bytes(bytes(key_active().private_key))
    return Signed(objects, soft, server, keys, reviewer_keys)


def check(signed: Signed, objects: list[dict[str, Any]], tmp_path: Path) -> Any:
    return verify_cli(tmp_path / "export.jsonl", objects, "--key", str(signed.keys),
                      "--reviewer-keys", str(signed.reviewer_keys))


def test_issue_18_the_signed_export_verifies_and_says_who_approved_what(
    signed: Signed, tmp_path: Path
) -> None:
    result = check(signed, signed.objects, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("OK: session") and len(lines) == 3
    assert "intent approved" in lines[1] and "evidence approved" in lines[2]
    assert all(line.endswith("(rita), signed with their passkey") for line in lines[1:])


def test_issue_18_a_counter_that_went_backwards_in_the_export_fails_naming_its_seq(
    signed: Signed, tmp_path: Path
) -> None:
    """A clone of the authenticator signs the second decision with a counter the first already
    used; the operator puts it in the export and re-seals."""
    objects = signed.copy()
    _, evidence = decision_events(objects)
    signed.soft.sign_count = 1
    signed.resign(objects, evidence)
    result = check(signed, reseal(objects, signed.server_key), tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {evidence['seq']}: "), result.stdout
    assert "signature counter 1 is not above 1" in result.stdout


def test_issue_18_a_signature_without_user_verification_fails_offline(
    signed: Signed, tmp_path: Path
) -> None:
    objects = signed.copy()
    intent, _ = decision_events(objects)
    signed.soft.user_verified = False
    signed.soft.sign_count = 0
    signed.resign(objects, intent)
    result = check(signed, reseal(objects, signed.server_key), tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {intent['seq']}: "), result.stdout
    assert "did not verify the user" in result.stdout


def test_issue_18_an_assertion_or_reviewer_key_no_decision_uses_fails_at_its_line(
    signed: Signed, tmp_path: Path
) -> None:
    objects = signed.copy()
    _, evidence = decision_events(objects)
    evidence["data"].pop("signatures")  # the operator drops the signature from the event
    result = check(signed, reseal(objects, signed.server_key), tmp_path)
    assert result.returncode == 1
    line = 1 + next(index for index, obj in enumerate(objects)
                    if obj["kind"] == "assertion" and obj["seq"] == evidence["seq"])
    assert result.stdout.startswith(f"FAIL: line {line}: assertion of seq {evidence['seq']}"), (
        result.stdout)
    assert "no decision event names it" in result.stdout


def test_issue_18_a_reviewer_key_whose_spki_is_not_its_cose_key_fails_at_its_line(
    signed: Signed, tmp_path: Path
) -> None:
    objects = signed.copy()
    index, key = next((index, obj) for index, obj in enumerate(objects)
                      if obj["kind"] == "reviewer-key")
    key["spki"] = b64url(SoftAuthenticator(rp_id="localhost", origin=ORIGIN).spki)
    result = check(signed, objects, tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: line {index + 1}: "), result.stdout
    assert "are not those of its COSE key" in result.stdout


def test_issue_18_signed_decision_lines_in_a_format_2_export_are_refused(
    signed: Signed
) -> None:
    objects = signed.copy()
    objects[0]["format"] = FORMAT_V2
    report = verify_export([serialise_line(obj) for obj in objects])
    assert report.failure is not None
    assert f"reviewer-key line in a {FORMAT_V2} export" in str(report.failure)


def test_issue_18_a_reviewer_keys_file_that_is_not_a_list_of_keys_is_refused(
    signed: Signed, tmp_path: Path
) -> None:
    signed.reviewer_keys.write_text('{"keys": []}')
    result = check(signed, signed.objects, tmp_path)
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL: reviewer keys file: must be a non-empty JSON list")


def test_issue_18_the_management_command_says_who_approved_what(
    signed: Signed, tmp_path: Path
) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(serialise_line(obj) + "\n" for obj in signed.objects))
    out, err = StringIO(), StringIO()
    call_command("governor_verify", str(path), "--server-keys", stdout=out, stderr=err)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("OK: session") and len(lines) == 3
    assert all(line.endswith("(rita), signed with their passkey") for line in lines[1:])
    assert "WARNING: no --reviewer-keys given" in err.getvalue()


def test_issue_18_a_reviewer_renamed_since_publishing_their_keys_still_verifies(
    signed: Signed, tmp_path: Path
) -> None:
    published = json.loads(signed.reviewer_keys.read_text())
    published[0]["username"] = "rita-before-her-rename"
    signed.reviewer_keys.write_text(json.dumps(published))
    result = check(signed, signed.objects, tmp_path)
    assert result.returncode == 0, result.stdout


def test_issue_25_one_assertion_and_nonce_copied_onto_a_second_decision_event_fails_naming_both(
    signed: Signed, tmp_path: Path
) -> None:
    """Whoever holds the server's key copies the intent approval, its nonce and its assertion,
    onto a second decision event (here in the evidence approval's place) and re-seals. With a
    passkey that keeps no signature counter (synced passkeys report 0) both events check out
    against the reviewer's key; the server issues a nonce for one signature, so the verifier
    must refuse a nonce or an assertion that two events carry."""
    objects = signed.copy()
    intent, evidence = decision_events(objects)
    signed.soft.sign_count = 0  # a passkey that counts nothing
    signed.resign(objects, intent)
    evidence["type"], evidence["data"] = intent["type"], json.loads(json.dumps(intent["data"]))
    copied = next(obj for obj in objects if obj["kind"] == "assertion"
                  and obj["seq"] == intent["seq"])
    at = next(index for index, obj in enumerate(objects) if obj["kind"] == "assertion"
              and obj["seq"] == evidence["seq"])
    objects[at] = {**copied, "seq": evidence["seq"]}
    result = check(signed, reseal(objects, signed.server_key), tmp_path)
    assert result.returncode == 1, result.stdout
    assert result.stdout.startswith(f"FAIL: seq {evidence['seq']}: "), result.stdout
    nonce = intent["data"]["signatures"][0]["nonce"]
    assert f"its nonce {nonce} is also that of the signature in seq {intent['seq']}" in (
        result.stdout)
