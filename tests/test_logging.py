"""Log lines (docs/operations.md, "Logs"): what they never hold, the failed-login audit line and
its mask, the text format and LOG_LEVEL."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from django.test import Client

from governor.logs import redact
from governor.services.tokens import TOKEN_PREFIX
from tests.live import ROOT

TOKEN = "gov_" + "A1b2C3d4E5f6G7h8I9j0" * 2  # noqa: S105 - the shape of an agent token


def test_a_token_a_bearer_value_and_secret_fields_never_reach_a_line() -> None:
    event = redact(None, "info", {
        "event": f"called with {TOKEN} and Authorization: Bearer abc.def-123",
        "headers": {"Authorization": f"Bearer {TOKEN}"},
        "password": "hunter2-hunter2", "token_prefix": TOKEN[:12], "count": 3})
    line = repr(event)
    assert TOKEN not in line and TOKEN[12:] not in line and "abc.def-123" not in line
    assert "hunter2" not in line
    assert event["token_prefix"] == TOKEN[:12]  # the prefix identifies it, and is kept
    assert event["event"].startswith(f"called with {TOKEN[:12]}…")
    assert event["count"] == 3
    assert TOKEN.startswith(TOKEN_PREFIX)  # the shape governor.logs looks for


def test_the_secret_key_and_metrics_token_are_redacted_by_value(settings: Any) -> None:
    settings.GOVERNOR_METRICS_TOKEN = "metrics-token-for-redaction-01"
    event = redact(None, "info", {"event": f"x {settings.SECRET_KEY} y "
                                           f"{settings.GOVERNOR_METRICS_TOKEN} z"})
    assert event["event"] == "x [redacted] y [redacted] z"


def failed_login(caplog: pytest.LogCaptureFixture) -> dict[str, Any]:
    with caplog.at_level("WARNING", logger="governor.audit"):
        answer = Client(REMOTE_ADDR="203.0.113.7").post(
            "/accounts/login/", {"username": "mallory", "password": "guess-password-1"})
    assert answer.status_code == 200
    [record] = [r for r in caplog.records if r.name == "governor.audit"]
    assert isinstance(record.msg, dict)
    return record.msg


def test_a_failed_login_is_logged_with_the_user_name_and_address(
        db: None, caplog: pytest.LogCaptureFixture) -> None:
    line = failed_login(caplog)
    assert (line["event"], line["username"], line["address"]) == (
        "login failed", "mallory", "203.0.113.7")
    assert "guess-password-1" not in repr(line)


def test_the_mask_setting_masks_the_user_name_and_address(
        db: None, caplog: pytest.LogCaptureFixture, settings: Any) -> None:
    settings.GOVERNOR_LOG_MASK_LOGINS = True
    line = failed_login(caplog)
    assert (line["username"], line["address"]) == ("[masked]", "[masked]")


SCRIPT = """
import logging, django
django.setup()
import structlog
logging.getLogger("governor.check").info("an info line")
structlog.get_logger("governor.check").warning("a warning", token="{token}", session_id="s-1")
"""


def logged(**env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "governor.settings", **env}
    environ.pop("DATABASE_URL", None)
    return subprocess.run([sys.executable, "-c", SCRIPT.format(token=TOKEN)],  # noqa: S603
                          cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60,
                          check=False)


def test_text_lines_are_key_value_and_log_level_filters_them() -> None:
    text = logged(GOVERNOR_LOG_FORMAT="text", LOG_LEVEL="warning")
    assert text.returncode == 0, text.stderr
    assert "an info line" not in text.stderr
    assert "a warning" in text.stderr and "session_id=s-1" in text.stderr
    assert TOKEN not in text.stderr and f"token={TOKEN[:12]}…" in text.stderr


def test_json_lines_are_one_object_each() -> None:
    out = logged(GOVERNOR_LOG_FORMAT="json")
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("{")]
    assert len(lines) == 2 and '"event": "a warning"' in lines[1]
    assert '"level": "warning"' in lines[1] and TOKEN not in out.stderr


@pytest.mark.parametrize(("name", "value"), [("LOG_LEVEL", "LOUD"),
                                             ("GOVERNOR_LOG_FORMAT", "xml")])
def test_a_bad_log_setting_fails_loudly_with_its_name(name: str, value: str) -> None:
    out = logged(**{name: value})
    assert out.returncode != 0
    assert f"{name}={value!r}" in out.stderr


def test_a_task_run_inline_logs_as_itself_and_gives_its_caller_back_its_context() -> None:
    """A task's lines name the task and nothing of its caller's (a worker runs task after
    task); once it ends, the caller's own lines carry their request id again."""
    import structlog

    from governor.celery import app

    seen: dict[str, Any] = {}

    @app.task(name="tests.logging.probe")
    def probe() -> None:
        seen.update(structlog.contextvars.get_contextvars())

    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(request_id="caller-request")
    try:
        result = probe.apply()  # inline, as the tests and `task_always_eager` run tasks
        assert result.successful()
        assert seen == {"task": "tests.logging.probe", "task_id": result.id}
        assert structlog.contextvars.get_contextvars() == {"request_id": "caller-request"}
    finally:
        structlog.contextvars.clear_contextvars()
