"""Input (docs/security.md): an imported log is capped at GOVERNOR_MAX_IMPORT_BYTES, as sent and
once decompressed. A plain body over the cap and a zstd bomb that decompresses past it are
refused with an error naming the import cap, store nothing, and the bomb is never decompressed
past the cap."""

from __future__ import annotations

import json
import time
import tracemalloc
from typing import Any

import pytest
import zstandard
from django.utils import timezone

from governor.models import Event, ImportSlot, Session
from tests.conftest import AgentClient
from tests.harness_corpus import denormalised_text, index_rows

MIB = 1024 * 1024


def recorded_log() -> bytes:
    [row] = [r for r in index_rows() if r.path.endswith("agent-instructions/session.jsonl")]
    return denormalised_text(row.path).encode()


def assert_refused(response: Any, message: str, detail: str) -> None:
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["message"] == message
    assert error["details"] == [{"path": "", "message": detail}]
    assert not Session.objects.exists()
    assert not Event.objects.exists()


def test_a_plain_log_one_byte_over_the_cap_is_refused(
    agent: AgentClient, settings: Any
) -> None:
    log = recorded_log()
    settings.GOVERNOR_MAX_IMPORT_BYTES = len(log) - 1
    response = agent.post("/sessions/import", raw=log, content_type="application/x-ndjson")
    assert_refused(response, "log is larger than the import cap", "body over the import cap")

    settings.GOVERNOR_MAX_IMPORT_BYTES = len(log)  # the same log at the cap is imported
    response = agent.post("/sessions/import", raw=log, content_type="application/x-ndjson")
    assert response.status_code == 201, response.content


def test_a_zstd_log_that_decompresses_one_byte_over_the_cap_is_refused(
    agent: AgentClient, settings: Any
) -> None:
    log = recorded_log()
    body = zstandard.ZstdCompressor().compress(log)
    settings.GOVERNOR_MAX_IMPORT_BYTES = len(log) - 1
    assert len(body) < len(log) - 1
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    assert_refused(response, "decompressed log is larger than the import cap",
                   "decompressed body over the cap")

    settings.GOVERNOR_MAX_IMPORT_BYTES = len(log)
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    assert response.status_code == 201, response.content


def zstd_bomb(decompressed_bytes: int) -> bytes:
    """`decompressed_bytes` of newlines in one zstd frame of a few kilobytes (8 KiB for 256 MiB)."""
    compressor = zstandard.ZstdCompressor(level=19).compressobj()
    chunk = b"\n" * MIB
    parts = [compressor.compress(chunk) for _ in range(decompressed_bytes // MIB)]
    return b"".join([*parts, compressor.flush()])


@pytest.mark.parametrize("headers", [{}, {"Content-Encoding": "zstd"}])
def test_a_zstd_bomb_at_the_configured_cap_is_refused_without_decompressing_it_whole(
    agent: AgentClient, settings: Any, headers: dict[str, str]
) -> None:
    cap = settings.GOVERNOR_MAX_IMPORT_BYTES  # as configured: 64 MiB unless set otherwise
    body = zstd_bomb(4 * cap)
    assert len(body) < cap // 1000
    tracemalloc.start()
    try:
        response = agent.post("/sessions/import", raw=body, headers=headers,
                              content_type="application/zstd" if not headers
                              else "application/x-ndjson")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert_refused(response, "decompressed log is larger than the import cap",
                   "decompressed body over the cap")
    assert peak < cap + 16 * MIB, f"{peak / MIB:.0f} MiB held for a {cap / MIB:.0f} MiB cap"


def turns_log(turns: int, first: int = 1) -> bytes:
    """A valid log of `turns` empty turns from turn `first`: 2 events each."""
    return b"".join(b'{"type":"turn/start","data":{"turn":%d}}\n'
                    b'{"type":"turn/end","data":{"turn":%d,"reason":{"kind":"completed"}}}\n'
                    % (turn, turn) for turn in range(first, first + turns))


def chunks_log(rows: int, pieces: int) -> bytes:
    """One turn holding `rows` packed text-chunks rows of `pieces` chunks each: 4 + rows *
    pieces events from a few kilobytes of zstd."""
    row = json.dumps({"type": "text-chunks", "data": {
        "turn": 1, "step": 1, "index": 0, "dt": [0] * (pieces - 1), "texts": ["x"] * pieces}})
    return "\n".join([
        '{"type":"turn/start","data":{"turn":1}}',
        '{"type":"step/start","data":{"turn":1,"step":1}}',
        *[row] * rows,
        '{"type":"step/end","data":{"turn":1,"step":1}}',
        '{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}']).encode()


def assert_event_cap_refused(response: Any, cap: int) -> None:
    assert response.status_code == 413, response.content
    error = response.json()["error"]
    assert error["code"] == "TOO_LARGE"
    assert f"an import takes at most {cap} (GOVERNOR_MAX_IMPORT_EVENTS)" in error["message"]
    assert error["details"] == [{"path": "",
                                 "message": f"more than {cap} events (GOVERNOR_MAX_IMPORT_EVENTS)"}]
    assert not Session.all_objects.exists()
    assert not Event.objects.exists()


def test_a_log_one_event_over_the_event_cap_is_refused_413_naming_it(
        agent: AgentClient, settings: Any) -> None:
    """Issue 25 finding 5: an import had no event cap."""
    settings.GOVERNOR_MAX_IMPORT_EVENTS = 100
    response = agent.post("/sessions/import", raw=turns_log(51),
                          content_type="application/x-ndjson")
    assert_event_cap_refused(response, 100)
    response = agent.post("/sessions/import", raw=turns_log(50),
                          content_type="application/x-ndjson")
    assert response.status_code == 201, response.content
    assert response.json()["next_seq"] == 100


def test_packed_rows_past_the_event_cap_are_refused_before_they_are_expanded_or_stored(
        agent: AgentClient, settings: Any) -> None:
    """Issue 25 finding 5: 137 KB of zstd (packed chunk rows) stored 200,000 events in one
    transaction, 15.6 s of CPU. A packed row is counted before it is expanded: the row that
    would pass the cap is refused, nothing after it is read, nothing is written."""
    settings.GOVERNOR_MAX_IMPORT_EVENTS = 1000
    body = zstandard.ZstdCompressor(level=19).compress(chunks_log(rows=20, pieces=1000))
    assert len(body) < 2000
    started = time.process_time()
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    spent = time.process_time() - started
    assert_event_cap_refused(response, 1000)
    assert "line 3 goes past them" in response.json()["error"]["message"]
    assert spent < 0.5, f"{spent:.2f} s of CPU"


def test_a_token_starting_more_imports_a_minute_than_its_cap_gets_429_with_retry_after(
        agent: AgentClient, other_agent: AgentClient, settings: Any) -> None:
    """Issue 25 finding 5: imports were not limited per token. Refused ones count too (each
    costs its parse); another token is not held back; a slot frees a minute after its import
    started."""
    settings.GOVERNOR_MAX_IMPORTS_PER_MINUTE = 2
    log = turns_log(1)
    assert agent.post("/sessions/import", raw=log,
                      content_type="application/x-ndjson").status_code == 201
    assert agent.post("/sessions/import", raw=b"not json",
                      content_type="application/x-ndjson").status_code == 422
    refused = agent.post("/sessions/import", raw=log, content_type="application/x-ndjson")
    assert refused.status_code == 429, refused.content
    error = refused.json()["error"]
    assert error["code"] == "TOO_MANY_IMPORTS"
    assert "GOVERNOR_MAX_IMPORTS_PER_MINUTE" in error["message"]
    assert 55 <= int(refused["Retry-After"]) <= 60
    assert Session.all_objects.count() == 1
    assert other_agent.post("/sessions/import", raw=log,
                            content_type="application/x-ndjson").status_code == 201
    ImportSlot.objects.update(until=timezone.now())  # a minute on
    assert agent.post("/sessions/import", raw=log,
                      content_type="application/x-ndjson").status_code == 201


def test_a_truncated_zstd_frame_is_refused_naming_the_frame(agent: AgentClient) -> None:
    """Issue 25 finding 12: a body cut inside its last frame was read as the prefix it decodes
    to, here a whole log of one turn: 201 for what was sent as three turns."""
    compressor = zstandard.ZstdCompressor()
    first, second = compressor.compress(turns_log(1)), compressor.compress(turns_log(2, first=2))
    body = first + second[:-5]
    response = agent.post("/sessions/import", raw=body, content_type="application/zstd")
    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["details"] == [{"path": "frames/1",
                                 "message": "ends before its last block: the body is truncated"}]
    assert error["message"] == (f"zstd body could not be decompressed: zstd frame 1 (at byte "
                                f"{len(first)} of the body) ends before its last block: the "
                                "body is truncated")
    assert not Session.all_objects.exists()
    whole = agent.post("/sessions/import", raw=first + second, content_type="application/zstd")
    assert whole.status_code == 201, whole.content
    assert whole.json()["next_seq"] == 6
