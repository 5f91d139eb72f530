"""A report profile's private report directory (rules §14.6): made empty for each run,
writable by the sandbox user only, read back without following a link, and judged by
governor/domain/reports.py — and for a streamed run (rules §17.4), against the stream by
governor/domain/report_stream.py."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from governor.domain.heldout import held_out_test_names
from governor.domain.report_stream import disagreement, parse_stream
from governor.domain.reports import MAX_REPORT_BYTES, ReportError, TestReport, parse_reports

SANDBOX_OWNER = (65534, 65534)  # verification/sandbox.py NOBODY: who a root worker runs as
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
JUDGED = ("exit", None)  # the command ran to its end: its report tells what the tests did


@contextmanager
def report_directory(definition: Mapping[str, Any]) -> Iterator[str | None]:
    """An empty directory for a report profile's run (None for any other), deleted after."""
    if not definition.get("report"):
        yield None
        return
    parent = Path(settings.VAR_DIR) / "reports"
    parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    root = tempfile.mkdtemp(dir=parent, prefix="report-")
    try:
        if os.geteuid() == 0:
            os.chown(root, *SANDBOX_OWNER)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report_files(directory: str) -> list[tuple[str, bytes]]:
    """The regular `*.xml` files directly in `directory`, by name, read without following a
    link or opening anything else the command left there; at most MAX_REPORT_BYTES + 1 bytes
    in all are read (more is refused by the parser)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    files, budget = [], MAX_REPORT_BYTES + 1
    try:
        for entry in sorted(os.scandir(fd), key=lambda item: item.name):
            if not entry.name.endswith(".xml") or not entry.is_file(follow_symlinks=False):
                continue
            file = os.open(entry.name, READ_FLAGS, dir_fd=fd)
            try:
                data = os.read(file, budget) if budget > 0 else b""
                while budget - len(data) > 0 and (more := os.read(file, budget - len(data))):
                    data += more
            finally:
                os.close(file)
            files.append((entry.name, data))
            budget -= len(data)
    finally:
        os.close(fd)
    return files


def report_judged(record: dict[str, Any], directory: str, detail: str,
                  stream: bytes | None = None, *,
                  heldout: Sequence[tuple[str, str, bytes]] | None = None,
                  ) -> tuple[str, list[list[str]] | None]:
    """Judge a report run by its report, in `record` (the result being recorded): its counts
    and receipt under `report`, and `passed` only if the tests passed too. A streamed run's
    `stream` (the plugin's bytes) is summarised under `stream`, and when it disagrees with the
    report or the exit status the run is `bad-report`, whatever its exit, with no report kept.
    Returns the detail for operators and the per-test outcomes to keep beside the run. A
    held-out run's test ids (`heldout`: the suite's files) are named as
    `held_out_test_names` says, in the report and the stream alike (rules §18.2)."""
    if record["failureKind"] not in JUDGED:
        return detail, None
    streamed = parse_stream(stream) if stream is not None else None
    try:
        report = parse_reports(report_files(directory))
    except (ReportError, OSError) as exc:
        kind = exc.kind if isinstance(exc, ReportError) else "bad-report"
        record["report"] = None
        if streamed is not None and heldout is not None:
            names = held_out_test_names(heldout, streamed.tags)
            streamed.tags = {names[test]: tags for test, tags in streamed.tags.items()}
        if streamed is not None:
            record["stream"] = streamed.record(disagreement(streamed, {}, record["exitCode"]))
        if record["passed"]:
            record.update(passed=False, failureKind=kind)
        return _joined(detail, f"{kind}: {exc}"), None
    if heldout is not None:
        names = held_out_test_names(heldout, [*report.outcomes, *(
            streamed.tags if streamed is not None else ())])
        report = TestReport({names[test]: outcome for test, outcome in report.outcomes.items()})
        if streamed is not None:
            streamed.tags = {names[test]: tags for test, tags in streamed.tags.items()}
    record["report"] = report.record()
    if streamed is not None:
        disagreed = disagreement(streamed, report.outcomes, record["exitCode"])
        record["stream"] = streamed.record(disagreed)
        if disagreed is not None:
            record.update(report=None, passed=False, failureKind="bad-report")
            return _joined(detail, f"bad-report: {disagreed}"), None
    problem = report.problem()
    if problem is not None and record["passed"]:
        record.update(passed=False, failureKind="tests-failed")
    return (_joined(detail, problem) if problem else detail,
            sorted([test, outcome] for test, outcome in report.outcomes.items()))


def _joined(detail: str, more: str) -> str:
    return f"{detail}; {more}" if detail else more
