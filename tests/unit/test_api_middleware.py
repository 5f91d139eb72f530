"""governor.middleware.APIMiddleware: Django's security and common middleware for the API,
called in the event loop, with the answers they give in a chain."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.test import RequestFactory

from governor.middleware import APIMiddleware


def serve(request: HttpRequest) -> tuple[HttpResponseBase, list[HttpRequest]]:
    reached: list[HttpRequest] = []

    async def view(request: HttpRequest) -> HttpResponse:
        reached.append(request)
        return HttpResponse(b'{"ok": true}', content_type="application/json")

    # On a thread of its own: once a browser test ran, Playwright's sync driver keeps an event
    # loop running on the main thread, where asyncio.run refuses to start.
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, APIMiddleware(view)(request)).result(), reached


def test_an_api_answer_gets_the_security_and_common_headers(settings: Any) -> None:
    response, reached = serve(RequestFactory().get("/api/v1/sessions"))
    assert len(reached) == 1
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == settings.SECURE_REFERRER_POLICY
    assert response["Content-Length"] == "12"  # CommonMiddleware


def test_a_redirect_to_https_answers_before_the_view_and_still_gets_the_security_headers(
        settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    response, reached = serve(RequestFactory().get("/api/v1/sessions", secure=False))
    assert reached == []
    assert response.status_code == 301
    assert response["Location"] == "https://testserver/api/v1/sessions"
    assert response["X-Content-Type-Options"] == "nosniff"
    secure, _ = serve(RequestFactory().get("/api/v1/sessions", secure=True))
    assert secure["Strict-Transport-Security"] == "max-age=3600"


def test_a_disallowed_user_agent_is_refused_as_by_django(settings: Any) -> None:
    settings.DISALLOWED_USER_AGENTS = [re.compile("^evil-bot")]
    with pytest.raises(PermissionDenied):
        serve(RequestFactory().get("/api/v1/sessions", headers={"User-Agent": "evil-bot/1"}))
