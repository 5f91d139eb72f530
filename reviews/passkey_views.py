"""A reviewer's passkeys page, and the JSON steps of the WebAuthn ceremonies (static/passkeys.js
drives them: registering a passkey, signing a decision before it is posted)."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from governor.domain.passkey import rp_id_usable
from governor.lib.live import MemberRequest
from governor.selectors.access import review_for_reviewer
from governor.selectors.passkeys import passkeys_of, reviewer_key
from governor.services import passkeys


def signing_elsewhere(request: HttpRequest) -> str:
    """Where to open this page for a passkey to work: GOVERNOR_PUBLIC_URL's origin, the one
    passkeys are bound to, with the page's path — when the request came to another origin
    (127.0.0.1 behind localhost, another name); "" when it came to the right one."""
    here = f"{request.scheme}://{request.get_host()}"
    if here == settings.WEBAUTHN_ORIGIN:
        return ""
    return settings.PUBLIC_URL + request.get_full_path()


def _refused(exc: passkeys.PasskeyRefused) -> JsonResponse:
    return JsonResponse({"error": exc.message, "details": exc.details}, status=400)


def _options(text: str) -> HttpResponse:
    return HttpResponse(text, content_type="application/json")


@login_required
@require_GET
def page(request: MemberRequest) -> HttpResponse:
    return render(request, "reviews/passkeys.html", {
        "passkeys": passkeys_of(request.user), "rp_id": settings.WEBAUTHN_RP_ID,
        "rp_usable": rp_id_usable(settings.WEBAUTHN_RP_ID), "max_name": passkeys.MAX_NAME_CHARS,
        "elsewhere": signing_elsewhere(request),
        "here": f"{request.scheme}://{request.get_host()}"})


@login_required
@require_POST
def registration_options(request: MemberRequest) -> HttpResponse:
    if not rp_id_usable(settings.WEBAUTHN_RP_ID):
        return JsonResponse({"error": "passkeys need this site served under a domain name "
                                      "(GOVERNOR_PUBLIC_URL), not an IP address"}, status=400)
    return _options(passkeys.registration_options(request.user, request.session))


@login_required
@require_POST
def register(request: MemberRequest) -> HttpResponse:
    try:
        credential = json.loads(request.POST.get("credential", ""))
    except ValueError:
        return JsonResponse({"error": "credential must be the authenticator's JSON answer"},
                            status=400)
    try:
        passkey = passkeys.passkey_register(request.user, request.session,
                                            name=request.POST.get("name", ""),
                                            credential=credential)
    except passkeys.PasskeyRefused as exc:
        return _refused(exc)
    messages.success(request, f"Passkey “{passkey.name}” added: your decisions are now signed "
                              "with it.")
    return JsonResponse({"id": passkey.pk, "name": passkey.name}, status=201)


@login_required
@require_POST
def remove(request: MemberRequest, passkey_id: int) -> HttpResponse:
    passkey = passkeys.passkey_remove(request.user, passkey_id)  # NotFound answers 404
    messages.success(request, f"Passkey “{passkey.name}” removed: it signs nothing more. The "
                              "decisions it signed stay checkable.")
    return redirect("reviews:passkeys")


@login_required
@require_GET
def public_keys(request: MemberRequest) -> HttpResponse:
    """The reviewer's own public keys, as `python -m governor.verify --reviewer-keys` reads
    them: publish them where the people who check exports can find them."""
    keys: list[dict[str, object]] = [reviewer_key(key)
                                  for key in passkeys_of(request.user)]
    response = JsonResponse(keys, safe=False, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = (
        f'attachment; filename="reviewer-keys-{request.user.get_username()}.json"')
    return response


@login_required
@require_POST
def signing_options(request: MemberRequest, review_id: str) -> HttpResponse:
    review = review_for_reviewer(request.user, review_id)
    try:
        return _options(passkeys.signing_options(
            request.user, review, receipt=request.POST.get("receipt", ""),
            decision=request.POST.get("decision", ""), state=request.session))
    except passkeys.PasskeyRefused as exc:
        return _refused(exc)
