"""Reviewer pages (htmx-enhanced, server-rendered)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseNotFound


@login_required
def inbox(request: HttpRequest) -> HttpResponse:
    return HttpResponseNotFound("the inbox page is being built")


@login_required
def detail(request: HttpRequest, review_id: str) -> HttpResponse:
    return HttpResponseNotFound("the review page is being built")
