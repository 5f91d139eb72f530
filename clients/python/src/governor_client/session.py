"""One workspace's governor session, as the CLI, the MCP server and the hooks share it.

`AgentSession` binds a `GovernorClient` to a `Workspace` state file: it starts or resumes the
session, records what the agent does as Harness events (safely replayable batches), and calls the
contract routes while remembering the lifecycle state the governor last reported.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from governor_client import harness
from governor_client.client import MAX_WAIT_SECONDS, GovernorClient
from governor_client.errors import GovernorError, ReviewPending
from governor_client.harness import Record, TraceBook
from governor_client.snapshot import Progress, upload
from governor_client.types import (
    AssessResult,
    BeginResult,
    Kind,
    Outcome,
    Review,
    RunQueued,
    SessionStatus,
    TurnStop,
    VerificationRun,
)
from governor_client.workspace import LocalState, PendingBatch, Workspace

NEXT = {
    "active": "The contract is active. Do the work, then call reliability_verify; claim "
              "completion only after the answer is certified.",
    "review-pending": "A human reviewer has not decided yet, so no contract is active: do not "
                      "claim completion. Call reliability_status with wait_seconds to keep "
                      "waiting (review_url is the reviewer's page).",
    "delivery-pending": "Every check passed and a person is reviewing the delivered change: it "
                        "is not certified yet, so do not claim completion. Call "
                        "reliability_status with wait_seconds to wait for the decision.",
    "drafted": "Begin with exactly the `begin` body (reliability_begin for a general draft, "
               "reliability_begin_code for a code draft), adding intent when review is "
               "required; a changed claim or check is refused.",
    "review-required": "Coverage is not ready: fix the error findings of the assessment, then "
                       "begin again.",
    "revision-requested": "The reviewer asked for a revision: revise the proposal using the "
                          "feedback and call reliability_begin again.",
    "rejected": "The reviewer rejected the proposal: do not proceed as if it were approved; "
                "ask the user, or abstain.",
    "expired": "The review expired undecided: begin again if the task still needs a contract.",
    "delivery-revision": "A person asked for changes to the delivered change: make them, "
                         "answering the feedback and every line comment (review.comments, each "
                         "path and line), then call reliability_verify; the next passing "
                         "attempt opens a new delivery review. Do not claim completion.",
    "certified": "The contract is certified: report truthfully what was verified and nothing "
                 "more, and cite the terminal receipt.",
    "exhausted": "The contract is exhausted: do not claim the task is complete; tell the user "
                 "what failed (or what the reviewer said) and cite the terminal receipt.",
    "cancelled": "The proposal was withdrawn: begin again if the task still needs a contract.",
}

MAX_RECORDS_PER_BATCH = 100  # ≤ 7 events each: far below the server's 1000 per batch
MAX_REBUILDS = 5


class AgentSession:
    def __init__(self, client: GovernorClient, workspace: Workspace, *,
                 external_id: str | None = None, snapshot: bool = False,
                 progress: Progress | None = None) -> None:
        """`external_id` pins the session (a hook passes the coding agent's own session id);
        without it the workspace's current session is used, or a new one is started.
        `snapshot`: the governor shares no disk with this machine (rules §11): the session
        is bound {"kind": "snapshot"}, and the workspace is uploaded before every begin, check,
        run and stop, which then name the tree uploaded."""
        self.client = client
        self.workspace = workspace
        self.external_id = external_id
        self.snapshot = snapshot
        self.progress = progress
        self.upload_wait: float | None = None  # a hook's stop waits only within its budget

    def upload(self, *, wait: float | None = None) -> dict[str, Any]:
        """Upload the workspace as the session's newest snapshot (only what changed), waiting at
        most `wait` seconds for an upload of this workspace already running."""
        session_id = self.ensure()
        return upload(self.client, session_id, self.workspace.root, progress=self.progress,
                      wait=wait if wait is not None else self.upload_wait)

    def _tree(self) -> str | None:
        """In snapshot mode, the tree just uploaded; None for a path session."""
        return str(self.upload()["tree"]) if self.snapshot else None

    # --- the session ---------------------------------------------------------------------------

    def own_external_id(self) -> str | None:
        """The external id of this workspace's own session when the agent's session id is
        already bound to another directory (the agent resumed a session somewhere else)."""
        if self.external_id is None:
            return None
        digest = hashlib.sha256(str(self.workspace.root).encode()).hexdigest()[:16]
        return f"{self.external_id}@{digest}"

    def bind(self) -> None:
        """Point the workspace state at this session without asking the server: records queued
        after this belong to it even while the governor cannot be reached."""
        with self.workspace.state() as state:
            if self.external_id is not None \
                    and state.external_id not in (self.external_id, self.own_external_id()):
                state.reset(self.external_id)
            elif state.external_id is None:
                state.reset(f"governor-agent:{uuid.uuid4()}")

    def ensure(self) -> str:
        """The session id, starting or resuming the session first when needed."""
        with self.workspace.state() as state:
            self.bind()
            if state.session_id:
                return state.session_id
            # The external id is on disk before the create, so a create whose answer is lost is
            # repeated with the same id, and the server answers with the same session.
            self.workspace.save(state)
            assert state.external_id is not None
            bound = None if self.snapshot else self.workspace.root
            info = self.client.create_session(bound, external_id=state.external_id)
            if info["workspace"].get("path") != str(bound or "") \
                    and state.external_id == self.external_id:
                # The id names a session bound to another directory, whose files its checks
                # read: this directory gets a session of its own.
                state.external_id = self.own_external_id()
                self.workspace.save(state)
                assert state.external_id is not None
                info = self.client.create_session(bound, external_id=state.external_id)
            if info["workspace"].get("path") != str(bound or ""):
                raise GovernorError(None, "WORKSPACE_MISMATCH", (
                    f"session {info['id']} (external id {state.external_id!r}) is bound to "
                    f"{info['workspace'].get('path') or 'snapshots'}, not to "
                    f"{bound or 'snapshots'}"))
            state.session_id = info["id"]
            state.next_seq = info["next_seq"]
            state.book = TraceBook() if info["next_seq"] == 0 else None
            return info["id"]

    def status(self) -> SessionStatus:
        status = self.client.session(self.ensure())
        self._remember(status["state"], (status["contract"] or {}).get("contractId"))
        return status

    def _remember(self, lifecycle_state: str, contract_id: str | None = None) -> None:
        with self.workspace.state() as state:
            state.contract_state = lifecycle_state
            if contract_id is not None:
                state.contract_id = contract_id

    def _remember_outcome(self, terminal: Mapping[str, Any] | None) -> None:
        if terminal is not None:
            self._remember(str(terminal["status"]), terminal.get("contractId"))
        else:
            self._remember("active")

    # --- recording what the agent does ---------------------------------------------------------

    def queue(self, *records: Record) -> None:
        """Queue records in the workspace without sending them."""
        self.bind()
        with self.workspace.state() as state:
            state.outbox.extend(records)

    def record(self, *records: Record) -> None:
        """Queue records and send everything queued. Records stay queued when the governor
        cannot be reached, and go with the next successful send."""
        with self.workspace.state() as state:
            self.queue(*records)
            self._flush(state)

    def flush(self) -> None:
        with self.workspace.state() as state:
            self._flush(state)

    def post_raw(self, events: list[dict[str, Any]]) -> dict[str, Any]:
        """Append events the caller built. Afterwards the trace book is read back from the log."""
        session_id = self.ensure()
        with self.workspace.state() as state:
            self._flush(state)
            result = self.client.append_events(session_id, events)
            state.next_seq = result["last_seq"] + 1
            state.book = None
        return dict(result)

    def _flush(self, state: LocalState) -> None:
        if not state.outbox and state.pending is None:
            return
        session_id = self.ensure()
        rebuilds = 0
        resynced = False
        while state.pending is not None or state.outbox:
            if state.pending is None:
                if state.book is None:
                    self._resync(state)
                    resynced = True
                assert state.book is not None
                records = state.outbox[:MAX_RECORDS_PER_BATCH]
                events, book = harness.build_events(records, state.book, state.next_seq)
                if not events:
                    del state.outbox[:len(records)]
                    continue
                state.pending = PendingBatch(key=f"governor-agent-{uuid.uuid4()}",
                                             expected_seq=state.next_seq, events=events,
                                             book=book, records=len(records))
                self.workspace.save(state)  # the key must be on disk before the batch leaves
            batch = state.pending
            try:
                result = self.client.append_events(session_id, batch.events,
                                                   expected_seq=batch.expected_seq,
                                                   idempotency_key=batch.key)
            except GovernorError as error:
                rebuilds += 1
                if rebuilds > MAX_REBUILDS:
                    raise
                if error.status == 409 and isinstance(error.details, dict) \
                        and "next_seq" in error.details:
                    # The governor appended events of its own since: rebuild on its next seq.
                    state.next_seq = int(error.details["next_seq"])
                    state.pending = None
                    continue
                if error.code == "INVARIANT" and not resynced:
                    # Our book disagrees with the server's trace: read it back and rebuild once.
                    self._resync(state)
                    resynced = True
                    state.pending = None
                    continue
                raise
            state.next_seq = result["last_seq"] + 1
            state.book = batch.book
            del state.outbox[:batch.records]
            state.pending = None

    def _resync(self, state: LocalState) -> None:
        assert state.session_id is not None
        events = list(self.client.iter_events(state.session_id))
        state.book = TraceBook.from_log(events)
        state.next_seq = events[-1]["seq"] + 1 if events else 0

    # --- contracts -----------------------------------------------------------------------------

    def assess(self, body: Mapping[str, Any], *, kind: Kind = "general") -> AssessResult:
        return self.client.assess(self.ensure(), body, kind=kind)

    def begin(self, body: Mapping[str, Any], *, kind: Kind = "general") -> BeginResult:
        session_id = self.ensure()
        self.flush()  # the contract starts after everything the agent did so far
        answer = self.client.begin(session_id, body, kind=kind, tree=self._tree())
        if answer["status"] == "active":
            self._remember("active", answer.get("contract", {}).get("contractId"))
        elif answer["status"] == "review-pending":
            self._remember("review-pending")
        return answer

    def review_polls(self, limit: float) -> Iterator[Review | None]:
        """Yields the latest review after each long poll until it is decided (an approved intent
        is followed by the evidence stage, still pending) or `limit` seconds passed."""
        session_id = self.ensure()
        for wait in _waits(limit):
            review = self.client.review(session_id, wait=wait)["review"]
            yield review
            if review is None or review["status"] != "pending":
                return

    def verify(self) -> Outcome:
        """Evaluate the contract's checks now. Raises `ReviewPending` (with the review's URL)
        while the contract is a proposal waiting for a person."""
        session_id = self.ensure()
        self.flush()
        with self._pending_review_explained():
            outcome = self.client.verify(session_id, tree=self._tree())
        self._remember_outcome(outcome["terminal"])
        return outcome

    @contextlib.contextmanager
    def _pending_review_explained(self) -> Iterator[None]:
        """The server refuses verify and abstain with a 409 while a proposal waits for review
        (its message names the review page); the agent gets it as `ReviewPending`, whose
        `review_url` and `stage` a caller can act on."""
        try:
            yield
        except GovernorError as error:
            if error.status != 409:
                raise
            try:
                status = self.status()
            except GovernorError:
                raise error from None
            review = status["review"]
            if status["state"] != "review-pending" or review is None:
                raise
            raise ReviewPending(self.client.absolute(review["review_url"]),
                                review["stage"]) from error

    def turn_stop(self) -> TurnStop:
        session_id = self.ensure()
        self.flush()
        answer = self.client.turn_stop(session_id, tree=self._tree())
        if "terminal" in answer:
            self._remember_outcome(answer["terminal"])
        elif answer["action"] == "steer":
            self._remember("active")
        else:
            # allow: idle, review pending or already terminal. Which one is only worth knowing
            # for later stops; the answer itself must not be lost over it.
            with contextlib.suppress(GovernorError):
                self.status()
        return answer

    def abstain(self, reason: str) -> Outcome:
        """Raises `ReviewPending` while the contract waits for review (withdraw it instead)."""
        with self._pending_review_explained():
            outcome = self.client.abstain(self.ensure(), reason)
        self._remember_outcome(outcome["terminal"])
        return outcome

    def withdraw(self) -> dict[str, Any]:
        answer = self.client.withdraw_review(self.ensure())
        self._remember("idle")
        return dict(answer)

    def request_verification(self, profile: str) -> RunQueued:
        session_id = self.ensure()
        self.flush()  # the run must come after the edits it verifies
        return self.client.request_verification(session_id, profile, tree=self._tree())

    def run_polls(self, run_id: str, limit: float) -> Iterator[VerificationRun]:
        """Yields the run after each long poll until it finished or `limit` seconds passed."""
        for wait in _waits(limit):
            run = self.client.verification(run_id, wait=wait)
            yield run
            if run["state"] == "finished":
                return


def _waits(limit: float) -> Iterator[int]:
    """Long-poll lengths (each ≤ the server's maximum) until `limit` seconds have passed; at
    least one poll, which answers at once when `limit` is 0."""
    deadline = time.monotonic() + limit
    while True:
        yield max(0, min(math.ceil(deadline - time.monotonic()), MAX_WAIT_SECONDS))
        # A poll can answer early (the intent stage was decided and the evidence stage opened):
        # what is left of `limit` is measured, not assumed from the length asked for.
        if time.monotonic() >= deadline:
            return


def review_outcome(agent: AgentSession, status: SessionStatus, waited: float) -> dict[str, Any]:
    """What waiting for a review came to: active (with the contract), still pending, or the
    reviewer's decision (with the feedback), and what to do next. State and review come from
    one read of the session: the last poll's review may be older than the state (the evidence
    stage can be approved between the two requests)."""
    review = status["review"]
    answer: dict[str, Any] = {"status": status["state"], "review": review,
                              "waited_seconds": round(waited, 1)}
    revised = review is not None and review["stage"] == "delivery" \
        and review["status"] == "revision-requested" and status["state"] == "active"
    if status["state"] == "active":
        answer["contract"] = status["contract"]
    elif review is not None and review["stage"] == "delivery":
        answer["terminal"] = status["terminal"]  # a person's decision ended the contract
    elif review is not None and status["state"] != "review-pending":
        answer["status"] = review["status"]
    if review is not None:
        review["review_url"] = agent.client.absolute(review["review_url"])
    answer["next"] = NEXT["delivery-revision"] if revised else NEXT.get(answer["status"], "")
    return answer
