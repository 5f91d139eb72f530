"""Issue 18 in a real browser: a reviewer registers a passkey with Chromium's virtual
authenticator (the DevTools WebAuthn domain, through Playwright's CDP session), signs both review
stages, and the export verifies offline with `python -m governor.verify` — and fails, naming the
seq, once a server operator holding the server's key alters a decision, replays an assertion onto
another proposal or stage, or swaps a reviewer's key. The server is reached as `localhost` (an IP
address cannot be a relying-party id); the project requires signed approvals."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from playwright.sync_api import Browser, CDPSession, Page, expect

from governor.domain.canonical import loads_strict
from governor.domain.passkey import b64url
from tests.browser import DESKTOP, Server, assert_accessible, log_in
from tests.passkey_authenticator import SoftAuthenticator
from tests.signed_exports import decision_events, forge_signature, reseal, verify_cli

pytestmark = pytest.mark.browser
CEREMONY_MS = 20_000  # a WebAuthn ceremony and the decision behind it, on a loaded machine


@pytest.fixture(scope="module")
def server(localhost_server: Server) -> Server:
    return localhost_server


@dataclass
class Authenticator:
    """A virtual authenticator of Chromium (WebAuthn.addVirtualAuthenticator): internal,
    resident keys, user verification by default."""

    cdp: CDPSession
    id: str

    def user_verified(self, verified: bool) -> None:
        self.cdp.send("WebAuthn.setUserVerified",
                      {"authenticatorId": self.id, "isUserVerified": verified})

    def credentials(self) -> list[dict[str, Any]]:
        return list(self.cdp.send("WebAuthn.getCredentials",
                                  {"authenticatorId": self.id})["credentials"])


def printed(out: str) -> str:
    """What `manage.py shell -c` printed last (it first says what it imported)."""
    return out.strip().splitlines()[-1]


def virtual_authenticator(page: Page) -> Authenticator:
    cdp = page.context.new_cdp_session(page)
    cdp.send("WebAuthn.enable", {"enableUI": False})
    added = cdp.send("WebAuthn.addVirtualAuthenticator", {"options": {
        "protocol": "ctap2", "transport": "internal", "hasResidentKey": True,
        "hasUserVerification": True, "isUserVerified": True,
        "automaticPresenceSimulation": True}})
    return Authenticator(cdp, added["authenticatorId"])


def reviewer(server: Server, username: str) -> int:
    """A new reviewer of the demo project; their user id."""
    out = server.shell(
        "from django.contrib.auth import get_user_model\n"
        "from governor.models import Membership, Project, Role\n"
        f"user = get_user_model().objects.create_user({username!r}, password='pw-{username}-1')\n"
        "Membership.objects.create(user=user, project=Project.objects.get(slug='demo'), "
        "role=Role.REVIEWER)\n"
        "print(user.pk)\n")
    return int(printed(out))


def add_passkey(page: Page, server: Server, name: str) -> None:
    page.get_by_role("link", name="Passkeys").click()
    expect(page.get_by_role("heading", name="Your passkeys")).to_be_visible()
    page.get_by_label("Name of this passkey").fill(name)
    page.get_by_role("button", name="Add a passkey").click()
    expect(page.get_by_role("cell", name=name, exact=True)).to_be_visible(timeout=CEREMONY_MS)


def approve(page: Page) -> None:
    # static/passkeys.js (a deferred script) signs on the form's submit: a click before it ran
    # posts unsigned, as a loaded machine showed once. Deferred scripts run before this event.
    page.wait_for_load_state("domcontentloaded")
    page.get_by_role("button", name="Approve", exact=True).click()


def decided(page: Page, text: str) -> None:
    """The page says `text` once the authenticator signed and the server answered."""
    expect(page.get_by_text(text)).to_be_visible(timeout=CEREMONY_MS)


def sign_both_stages(page: Page, server: Server) -> str:
    session_id, review_id = server.propose()
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.get_by_text("Your decision is signed with your passkey")).to_be_visible()
    approve(page)
    decided(page, "The evidence plan is now waiting")
    page.get_by_role("link", name="review the evidence plan").click()
    expect(page.get_by_role("heading", name=re.compile("^Evidence proposal"))).to_be_visible()
    approve(page)
    decided(page, "the contract is active")
    return session_id


@dataclass
class SignedExports:
    directory: Path
    user_id: int
    keys: Path
    """The body of GET /api/v1/keys."""
    reviewer_keys: Path
    """The reviewer's own public keys, downloaded from their passkeys page."""
    both_stages: list[dict[str, Any]]
    """A session whose intent and evidence approvals are signed."""
    intent_only: list[dict[str, Any]]
    """Another session whose intent approval is signed."""
    server_key: Ed25519PrivateKey
    """The server's signing key: what an operator holds."""

    def verify(self, objects: list[dict[str, Any]], *args: str) -> Any:
        return verify_cli(self.directory / "export.jsonl", objects, "--key", str(self.keys),
                          *args)


def export_objects(server: Server, session_id: str) -> list[dict[str, Any]]:
    response = server.agent.get(f"/sessions/{session_id}/export")
    assert response.status_code == 200, response.text
    return [loads_strict(line) for line in response.text.splitlines()]


@pytest.fixture(scope="module")
def signed(server: Server, browser: Browser,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[SignedExports]:
    directory = tmp_path_factory.mktemp("signed-exports")
    user_id = reviewer(server, "sally")
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    virtual_authenticator(page)
    log_in(page, server, "sally", "pw-sally-1")
    add_passkey(page, server, "virtual key")
    both = sign_both_stages(page, server)
    intent_only, review_id = server.propose()
    page.goto(f"{server.url}/reviews/{review_id}/")
    approve(page)
    decided(page, "The evidence plan is now waiting")
    reviewer_keys = directory / "reviewer-keys.json"
    reviewer_keys.write_bytes(page.request.get(
        f"{server.url}/reviews/passkeys/reviewer-keys.json").body())
    context.close()
    keys = directory / "keys.json"
    keys.write_bytes(server.agent.get("/keys").content)
    raw = server.shell("from governor.models import SigningKey\nimport base64\n"
                       "print(base64.b64encode(bytes(SigningKey.objects.get(active=True)"
                       ".private_key)).decode())")
    yield SignedExports(directory, user_id, keys, reviewer_keys, export_objects(server, both),
                        export_objects(server, intent_only),
                        Ed25519PrivateKey.from_private_bytes(base64.b64decode(printed(raw))))


def test_issue_18_signed_approvals_of_both_stages_verify_offline_and_name_the_reviewer(
    signed: SignedExports
) -> None:
    result = signed.verify(signed.both_stages, "--reviewer-keys", str(signed.reviewer_keys))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("OK: session"), result.stdout
    who = f"by user {signed.user_id} (sally), signed with their passkey"
    assert re.search(rf"seq \d+: intent approved sha256:[0-9a-f]{{64}} {re.escape(who)}",
                     result.stdout), result.stdout
    assert re.search(rf"seq \d+: evidence approved sha256:[0-9a-f]{{64}} {re.escape(who)}",
                     result.stdout), result.stdout
    assert "--reviewer-keys" not in result.stderr
    header = signed.both_stages[0]
    assert header["format"] == "reliability-governor-export/3"
    kinds = [obj["kind"] for obj in signed.both_stages]
    assert kinds.count("reviewer-key") == 1 and kinds.count("assertion") == 2
    key = next(obj for obj in signed.both_stages if obj["kind"] == "reviewer-key")
    assert key["algorithm"] == -7 and key["rpId"] == "localhost" and key["username"] == "sally"


def test_issue_18_without_reviewer_keys_the_verifier_warns_it_trusted_the_exports_own(
    signed: SignedExports
) -> None:
    result = signed.verify(signed.both_stages)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("WARNING: no --reviewer-keys given: the signed decisions were checked only against "
            "the reviewer keys inside the export") in result.stderr


def test_issue_18_a_decision_altered_after_signing_fails_naming_its_seq(
    signed: SignedExports
) -> None:
    objects = json.loads(json.dumps(signed.both_stages))
    event = decision_events(objects)[-1]  # the evidence approval
    event["data"]["decision"] = "rejected"
    objects = reseal(objects, signed.server_key)
    result = signed.verify(objects, "--reviewer-keys", str(signed.reviewer_keys))
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {event['seq']}: the signature of user "
                                    f"{signed.user_id}"), result.stdout
    assert "challenge is not this decision's" in result.stdout


def _replay(objects: list[dict[str, Any]], onto: dict[str, Any],
            taken: dict[str, Any], assertion: dict[str, Any]) -> None:
    """Put the decision `taken`'s signature entry and `assertion` on the decision `onto`."""
    onto["data"]["signatures"] = taken["data"]["signatures"]
    mine = next(obj for obj in objects if obj["kind"] == "assertion" and obj["seq"] == onto["seq"])
    mine.update({name: assertion[name] for name in ("authenticatorData", "clientDataJSON",
                                                    "signature")})


def test_issue_18_an_assertion_replayed_onto_another_stage_fails_naming_its_seq(
    signed: SignedExports
) -> None:
    objects = json.loads(json.dumps(signed.both_stages))
    intent, evidence = decision_events(objects)
    intent_assertion = next(obj for obj in objects if obj["kind"] == "assertion"
                            and obj["seq"] == intent["seq"])
    _replay(objects, evidence, intent, intent_assertion)
    objects = reseal(objects, signed.server_key)
    result = signed.verify(objects, "--reviewer-keys", str(signed.reviewer_keys))
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {evidence['seq']}: "), result.stdout
    # Its nonce is the intent decision's: refused as a copy before its challenge is compared.
    assert f"is also that of the signature in seq {intent['seq']}" in result.stdout


def test_issue_18_an_assertion_replayed_onto_another_proposal_fails_naming_its_seq(
    signed: SignedExports
) -> None:
    donor = json.loads(json.dumps(signed.both_stages))
    donor_intent = decision_events(donor)[0]
    donor_assertion = next(obj for obj in donor if obj["kind"] == "assertion"
                           and obj["seq"] == donor_intent["seq"])
    objects = json.loads(json.dumps(signed.intent_only))
    (intent,) = decision_events(objects)
    assert intent["data"]["proposalReceipt"] != donor_intent["data"]["proposalReceipt"]
    _replay(objects, intent, donor_intent, donor_assertion)
    objects = reseal(objects, signed.server_key)
    result = signed.verify(objects, "--reviewer-keys", str(signed.reviewer_keys))
    assert result.returncode == 1
    assert result.stdout.startswith(f"FAIL: seq {intent['seq']}: "), result.stdout
    assert "challenge is not this decision's" in result.stdout


def test_issue_18_a_swapped_reviewer_key_fails_against_reviewer_keys_and_warns_without(
    signed: SignedExports
) -> None:
    """The operator registers a passkey in sally's name and re-signs her decisions with it: the
    export's own keys then vouch for it — which is why the verifier warns — but the key sally
    published does not."""
    objects = json.loads(json.dumps(signed.both_stages))
    forger = SoftAuthenticator(rp_id="localhost", origin="http://localhost")
    events = decision_events(objects)
    for event in events:
        forge_signature(objects, event, forger)
    objects = reseal(objects, signed.server_key)
    trusting = signed.verify(objects)
    assert trusting.returncode == 0, trusting.stdout
    assert "WARNING: no --reviewer-keys given" in trusting.stderr
    refused = signed.verify(objects, "--reviewer-keys", str(signed.reviewer_keys))
    assert refused.returncode == 1
    assert refused.stdout.startswith(f"FAIL: seq {events[0]['seq']}: "), refused.stdout
    assert "is not the one in --reviewer-keys (the key was swapped)" in refused.stdout
    # Swapped without re-signing: the signature no longer verifies, with or without the file.
    unsigned = json.loads(json.dumps(signed.both_stages))
    key_line = next(obj for obj in unsigned if obj["kind"] == "reviewer-key")
    key_line.update(cose=b64url(forger.cose), spki=b64url(forger.spki))
    swapped = signed.verify(unsigned)
    assert swapped.returncode == 1
    assert swapped.stdout.startswith(f"FAIL: seq {events[0]['seq']}: "), swapped.stdout
    assert "does not verify with the reviewer's public key" in swapped.stdout


def test_issue_18_without_a_passkey_the_page_says_why_and_an_approval_approves_nothing(
    server: Server, page: Page
) -> None:
    reviewer(server, "nora")
    log_in(page, server, "nora", "pw-nora-1")
    session_id, review_id = server.propose()
    page.goto(f"{server.url}/reviews/{review_id}/")
    expect(page.get_by_text("This project requires signed approvals.")).to_be_visible()
    assert_accessible(page)
    approve(page)
    expect(page.get_by_text("Nothing was approved.", exact=True)).to_be_visible()
    expect(page.get_by_text("requires every approval to be signed with your own passkey")
           ).to_be_visible()
    assert server.review(session_id)["status"] == "pending"


def test_issue_18_an_authenticator_that_cannot_verify_the_user_decides_nothing(
    server: Server, page: Page
) -> None:
    reviewer(server, "uma")
    authenticator = virtual_authenticator(page)
    log_in(page, server, "uma", "pw-uma-1")
    add_passkey(page, server, "virtual key")
    assert_accessible(page)
    session_id, review_id = server.propose()
    page.goto(f"{server.url}/reviews/{review_id}/")
    authenticator.user_verified(False)
    approve(page)
    expect(page.get_by_text("Nothing was decided: Your authenticator did not sign")
           ).to_be_visible()
    assert server.review(session_id)["status"] == "pending"


def test_issue_18_a_passkey_counter_that_went_backwards_approves_nothing(
    server: Server, page: Page
) -> None:
    """The server has seen a higher counter than the authenticator now reports: a clone."""
    reviewer(server, "carl")
    authenticator = virtual_authenticator(page)
    log_in(page, server, "carl", "pw-carl-1")
    add_passkey(page, server, "virtual key")
    session_id, review_id = server.propose()
    page.goto(f"{server.url}/reviews/{review_id}/")
    approve(page)
    decided(page, "The evidence plan is now waiting")
    (credential,) = authenticator.credentials()
    server.shell("from reviews.models import Passkey\n"
                 "Passkey.objects.filter(user__username='carl')"
                 f".update(sign_count={credential['signCount'] + 100})\n")
    page.get_by_role("link", name="review the evidence plan").click()
    approve(page)
    expect(page.get_by_text("Nothing was decided.", exact=True)).to_be_visible()
    expect(page.get_by_text("signature counter went backwards")).to_be_visible()
    review = server.review(session_id)
    assert review["stage"] == "evidence" and review["status"] == "pending"
