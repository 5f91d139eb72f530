"""A typed client for every agent route of the governor's HTTP API (docs/api.md).

Retries are only ever made where repeating the request cannot do anything twice:

- reads, `abstain` (a second abstain returns the terminal) and session creation with an
  `external_id` (the server answers the same session) are repeated on any transport failure or
  a 502/503/504, and a long poll refused as one too many for the token (429) after the
  `Retry-After` the server gives;
- event batches are repeated under the same `Idempotency-Key` (and `expected_seq`), so the server
  answers a replay with the first result and stores nothing twice;
- everything else (begin, verify, turn-stop, queueing a run, import) is repeated only when the
  request provably never left this machine (the connection could not be opened). Any other
  failure raises `GovernorUnreachable`: the server may have acted, and the caller decides.
"""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import httpx

from governor_client.config import Config
from governor_client.errors import GovernorError, GovernorUnreachable
from governor_client.types import (
    AppendResult,
    AssessResult,
    BeginResult,
    BlobBatchStored,
    Certification,
    CertificationList,
    ContractBody,
    DraftResult,
    EventPage,
    Kind,
    LoggedEvent,
    Outcome,
    OutcomeProfile,
    OutcomeStatus,
    Profile,
    ProjectInfo,
    PublicKey,
    ReviewAnswer,
    RunQueued,
    SessionInfo,
    SessionStatus,
    SnapshotInfo,
    TurnStop,
    VerificationRun,
)

MAX_WAIT_SECONDS = 60  # the server holds a long poll at most this long
RETRYABLE_STATUS = frozenset({502, 503, 504})
_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


class Retry(enum.Enum):
    REPEATABLE = "repeatable"  # the request may be sent again whatever happened to the first
    UNSENT = "unsent"  # only when the first never left this machine


class GovernorClient:
    def __init__(
        self,
        config: Config,
        *,
        timeout: float = 30.0,
        connect_timeout: float | None = None,
        retries: int = 4,
        backoff: float = 0.25,
        budget: float | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """`budget` caps the time all requests of this client may take together (a hook must
        answer within its agent's timeout); past it a request fails as unreachable."""
        self.config = config
        self.retries = retries
        self.backoff = backoff
        self._timeout = timeout
        self._connect_timeout = connect_timeout or timeout
        self._deadline = time.monotonic() + budget if budget is not None else None
        self._http = httpx.Client(
            base_url=config.api_url, transport=transport,
            headers={"Authorization": f"Bearer {config.token}",
                     "User-Agent": "governor-agent/0.1"},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GovernorClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def absolute(self, path: str) -> str:
        """A server-relative link (e.g. a review URL) as an absolute one."""
        return self.config.url + path if path.startswith("/") else path

    # --- transport -----------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        retry: Retry,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        where = f"{method} {self.config.api_url}{path}"
        attempt = 0
        while True:
            limit = timeout or self._timeout
            if self._deadline is not None:
                limit = min(limit, self._deadline - time.monotonic())
                if limit <= 0:
                    raise GovernorUnreachable(f"{where}: no answer within the time budget")
            try:
                response = self._http.request(
                    method, path, json=json, content=content, params=params, headers=headers,
                    timeout=httpx.Timeout(limit, connect=min(limit, self._connect_timeout)),
                )
            except httpx.TransportError as exc:
                repeatable = retry is Retry.REPEATABLE or isinstance(exc, _UNSENT)
                if not repeatable or attempt >= self.retries:
                    raise GovernorUnreachable(
                        f"{where}: {type(exc).__name__}: {exc or 'no answer'}") from exc
                pause = self.backoff * (2 ** attempt)
            else:
                if response.status_code < 400:
                    return response
                too_many_waits = response.status_code == 429
                if (retry is Retry.UNSENT or attempt >= self.retries
                        or not (too_many_waits or response.status_code in RETRYABLE_STATUS)):
                    raise _error_of(response)
                # One long poll too many for the token: its others end within Retry-After.
                pause = _retry_after(response) if too_many_waits else self.backoff * (2 ** attempt)
            if self._deadline is not None:
                pause = min(pause, max(0.0, self._deadline - time.monotonic()))
            time.sleep(pause)
            attempt += 1

    def _json(self, method: str, path: str, *, retry: Retry, **kwargs: Any) -> Any:
        return self._request(method, path, retry=retry, **kwargs).json()

    # --- sessions and their logs ---------------------------------------------------------------

    def create_session(
        self,
        workspace: str | Path | None,
        *,
        external_id: str | None = None,
        header: Mapping[str, Any] | None = None,
    ) -> SessionInfo:
        """Create a session bound to `workspace` (an absolute directory under one of the
        project's roots), or return the existing one with the same `external_id`."""
        body: dict[str, Any] = {"workspace": {"kind": "path", "path": str(workspace)}
                                if workspace is not None else {"kind": "snapshot"}}
        if external_id is not None:
            body["external_id"] = external_id
        if header is not None:
            body["header"] = dict(header)
        retry = Retry.REPEATABLE if external_id is not None else Retry.UNSENT
        return cast(SessionInfo, self._json("POST", "/sessions", json=body, retry=retry))

    def session(self, session_id: str) -> SessionStatus:
        return cast(SessionStatus, self._json("GET", f"/sessions/{session_id}",
                                              retry=Retry.REPEATABLE))

    def append_events(
        self,
        session_id: str,
        events: Sequence[Mapping[str, Any]],
        *,
        expected_seq: int | None = None,
        idempotency_key: str | None = None,
    ) -> AppendResult:
        """Append a batch all-or-nothing. The batch is sent under `idempotency_key` (a fresh one
        when not given), so retrying it can never store it twice."""
        body: dict[str, Any] = {"events": list(events)}
        if expected_seq is not None:
            body["expected_seq"] = expected_seq
        key = idempotency_key or f"governor-agent-{uuid.uuid4()}"
        return cast(AppendResult, self._json(
            "POST", f"/sessions/{session_id}/events", json=body, retry=Retry.REPEATABLE,
            headers={"Idempotency-Key": key}))

    def events(self, session_id: str, *, after: int = -1, limit: int = 500) -> EventPage:
        return cast(EventPage, self._json("GET", f"/sessions/{session_id}/events",
                                          params={"after": after, "limit": limit},
                                          retry=Retry.REPEATABLE))

    def iter_events(self, session_id: str, *, after: int = -1) -> Iterator[LoggedEvent]:
        """Every event after `after`, page by page."""
        while True:
            page = self.events(session_id, after=after, limit=5000)
            yield from page["events"]
            if page["next_after"] is None:
                return
            after = page["next_after"]

    def import_session(
        self,
        log: bytes | str,
        *,
        workspace: str | Path | None = None,
        external_id: str | None = None,
    ) -> SessionInfo:
        """A whole Harness JSONL log (plain, or zstd-compressed bytes) as a new session."""
        data = log.encode("utf-8") if isinstance(log, str) else log
        params = {key: str(value) for key, value in
                  (("workspace", workspace), ("external_id", external_id)) if value is not None}
        return cast(SessionInfo, self._json(
            "POST", "/sessions/import", content=data, params=params, retry=Retry.UNSENT,
            headers={"Content-Type": "application/x-ndjson"}))

    def export_session(self, session_id: str) -> str:
        """The JSONL export (check it offline with `python -m governor.verify`)."""
        return self._request("GET", f"/sessions/{session_id}/export",
                             retry=Retry.REPEATABLE).text

    # --- contracts -----------------------------------------------------------------------------

    def assess(self, session_id: str, body: ContractBody | Mapping[str, Any], *,
               kind: Kind = "general") -> AssessResult:
        """Coverage preflight; writes nothing."""
        params = {"kind": "code"} if kind == "code" else None
        return cast(AssessResult, self._json("POST", f"/sessions/{session_id}/assess",
                                             json=dict(body), params=params,
                                             retry=Retry.REPEATABLE))

    def draft(self, session_id: str, *, contract_kind: Kind, objective: str,
              context: str | None = None) -> DraftResult:
        """Claims and checks drafted by the project's auxiliary model (projects in the
        `auxiliary-model` authoring mode only). One paid model call: never repeated."""
        body: dict[str, Any] = {"contract_kind": contract_kind, "objective": objective}
        if context is not None:
            body["context"] = context
        return cast(DraftResult, self._json("POST", f"/sessions/{session_id}/drafts", json=body,
                                            retry=Retry.UNSENT))

    def drafting_available(self, session_id: str) -> bool:
        """Whether the project drafts contracts with an auxiliary model. Asks with an empty body,
        which the server refuses before any model is called: as invalid when the project drafts,
        as a conflict (409) when it does not; a server without the route answers 404/405."""
        try:
            self._request("POST", f"/sessions/{session_id}/drafts", json={},
                          retry=Retry.UNSENT)
        except GovernorError as error:
            if error.status == 422:
                return True
            if error.status in (404, 405, 409):
                return False
            raise
        raise GovernorError(200, "UNEXPECTED", "an empty draft request was accepted")

    def begin(self, session_id: str, body: ContractBody | Mapping[str, Any], *,
              kind: Kind = "general", tree: str | None = None) -> BeginResult:
        route = "code-contracts" if kind == "code" else "contracts"
        return cast(BeginResult, self._json("POST", f"/sessions/{session_id}/{route}",
                                            json={**dict(body), **(_tree(tree) or {})},
                                            retry=Retry.UNSENT))

    def review(self, session_id: str, *, wait: int = 0) -> ReviewAnswer:
        """The latest review; with `wait` (≤60 s) held until the pending proposal is decided."""
        wait = max(0, min(wait, MAX_WAIT_SECONDS))
        return cast(ReviewAnswer, self._json(
            "GET", f"/sessions/{session_id}/review", params={"wait": wait},
            retry=Retry.REPEATABLE, timeout=self._timeout + wait))

    def withdraw_review(self, session_id: str) -> ReviewAnswer:
        return cast(ReviewAnswer, self._json("DELETE", f"/sessions/{session_id}/review",
                                             retry=Retry.UNSENT))

    def verify(self, session_id: str, *, tree: str | None = None) -> Outcome:
        """A manual attempt: evaluates every check now (it counts against the repair budget). A
        snapshot session names its latest snapshot (`tree`)."""
        return cast(Outcome, self._json("POST", f"/sessions/{session_id}/verify",
                                        json=_tree(tree), retry=Retry.UNSENT))

    def turn_stop(self, session_id: str, *, tree: str | None = None) -> TurnStop:
        return cast(TurnStop, self._json("POST", f"/sessions/{session_id}/turn-stop",
                                         json=_tree(tree), retry=Retry.UNSENT))

    # --- snapshots (rules §11) -------------------------------------------------------------

    def project(self) -> ProjectInfo:
        """The token's project as an agent needs it: `tree_exclusions` and the tree caps."""
        return cast(ProjectInfo, self._json("GET", "/project", retry=Retry.REPEATABLE))

    def blobs_missing(self, blobs: list[str]) -> list[str]:
        answer = self._json("POST", "/blobs/missing", json={"blobs": blobs},
                            retry=Retry.REPEATABLE)
        return cast(list[str], answer["missing"])

    def put_blob(self, blob: str, data: bytes) -> bool:
        """Store a blob (idempotent); True when the server did not have it."""
        response = self._request("PUT", f"/blobs/{blob}", content=data, retry=Retry.REPEATABLE,
                                 headers={"Content-Type": "application/octet-stream"})
        return response.status_code == 201

    def put_blobs(self, blobs: list[tuple[str, bytes]]) -> BlobBatchStored:
        """Store many blobs in one request (`POST /blobs`), all or none (idempotent);
        `{"stored": ids new to the server, "present": ids it held}`."""
        body = b"".join(b"%s %d\n%s" % (blob.encode(), len(data), data) for blob, data in blobs)
        return cast(BlobBatchStored, self._json(
            "POST", "/blobs", content=body, retry=Retry.REPEATABLE,
            headers={"Content-Type": "application/octet-stream"}))

    def create_snapshot(self, session_id: str, entries: list[dict[str, Any]], *,
                        base: str | None = None) -> SnapshotInfo:
        body: dict[str, Any] = {"entries": entries}
        if base is not None:
            body["base"] = base
        return cast(SnapshotInfo, self._json("POST", f"/sessions/{session_id}/snapshots",
                                             json=body, retry=Retry.REPEATABLE))

    # --- the gate (rules §19) -----------------------------------------------------------------

    def gate_change(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """`POST /changes` with a gate token: the change is recorded and its runs queued."""
        return cast(dict[str, Any], self._json("POST", "/changes", json=body,
                                               retry=Retry.UNSENT))

    def change(self, change_id: str, *, wait: int = 0) -> dict[str, Any]:
        """A gated change; with `wait`, long-polls until it is decided."""
        return cast(dict[str, Any], self._json(
            "GET", f"/changes/{change_id}", params={"wait": wait} if wait else None,
            retry=Retry.REPEATABLE, timeout=wait + 30 if wait else None))

    def abstain(self, session_id: str, reason: str) -> Outcome:
        return cast(Outcome, self._json("POST", f"/sessions/{session_id}/abstain",
                                         json={"reason": reason}, retry=Retry.REPEATABLE))

    # --- trusted verification ------------------------------------------------------------------

    def code_profiles(self) -> list[Profile]:
        answer = self._json("GET", "/code-profiles", retry=Retry.REPEATABLE)
        return cast(list[Profile], answer["profiles"])

    def outcome_profiles(self) -> list[OutcomeProfile]:
        answer = self._json("GET", "/outcome-profiles", retry=Retry.REPEATABLE)
        return cast(list[OutcomeProfile], answer["profiles"])

    def outcome_observe(self, session_id: str, *, wait: int = MAX_WAIT_SECONDS) -> OutcomeStatus:
        """Observe the outcome now (the server allows one a minute: 429 with Retry-After). A
        worker runs the probe; the answer waits for it up to `wait` (≤60 s) seconds, and
        carries `pending` when it had not answered by then (`outcome_status` shows it later)."""
        wait = max(0, min(wait, MAX_WAIT_SECONDS))
        return cast(OutcomeStatus, self._json(
            "POST", f"/sessions/{session_id}/outcome/observations", params={"wait": wait},
            retry=Retry.UNSENT, timeout=self._timeout + wait))

    def outcome_status(self, session_id: str) -> OutcomeStatus:
        return cast(OutcomeStatus, self._json("GET", f"/sessions/{session_id}/outcome",
                                              retry=Retry.REPEATABLE))

    def request_verification(self, session_id: str, profile: str, *,
                             tree: str | None = None) -> RunQueued:
        return cast(RunQueued, self._json(
            "POST", f"/sessions/{session_id}/code-verifications",
            json={"profile": profile, **(_tree(tree) or {})}, retry=Retry.UNSENT))

    def verification(self, run_id: str, *, wait: int = 0) -> VerificationRun:
        wait = max(0, min(wait, MAX_WAIT_SECONDS))
        return cast(VerificationRun, self._json(
            "GET", f"/code-verifications/{run_id}", params={"wait": wait},
            retry=Retry.REPEATABLE, timeout=self._timeout + wait))

    def keys(self) -> list[PublicKey]:
        return cast(list[PublicKey], self._json("GET", "/keys", retry=Retry.REPEATABLE)["keys"])

    def certifications(self, *, session: str) -> list[Certification]:
        """The session's certified terminals, each with its envelope and certified manifest."""
        return cast(CertificationList, self._json(
            "GET", "/certifications", params={"session": session},
            retry=Retry.REPEATABLE))["certifications"]


def _tree(tree: str | None) -> dict[str, str] | None:
    """A snapshot session's `{"tree": …}`; a path session sends no body."""
    return None if tree is None else {"tree": tree}


def _retry_after(response: httpx.Response) -> int:
    """The seconds `Retry-After` asks for (1 when absent or unreadable, at most a long poll),
    and one more: the wait that ends by then releases its slot a moment after its deadline."""
    try:
        seconds = max(0, min(int(response.headers.get("Retry-After", "1")), MAX_WAIT_SECONDS))
    except ValueError:
        seconds = 1
    return seconds + 1


def _error_of(response: httpx.Response) -> GovernorError:
    try:
        error = response.json()["error"]
        return GovernorError(response.status_code, str(error["code"]), str(error["message"]),
                             error.get("details"))
    except (ValueError, KeyError, TypeError):
        text = response.text.strip()[:500] or response.reason_phrase
        return GovernorError(response.status_code, f"HTTP_{response.status_code}", text)
