"""Reviewers' passkeys (issue 18): registering and removing them, and signing decisions.

The registration and signing ceremonies are the `webauthn` package's (py_webauthn), with the
relying-party id and origin from settings (WEBAUTHN_RP_ID, WEBAUTHN_ORIGIN). A decision's
challenge is derived from the decision itself (governor.domain.passkey): the proposal receipt,
the stage, the decision, the reviewer and a nonce the server issued for this one signing, kept in
the reviewer's login session until it is used or five minutes pass."""

from __future__ import annotations

import secrets
import time
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any

import webauthn
from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone
from webauthn.helpers import exceptions as webauthn_errors
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from governor.domain import passkey as proof
from governor.lib.errors import Invalid, NotFound
from governor.selectors.passkeys import passkeys_of
from reviews.models import DecisionSignature, Passkey, Review, Status

REGISTERING = "passkey-registration"
SIGNING = "passkey-signing"
CEREMONY_SECONDS = 300
MAX_NAME_CHARS = 100
SIGNED_DECISIONS = (Status.APPROVED, Status.REVISION_REQUESTED, Status.REJECTED)


class PasskeyRefused(Invalid):
    """A registration or a signature that does not check out; nothing was stored."""

    def __init__(self, message: str, *, field: str = "passkey") -> None:
        super().__init__(message, details=[{"path": field, "message": message}])


# --- registration ------------------------------------------------------------------------------


def registration_options(user: User, state: MutableMapping[str, Any]) -> str:
    """The options for navigator.credentials.create() (JSON); the challenge is kept in `state`
    (the login session) until registration_finish."""
    options = webauthn.generate_registration_options(
        rp_id=settings.WEBAUTHN_RP_ID, rp_name="Reliability Governor",
        user_id=str(user.pk).encode(), user_name=user.get_username(),
        exclude_credentials=[PublicKeyCredentialDescriptor(id=proof.from_b64url(
            key.credential_id, "credential id")) for key in passkeys_of(user)],
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED),
        supported_pub_key_algs=list(proof.ALGORITHMS),  # type: ignore[arg-type]
    )
    state[REGISTERING] = {"challenge": proof.b64url(options.challenge), "at": time.time()}
    return webauthn.options_to_json(options)


def passkey_register(user: User, state: MutableMapping[str, Any], *, name: str,
                     credential: Any) -> Passkey:
    """Store the passkey `credential` (navigator.credentials.create()'s JSON) under `name`,
    after py_webauthn verified it against the challenge issued to this login session."""
    issued = state.pop(REGISTERING, None)  # used once, whatever the outcome
    name = (name or "").strip()
    if not name or len(name) > MAX_NAME_CHARS:
        raise PasskeyRefused(f"give the passkey a name of 1 to {MAX_NAME_CHARS} characters",
                             field="name")
    if not issued or time.time() - issued["at"] > CEREMONY_SECONDS:
        raise PasskeyRefused("the registration was not started here or took longer than "
                             f"{CEREMONY_SECONDS // 60} minutes; start again")
    try:
        verified = webauthn.verify_registration_response(
            credential=credential, expected_challenge=proof.from_b64url(issued["challenge"], "c"),
            expected_rp_id=settings.WEBAUTHN_RP_ID, expected_origin=settings.WEBAUTHN_ORIGIN,
            require_user_verification=True,
            supported_pub_key_algs=list(proof.ALGORITHMS))  # type: ignore[arg-type]
    except (webauthn_errors.WebAuthnException, ValueError, TypeError, KeyError) as exc:
        raise PasskeyRefused(f"the authenticator's answer does not verify: {exc}") from None
    algorithm, _ = proof.cose_to_spki(verified.credential_public_key)
    credential_id = proof.b64url(verified.credential_id)
    if Passkey.objects.filter(credential_id=credential_id).exists():
        raise PasskeyRefused("this passkey is registered already")
    return Passkey.objects.create(
        user=user, name=name, credential_id=credential_id,
        public_key=verified.credential_public_key, algorithm=algorithm,
        rp_id=settings.WEBAUTHN_RP_ID, sign_count=verified.sign_count)


def passkey_remove(user: User, passkey_id: int) -> Passkey:
    """It signs nothing more; the decisions it signed stay checkable (it is kept, marked)."""
    passkey = Passkey.objects.filter(pk=int(passkey_id), user_id=user.pk,
                                     removed_at__isnull=True).first()
    if passkey is None:
        raise NotFound("passkey not found")
    passkey.removed_at = timezone.now()
    passkey.save(update_fields=["removed_at"])
    return passkey


# --- signing a decision ------------------------------------------------------------------------


def signing_options(user: User, review: Review, *, receipt: str, decision: str,
                    state: MutableMapping[str, Any]) -> str:
    """The options for navigator.credentials.get() whose challenge is this decision's, with a
    fresh nonce kept in `state` for decision_signature."""
    if decision not in SIGNED_DECISIONS:
        raise PasskeyRefused("decision must be approved, revision-requested or rejected",
                             field="decision")
    keys = passkeys_of(user)
    if not keys:
        raise PasskeyRefused("you have no passkey: add one on your passkeys page first")
    nonce = proof.b64url(secrets.token_bytes(16))
    signed = _statement(user, review, receipt=receipt, decision=decision, nonce=nonce)
    options = webauthn.generate_authentication_options(
        rp_id=settings.WEBAUTHN_RP_ID, challenge=proof.challenge(signed),
        allow_credentials=[PublicKeyCredentialDescriptor(
            id=proof.from_b64url(key.credential_id, "credential id")) for key in keys],
        user_verification=UserVerificationRequirement.REQUIRED)
    state[SIGNING] = {"review": str(review.pk), "receipt": receipt, "decision": decision,
                      "nonce": nonce, "at": time.time()}
    return webauthn.options_to_json(options)


def _statement(user: User, review: Review, *, receipt: str, decision: str,
               nonce: str) -> proof.DecisionStatement:
    return proof.statement(proposal_receipt=receipt, stage=review.stage, decision=decision,
                           reviewer=user.pk, nonce=nonce)


@dataclass(frozen=True)
class Signed:
    """A verified assertion over one decision, not yet stored (review_decide stores it with the
    decision, in the decision's transaction)."""

    passkey: Passkey
    decision: str
    nonce: str
    assertion: dict[str, str]
    sign_count: int

    @property
    def digest(self) -> str:
        return proof.assertion_digest(self.assertion)


def decision_signature(user: User, review: Review, *, receipt: str, decision: str,
                       credential: Any, state: MutableMapping[str, Any]) -> Signed:
    """Verify `credential` (navigator.credentials.get()'s JSON) as `user`'s signature of exactly
    this decision, with the nonce issued to this login session for it (used once)."""
    issued = state.pop(SIGNING, None)
    if (not issued or issued["review"] != str(review.pk) or issued["receipt"] != receipt
            or issued["decision"] != decision):
        raise PasskeyRefused("the signature was not requested for this decision on this page; "
                             "sign again")
    if time.time() - issued["at"] > CEREMONY_SECONDS:
        raise PasskeyRefused(f"the signature took longer than {CEREMONY_SECONDS // 60} minutes; "
                             "sign again")
    credential_id = credential.get("id") if isinstance(credential, dict) else None
    passkey = Passkey.objects.filter(user_id=user.pk, credential_id=credential_id,
                                     removed_at__isnull=True).first()
    if passkey is None:
        raise PasskeyRefused("the signature is not by one of your registered passkeys")
    signed = _statement(user, review, receipt=receipt, decision=decision, nonce=issued["nonce"])
    try:
        verified = webauthn.verify_authentication_response(
            credential=credential, expected_challenge=proof.challenge(signed),
            expected_rp_id=passkey.rp_id, expected_origin=settings.WEBAUTHN_ORIGIN,
            credential_public_key=bytes(passkey.public_key),
            credential_current_sign_count=passkey.sign_count, require_user_verification=True)
    except (webauthn_errors.WebAuthnException, ValueError, TypeError, KeyError) as exc:
        raise PasskeyRefused(_reason(exc)) from None
    response = credential["response"]
    assertion = {"credentialId": passkey.credential_id,
                 "authenticatorData": response["authenticatorData"],
                 "clientDataJSON": response["clientDataJSON"],
                 "signature": response["signature"]}
    # The same check an offline verifier makes (cryptography alone): what is stored verifies.
    try:
        _, spki = proof.cose_to_spki(bytes(passkey.public_key))
        proof.check_assertion(assertion=assertion, signed=signed, alg=passkey.algorithm,
                              spki=spki, rp_id=passkey.rp_id)
    except proof.PasskeyError as exc:
        raise PasskeyRefused(str(exc)) from None
    return Signed(passkey=passkey, decision=decision, nonce=issued["nonce"],
                  assertion=assertion, sign_count=verified.new_sign_count)


def _reason(exc: Exception) -> str:
    text = str(exc)
    if "sign count" in text:
        return (f"the passkey's signature counter went backwards ({text}): the authenticator "
                "may have been cloned, so the signature is refused")
    if "User verification" in text:
        return ("your authenticator did not verify you (PIN, fingerprint or face): a signed "
                "decision needs user verification")
    return f"the passkey signature does not verify: {text}"


def signature_record(review: Review, user: User, signed: Signed) -> DecisionSignature:
    """Inside the decision's transaction: advance the passkey's counter (refusing a counter
    that did not move forward since the check) and keep the assertion with the decision."""
    passkey = Passkey.objects.select_for_update().get(pk=signed.passkey.pk)
    if (signed.sign_count or passkey.sign_count) and signed.sign_count <= passkey.sign_count:
        raise PasskeyRefused(_reason(ValueError(
            f"sign count {signed.sign_count} is not above {passkey.sign_count}")))
    passkey.sign_count = signed.sign_count
    passkey.last_used_at = timezone.now()
    passkey.save(update_fields=["sign_count", "last_used_at"])
    return DecisionSignature.objects.create(
        review=review, user=user, passkey=passkey, decision=signed.decision, nonce=signed.nonce,
        authenticator_data=signed.assertion["authenticatorData"],
        client_data_json=signed.assertion["clientDataJSON"],
        signature=signed.assertion["signature"], digest=signed.digest)
