"""On PostgreSQL each served process draws its connections from one pool (Django's psycopg pool,
GOVERNOR_DB_POOL_*): however many requests arrive at once, a process holds at most
GOVERNOR_DB_POOL_MAX_SIZE connections, and the requests beyond it wait for one instead of
failing. Here the database role may open only 6 connections and 150 requests arrive at once."""

from __future__ import annotations

import os
import secrets
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.integration.test_stateless_nodes import SERVER, manage, node_env, web_node
from tests.live import ADMIN_PASSWORD, free_port

pytestmark = [pytest.mark.postgres]
ROLE_CONNECTION_LIMIT = 6
POOL_MAX_SIZE = 3
REQUESTS = 150


@contextmanager
def limited_database() -> Iterator[tuple[str, str]]:
    """A scratch database owned by a scratch role that may hold ROLE_CONNECTION_LIMIT
    connections at once; its URL and the role's name."""
    role = f"governor_pool_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT {ROLE_CONNECTION_LIMIT}')
        admin.execute(f'CREATE DATABASE "{role}" OWNER "{role}"')
    try:
        yield f"postgres://{role}@127.0.0.1:5432/{role}", role
    finally:
        with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{role}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')


def connections_of(role: str) -> int:
    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as admin:
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                            [role]).fetchone()
    assert row is not None
    return int(row[0])


def test_150_requests_at_once_share_a_pool_of_three_connections(tmp_path: Path) -> None:
    with limited_database() as (database, role):
        env = node_env({**os.environ, "DATABASE_URL": database,
                        "GOVERNOR_BROKER_URL": "filesystem://",
                        "SECRET_KEY": secrets.token_urlsafe(50), "DEBUG": "0",
                        "GOVERNOR_ADMIN_PASSWORD": ADMIN_PASSWORD,
                        "GOVERNOR_DB_POOL_MIN_SIZE": "1",
                        "GOVERNOR_DB_POOL_MAX_SIZE": str(POOL_MAX_SIZE)}, tmp_path / "web")
        manage(env, "migrate", "--no-input", "-v", "0")
        with web_node(env, free_port()) as url:  # one web process
            most = [0]
            done = threading.Event()

            def watch() -> None:
                while not done.is_set():
                    most[0] = max(most[0], connections_of(role))
                    done.wait(0.02)

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                with httpx.Client(base_url=url, timeout=60, limits=httpx.Limits(
                        max_connections=REQUESTS)) as client, \
                        ThreadPoolExecutor(max_workers=REQUESTS) as burst:
                    answers = list(burst.map(lambda _: client.get("/healthz"), range(REQUESTS)))
            finally:
                done.set()
                watcher.join()

        failed = [answer.text for answer in answers if answer.status_code != 200]
        assert not failed, failed[:3]
        assert all(answer.json()["database"]["status"] == "ok" for answer in answers)
        assert 1 <= most[0] <= POOL_MAX_SIZE, most[0]
