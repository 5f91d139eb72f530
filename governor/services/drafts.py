"""Auxiliary-model drafting (rules §9): the one streamed provider call and the draft event.

`draft_create` checks everything it can before the call (authoring mode, route, request body,
required profiles for a code draft, the input cap, the credential), makes exactly one streamed
request (no fallback, no retry, redirects not followed, proxies from the environment ignored),
reads at most 256 KiB of it within the route's timeout, parses the answer strictly and only then
appends `reliability/contract-draft`. Any refusal records nothing.

The credential is read at call time from the environment variable or file the route names and
is only ever put in the request header; refusal texts are redacted against it.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from typing import TypedDict

import httpx

from governor.domain import coverage, lifecycle
from governor.domain import drafting as domain
from governor.domain.canonical import JSONObject
from governor.lib.errors import Invalid, Unavailable
from governor.lib.provider_streams import SSEDecoder, StreamResult, stream_reader
from governor.models import DraftRoute, Project, Session
from governor.selectors.drafts import drafting_required
from governor.selectors.heldout import heldout_sources
from governor.services.events import (
    governor_event_append,
    session_locked,
)
from verification.models import VerifierProfile

log = logging.getLogger(__name__)
MAX_ERROR_BODY_BYTES = 16 * 1024
MAX_CREDENTIAL_FILE_BYTES = 16 * 1024


def _route_of(project: Project) -> tuple[domain.Route, DraftRoute]:
    """The project's route, checked, and its row (which names where the credential is)."""
    row = DraftRoute.objects.filter(project=project).first()
    if row is None:
        raise Unavailable("this project drafts with an auxiliary model but no drafting route is "
                          "configured; an operator sets it in the admin (Project → draft route)")
    problems = domain.route_problems(
        provider=row.provider, base_url=row.base_url, model=row.model,
        reasoning_effort=row.reasoning_effort, credential_env=row.credential_env,
        credential_file=row.credential_file)
    if problems:
        raise Unavailable("the project's drafting route is misconfigured: "
                          + "; ".join(f"{name}: {message}" for name, message in problems))
    route = domain.Route(
        provider=row.provider, base_url=row.base_url, model=row.model,
        reasoning_effort=row.reasoning_effort or None, max_output_tokens=row.max_output_tokens,
        timeout_seconds=float(row.timeout_seconds), max_input_bytes=row.max_input_bytes)
    return route, row


def _credential(row: DraftRoute) -> str:
    """The route's key, read now. Errors name where it was looked for, never what was found."""
    if row.credential_env:
        key = os.environ.get(row.credential_env, "").strip()
        if not key:
            raise Unavailable(f"the drafting credential variable {row.credential_env} is not set "
                              "or empty in the server's environment")
        return key
    try:
        with open(row.credential_file, "rb") as handle:
            raw = handle.read(MAX_CREDENTIAL_FILE_BYTES + 1)
    except OSError as exc:
        raise Unavailable(f"the drafting credential file {row.credential_file} cannot be read "
                          f"({exc.strerror or type(exc).__name__})") from None
    try:
        key = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        key = ""
    if not key or len(raw) > MAX_CREDENTIAL_FILE_BYTES or any(c.isspace() for c in key):
        raise Unavailable(f"the drafting credential file {row.credential_file} does not hold "
                          "one key")
    return key


def _status_error(response: httpx.Response, key: str) -> domain.DraftError:
    """An error status: the status and, at most, the provider's short error identifier."""
    body = b""
    try:
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_ERROR_BODY_BYTES:
                break
    except httpx.HTTPError:
        pass
    try:
        payload = json.loads(body[:MAX_ERROR_BODY_BYTES])
    except ValueError:
        payload = None
    kind = domain.provider_error_type(payload, key)
    suffix = f" ({kind})" if kind else ""
    return domain.DraftError(domain.UPSTREAM, "http-status",
                             f"the drafting provider answered HTTP {response.status_code}"
                             f"{suffix}; no retry or fallback is made")


def provider_call(route: domain.Route, text: str, key: str) -> StreamResult:
    """One streamed request; the answer text, finish reason and usage, or DraftError."""
    url, headers, payload = domain.provider_request(route, text)
    headers.update(domain.credential_headers(route.provider, key))
    host = domain.base_url_host(route.base_url)
    deadline = time.monotonic() + route.timeout_seconds
    decoder, reader = SSEDecoder(), stream_reader(route.provider)
    received = 0

    def timed_out() -> domain.DraftError:
        return domain.DraftError(domain.TIMEOUT, "timeout",
                                 f"the drafting provider at {host} did not complete its answer "
                                 f"within the route's {route.timeout_seconds:g} s timeout")

    try:
        with httpx.Client(timeout=httpx.Timeout(route.timeout_seconds), follow_redirects=False,
                          trust_env=False) as client, \
                client.stream("POST", url, headers=headers, content=payload) as response:
            if response.status_code != 200:
                raise _status_error(response, key)
            media = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "text/event-stream":
                raise domain.DraftError(domain.STREAM, "content-type",
                                        "the drafting provider did not answer with an event "
                                        "stream (text/event-stream)")
            for chunk in response.iter_bytes():
                received += len(chunk)
                if received > domain.MAX_RESPONSE_BYTES:
                    raise domain.DraftError(
                        domain.STREAM, "oversize",
                        f"the drafting provider's answer exceeded the "
                        f"{domain.MAX_RESPONSE_BYTES // 1024} KiB response cap")
                for event in decoder.feed(chunk):
                    reader.event(event)
                if time.monotonic() > deadline:
                    raise timed_out()
            for event in decoder.close():
                reader.event(event)
    except httpx.TimeoutException:
        raise timed_out() from None
    except httpx.HTTPError as exc:
        raise domain.DraftError(
            domain.UPSTREAM, "transport",
            f"the drafting provider at {host} could not be reached or broke off the answer "
            f"({type(exc).__name__}); no retry is made") from None
    if time.monotonic() > deadline:
        raise timed_out()
    return reader.result()


def _profiles(project: Project) -> list[domain.ProfileChoice]:
    return [{"id": p.profile_id, "description": p.description, "required": p.required}
            for p in VerifierProfile.objects.filter(project=project).order_by("profile_id")]


class DraftCreated(TypedDict):
    """The answer to a draft: the draft, its coverage, its receipt and the body that begins
    a contract matching it exactly."""

    draft: domain.DraftDocument
    coverage: JSONObject
    receipt: str
    begin: dict[str, object]


def draft_create(*, session: Session, body: object) -> DraftCreated:
    """§9: draft claims and checks with the project's auxiliary model and record the draft."""
    project = session.project
    drafting_required(project)
    request = domain.draft_request(body)
    route, row = _route_of(project)
    profiles = _profiles(project)
    required = [p["id"] for p in profiles if p["required"]]
    if request.kind == "code" and not required:
        raise Invalid("a code draft needs at least one required code verification profile, and "
                      "this project has none; nothing was sent to the model",
                      details=[{"path": "contract_kind", "message": "no required profile"}])
    block = domain.user_block(request, profiles)
    text = domain.user_text(block)
    size = len(text.encode("utf-8"))
    if size > route.max_input_bytes:
        raise Invalid(
            f"the drafting input is {size} bytes (objective, context and the profile list as "
            f"canonical JSON); the route allows at most {route.max_input_bytes}; nothing was sent",
            details=[{"path": "context", "message": f"input of {size} bytes is over the "
                                                    f"{route.max_input_bytes}-byte cap"}])
    key = _credential(row)
    started = time.monotonic()
    try:
        result = provider_call(route, text, key)
        claims, checks = domain.parse_plan_text(result.text, max_checks=project.max_checks)
        proposal = domain.draft_proposal(request, claims, checks, required_profile_ids=required,
                                         max_checks=project.max_checks)
    except domain.DraftError as exc:
        exc.message = domain.redact(exc.message, key)
        exc.args = (exc.message,)
        log.warning("draft refused: session=%s provider=%s model=%s code=%s reason=%s",
                    session.pk, route.provider, route.model, exc.code, exc.reason)
        raise
    assessment = coverage.assess(proposal.objective, proposal.claims, proposal.checks,
                                 heldout=heldout_sources(project))
    with session_locked(session) as state:
        document = domain.draft_document(
            draft_id=f"draft-{uuid.uuid4()}", session_id=str(session.pk), proposal=proposal,
            coverage=assessment, route=route, input_receipt=domain.input_receipt(block),
            input_bytes=size, usage=result.usage)
        governor_event_append(session=session, state=state, type=lifecycle.CONTRACT_DRAFT,
                              data=document)
    log.info("draft recorded: session=%s provider=%s model=%s receipt=%s ms=%d", session.pk,
             route.provider, route.model, document["receipt"],
             int((time.monotonic() - started) * 1000))
    return {"draft": document, "coverage": assessment, "receipt": document["receipt"],
            "begin": domain.begin_body(document)}
