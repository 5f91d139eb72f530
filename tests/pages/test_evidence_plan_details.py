"""The evidence page shows what every check really does (issue 28 item 1): a trusted run's
profile — its description, the command exactly as it runs, sandbox, limits, protected paths,
report kind and receipt, and that it was edited after the plan was proposed — and a file
check's file as the workspace holds it now, as text."""

from __future__ import annotations

from pathlib import Path

from django.test import Client

from governor.domain.profiles import validate_profile
from governor.models import Project
from governor.services.profiles import profile_store
from governor.services.projects import project_set
from reviews.models import Review
from tests.conftest import AgentClient
from tests.pages import contract_body
from tests.pages.test_review_pages import approve_intent, url
from verification.models import VerifierProfile

PROFILE = {"id": "unit-tests", "description": "Runs the calc unit tests with pytest",
           "argv": ["/usr/bin/python3", "-m", "pytest", "-q", "--junitxml=/governor-report/j.xml"],
           "report": "junit", "protected_paths": ["tests/**"], "timeout_ms": 30_000}


def evidence_of_a_plan_with_a_profile_and_a_file(agent: AgentClient, workspace: Path,
                                                 rita: Client, route: str = "contracts"
                                                 ) -> Review:
    (workspace / "README.md").write_text("<script>alert(1)</script>\n## Install\n")
    body = contract_body()
    body["checks"].append({"id": "tests", "kind": "code_verification_succeeded",
                           "profile": "unit-tests"})
    body["claims"][0]["check_ids"].append("tests")
    session_id = agent.create_session(workspace)["id"]
    response = agent.post(f"/sessions/{session_id}/{route}", body)
    assert response.status_code == 202, response.content
    return approve_intent(rita, Review.objects.get(pk=response.json()["review"]["id"]))


def test_the_evidence_page_shows_exactly_what_a_trusted_run_runs(
        agent: AgentClient, workspace: Path, review_project: Project, rita: Client) -> None:
    profile_store(model=VerifierProfile, project=review_project,
                  validated=validate_profile(PROFILE))
    evidence = evidence_of_a_plan_with_a_profile_and_a_file(agent, workspace, rita)
    page = rita.get(url(evidence)).content.decode()
    assert "Runs the calc unit tests with pytest" in page
    assert "/usr/bin/python3 -m pytest -q --junitxml=/governor-report/j.xml" in page
    assert "read-only, on a private copy of the workspace tree" in page
    assert "30000 ms" in page and "tests/**" in page and "junit: judged by its report" in page
    assert evidence.proposal["profileReceipts"] == {"unit-tests": review_project.profiles.get(
        profile_id="unit-tests").receipt}
    assert "was edited after this plan was proposed" not in page


def test_a_profile_edited_after_the_plan_was_proposed_says_so(
        agent: AgentClient, workspace: Path, review_project: Project, rita: Client) -> None:
    profile_store(model=VerifierProfile, project=review_project,
                  validated=validate_profile(PROFILE))
    evidence = evidence_of_a_plan_with_a_profile_and_a_file(agent, workspace, rita)
    profile_store(model=VerifierProfile, project=review_project,
                  validated=validate_profile({**PROFILE, "argv": ["/bin/true"]}))
    page = rita.get(url(evidence)).content.decode()
    assert "The profile was edited after this plan was proposed" in page
    assert '<code class="command">/bin/true</code>' in page  # what will run now


def test_the_command_is_shell_quoted_and_the_limits_read_as_sizes_with_their_exact_bytes(
        agent: AgentClient, workspace: Path, review_project: Project, rita: Client) -> None:
    """Issue 40: `/bin/sh -c test -f README.md` did not say which words are one argument; a
    limit of 268435456 was a number to count the digits of."""
    profile_store(model=VerifierProfile, project=review_project, validated=validate_profile({
        **PROFILE, "report": None, "argv": ["/bin/sh", "-c", "test -f README.md"],
        "limits": {"memory_bytes": 256 * 1024**2, "file_bytes": 3 * 1024**2 // 2}}))
    evidence = evidence_of_a_plan_with_a_profile_and_a_file(agent, workspace, rita)
    page = rita.get(url(evidence)).content.decode()
    assert '<code class="command">/bin/sh -c &#x27;test -f README.md&#x27;</code>' in page
    assert '<code class="nowrap" title="268,435,456 bytes">memoryBytes 256 MiB</code>' in page
    assert '<code class="nowrap" title="1,572,864 bytes">fileBytes 1.5 MiB</code>' in page
    assert '<code class="nowrap">pids 256</code>' in page and "268435456" not in page


def test_a_required_profile_the_agent_names_too_is_shown_in_full_once(
        agent: AgentClient, workspace: Path, review_project: Project, rita: Client) -> None:
    profile_store(model=VerifierProfile, project=review_project,
                  validated=validate_profile({**PROFILE, "required": True}))
    evidence = evidence_of_a_plan_with_a_profile_and_a_file(agent, workspace, rita,
                                                            route="code-contracts")
    checks = [check["id"] for check in evidence.proposal["checks"]]
    assert [check["id"] for check in evidence.proposal["checks"]
            if check.get("profile") == "unit-tests"] == ["code-profile-unit-tests", "tests"]
    first = checks.index("code-profile-unit-tests")  # after the protected-paths check
    page = rita.get(url(evidence)).content.decode()
    assert page.count("What this trusted run runs") == 1
    assert page.count("Runs the calc unit tests with pytest") == 1
    assert (f'Runs the same trusted profile as check <a href="#check-{first}" class="mono">'
            "code-profile-unit-tests</a>") in page
    assert f'id="check-{first}"' in page


def test_a_file_checks_file_is_shown_as_the_workspace_holds_it_as_text(
        agent: AgentClient, workspace: Path, review_project: Project, rita: Client) -> None:
    profile_store(model=VerifierProfile, project=review_project,
                  validated=validate_profile(PROFILE))
    evidence = evidence_of_a_plan_with_a_profile_and_a_file(agent, workspace, rita)
    page = rita.get(url(evidence)).content.decode()
    assert "<code>README.md</code> as the workspace holds it now" in page
    assert "&lt;script&gt;" in page and "<script>alert(1)</script>" not in page


def test_rule_17_3_the_evidence_page_shows_the_runner_control_the_project_does_not_protect(
        agent: AgentClient, workspace: Path, review_project: Project, rita: Client) -> None:
    """An exempted built-in entry is shown with its reason, first; and how the report
    profile's pytest loads plugins."""
    profile_store(model=VerifierProfile, project=review_project,
                  validated=validate_profile(PROFILE))
    project_set(project=review_project, runner_control_exempt=[
        {"entry": "**/setup.cfg", "reason": "holds only <flake8> settings"}])
    evidence = evidence_of_a_plan_with_a_profile_and_a_file(agent, workspace, rita)
    page = rita.get(url(evidence)).content.decode()
    shown = page.index("The project does not protect this runner control")
    assert shown < page.index("Evidence plan")
    assert "<code>**/setup.cfg</code> — holds only &lt;flake8&gt; settings" in page
    assert "<code>PYTEST_DISABLE_PLUGIN_AUTOLOAD=1</code>" in page
    project_set(project=review_project, runner_control_exempt=[])  # later plans: none shown
    assert "The project does not protect this runner control" not in rita.get(
        url(evidence_of_a_plan_with_a_profile_and_a_file(agent, workspace, rita))
    ).content.decode()
