"""SEMANTICS §2: every recorded DeepSeek Harness log in shared/fixtures/harness reaches the verdict
its index.tsv lists (accept, reject, accept-stream; `skip` rows are not sessions and get no case).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from governor.domain.harness import (
    InvariantError,
    TraceState,
    parse_log,
    parse_stream,
    validate_batch,
    validate_log,
)


def _shared_dir() -> Path:
    candidates = [Path(__file__).resolve().parents[3] / "shared"]
    if os.environ.get("GOVERNOR_SHARED_DIR"):
        candidates.append(Path(os.environ["GOVERNOR_SHARED_DIR"]))
    for candidate in candidates:
        if (candidate / "fixtures" / "harness" / "index.tsv").is_file():
            return candidate
    raise FileNotFoundError(
        f"shared/fixtures/harness/index.tsv not found in {[str(c) for c in candidates]}; "
        "set GOVERNOR_SHARED_DIR"
    )


FIXTURES = _shared_dir() / "fixtures" / "harness"


def _index_rows() -> list[Any]:
    lines = (FIXTURES / "index.tsv").read_text(encoding="utf-8").splitlines()
    header, *rows = (line.split("\t") for line in lines if line.strip())
    assert header[:2] == ["path", "expected"]
    return [
        pytest.param(path, verdict, note, id=f"{verdict}:{path.removeprefix('logs/')}")
        for path, verdict, note in rows
        if verdict != "skip"
    ]


ROWS = _index_rows()

# The recorder's placeholders stand for real values (README). `"{{tools}}"` replaced an array.
PLACEHOLDERS = {
    '"{{tools}}"': "[]",
    "{{cwd}}": "/srv/harness-fixture",
    "{{sessionId}}": "6f0c2a4e-8d1b-4c3a-9e57-2b8f1d0a7c64",
    "{{system}}": "You are a coding agent.",
    "{{rpcId}}": "rpc-1",
    "{{messagePrefix}}": "Workspace context.",
}


def _denormalised_text(path: str) -> str:
    text = (FIXTURES / path).read_text(encoding="utf-8")
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    return text


def _restore_seq_and_time(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The recorder dropped seq and time: seq is the position in the expanded log, time 0."""
    return [{**event, "seq": position, "time": 0} for position, event in enumerate(events)]


def test_every_non_skip_fixture_has_a_case() -> None:
    verdicts = {param.values[1] for param in ROWS}
    assert verdicts == {"accept", "reject", "accept-stream"}
    assert len(ROWS) >= 180


@pytest.mark.parametrize(("path", "verdict", "note"), ROWS)
def test_recorded_harness_log_reaches_its_listed_verdict(
    path: str, verdict: str, note: str
) -> None:
    text = _denormalised_text(path)
    if verdict == "accept-stream":
        state = TraceState()
        for event in parse_stream(text):
            state = validate_batch(state, [event])
        assert state.count > 0
        return

    header, events = parse_log(text)
    if header is not None:
        assert Path(header.get("cwd", "/")).is_absolute()
    events = _restore_seq_and_time(events)

    if verdict == "accept":
        state = validate_batch(TraceState(), events, allow_reliability=True)
        assert state.count == len(events)
        assert validate_log(header, events) == state
        assert TraceState.from_json(json.loads(json.dumps(state.to_json()))) == state
        return

    assert verdict == "reject"
    with pytest.raises(InvariantError) as caught:
        validate_log(header, events)
    error = caught.value
    assert error.rule and isinstance(error.index, int), str(error)
    if "legacy-shape" in note:
        assert error.rule == "message-shape", str(error)
    failing_seq = re.search(r"FAILS: seq (\d+)", note)
    if failing_seq:
        assert error.seq == int(failing_seq.group(1)), str(error)
