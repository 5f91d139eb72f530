"""Served over ASGI, the API and /healthz run only settings.API_MIDDLEWARE (governor.asgi): no
cookie, session, CSRF or framing middleware touches them, while the pages keep every one."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from tests.live import live_server


def test_the_api_runs_without_the_pages_middleware_and_the_pages_keep_it(tmp_path: Path) -> None:
    with live_server(tmp_path) as live, httpx.Client(base_url=live.url, timeout=30) as client:
        health = client.get("/healthz")
        missing = client.get(f"/api/v1/sessions/{uuid.uuid4()}",
                             headers={"Authorization": f"Bearer {live.token}"})
        for answer in (health, missing):
            assert answer.headers["X-Content-Type-Options"] == "nosniff"  # SecurityMiddleware
            assert "X-Frame-Options" not in answer.headers  # no XFrameOptionsMiddleware
            assert "set-cookie" not in answer.headers
            assert "Cookie" not in answer.headers.get("Vary", "")  # no session middleware
        assert health.status_code in (200, 503)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"

        login = client.get("/accounts/login/")
        assert login.status_code == 200
        assert login.headers["X-Frame-Options"] == "DENY"
        assert "csrftoken" in login.cookies
        refused = httpx.post(live.url + "/accounts/login/", timeout=30,
                             data={"username": "admin", "password": "x"})
        assert refused.status_code == 403  # CSRF still guards the pages


def test_a_host_the_server_does_not_serve_is_a_400_on_the_api_as_on_the_pages(
        tmp_path: Path) -> None:
    """The API's middleware is a coroutine to Django (marked so): its DisallowedHost becomes
    Django's 400, never a 500 with a traceback in the log for every probe of a wrong name."""
    with live_server(tmp_path, extra_env={"ALLOWED_HOSTS": "127.0.0.1"}) as live, \
            httpx.Client(base_url=live.url, timeout=30) as client:
        for path in ("/healthz", "/api/v1/keys", "/reviews/"):
            answer = client.get(path, headers={"Host": "evil.example"})
            assert answer.status_code == 400, (path, answer.status_code)
    assert "Exception in ASGI application" not in (tmp_path / "server.log").read_text()
