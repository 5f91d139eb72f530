"""Verify (or abstain) while the contract is a proposal a person has not decided: the client
says a contract is waiting for review and where, never "there is no contract"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.test_contracts import readme_contract
from tests.clients.conftest import cli, cli_json
from tests.conftest import INTENT
from tests.live import Live


def test_verify_while_a_review_is_pending_names_the_review_and_its_url(
    live: Live, workspace: Path, review_required: None,
) -> None:
    from governor_client import AgentSession, Config, GovernorClient, ReviewPending, Workspace

    config = Config.from_env({"GOVERNOR_URL": live.url, "GOVERNOR_TOKEN": live.token})
    with GovernorClient(config) as client:
        agent = AgentSession(client, Workspace(workspace))
        begun = agent.begin(readme_contract(intent=INTENT))
        assert begun["status"] == "review-pending"
        with pytest.raises(ReviewPending) as waiting:
            agent.verify()
        assert waiting.value.review_url == begun["review_url"]
        assert waiting.value.status == 409 and waiting.value.code == "REVIEW_PENDING"
        assert "waiting for review (intent stage)" in str(waiting.value)
        assert begun["review_url"] in waiting.value.message
        assert "no contract" not in waiting.value.message
        with pytest.raises(ReviewPending):
            agent.abstain("cannot do it")
        assert agent.status()["state"] == "review-pending"  # nothing was written


def test_the_cli_verify_says_so_too(live: Live, workspace: Path, review_required: None) -> None:
    begun = cli_json(live, workspace, "begin", "--wait", "0",
                     stdin=json.dumps(readme_contract(intent=INTENT)))
    refused = cli(live, workspace, "verify")
    assert refused.returncode == 1
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "REVIEW_PENDING"
    assert error["details"]["review_url"] == begun["review_url"]


def test_verify_without_any_contract_keeps_the_servers_answer(
    live: Live, workspace: Path, review_required: None,
) -> None:
    refused = cli(live, workspace, "verify")
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "CONFLICT" and "no contract" in error["message"]
