"""Trusted code verification through the API (rules §8, §4.10), tasks run in-process with
the real bubblewrap sandbox. The worker/Redis path is in tests/integration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governor.domain.profiles import validate_profile
from governor.models import Event, Project
from governor.services.profiles import profile_store
from tests.api.test_contracts import Agent, readme_contract
from tests.conftest import AgentClient
from verification.models import ProfileVersion, VerificationRun, VerifierProfile

pytestmark = pytest.mark.sandbox


def add_profile(project: Project, profile_id: str, argv: list[str], **extra: Any) -> Any:
    profile, _ = profile_store(model=VerifierProfile, project=project, validated=validate_profile({
        "id": profile_id, "description": f"{profile_id} check", "argv": argv,
        "timeout_ms": 10_000, **extra}))
    return profile


@pytest.fixture
def tests_profile(project: Project) -> VerifierProfile:
    return add_profile(project, "unit-tests", ["/bin/sh", "-c", "test -f /workspace/ok"])


@pytest.fixture
def worker(agent: AgentClient, workspace: Path) -> Agent:
    return Agent(agent, workspace)


def run(worker: Agent, profile: str) -> dict[str, Any]:
    response = worker.client.post(f"/sessions/{worker.id}/code-verifications",
                                  {"profile": profile, "argv": ["rm", "-rf", "/"]})
    assert response.status_code == 202, response.content
    body = response.json()
    assert set(body) == {"id", "state"}
    answer = worker.client.get(f"/code-verifications/{body['id']}", wait=5).json()
    assert answer["state"] == "finished"
    return answer


def test_profiles_list_never_shows_argv_or_env(
    worker: Agent, project: Project
) -> None:
    add_profile(project, "lint", ["ruff", "check"], env={"CI": "1"})
    [listed] = worker.client.get("/code-profiles").json()["profiles"]
    assert set(listed) == {"id", "description", "required", "timeout_ms", "sandbox_mode",
                           "protected_paths", "report", "heldout", "oracle", "receipt"}


def test_a_run_records_its_result_without_the_output(
    worker: Agent, tests_profile: VerifierProfile, workspace: Path
) -> None:
    (workspace / "ok").write_text("")
    answer = run(worker, "unit-tests")
    result = answer["result"]
    assert result["passed"] is True and result["failureKind"] is None
    assert result["profileReceipt"] == tests_profile.receipt
    assert set(result["stdout"]) == {"bytes", "truncated", "receipt"}
    event = Event.objects.get(session_id=worker.id, type="reliability/code-verification")
    assert event.data == result


def test_exit_7_fails_with_kind_exit(worker: Agent, project: Project) -> None:
    add_profile(project, "fails", ["/bin/sh", "-c", "exit 7"])
    result = run(worker, "fails")["result"]
    assert (result["passed"], result["failureKind"], result["exitCode"]) == (False, "exit", 7)


def test_missing_command_is_a_configuration_failure(worker: Agent, project: Project) -> None:
    add_profile(project, "missing", ["/usr/bin/definitely-not-here"])
    result = run(worker, "missing")["result"]
    assert (result["passed"], result["failureKind"]) == (False, "configuration")


def test_unknown_profile_is_404(worker: Agent) -> None:
    response = worker.client.post(f"/sessions/{worker.id}/code-verifications",
                                  {"profile": "nope"})
    assert response.status_code == 404


def test_code_contract_needs_a_required_profile(worker: Agent) -> None:
    response = worker.client.post(f"/sessions/{worker.id}/code-contracts", readme_contract())
    assert response.status_code == 422
    assert "profile" in response.json()["error"]["message"]


def test_code_contract_injects_required_checks_and_reserved_ids_cannot_be_shadowed(
    worker: Agent, tests_profile: VerifierProfile
) -> None:
    body = readme_contract()
    body["checks"].append({"id": "code-profile-unit-tests", "kind": "file_exists",
                           "path": "x"})
    assert worker.client.post(f"/sessions/{worker.id}/code-contracts",
                              body).status_code == 422
    response = worker.client.post(f"/sessions/{worker.id}/code-contracts", readme_contract())
    assert response.status_code == 201, response.content
    contract = response.json()["contract"]
    # First the runner control every contract naming a profile protects (rules §17.3).
    assert contract["checks"][0]["id"] == "protected-paths"
    assert contract["checks"][1] == {"id": "code-profile-unit-tests",
                                     "kind": "code_verification_succeeded",
                                     "profile": "unit-tests", "minCount": 1}
    assert contract["claims"][1]["id"] == "required-code-verification"
    assert contract["claims"][1]["importance"] == "critical"


def test_rule_4_10_certified_only_after_a_fresh_pass(
    worker: Agent, tests_profile: VerifierProfile, workspace: Path
) -> None:
    worker.write("README.md", "## Install\n")
    worker.client.post(f"/sessions/{worker.id}/code-contracts", readme_contract())
    (workspace / "ok").write_text("")
    assert run(worker, "unit-tests")["result"]["passed"]
    worker.write("README.md", "## Install\nmore\n")  # a later edit makes the pass stale
    verdict = worker.client.post(f"/sessions/{worker.id}/verify").json()
    assert verdict["decision"] == "repair"
    assert "code-profile-unit-tests" in verdict["message"]
    assert run(worker, "unit-tests")["result"]["passed"]
    assert worker.client.post(f"/sessions/{worker.id}/verify").json()["decision"] == "certified"


def test_rule_4_10_a_profile_edited_after_its_run_is_stale(
    worker: Agent, tests_profile: VerifierProfile, workspace: Path, project: Project
) -> None:
    worker.write("README.md", "## Install\n")
    worker.client.post(f"/sessions/{worker.id}/code-contracts", readme_contract())
    (workspace / "ok").write_text("")
    old_receipt = tests_profile.receipt
    assert run(worker, "unit-tests")["result"]["passed"]
    add_profile(project, "unit-tests", ["/bin/sh", "-c", "test -f /workspace/ok && true"])
    verdict = worker.client.post(f"/sessions/{worker.id}/verify").json()
    assert verdict["decision"] == "repair"
    assert "stale" in verdict["message"]
    assert ProfileVersion.objects.filter(receipt=old_receipt).exists()


def test_runs_claim_once(worker: Agent, tests_profile: VerifierProfile) -> None:
    from governor.services.runs import run_claim

    run(worker, "unit-tests")
    [finished] = VerificationRun.objects.all()
    assert run_claim(str(finished.pk)) is None


def test_rule_4_10_a_run_that_started_before_an_edit_is_stale_however_late_it_ends(
    worker: Agent, tests_profile: VerifierProfile
) -> None:
    from governor.services.runs import run_claim, run_finish

    worker.write("README.md", "## Install\n")
    worker.client.post(f"/sessions/{worker.id}/code-contracts", readme_contract())
    queued = VerificationRun.objects.create(
        session_id=worker.id, profile=tests_profile, profile_receipt=tests_profile.receipt,
        definition=tests_profile.definition())
    claimed = run_claim(str(queued.pk))
    assert claimed is not None
    worker.write("README.md", "## Install\nedited while the tests ran\n")
    empty = {"bytes": 0, "truncated": False, "receipt": "sha256:" + "0" * 64}
    run_finish(run=claimed, record={
        "passed": True, "failureKind": None, "exitCode": 0, "signal": None, "durationMs": 5,
        "sandboxMode": "read-only", "stdout": empty, "stderr": empty})
    verdict = worker.client.post(f"/sessions/{worker.id}/verify").json()
    assert verdict["decision"] == "repair"
    assert "code-profile-unit-tests" in verdict["message"]
