"""GET /api/v1/certifications (issue 30): a project's certified terminals, by tree or by session,
with the signed envelopes a verifier checks itself — never another project's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governor.domain.commits import certification_of
from governor.domain.tree import TREE_ID_PREFIX
from governor.models import Project
from governor.verify import load_trusted_keys
from tests.api.test_contracts import Agent, readme_contract
from tests.conftest import AgentClient

EXCLUSIONS = ["node_modules/**", "*.log"]


@pytest.fixture
def certified(agent: AgentClient, workspace: Path, project: Project) -> tuple[Agent, None]:
    project.tree_exclusions = EXCLUSIONS
    project.save(update_fields=["tree_exclusions"])
    (workspace / "bin").mkdir()
    (workspace / "bin" / "run").write_text("#!/bin/sh\n")
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "dep.js").write_text("excluded\n")
    (workspace / "debug.log").write_text("excluded\n")
    worker = Agent(agent, workspace)
    assert worker.begin(readme_contract()).status_code == 201
    worker.write("README.md", "## Install\n")
    assert worker.turn_stop()["terminal"]["status"] == "certified"
    return worker, None


def keys(agent: AgentClient) -> Any:
    return load_trusted_keys(agent.get("/keys").content)


def test_a_tree_query_answers_the_projects_certified_terminals_with_their_envelopes(
        agent: AgentClient, certified: tuple[Agent, None]) -> None:
    worker, _ = certified
    status = worker.status()
    tree = status["terminal"]["tree"]["id"]
    response = agent.get("/certifications", tree=tree)
    assert response.status_code == 200, response.content
    [item] = response.json()["certifications"]
    assert (item["session"], item["seq"], item["tree"]) == (worker.id, status["terminal"]["seq"],
                                                            tree)
    assert item["exclusions"] == sorted(EXCLUSIONS) and item["entries"] is None
    assert item["terminalReceipt"] == status["terminal"]["receipt"]
    checked = certification_of(item["envelope"], keys(agent), exclusions=item["exclusions"])
    assert checked.tree == tree and checked.session == worker.id
    other_tree = TREE_ID_PREFIX + "0" * 64
    assert agent.get("/certifications", tree=other_tree).json() == {"certifications": []}


def test_a_session_query_carries_the_certified_manifest(
        agent: AgentClient, certified: tuple[Agent, None]) -> None:
    worker, _ = certified
    [item] = agent.get("/certifications", session=worker.id).json()["certifications"]
    paths = [entry[0] for entry in item["entries"]]
    assert "README.md" in paths and "bin/run" in paths
    assert not any(path.startswith("node_modules/") or path.endswith(".log") for path in paths)
    checked = certification_of(item["envelope"], keys(agent), entries=item["entries"])
    assert checked.entries is not None and len(checked.entries) == len(paths)


def test_another_projects_token_sees_no_certification(
        agent: AgentClient, other_agent: AgentClient, certified: tuple[Agent, None]) -> None:
    worker, _ = certified
    tree = worker.status()["terminal"]["tree"]["id"]
    assert other_agent.get("/certifications", tree=tree).json() == {"certifications": []}
    assert other_agent.get("/certifications", session=worker.id).status_code == 404


def test_a_query_names_exactly_one_well_formed_tree_or_session(agent: AgentClient) -> None:
    assert agent.get("/certifications").status_code == 422
    assert agent.get("/certifications", tree="gittree:sha256:XYZ").status_code == 422
    assert agent.get("/certifications", tree=TREE_ID_PREFIX + "0" * 64,
                     session="00000000-0000-0000-0000-000000000000").status_code == 422
