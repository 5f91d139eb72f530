"""docs/api.md states the receipt, chain-hash and signature formulas and the export format
exactly: a verifier written from that page alone (tests/api/documented_verifier.py, which
shares no code with the governor) accepts a real export and finds what a forger changed."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from governor.models import Project
from governor.services.keys import key_active
from governor.services.reviews import review_decide
from governor.verify import serialise_line
from reviews.models import Review
from tests.api import documented_verifier
from tests.api.test_code_verification import add_profile
from tests.api.test_contracts import Agent, readme_contract
from tests.api.test_export_and_verify import export_text, finished_run
from tests.api.test_review_api import INTENT
from tests.conftest import AgentClient
from tests.pages import propose, reviewer_client
from tests.pages.test_passkeys import ORIGIN, register, signed_press
from tests.passkey_authenticator import SoftAuthenticator
from tests.signed_exports import decision_events, reseal

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = set(sys.stdlib_module_names) | {"rfc8785", "cryptography", "__future__"}


def test_the_documented_verifier_imports_nothing_of_the_governor() -> None:
    tree = ast.parse((ROOT / "tests/api/documented_verifier.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""])
            assert not getattr(node, "level", 0), "relative import"
            for name in names:
                assert name.split(".")[0] in ALLOWED, f"the verifier imports {name!r}"
    code = ("import json, sys\nimport tests.api.documented_verifier\n"
            "print(json.dumps(sorted(sys.modules)))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                                       capture_output=True, text=True).stdout)
    leaked = [name for name in loaded
              if name.split(".")[0] in ("governor", "reviews", "verification", "django")]
    assert not leaked, leaked


def reviewed_code_session(agent: AgentClient, workspace: Path, project: Project,
                          reviewer: Any) -> Agent:
    """Both review stages approved, a failed and a passing run, a repair and a certified
    terminal: every receipt kind but drafts, and both kinds of attestation."""
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    profile = add_profile(project, "unit-tests", ["/bin/true"])
    worker = Agent(agent, workspace)
    worker.write("README.md", "## Install\n")
    response = agent.post(f"/sessions/{worker.id}/code-contracts",
                          readme_contract(intent=INTENT))
    assert response.status_code == 202, response.content
    for stage in ("intent", "evidence"):
        review = Review.objects.get(session_id=worker.id, stage=stage)
        review_decide(user=reviewer, review=review, receipt=review.receipt, decision="approved")
    finished_run(worker, profile, passed=False)
    assert agent.post(f"/sessions/{worker.id}/verify").json()["decision"] == "repair"
    finished_run(worker, profile, passed=True)
    assert agent.post(f"/sessions/{worker.id}/verify").json()["decision"] == "certified"
    worker.write("NOTES.md", "after the terminal\n")
    return worker


def test_a_verifier_written_from_the_docs_accepts_a_real_export(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any
) -> None:
    worker = reviewed_code_session(agent, workspace, project, reviewer)
    text = export_text(agent, worker.id)
    types = {json.loads(line).get("type") for line in text.splitlines()}
    assert {"reliability/intent-review", "reliability/contract-review", "reliability/contract",
            "reliability/code-verification", "reliability/attempt",
            "reliability/terminal"} <= types
    keys = documented_verifier.keys_from_endpoint(agent.get("/keys").content)
    assert documented_verifier.problems(text, keys) == []


def test_a_verifier_written_from_the_docs_finds_a_forged_run_and_an_unsigned_tail(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any
) -> None:
    worker = reviewed_code_session(agent, workspace, project, reviewer)
    keys = documented_verifier.keys_from_endpoint(agent.get("/keys").content)
    objects = [json.loads(line) for line in export_text(agent, worker.id).splitlines()]
    events = [obj for obj in objects if obj["kind"] == "event"]
    failed_run = next(event for event in events
                      if event["type"] == "reliability/code-verification"
                      and not event["data"]["passed"])
    failed_run["data"]["passed"] = True
    prev = documented_verifier.GENESIS
    for event in events:  # the forger re-chains everything
        event["prev"] = prev
        event["hash"] = prev = documented_verifier.chain_hash(event)
    text = "".join(documented_verifier.rfc8785.dumps(obj).decode() + "\n" for obj in objects)
    found = documented_verifier.problems(text, keys)
    assert f"seq {failed_run['seq']}: code-verification-result receipt" in found
    assert f"seq {events[-1]['seq']}: the signed head does not cover the last event" in found


def test_a_verifier_written_from_the_docs_checks_the_certified_tree_and_its_manifest(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any
) -> None:
    worker = reviewed_code_session(agent, workspace, project, reviewer)
    keys = documented_verifier.keys_from_endpoint(agent.get("/keys").content)
    objects = [json.loads(line) for line in export_text(agent, worker.id).splitlines()]
    assert documented_verifier.problems(export_text(agent, worker.id), keys) == []
    status = worker.status()
    manifests = {obj["tree"]: obj for obj in objects if obj["kind"] == "manifest"}
    assert set(manifests) == {status["terminal"]["tree"]["id"],
                              status["contract"]["startTree"]["id"]}
    manifest = manifests[status["terminal"]["tree"]["id"]]
    assert "README.md" in {entry["path"] for entry in manifest["entries"]}
    manifest["entries"][0]["blob"] = "0" * 64
    text = "".join(documented_verifier.rfc8785.dumps(obj).decode() + "\n" for obj in objects)
    assert documented_verifier.problems(text, keys) == [
        f"manifest of {manifest['tree']}: its entries make another tree"]


def test_a_verifier_written_from_the_docs_checks_signed_decisions(
    agent: AgentClient, workspace: Path, project: Project, reviewer: Any, settings: Any
) -> None:
    """docs/api.md "Signed decisions": both stages approved with a reviewer's passkey (a software
    authenticator through the pages), checked from the page alone; an altered decision, re-sealed
    with the server's key, is found at its seq."""
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
    text = export_text(agent, session_id)
    keys = documented_verifier.keys_from_endpoint(agent.get("/keys").content)
    objects = [json.loads(line) for line in text.splitlines()]
    assert [obj["kind"] for obj in objects].count("assertion") == 2
    assert documented_verifier.problems(text, keys) == []

    altered = decision_events(objects)[-1]
    altered["data"]["decision"] = "rejected"
    forged = reseal(objects, Ed25519PrivateKey.from_private_bytes(bytes(key_active().private_key)))
    text = "".join(serialise_line(obj) + "\n" for obj in forged)
    assert documented_verifier.problems(text, keys) == [
        f"seq {altered['seq']}: the assertion was not made for this decision"]
