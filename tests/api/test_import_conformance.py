"""Real-data conformance through the API: every recorded Harness log reaches its listed verdict
when imported (or, for live streams, appended event by event), and a refusal names the rule, the
event index and its seq and stores nothing."""

from __future__ import annotations

import pytest
import zstandard

from governor.domain.harness import parse_log, parse_stream
from governor.models import Event, Session
from tests.conftest import AgentClient
from tests.harness_corpus import FIXTURES, denormalised_text, index_rows

ROWS = [pytest.param(row, id=f"{row.verdict}:{row.path.removeprefix('logs/')}")
        for row in index_rows() if row.verdict != "skip"]


@pytest.mark.parametrize("row", ROWS)
def test_recorded_log_reaches_its_verdict_through_the_api(
    agent: AgentClient, workspace: object, row: object
) -> None:
    text = denormalised_text(row.path)  # type: ignore[attr-defined]
    verdict = row.verdict  # type: ignore[attr-defined]
    if verdict == "accept-stream":
        session = agent.create_session(workspace)  # type: ignore[arg-type]
        events = parse_stream(text)
        for event in events:
            response = agent.append(session["id"], [event])
            assert response.status_code == 200, response.content
        assert Event.objects.filter(session_id=session["id"]).count() == len(events)
        return
    response = agent.post("/sessions/import", raw=text, content_type="application/x-ndjson")
    if verdict == "accept":
        assert response.status_code == 201, response.content
        session = Session.objects.get(pk=response.json()["id"])
        assert session.imported
        assert response.json()["next_seq"] == session.events.count() > 0
        return
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "INVARIANT"
    assert error["details"]["rule"] and isinstance(error["details"]["index"], int)
    assert "seq" in error["details"]
    assert not Session.objects.exists()
    assert not Event.objects.exists()


def test_zstd_compressed_log_is_imported(agent: AgentClient) -> None:
    [row] = [r for r in index_rows() if r.path.endswith("agent-instructions/session.jsonl")]
    body = zstandard.ZstdCompressor().compress(denormalised_text(row.path).encode())
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    assert response.status_code == 201, response.content


def test_multi_frame_zstd_log_is_read_whole(agent: AgentClient) -> None:
    """The Harness flushes its log as one zstd frame per write: every frame is read."""
    [row] = [r for r in index_rows() if r.path.endswith("agent-instructions/session.jsonl")]
    lines = denormalised_text(row.path).splitlines(keepends=True)
    compressor = zstandard.ZstdCompressor()
    body = b"".join(compressor.compress(line.encode()) for line in lines)
    assert len(lines) > 2
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    assert response.status_code == 201, response.content
    session = Session.objects.get(pk=response.json()["id"])
    assert response.json()["next_seq"] == session.events.count() > 0


def test_a_log_file_the_harness_wrote_is_imported_whole(agent: AgentClient) -> None:
    """session.jsonl.zstd as dsh 0.1.0-rc.8 wrote it (tests/harness_e2e): many frames."""
    body = (FIXTURES / "logs/dsh-0.1.0-rc.8/plugin-steer-repair/session.jsonl.zstd").read_bytes()
    text = zstandard.ZstdDecompressor().stream_reader(body, read_across_frames=True).read(1 << 24)
    first_frame = zstandard.ZstdDecompressor().stream_reader(body).read(1 << 24)
    assert len(first_frame) < len(text)
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    assert response.status_code == 201, response.content
    assert response.json()["next_seq"] == len(parse_log(text.decode())[1])  # every event


def test_multi_frame_zstd_over_the_cap_is_refused(agent: AgentClient, settings: object) -> None:
    """The decompressed-size cap counts every frame, not only the first."""
    settings.GOVERNOR_MAX_IMPORT_BYTES = 4096  # type: ignore[attr-defined]
    compressor = zstandard.ZstdCompressor()
    body = b"".join(compressor.compress(b" " * 1024 + b"\n") for _ in range(8))
    assert len(body) < 4096
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["details"] == [
        {"path": "", "message": "decompressed body over the cap"}]
    assert not Session.objects.exists()


def test_imported_governor_events_are_marked_imported(agent: AgentClient) -> None:
    [row] = [r for r in index_rows() if r.path.endswith("agent-instructions/session.jsonl")]
    response = agent.post("/sessions/import", raw=denormalised_text(row.path),
                          content_type="application/x-ndjson")
    first = Event.objects.filter(session_id=response.json()["id"]).order_by("seq").first()
    assert first is not None and first.meta and first.meta.get("imported") is True


def test_an_imported_log_with_an_impossible_lifecycle_is_refused_whole(
    agent: AgentClient,
) -> None:
    import json

    contract = {"contractId": "c1", "version": 3, "startedAtSeq": 0, "checks": [],
                "maxAttempts": 1}
    lines = [
        {"type": "turn/start", "data": {"turn": 1}},
        {"type": "reliability/contract", "data": contract},
        {"type": "reliability/terminal", "data": {"contractId": "c1", "status": "certified",
                                                  "reason": "x"}},
        {"type": "reliability/terminal", "data": {"contractId": "c1", "status": "exhausted",
                                                  "reason": "y"}},
        {"type": "turn/end", "data": {"turn": 1}},
    ]
    text = "\n".join(json.dumps(line) for line in lines)
    response = agent.post("/sessions/import", raw=text, content_type="application/x-ndjson")
    assert response.status_code == 422, response.content
    assert response.json()["error"]["details"]["rule"] == "lifecycle"
    assert response.json()["error"]["details"]["seq"] == 3
    assert not Session.objects.exists()
