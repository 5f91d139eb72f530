"""The served stack keeps an idle client connection open for GOVERNOR_KEEP_ALIVE_SECONDS, longer
than clients keep theirs (httpx: 5 s), so a client that sends its next request on a connection
after a pause never finds it closed under it (gunicorn's own default closes it after 2 s)."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from tests.live import live_server

PAUSE_SECONDS = 6


def ask(connection: socket.socket, host: str) -> bytes:
    connection.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
        chunk = connection.recv(65536)
        if not chunk:
            break
        answer += chunk
    return answer


def test_a_connection_idle_for_six_seconds_still_serves_the_next_request(
        tmp_path: Path) -> None:
    assert settings.GOVERNOR_KEEP_ALIVE_SECONDS > PAUSE_SECONDS
    with live_server(tmp_path) as live:
        address = urlsplit(live.url)
        host = f"{address.hostname}:{address.port}"
        with socket.create_connection((address.hostname, address.port), timeout=10) as conn:
            assert ask(conn, host).startswith(b"HTTP/1.1 200")
            time.sleep(PAUSE_SECONDS)
            assert ask(conn, host).startswith(b"HTTP/1.1 200")  # b"" had the server closed it
