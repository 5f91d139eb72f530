"""Reviewers learn that a proposal waits: email, and a webhook signed with HMAC, retried."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import os
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from governor.models import Project
from reviews.notifications import webhook_signature
from tests.api.test_contracts import readme_contract
from tests.conftest import INTENT, AgentClient


class Receiver(http.server.BaseHTTPRequestHandler):
    received: list[tuple[dict[str, str], bytes]] = []
    failures_left = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Receiver.received.append((dict(self.headers), body))
        status = 500 if Receiver.failures_left > 0 else 204
        Receiver.failures_left -= 1
        self.send_response(status)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    Receiver.received = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    server.shutdown()


@pytest.fixture
def hooked(project: Project, receiver: str) -> Project:
    project.review_mode = "required"
    project.webhook_url = receiver
    project.webhook_secret = "whsec-test-1"
    project.save()
    return project


def begin(agent: AgentClient, session: dict, capture: Any) -> None:
    with capture(execute=True):
        response = agent.post(f"/sessions/{session['id']}/contracts",
                              readme_contract(intent=INTENT))
    assert response.status_code == 202


def test_webhook_post_is_signed_over_timestamp_and_body(
    hooked: Project, agent: AgentClient, session: dict,
    django_capture_on_commit_callbacks: Any,
) -> None:
    begin(agent, session, django_capture_on_commit_callbacks)
    [(headers, body)] = Receiver.received
    parts = dict(part.split("=", 1) for part in headers["X-Governor-Signature"].split(","))
    # What a receiver does: recompute the HMAC over "<t>." + body with the shared secret.
    signed = hmac.new(b"whsec-test-1", f"{parts['t']}.".encode() + body, hashlib.sha256)
    assert hmac.compare_digest(parts["v1"], signed.hexdigest())
    assert headers["X-Governor-Signature"] == webhook_signature("whsec-test-1", int(parts["t"]),
                                                                body)
    assert b'"event":"review.waiting"' in body and b'"stage":"intent"' in body


def test_webhook_is_retried_when_the_receiver_fails(
    hooked: Project, agent: AgentClient, session: dict,
    django_capture_on_commit_callbacks: Any,
) -> None:
    Receiver.failures_left = 2
    begin(agent, session, django_capture_on_commit_callbacks)
    assert len(Receiver.received) == 3
    assert Receiver.received[0][1] == Receiver.received[2][1]


class SMTPHandler(socketserver.StreamRequestHandler):
    """Just enough SMTP for one message (RFC 5321's happy path), kept in `messages`."""

    messages: list[tuple[list[str], str]] = []

    def reply(self, line: str) -> None:
        self.wfile.write(line.encode() + b"\r\n")

    def handle(self) -> None:
        self.reply("220 test ESMTP")
        recipients: list[str] = []
        while line := self.rfile.readline().decode():
            verb = line[:4].upper()
            if verb in ("EHLO", "HELO"):
                self.reply("250 test")
            elif verb == "RCPT":
                recipients.append(line.split(":", 1)[1].strip().strip("<>"))
                self.reply("250 ok")
            elif verb == "DATA":
                self.reply("354 go on")
                body = []
                while (data := self.rfile.readline().decode()) != ".\r\n":
                    body.append(data)
                SMTPHandler.messages.append((recipients, "".join(body)))
                self.reply("250 queued")
            elif verb == "QUIT":
                self.reply("221 bye")
                return
            else:
                self.reply("250 ok")


def test_reviewers_are_emailed_over_smtp_with_the_documented_settings(
    project: Project, reviewer: Any, agent: AgentClient, session: dict,
    django_capture_on_commit_callbacks: Any, settings: Any,
) -> None:
    """docs/operations.md "Notifications": EMAIL_BACKEND=…smtp.EmailBackend, EMAIL_HOST and
    EMAIL_PORT reach a real SMTP server."""
    SMTPHandler.messages = []
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), SMTPHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    environ = {"EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
               "EMAIL_HOST": "127.0.0.1", "EMAIL_PORT": str(server.server_address[1])}
    documented = subprocess.run(  # noqa: S603 - the settings module as a new process reads them
        [sys.executable, "-c", "import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE',"
         " 'governor.settings'); django.setup(); from django.conf import settings as s; "
         "print(s.EMAIL_BACKEND, s.EMAIL_HOST, s.EMAIL_PORT)"],
        env={**os.environ, **environ}, capture_output=True, text=True, timeout=60, check=True)
    backend, host, port = documented.stdout.split()
    settings.EMAIL_BACKEND, settings.EMAIL_HOST, settings.EMAIL_PORT = backend, host, int(port)
    project.review_mode = "required"
    project.save()
    try:
        begin(agent, session, django_capture_on_commit_callbacks)
    finally:
        server.shutdown()
        server.server_close()
    [(recipients, message)] = SMTPHandler.messages
    assert recipients == ["rita@example.com"]
    assert "proposal waiting for review" in message and "/reviews/" in message
