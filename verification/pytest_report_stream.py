"""rules §17.4: the pytest plugin the server loads into a report profile's run, from a
read-only directory outside the tree, under a module name chosen per run. It sends each thing
the session does the moment it happens, one JSON line each, down the pipe whose descriptor
GOVERNOR_STREAM_FD names; the worker reads it outside the sandbox as the run goes
(governor/domain/report_stream.py says what is sent and what must agree).

The descriptor is moved to one only this process holds (not inherited by what it starts) and
the variable removed, before any code of the tree is imported. Code in this process can still
find and write to it; that is the limit rules §17.4 states. Standard library only: it runs
under whatever pytest the profile's command starts, and never changes what pytest does.
"""

from __future__ import annotations

import json
import os
from typing import Any

_fd: int | None = None
_session: Any = None


def _take_descriptor() -> None:
    global _fd
    try:
        given = int(os.environ.pop("GOVERNOR_STREAM_FD"))
        _fd = os.dup(given)  # not inheritable
        os.close(given)
    except (KeyError, ValueError, OSError):
        _fd = None


def _send(**event: Any) -> None:
    global _fd
    if _fd is None:
        return
    line = (json.dumps(event, separators=(",", ":")) + "\n").encode()
    try:
        while line:
            line = line[os.write(_fd, line):]
    except OSError:
        _fd = None  # the reader is gone: the run ends without a stream that finished


def pytest_sessionstart(session: Any) -> None:
    global _session
    _session = session
    prefix = getattr(session.config.option, "junitprefix", None)
    _send(event="start", prefix=prefix if isinstance(prefix, str) else None)


def pytest_collectreport(report: Any) -> None:
    if report.outcome != "passed":
        _send(event="collect", id=report.nodeid, outcome=report.outcome)


def pytest_collection_finish(session: Any) -> None:
    _send(event="collected", count=len(session.items))


def pytest_runtest_logreport(report: Any) -> None:
    _send(event="test", id=report.nodeid, when=report.when, outcome=report.outcome,
          xfail=hasattr(report, "wasxfail"))


def pytest_unconfigure(config: Any) -> None:
    """After every `pytest_sessionfinish`: the exit status pytest returns."""
    if _session is not None:
        _send(event="finish", exitstatus=int(_session.exitstatus))


_take_descriptor()
