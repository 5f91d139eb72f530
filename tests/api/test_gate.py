"""rules §19 through the API: a change certified at the pull request with no session, by a gate
token — the policy from the base, the profiles run on the base and on the head (the base's
protected content laid over it) with real pytest in the real sandbox, the findings named by
path and rule; and what a gate token may not do. (The whole walk with stock git, the CLI and a
served stack with its worker is tests/clients/test_gate_cli.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from governor.domain.attestation import verify_envelope
from governor.domain.commits import certification_of
from governor.domain.tree import blob_id
from governor.models import Change, Project, WorkspaceTree
from governor.services.tokens import token_create
from tests.api.test_blob_store import put
from tests.api.test_code_verification import add_profile
from tests.api.test_evidence_the_agent_cannot_shape import PYTEST, RIGHT, TESTS, WRONG
from tests.conftest import AgentClient
from verification.models import ChangeRun, VerificationRun

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]
BASE_COMMIT = "1" * 40
HEAD_COMMIT = "2" * 40


@pytest.fixture
def gate(project: Project, agent_owner: Any) -> AgentClient:
    _, secret = token_create(project=project, name="ci", owner=agent_owner, kind="gate")
    return AgentClient(secret)


def uploaded(client: AgentClient, files: dict[str, str | bytes]) -> list[dict[str, str]]:
    """The entries of `files`, their blobs uploaded when the store lacks them."""
    entries = []
    contents = {path: data.encode() if isinstance(data, str) else data
                for path, data in files.items()}
    ids = {path: blob_id(data) for path, data in contents.items()}
    missing = set(client.post("/blobs/missing", {"blobs": sorted(set(ids.values()))}
                              ).json()["missing"])
    for path, data in contents.items():
        if ids[path] in missing:
            assert put(client, ids[path], data).status_code == 201
            missing.discard(ids[path])
        entries.append({"path": path, "mode": "100644", "blob": ids[path]})
    return entries


BASE = {"calc.py": WRONG, "tests/test_calc.py": TESTS,
        ".governor-gate.toml": 'required_profiles = ["unit-tests"]\n'
                               'protected_paths = ["tests/**"]\n'}


def gated(client: AgentClient, head: dict[str, str | bytes | None], *,
          base: dict[str, str | bytes] | None = None, observe: bool = False) -> Any:
    base = dict(BASE if base is None else base)
    files = {path: data for path, data in {**base, **head}.items() if data is not None}
    body: dict[str, Any] = {
        "base": {"commit": BASE_COMMIT, "entries": uploaded(client, base)},
        "head": {"commit": HEAD_COMMIT, "entries": uploaded(client, files)}}
    if observe:
        body["observe"] = True
    return client.post("/changes", body)


@pytest.fixture
def unit_tests(project: Project) -> Any:
    return add_profile(project, "unit-tests", PYTEST, report="junit", timeout_ms=60_000)


def decided(client: AgentClient, response: Any) -> dict[str, Any]:
    assert response.status_code == 201, response.content
    answer = client.get(f"/changes/{response.json()['id']}").json()
    assert answer["status"] != "running", answer
    return dict(answer)


def rules_of(answer: dict[str, Any]) -> dict[str, str]:
    return {finding["rule"]: finding["message"] for finding in answer["findings"]}


@pytest.mark.sandbox
def test_rule_19_2_an_honest_change_is_certified_with_a_signed_head_tree(
        gate: AgentClient, unit_tests: Any) -> None:
    answer = decided(gate, gated(gate, {"calc.py": RIGHT}))
    assert answer["status"] == "certified", answer["findings"]
    assert {(run["profile"], run["role"], run["passed"]) for run in answer["runs"]} == {
        ("unit-tests", "base", False), ("unit-tests", "head", True)}
    proofs = {proof["rule"]: proof["text"] for proof in answer["proofs"]}
    assert proofs["fail-to-pass"] == "fail-to-pass 1 of 1, pass-to-pass 1 of 1"
    statement = verify_envelope(answer["envelope"], public_keys_map())
    assert statement["subject"][0]["name"] == f"change:{answer['id']}"
    assert statement["predicate"]["startTree"] == answer["base"]["tree"]
    change = Change.objects.get(pk=answer["id"])
    certification = certification_of(answer["envelope"], public_keys_map(),
                                      entries=change.head_tree.manifest)
    assert certification.tree == answer["head"]["tree"]
    # rules §16.2: the project's certifications of the head tree include the change
    listed = gate.get("/certifications", tree=answer["head"]["tree"]).json()["certifications"]
    assert [item["session"] for item in listed] == [f"change:{answer['id']}"]


def public_keys_map() -> Any:
    """The keys the server publishes (GET /api/v1/keys), as a verifier loads them."""
    from django.test import Client

    from governor.verify import load_trusted_keys

    return load_trusted_keys(Client().get("/api/v1/keys").content)


@pytest.mark.sandbox
def test_rule_19_2_a_head_that_deletes_the_failing_test_is_not_certified(
        gate: AgentClient, unit_tests: Any) -> None:
    without = TESTS.split("def test_mul():")[0] + "def test_mul_of_twos():" + TESTS.split(
        "def test_mul_of_twos():")[1]
    answer = decided(gate, gated(gate, {"tests/test_calc.py": without}))
    assert answer["status"] == "not-certified"
    rules = rules_of(answer)
    assert "tests/test_calc.py (modified)" in rules["protected-paths"]
    # the run judged the base's tests anyway: the failing test still fails on the head
    assert "did not pass on the head" in rules["profile-passed"]


@pytest.mark.sandbox
def test_rule_19_1_a_head_that_edits_the_policy_to_drop_a_profile_is_judged_by_the_base_policy(
        gate: AgentClient, unit_tests: Any) -> None:
    answer = decided(gate, gated(gate, {".governor-gate.toml": "required_profiles = []\n"}))
    assert answer["status"] == "not-certified"
    rules = rules_of(answer)
    assert rules["gate-policy"].startswith(".governor-gate.toml (modified)")
    assert answer["policy"]["required_profiles"] == ["unit-tests"]  # the base's
    assert {run["profile"] for run in answer["runs"]} == {"unit-tests"}


@pytest.mark.sandbox
def test_rule_19_2_a_runner_control_file_added_by_the_head_is_a_protected_change(
        gate: AgentClient, unit_tests: Any) -> None:
    conftest = "import pytest\n\ndef pytest_collection_modifyitems(items):\n    items.clear()\n"
    answer = decided(gate, gated(gate, {"conftest.py": conftest, "calc.py": WRONG}))
    assert answer["status"] == "not-certified"
    assert "conftest.py (added)" in rules_of(answer)["protected-paths"]


@pytest.mark.sandbox
def test_rule_19_2_the_tamper_scan_names_the_path_line_and_rule(
        gate: AgentClient, unit_tests: Any) -> None:
    forged = RIGHT + "import os\nos._exit(0)\n"
    answer = decided(gate, gated(gate, {"calc.py": forged}))
    assert answer["status"] == "not-certified"
    assert "calc.py:4 tamper/" in rules_of(answer)["tamper-free"]


@pytest.mark.sandbox
def test_rule_19_2_observe_mode_records_what_it_would_have_refused(
        gate: AgentClient, unit_tests: Any) -> None:
    answer = decided(gate, gated(gate, {"tests/test_calc.py": ""}, observe=True))
    assert answer["observe"] is True and answer["status"] == "not-certified"
    assert Change.objects.get(pk=answer["id"]).observe


@pytest.mark.sandbox
def test_rule_19_2_a_base_already_run_is_not_run_again(
        gate: AgentClient, unit_tests: Any) -> None:
    first = decided(gate, gated(gate, {"calc.py": RIGHT}))
    second = decided(gate, gated(gate, {"calc.py": RIGHT, "NOTES.md": "fixed\n"}))
    base_run = {run["id"] for run in first["runs"] if run["role"] == "base"}
    assert base_run == {run["id"] for run in second["runs"] if run["role"] == "base"}
    assert VerificationRun.objects.filter(session__isnull=True, baseline=True).count() == 1
    assert ChangeRun.objects.filter(role="base").count() == 2


def test_rule_19_2_a_gate_token_is_refused_on_agent_routes(gate: AgentClient) -> None:
    for method, path, body in (
            ("post", "/sessions", {"workspace": {"kind": "snapshot"}}),
            ("post", "/sessions/00000000-0000-0000-0000-000000000000/contracts", {}),
            ("post", "/sessions/00000000-0000-0000-0000-000000000000/code-contracts", {}),
            ("get", "/sessions/00000000-0000-0000-0000-000000000000/review", None),
            ("get", "/code-profiles", None)):
        response = (gate.post(path, body) if method == "post" else gate.get(path))
        assert response.status_code == 403, (path, response.content)
        assert response.json()["error"]["code"] == "FORBIDDEN"
        assert "gate token may only gate changes" in response.json()["error"]["message"]
    assert gate.get("/project").status_code == 200  # shared: the exclusions and caps


def test_rule_19_2_an_agent_token_cannot_gate(agent: AgentClient) -> None:
    response = agent.post("/changes", {})
    assert response.status_code == 403
    assert "takes a gate token" in response.json()["error"]["message"]


def test_rule_19_1_a_policy_file_that_does_not_parse_is_refused_naming_line_and_key(
        gate: AgentClient) -> None:
    before = WorkspaceTree.objects.count()
    response = gated(gate, {}, base={"a.py": "x = 1\n", ".governor-gate.toml":
                                     'protected_paths = ["tests/**"]\nrequire_profiles = []\n'})
    assert response.status_code == 422
    assert response.json()["error"]["details"] == [{
        "path": "base: .governor-gate.toml:2 require_profiles",
        "message": "unknown key; the keys are required_profiles, protected_paths, "
                   "changes_within, tamper_scan, require_discriminating_evidence"}]
    response = gated(gate, {}, base={"a.py": "x = 1\n", ".governor-gate.toml": "tamper_scan = \n"})
    assert response.status_code == 422
    assert "line 1" in response.json()["error"]["message"]
    assert WorkspaceTree.objects.count() == before and not Change.objects.exists()


def test_rule_19_2_bad_input_is_refused_naming_the_field_and_nothing_is_stored(
        gate: AgentClient, project: Project) -> None:
    entries = uploaded(gate, {"a.py": "x = 1\n"})
    cases = [
        ({"base": {"commit": "HEAD", "entries": entries},
          "head": {"commit": HEAD_COMMIT, "entries": entries}}, "base.commit"),
        ({"base": {"commit": BASE_COMMIT, "entries": entries},
          "head": {"commit": "3" * 64, "entries": entries}}, "head.commit"),
        ({"base": {"commit": BASE_COMMIT, "entries": entries},
          "head": {"commit": HEAD_COMMIT, "entries": [{"path": "../x", "mode": "100644",
                                                       "blob": entries[0]["blob"]}]}},
         "head.entries/0/path"),
        ({"base": {"commit": BASE_COMMIT, "entries": entries},
          "head": {"commit": HEAD_COMMIT, "entries": [{"path": "b.py", "mode": "100644",
                                                       "blob": "f" * 64}]}},
         "head.entries/0/blob"),
    ]
    for body, field in cases:
        response = gate.post("/changes", body)
        assert response.status_code == 422, response.content
        assert field in [d["path"] for d in response.json()["error"]["details"]], response.json()
    project.tree_max_files = 1
    project.save(update_fields=["tree_max_files"])
    big = uploaded(gate, {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    response = gate.post("/changes", {"base": {"commit": BASE_COMMIT, "entries": entries},
                                      "head": {"commit": HEAD_COMMIT, "entries": big}})
    assert response.status_code == 422
    assert response.json()["error"]["details"][0]["path"] == "head.entries"
    assert not Change.objects.exists() and WorkspaceTree.objects.count() == 0


def test_rule_19_2_a_head_whose_checkout_would_not_be_its_bytes_is_not_certified(
        gate: AgentClient) -> None:
    """Rules §17.9 at the gate: `ident` in the head's `.gitattributes` expands `$Id$` in
    every clone, so the certified bytes would not be what a checkout holds."""
    answer = decided(gate, gated(gate, {".gitattributes": "calc.py ident\n"}, base={
        "calc.py": "x = 1\n"}))
    assert answer["status"] == "not-certified"
    assert "`ident` applies to calc.py" in rules_of(answer)["checkout-bytes"]


def test_rule_19_2_another_projects_gate_token_cannot_read_a_change(
        gate: AgentClient, agent_owner: Any) -> None:
    response = gated(gate, {"calc.py": "x = 2\n"}, base={"calc.py": "x = 1\n"})
    assert response.status_code == 201
    other = Project.objects.create(slug="other", name="Other")
    _, secret = token_create(project=other, name="ci", owner=agent_owner, kind="gate")
    stranger = AgentClient(secret)
    assert stranger.get(f"/changes/{response.json()['id']}").status_code == 404
    listed = stranger.get("/certifications", tree=response.json()["head"]["tree"]).json()
    assert listed == {"certifications": []}


def test_rule_19_2_a_base_the_server_keeps_is_named_by_its_id_alone(gate: AgentClient) -> None:
    base = {"calc.py": "x = 1\n"}
    first = gated(gate, {"calc.py": "x = 2\n"}, base=base)
    assert first.status_code == 201
    tree = first.json()["base"]["tree"]
    head = uploaded(gate, {"calc.py": "x = 3\n"})
    second = gate.post("/changes", {"base": {"commit": BASE_COMMIT, "tree": tree},
                                    "head": {"commit": HEAD_COMMIT, "changes": head}})
    assert second.status_code == 201, second.content
    assert second.json()["base"]["tree"] == tree and second.json()["changed"] == 1
    unknown = gate.post("/changes", {"base": {"commit": BASE_COMMIT, "tree": "gittree:sha256:"
                                              + "0" * 64},
                                     "head": {"commit": HEAD_COMMIT, "changes": head}})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["details"] == [{"path": "base.tree",
                                                   "message": "not kept: send entries"}]


@pytest.mark.sandbox
def test_rule_19_1_held_out_expected_outputs_gate_a_change_through_the_profile_that_runs_them(
        gate: AgentClient, project: Project) -> None:
    """Held-out suites reach a gate through the profiles that run them (rules §19.1, §18.3):
    the policy requires the oracle profile; the head that hard-codes the answer its visible
    test checks is not certified, the fix is — the expected values compared in the worker."""
    from governor.services.heldout import suite_load
    from tests.api.test_heldout_evidence import ADAPTER, CASES, ORACLE, cases_jsonl

    suite_load(project=project, name="golden-outputs",
               entries=[("adapter.py", "100644", ADAPTER.encode()),
                        ("cases.jsonl", "100644", cases_jsonl(CASES))])
    add_profile(project, "golden-outputs", ORACLE, timeout_ms=60_000, heldout="golden-outputs",
                oracle="golden-outputs")
    base = {**BASE, ".governor-gate.toml": 'required_profiles = ["golden-outputs"]\n'}
    hardcoded = "def mul(a, b):\n    return 12 if (a, b) == (3, 4) else a + b\n"
    refused = decided(gate, gated(gate, {"calc.py": hardcoded}, base=base))
    assert refused["status"] == "not-certified"
    assert "golden-outputs" in rules_of(refused)["profile-passed"]
    runs = VerificationRun.objects.filter(session__isnull=True,
                                          profile__profile_id="golden-outputs")
    assert {run.oracle.suite.name for run in runs} == {"golden-outputs"}
    assert all(run.result["failureKind"] == "outputs-differ" for run in runs)
    answer = decided(gate, gated(gate, {"calc.py": RIGHT}, base=base))
    assert answer["status"] == "certified", answer["findings"]


@pytest.mark.sandbox
def test_rule_19_2_a_head_that_loads_a_pytest_plugin_from_a_test_module_is_not_certified(
        gate: AgentClient, unit_tests: Any) -> None:
    """Review attack: the base protects no tests, so the head leaves the failing test as it is
    and adds a test module whose `pytest_plugins` loads a helper with a plain hook —
    `pytest_pyfunc_call` returning True passes every test without running it, with no import
    of pytest. The runs say the base's failing test passes on the head (fail-to-pass 1 of 1);
    the tamper scan (`tamper/runner-plugin`) is what refuses it."""
    base = {**BASE, ".governor-gate.toml": 'required_profiles = ["unit-tests"]\n'}
    answer = decided(gate, gated(gate, {
        "tests/test_zz.py": 'pytest_plugins = ["zz_helper"]\n\n\ndef test_zz():\n    pass\n',
        "tests/zz_helper.py": "def pytest_pyfunc_call(pyfuncitem):\n    return True\n"},
        base=base))
    assert answer["status"] == "not-certified", answer
    tamper = rules_of(answer)["tamper-free"]
    assert "tests/test_zz.py:1 tamper/runner-plugin" in tamper
    assert "tests/zz_helper.py:1 tamper/runner-plugin" in tamper
    assert set(rules_of(answer)) == {"tamper-free"}  # the runs alone would have certified it
    assert {(run["role"], run["passed"]) for run in answer["runs"]} == {
        ("base", False), ("head", True)}


def test_rule_19_2_a_refused_head_change_names_the_changes_field_the_body_has(
        gate: AgentClient) -> None:
    """Review: the CLI sends the head as `changes` over the base; a refusal named
    `head.entries/0/…`, a field the body did not have."""
    entries = uploaded(gate, {"a.py": "x = 1\n"})
    cases = [([{"path": "b.py", "mode": "100644", "blob": None}], "head.changes/0/blob"),
             ([{"path": "b.py", "mode": "100644", "blob": "f" * 64}], "head.changes/0/blob"),
             ([{"path": "../b.py", "mode": "100644", "blob": entries[0]["blob"]}],
              "head.changes/0/path"),
             ("x", "head.changes")]
    for changes, field in cases:
        response = gate.post("/changes", {"base": {"commit": BASE_COMMIT, "entries": entries},
                                          "head": {"commit": HEAD_COMMIT, "changes": changes}})
        assert response.status_code == 422, response.content
        assert [d["path"] for d in response.json()["error"]["details"]] == [field], changes
    assert not Change.objects.exists()
