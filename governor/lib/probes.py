"""Running an outcome probe: the operator's command in the verifier sandbox, read-only, on an
empty workspace of its own, with no network unless the profile says `host`. Only how it ended
and what the strict reading of its stdout found are returned: the output itself is dropped."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from governor.domain.outcomes import ProbeOutputInvalid, parse_probe_output, probe_record
from governor.domain.workspace import identity_at
from verification.sandbox import run_sandboxed

log = logging.getLogger(__name__)
Runner = Callable[..., Any]


def probe_run(definition: dict[str, Any], sandbox_definition: dict[str, Any], *, now_ms: int,
              runner: Runner = run_sandboxed) -> dict[str, Any]:
    """The probe result record (`governor.domain.outcomes.probe_record`) of one run of the
    bound outcome profile `definition` as the sandbox definition `sandbox_definition`; `now_ms`
    is the clock its `dataAsOf` is judged by."""
    empty = tempfile.mkdtemp(prefix="governor-probe-")
    try:
        os.chmod(empty, 0o755)  # noqa: S103 - the sandbox user must enter it; it holds nothing
        result = runner(sandbox_definition, empty, identity_at(empty))
    finally:
        shutil.rmtree(empty, ignore_errors=True)
    record = result.record()
    parsed, why = None, None
    if result.passed:
        try:
            parsed = parse_probe_output(
                result.stdout.tail.encode("utf-8"),
                truncated=result.stdout.truncated, metrics=definition["metrics"],
                max_data_age_ms=definition["maxDataAgeMs"], now_ms=now_ms)
        except ProbeOutputInvalid as exc:
            why = str(exc)
    elif result.detail:  # it may name the command: for operators, never in the log
        log.warning("probe %s: %s", definition["id"], result.detail)
    return probe_record(record, parsed, why)
