"""The recorded DeepSeek Harness logs in tests/fixtures/harness (MIT, notice in its LICENSE),
with the recorder's normalisation undone (its README says how), for tests and the ingestion
benchmark."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "harness"

# The recorder's placeholders stand for real values. `"{{tools}}"` replaced an array.
PLACEHOLDERS = {
    '"{{tools}}"': "[]",
    "{{cwd}}": "/srv/harness-fixture",
    "{{sessionId}}": "6f0c2a4e-8d1b-4c3a-9e57-2b8f1d0a7c64",
    "{{system}}": "You are a coding agent.",
    "{{rpcId}}": "rpc-1",
    "{{messagePrefix}}": "Workspace context.",
}


@dataclass(frozen=True)
class Row:
    path: str
    verdict: str
    note: str


def index_rows() -> list[Row]:
    lines = (FIXTURES / "index.tsv").read_text(encoding="utf-8").splitlines()
    header, *rows = (line.split("\t") for line in lines if line.strip())
    assert header[:2] == ["path", "expected"]
    return [Row(path, verdict, note) for path, verdict, note in rows]


def denormalised_text(path: str) -> str:
    text = (FIXTURES / path).read_text(encoding="utf-8")
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return text


def restore_seq_and_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorder dropped seq and time: seq is the position in the expanded log, time 0."""
    return [{**event, "seq": position, "time": 0} for position, event in enumerate(events)]
