"""Export and offline verification, and the database refusing to rewrite history."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.db import DatabaseError, connection, transaction

from governor.models import Event
from governor.verify import verify_export
from tests.conftest import AgentClient
from tests.harness_builders import Trace

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
