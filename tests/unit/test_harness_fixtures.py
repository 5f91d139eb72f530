"""rules §2: every recorded DeepSeek Harness log in tests/fixtures/harness reaches the verdict
its index.tsv lists (accept, reject, accept-stream; `skip` rows are not sessions and get no case).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from governor.domain.harness import (
    InvariantError,
    TraceState,
    parse_log,
    parse_stream,
    validate_batch,
    validate_log,
)
from tests.harness_corpus import denormalised_text, index_rows, restore_seq_and_time

ROWS = [
    pytest.param(row.path, row.verdict, row.note,
                 id=f"{row.verdict}:{row.path.removeprefix('logs/')}")
    for row in index_rows()
    if row.verdict != "skip"
]


def test_every_non_skip_fixture_has_a_case() -> None:
    verdicts = {param.values[1] for param in ROWS}
    assert verdicts == {"accept", "reject", "accept-stream"}
    assert len(ROWS) >= 180


@pytest.mark.parametrize(("path", "verdict", "note"), ROWS)
def test_recorded_harness_log_reaches_its_listed_verdict(
    path: str, verdict: str, note: str
) -> None:
    text = denormalised_text(path)
    if verdict == "accept-stream":
        state = TraceState()
        for event in parse_stream(text):
            state = validate_batch(state, [event])
        assert state.count > 0
        return

    header, events = parse_log(text)
    if header is not None:
        assert Path(header.get("cwd", "/")).is_absolute()
    events = restore_seq_and_time(events)

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
