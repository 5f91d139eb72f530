"""Issue 25, finding 6: connections that keep the served stack waiting for bytes are closed
(governor/serving.py), and an open-files limit of a few hundred does not let idle connections
starve `/healthz`. Each test starts the real stack (`governor_serve`: gunicorn, uvicorn workers)
on a port of its own."""

from __future__ import annotations

import os
import resource
import selectors
import socket
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from tests.live import Live, live_server

TIMEOUT = 2  # GOVERNOR_HEADER_TIMEOUT_SECONDS and GOVERNOR_BODY_TIMEOUT_SECONDS here
SLACK = 8.0  # a busy shared machine fires timers late, never early
IDLE, HALF_HEADER, STALLED_BODY, STRAY_BYTES = 200, 200, 50, 20


def address(live: Live) -> tuple[str, int]:
    parts = urlsplit(live.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def healthz(live: Live, timeout: float = 5) -> int:
    try:
        return httpx.get(live.url + "/healthz", timeout=timeout).status_code
    except httpx.HTTPError as exc:
        return -1 if isinstance(exc, httpx.TimeoutException) else -2


def connect(stack: ExitStack, where: tuple[str, int], count: int) -> list[socket.socket]:
    return [stack.enter_context(socket.create_connection(where, timeout=10))
            for _ in range(count)]


def test_idle_half_header_stalled_body_and_stray_byte_connections_are_closed_by_the_server_within_the_timeout_while_healthz_answers(  # noqa: E501
        tmp_path: Path) -> None:
    env = {"GOVERNOR_HEADER_TIMEOUT_SECONDS": str(TIMEOUT),
           "GOVERNOR_BODY_TIMEOUT_SECONDS": str(TIMEOUT)}
    with live_server(tmp_path, extra_env=env) as live, ExitStack() as stack:
        where = address(live)
        host = f"{where[0]}:{where[1]}".encode()
        idle = connect(stack, where, IDLE)  # connect and say nothing
        half = connect(stack, where, HALF_HEADER)  # a header that never ends, sent a line a second
        for conn in half:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: " + host + b"\r\n")
        stalled = connect(stack, where, STALLED_BODY)  # a body promised, a tenth of it sent
        for conn in stalled:
            conn.sendall(b"POST /api/v1/sessions HTTP/1.1\r\nHost: " + host + b"\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
                         b'{"a": 1}')
        stray = connect(stack, where, STRAY_BYTES)  # one request, then a CRLF a second
        for conn in stray:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        opened = time.monotonic()
        groups = {"idle": idle, "half": half, "stalled": stalled, "stray": stray}
        kind = {conn: name for name, group in groups.items() for conn in group}
        selector = selectors.DefaultSelector()
        for conn in kind:
            conn.setblocking(False)
            selector.register(conn, selectors.EVENT_READ)
        answers = {conn: b"" for conn in kind}
        closed: dict[socket.socket, float] = {}
        health: list[int] = []
        next_second = opened + 1
        while len(closed) < len(kind) and time.monotonic() < opened + TIMEOUT + SLACK:
            for key, _ in selector.select(timeout=0.1):
                conn = key.fileobj
                assert isinstance(conn, socket.socket)
                try:
                    data = conn.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    data = b""
                answers[conn] += data
                if not data:
                    closed[conn] = time.monotonic() - opened
                    selector.unregister(conn)
            if time.monotonic() >= next_second:  # trickling bytes must not extend the deadline
                next_second += 1
                for group, trickled in ((half, b"X-Slow: 1\r\n"), (stray, b"\r\n")):
                    for conn in group:
                        if conn not in closed:
                            with suppress(OSError):
                                conn.send(trickled)
                health.append(healthz(live))
        still_open = {name: sum(1 for conn in group if conn not in closed)
                      for name, group in groups.items()}
        assert still_open == dict.fromkeys(groups, 0), (
            f"still open of {IDLE}/{HALF_HEADER}/{STALLED_BODY}/{STRAY_BYTES}: {still_open}, "
            f"{time.monotonic() - opened:.1f} s after they were opened")
        assert min(closed.values()) >= TIMEOUT * 0.75  # closed by the timers, not at once
        assert health and set(health) == {200}, health
        assert healthz(live) == 200
        for conn in half:  # half a header is told why
            assert answers[conn].startswith(b"HTTP/1.1 408 "), answers[conn][:200]
            assert b"GOVERNOR_HEADER_TIMEOUT_SECONDS" in answers[conn]
        assert all(answers[conn] == b"" for conn in idle)  # nothing sent, nothing answered
        assert all(answers[conn].startswith(b"HTTP/1.1 200 ") for conn in stray)


def web_processes(server_pid: int) -> list[int]:
    """The gunicorn workers below `governor_serve` (pid `server_pid`): its grandchildren."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError), open(f"/proc/{entry}/stat") as stat:
                parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
    children = [pid for pid, parent in parents.items() if parent == server_pid]
    return [pid for pid, parent in parents.items() if parent in children]


def open_files_limit(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as limits:
        line = next(line for line in limits if line.startswith("Max open files"))
    soft, hard = line.split()[3:5]
    return int(soft), int(hard)


LOW_SOFT_LIMIT = 256
IDLE_MANY = 1000


def lower_the_soft_open_files_limit() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (LOW_SOFT_LIMIT, hard))


def test_started_with_a_soft_open_files_limit_of_256_the_server_raises_it_and_1000_idle_connections_leave_healthz_answering(  # noqa: E501
        tmp_path: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert hard >= 2 * IDLE_MANY, "the test needs a hard open-files limit above the soft one"
    if soft < 2 * IDLE_MANY:  # this test's own connections
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with live_server(tmp_path, preexec=lower_the_soft_open_files_limit) as live, \
            ExitStack() as stack:
        connect(stack, address(live), IDLE_MANY)  # four times what 2 x 256 descriptors hold
        time.sleep(1)  # accepted by now, or queued behind a process that ran out
        # -1: timed out, -2: reset or closed unanswered (uvloop, out of descriptors, accepts
        # and closes what waits to be accepted)
        answers = [healthz(live, timeout=3) for _ in range(10)]
        assert answers == [200] * 10, answers
        workers = web_processes(live.server_pid)
        assert len(workers) == 2, workers
        assert [open_files_limit(pid) for pid in workers] == [(hard, hard)] * 2
