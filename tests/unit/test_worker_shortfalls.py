"""docs/deployment.md "Root or not": a worker says at start what its runs will lack."""

from __future__ import annotations

import logging

import pytest
from celery.signals import worker_ready

from verification import sandbox
from verification.sandbox import worker_shortfalls


def test_a_worker_that_is_not_root_says_what_its_runs_lack() -> None:
    [said, *_] = worker_shortfalls(euid=1000)
    assert said.startswith("this worker is not root: its runs start as the worker's own user")
    assert "no overlay" in said


def test_the_warning_is_logged_when_a_worker_becomes_ready(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(sandbox.os, "geteuid", lambda: 1000)
    with caplog.at_level(logging.WARNING, logger="verification"):
        worker_ready.send(sender=None)
    assert any(record.getMessage().startswith("this worker is not root")
               and record.getMessage().endswith("(docs/deployment.md, 'Root or not')")
               for record in caplog.records)
