"""The small state the agent side keeps in its workspace: `.governor/session.json`.

It names the governor session the workspace is working in and holds what must survive between
short-lived processes (hook invocations, CLI calls) and the long-lived MCP server: the trace
book, the next seq, events not yet acknowledged by the server, and the last contract state the
governor reported — which decides what a stop does when the governor cannot be reached.

Every read-modify-write happens under an exclusive `flock` on `.governor/lock`, re-entrant within
a process, and the file is replaced atomically. Every file there is opened through `statedir`,
never through a symlink: the workspace may hold a `.governor/` its writer planted.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from governor_client.errors import StateUnusable
from governor_client.harness import Record, TraceBook
from governor_client.statedir import StateDir, open_state_dir

STATE_DIR = ".governor"
STATE_FILE = "session.json"
LOCK_FILE = "lock"
IGNORE_FILE = ".gitignore"
# Lifecycle states in which a stop must not pass unverified (rules §6-7): a contract is
# active, one is under review and may have become active since we last heard, or its delivery
# is under review (the server answers whether the stop may pass).
CONTRACT_STATES = frozenset({"active", "review-pending", "delivery-pending"})


@dataclass
class PendingBatch:
    """A batch sent (or about to be sent) and not yet acknowledged: resent under the same key,
    so a lost answer never stores it twice."""

    key: str
    expected_seq: int
    events: list[dict[str, Any]]
    book: TraceBook
    records: int  # how many outbox records it covers

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "expected_seq": self.expected_seq, "events": self.events,
                "book": self.book.to_json(), "records": self.records}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> PendingBatch:
        return cls(key=value["key"], expected_seq=value["expected_seq"], events=value["events"],
                   book=TraceBook.from_json(value["book"]), records=value["records"])


@dataclass
class LocalState:
    session_id: str | None = None
    external_id: str | None = None
    next_seq: int = 0
    book: TraceBook | None = None  # None: unknown, read it back from the server's log
    outbox: list[Record] = field(default_factory=list)
    pending: PendingBatch | None = None
    contract_state: str = "idle"  # the last lifecycle state the governor reported
    contract_id: str | None = None
    model: str | None = None  # the agent's model name, when a hook told us
    unasked_stops: int = 0  # stops in a row at which the governor could not be asked

    def reset(self, external_id: str) -> None:
        """Another session takes the workspace over: nothing of the old one carries over."""
        fresh = LocalState(external_id=external_id, model=self.model)
        for item in fields(self):
            setattr(self, item.name, getattr(fresh, item.name))

    @property
    def contract_known(self) -> bool:
        return self.contract_state in CONTRACT_STATES

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1, "session_id": self.session_id, "external_id": self.external_id,
            "next_seq": self.next_seq, "book": self.book.to_json() if self.book else None,
            "outbox": list(self.outbox),
            "pending": self.pending.to_json() if self.pending else None,
            "contract_state": self.contract_state, "contract_id": self.contract_id,
            "model": self.model, "unasked_stops": self.unasked_stops,
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> LocalState:
        return cls(
            session_id=value.get("session_id"), external_id=value.get("external_id"),
            next_seq=int(value.get("next_seq", 0)),
            book=TraceBook.from_json(value["book"]) if value.get("book") else None,
            outbox=list(value.get("outbox") or []),
            pending=PendingBatch.from_json(value["pending"]) if value.get("pending") else None,
            contract_state=str(value.get("contract_state", "idle")),
            contract_id=value.get("contract_id"), model=value.get("model"),
            unasked_stops=int(value.get("unasked_stops", 0)),
        )


class Workspace:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        self.file = self.root / STATE_DIR / STATE_FILE  # for messages
        self._mutex = threading.RLock()
        self._held: LocalState | None = None
        self._dir: StateDir | None = None  # `.governor/` while the state is held
        self._depth = 0

    def peek(self) -> LocalState:
        """The state as last saved, without locking (for decisions that must not wait)."""
        try:
            with open_state_dir(self.root, STATE_DIR, create=False) as directory:
                return self._load(directory)
        except FileNotFoundError:
            return LocalState()
        except (OSError, StateUnusable) as exc:
            print(f"governor-agent: ignoring unreadable {self.file}: {exc}", file=sys.stderr)
            return LocalState()

    @contextmanager
    def state(self) -> Iterator[LocalState]:
        """The state, locked for a read-modify-write; saved when the block ends (also when it
        raises: what was learnt from the server before the error must not be forgotten)."""
        with self._mutex:
            if self._held is not None:
                self._depth += 1
                try:
                    yield self._held
                finally:
                    self._depth -= 1
                return
            with self.directory() as directory, \
                    os.fdopen(directory.open(LOCK_FILE, os.O_RDWR | os.O_CREAT)) as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self._dir = directory
                try:
                    self._held = self._load(directory)
                    try:
                        yield self._held
                    finally:
                        self.save(self._held)
                finally:
                    self._held = None
                    self._dir = None
                    fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def directory(self) -> Iterator[StateDir]:
        """`.governor/` in the workspace, which must exist: nothing is ever created outside it
        (not the workspace itself, nor its parents, nor wherever a symlinked `.governor` leads);
        made on first use, with a `.gitignore` that keeps it out of the agent's repository."""
        if not self.root.is_dir():
            raise StateUnusable(f"the workspace {self.root} is not an existing directory")
        with contextlib.ExitStack() as opened:
            try:
                directory = opened.enter_context(
                    open_state_dir(self.root, STATE_DIR, create=True))
                directory.create(IGNORE_FILE, "*\n")
            except OSError as exc:
                raise StateUnusable(f"cannot create {self.root / STATE_DIR}: "
                                    f"{exc.strerror}") from None
            yield directory

    def _load(self, directory: StateDir) -> LocalState:
        try:
            text = directory.read_text(STATE_FILE)
            return LocalState() if text is None else LocalState.from_json(json.loads(text))
        except (OSError, ValueError, KeyError, TypeError, StateUnusable) as exc:
            print(f"governor-agent: ignoring unreadable {self.file}: {exc}", file=sys.stderr)
            return LocalState()

    def save(self, state: LocalState) -> None:
        """Write `state` now (the caller holds the lock)."""
        assert self._dir is not None, "save() is called inside state() only"
        self._dir.replace(STATE_FILE, json.dumps(state.to_json(), ensure_ascii=False, indent=1))
