"""Input (docs/security.md): an imported log is capped at GOVERNOR_MAX_IMPORT_BYTES, as sent and
once decompressed. A plain body over the cap and a zstd bomb that decompresses past it are
refused with an error naming the import cap, store nothing, and the bomb is never decompressed
past the cap."""

from __future__ import annotations

import tracemalloc
from typing import Any

import pytest
import zstandard

from governor.models import Event, Session
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
