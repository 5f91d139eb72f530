"""Live parts of the pages: a fragment that waits on the server for its next change (the one
long poll, governor.lib.waits), and the request types django-htmx and `login_required` leave."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import wraps
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseForbidden,
    HttpResponseNotAllowed,
)
from django.urls import reverse
from django.utils.http import urlencode
from django_htmx.middleware import HtmxDetails

from governor.lib.errors import TooManyWaits
from governor.lib.waits import MAX_WAIT_SECONDS, long_poll, off_thread


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it: `request.htmx` says whether htmx sent it
    and which element it targets."""

    htmx: HtmxDetails


class MemberRequest(HtmxHttpRequest):
    """A request `login_required` let through: its user is a signed-in person (django-stubs
    types `request.user` as possibly anonymous)."""

    user: User


LIVE_WAIT_SECONDS = 30  # how long one wait of a page's live part lasts before "unchanged" (204)


LIVE_FALLBACK_SECONDS = 5  # how often a page re-reads when its person holds every wait slot


@dataclass(frozen=True)
class Shown:
    """What a live part shows, as a version to compare, and in how many seconds it changes
    with time alone (a proposal whose time runs out), if it does."""

    version: str
    changes_in: float | None = None


def version_of(*parts: object) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def live_url(name: str, *args: object, version: str, **query: str | int) -> str:
    """The address a live part waits on: what it shows (`version`) and how long to wait."""
    params = urlencode({**query, "version": version, "wait": LIVE_WAIT_SECONDS})
    return f"{reverse(name, args=args)}?{params}"


async def live_answer(request: HttpRequest, *, user: User, topics: Sequence[str],
                      shown: Callable[[], Shown],
                      fragment: Callable[[int], HttpResponse]) -> HttpResponse:
    """The answer to a live part's `?version=…&wait=…`: the fresh `fragment` (200) as soon as
    `shown()` differs from the version the page shows, woken by `topics` (the one long poll,
    governor.lib.waits, with its re-check as the safety net); 204 when nothing changed by
    the end of the wait, so htmx keeps the page as it is and asks again. A person holds at most
    GOVERNOR_MAX_WAITS_PER_USER waits; beyond that the fragment is answered at once, asking to be
    re-read in LIVE_FALLBACK_SECONDS (`fragment(delay)`)."""
    raw = request.GET.get("wait", "0")
    if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_WAIT_SECONDS:
        return HttpResponseBadRequest(f"wait: whole seconds from 0 to {MAX_WAIT_SECONDS} "
                                      f"expected, not {raw!r}", content_type="text/plain")
    before = request.GET.get("version", "")
    try:
        return await long_poll(
            request, waiter=user, seconds=int(raw), topics=topics, read=shown,
            settled=lambda now: now.version != before, changes_in=lambda now: now.changes_in,
            answer=lambda now: HttpResponse(status=204) if now.version == before else fragment(0))
    except TooManyWaits:
        return await off_thread(request, fragment, LIVE_FALLBACK_SECONDS)


def signed_in_live(view: Callable[..., Any]) -> Callable[..., Any]:
    """A live part's view, called as `view(request, user, …)`: GET only, for a signed-in person.
    Anyone else gets a 403 that tells htmx to reload the page (`HX-Refresh`), whose own login
    check then sends them to sign in; a redirect would put the login form into the live
    part."""
    @wraps(view)
    async def wrapper(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if request.method != "GET":
            return HttpResponseNotAllowed(["GET"])
        user = await request.auser()
        if not isinstance(user, AbstractBaseUser) or not user.is_authenticated:
            return HttpResponseForbidden("sign in to follow this page",
                                         headers={"HX-Refresh": "true"},
                                         content_type="text/plain")
        response: HttpResponse = await view(request, user, *args, **kwargs)
        return response
    return wrapper
