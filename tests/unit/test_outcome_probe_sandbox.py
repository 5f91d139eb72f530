"""An outcome probe runs in the verifier sandbox: read-only, on an empty workspace of its own,
no network unless its operator chose `host`, and its output never kept."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from governor.domain.outcomes import outcome_definition, probe_definition, validate_outcome_profile
from governor.lib.probes import probe_run
from verification.sandbox import bwrap_argv, sandbox_mounts

NOW = 1_800_000_000_000


def definition(argv: list[str], **extra: Any) -> dict[str, Any]:
    return outcome_definition(validate_outcome_profile({
        "id": "probe", "description": "d", "argv": argv,
        "metrics": [{"name": "up", "unit": ""}],
        "target": {"id": "t", "metric": "up", "operator": "eq", "value": 1}, **extra}))


def test_rule_2_a_probe_has_no_network_unless_its_profile_says_host() -> None:
    closed = probe_definition(definition(["/usr/bin/true"]))
    assert "--unshare-all" in bwrap_argv(closed, "/tmp/x")  # noqa: S108
    assert "--share-net" not in bwrap_argv(closed, "/tmp/x")  # noqa: S108
    assert all(m.target != "/etc/resolv.conf" for m in sandbox_mounts(closed, "/tmp/x"))  # noqa: S108
    opened = probe_definition(definition(["/usr/bin/true"], network="host"))
    assert "--share-net" in bwrap_argv(opened, "/tmp/x")  # noqa: S108
    assert closed["sandboxMode"] == opened["sandboxMode"] == "read-only"


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    threading.Thread(target=lambda: [server.accept() for _ in range(2)], daemon=True).start()
    return server, server.getsockname()[1]


def test_rule_2_a_probe_without_network_reaches_nothing_and_with_host_reaches_the_host() -> None:
    server, port = _listener()
    try:
        script = (f"import socket, json; socket.create_connection(('127.0.0.1', {port}), 2); "
                  f"print(json.dumps({{'dataAsOf': {NOW}, 'metrics': {{'up': 1}}}}))")
        closed = definition(["/usr/bin/python3", "-c", script])
        refused = probe_run(closed, probe_definition(closed), now_ms=NOW)
        assert refused["passed"] is False and refused["failureKind"] == "exit"
        opened = definition(["/usr/bin/python3", "-c", script], network="host")
        reached = probe_run(opened, probe_definition(opened), now_ms=NOW)
        assert reached["passed"] is True and reached["metrics"] == {"up": 1}
    finally:
        server.close()


def test_rule_2_a_probe_sees_an_empty_read_only_workspace_and_its_output_is_not_kept() -> None:
    script = ("import os, json; assert os.listdir('/workspace') == []; "
              "open('/workspace/x', 'w')")
    bound = definition(["/usr/bin/python3", "-c", script])
    result = probe_run(bound, probe_definition(bound), now_ms=NOW)
    assert result["passed"] is False and result["failureKind"] == "exit"
    assert set(result["stderr"]) == {"bytes", "truncated", "receipt"}  # never the text
    assert result["stderr"]["bytes"] > 0


def test_rule_2_a_probe_that_cannot_start_is_configuration_and_names_no_command() -> None:
    bound = definition(["/usr/bin/no-such-probe"])
    result = probe_run(bound, probe_definition(bound), now_ms=NOW)
    assert result["passed"] is False and result["failureKind"] == "configuration"
    assert "no-such-probe" not in str(result)


def test_rule_2_a_probe_past_its_timeout_is_timeout() -> None:
    bound = definition(["/usr/bin/sleep", "5"], timeout_ms=1000)
    result = probe_run(bound, probe_definition(bound), now_ms=NOW)
    assert result["failureKind"] == "timeout"


def test_rule_2_a_probe_reads_a_data_directory_private_to_the_worker(tmp_path: Path) -> None:
    """The operator's data directory in a checkout under a directory only the worker's user may
    enter (issue 40: `outcome-data/` of a checkout under /root, served as root). A root worker
    runs bubblewrap as nobody, which cannot pass such a directory: it binds it as root first,
    as it does the workspace."""
    private = tmp_path / "home"
    data = private / "checkout" / "outcome-data"
    data.mkdir(parents=True)
    private.chmod(0o700)
    (data / "answer.json").write_text(json.dumps({"dataAsOf": NOW, "metrics": {"up": 1}}))
    bound = definition(["/usr/bin/cat", "/outcome-data/answer.json"])
    sandbox = {**probe_definition(bound), "readOnlyBinds": [[str(data), "/outcome-data"]]}
    result = probe_run(bound, sandbox, now_ms=NOW)
    assert result["passed"] is True, result
    assert result["metrics"] == {"up": 1}


def test_rule_2_a_missing_data_directory_is_infrastructure_named_before_the_probe_starts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "no-such-directory"
    bound = definition(["/usr/bin/cat", "/outcome-data/answer.json"])
    sandbox = {**probe_definition(bound), "readOnlyBinds": [[str(missing), "/outcome-data"]]}
    result = probe_run(bound, sandbox, now_ms=NOW)
    assert result["passed"] is False and result["failureKind"] == "infrastructure"
    assert f"the read-only directory {missing} is not available" in caplog.text  # operators'
