"""Appending to a session log: validation, seq assignment, hash chain and projection, atomically."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

from governor.domain import harness, lifecycle
from governor.domain.canonical import canonical_bytes, sha256_hex
from governor.domain.chain import ENVELOPE_TO_META, event_hash
from governor.lib.clock import now_ms
from governor.lib.errors import Conflict
from governor.lib.notify import announce_on_commit, session_topic
from governor.models import Event, EventBatch, Origin, Session, SessionState
from governor.selectors.sessions import lifecycle_of
from governor.services.facts import facts_record


@dataclass(frozen=True)
class AppendResult:
    first_seq: int
    last_seq: int
    head: str
    replayed: bool = False

    def as_dict(self) -> dict[str, object]:
        return {"first_seq": self.first_seq, "last_seq": self.last_seq, "head": self.head}


def _state_locked(session: Session, *, with_trace: bool = False) -> SessionState:
    """The session's projection row, locked for the rest of the transaction. Appends are
    serialised by this lock. Governor events never read the Harness trace (it grows with the
    log), so it is only loaded for agent batches."""
    rows = SessionState.objects.select_for_update()
    if not with_trace:
        rows = rows.defer("trace")
    return rows.get(session=session)


@contextmanager
def session_locked(session: Session) -> Iterator[SessionState]:
    """A transaction holding the session's projection row locked, for writing governor events
    (`governor_event_append`). Leaving it normally saves the projection they advanced (after
    an early return too); an exception rolls everything back."""
    with transaction.atomic():
        state = _state_locked(session)
        next_seq = state.next_seq
        yield state
        if state.next_seq != next_seq:
            state.save(update_fields=["next_seq", "head", "lifecycle", "updated_at"])
            announce_on_commit(session_topic(session.pk))


def _index_fields(envelope: dict[str, Any]) -> dict[str, Any]:
    kind = envelope["type"]
    if kind == "tool/call":
        info = harness.tool_call_info(envelope)
        if info is not None:
            call_id, name, _arguments = info
            return {"call_id": call_id, "tool_name": name,
                    "governor_tool": harness.is_governor_tool(name)}
    elif kind == "tool/code-dispatch-start":
        name = envelope["data"].get("name")
        if isinstance(name, str):
            return {"tool_name": name, "governor_tool": harness.is_governor_tool(name)}
    elif kind == "tool/result":
        result = harness.tool_result_info(envelope)
        if result is not None:
            call_id, is_error = result
            return {"call_id": call_id, "is_error": is_error}
    return {}


COLUMNS = ("session_id", "seq", "type", "time", "origin", "data", "meta", "raw", "prev_hash",
           "hash", "tool_name", "call_id", "is_error", "governor_tool")
_dump = Event._meta.get_field("data").get_prep_value


def _chain_rows(
    session: Session,
    state: SessionState,
    envelopes: list[dict[str, Any]],
    raws: Sequence[str | None],
    *,
    origin: str,
    imported: bool,
) -> list[dict[str, Any]]:
    """Seqs, hashes and index fields for new events; advances `state` (not yet saved)."""
    session_id = str(session.id)
    seq = state.next_seq
    prev = state.head
    rows = []
    for envelope, raw in zip(envelopes, raws, strict=True):
        meta = {name: envelope[key] for key, name in ENVELOPE_TO_META if key in envelope}
        if imported:
            meta["imported"] = True
        kind = envelope["type"]
        time = envelope.get("time", 0)
        digest = event_hash(session=session_id, seq=seq, type=kind, time=time, origin=origin,
                            data=envelope["data"], prev=prev, meta=meta or None)
        fields = _index_fields(envelope) if origin == Origin.AGENT else {}
        if origin == Origin.AGENT and harness.is_workspace_mutation(kind, fields.get("tool_name")):
            state.last_mutation_seq = seq
        rows.append({"session_id": session.pk, "seq": seq, "type": kind, "time": time,
                     "origin": origin, "data": envelope["data"], "meta": meta or None,
                     "raw": raw, "prev_hash": prev, "hash": digest, **fields})
        prev = digest
        seq += 1
    state.next_seq = seq
    state.head = prev
    return rows


def _insert(rows: list[dict[str, Any]]) -> None:
    """One `executemany` of plain column values: a third of `bulk_create`'s cost per event
    (benchmark B2), and the model's own validation has already happened in the domain."""
    table = Event._meta.db_table
    session_key = Session._meta.pk.get_db_prep_value(rows[0]["session_id"], connection)
    placeholders = ", ".join(["%s"] * len(COLUMNS))
    sql = f"INSERT INTO {table} ({', '.join(COLUMNS)}) VALUES ({placeholders})"  # noqa: S608
    values = [
        (session_key, row["seq"], row["type"], row["time"], row["origin"],
         _dump(row["data"]), _dump(row["meta"]), row["raw"], row["prev_hash"], row["hash"],
         row.get("tool_name"), row.get("call_id"), row.get("is_error"),
         row.get("governor_tool"))
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(sql, values)


def events_append(
    *,
    session: Session,
    envelopes: list[dict[str, Any]],
    raws: Sequence[str | None] | None = None,
    expected_seq: int | None = None,
    idempotency_key: str | None = None,
    extra_types: frozenset[str] = frozenset(),
    imported: bool = False,
) -> AppendResult:
    """Append an agent batch all-or-nothing.

    A batch is identified by the `Idempotency-Key` the client sent or, failing that, by its
    `expected_seq`: the same batch sent again under the same key returns the first answer and
    stores nothing; a different batch under a used key is a conflict.
    """
    raws = raws if raws is not None else [None] * len(envelopes)
    key = idempotency_key or (f"expected-seq:{expected_seq}" if expected_seq is not None else None)
    digest = sha256_hex(canonical_bytes(envelopes)) if key else ""
    with transaction.atomic():
        state = _state_locked(session, with_trace=True)
        if key:
            previous = EventBatch.objects.filter(session=session, key=key).first()
            if previous is not None:
                if previous.digest != digest:
                    raise Conflict(
                        f"batch key {key!r} was already used for a different batch",
                        details={"key": key, "first_seq": previous.first_seq},
                    )
                return AppendResult(previous.first_seq, previous.last_seq, previous.head, True)
        if expected_seq is not None and expected_seq != state.next_seq:
            raise Conflict(
                f"expected_seq is {expected_seq} but the next seq is {state.next_seq}",
                details={"expected_seq": expected_seq, "next_seq": state.next_seq},
            )
        trace = harness.TraceState.from_json(state.trace)
        trace.count = state.next_seq  # governor events share the seq space and skip the trace
        trace = harness.validate_batch(
            trace,
            envelopes,
            allow_reliability=imported,
            extra_types=extra_types,
        )
        first_seq = state.next_seq
        rows = _chain_rows(session, state, envelopes, raws, origin=Origin.AGENT,
                           imported=imported)
        _insert(rows)
        if imported:
            state.lifecycle = _fold_governor_events(state, rows)
        state.trace = trace.to_json()
        state.save(update_fields=["next_seq", "head", "trace", "lifecycle", "last_mutation_seq",
                                  "updated_at"])
        announce_on_commit(session_topic(session.pk))
        result = AppendResult(first_seq, state.next_seq - 1, state.head)
        if key:
            EventBatch.objects.create(session=session, key=key, digest=digest,
                                      first_seq=result.first_seq, last_seq=result.last_seq,
                                      head=result.head)
        return result


# An import's events are written this many to a transaction: on SQLite each holds the one write
# lock for some tens of milliseconds, and the next chunk's rows (hashes, index fields) are made
# with the lock released, so other sessions' writes get in between (`events_import`).
IMPORT_CHUNK = 1000


def events_import(*, session: Session, envelopes: list[dict[str, Any]],
                  state: SessionState) -> None:
    """Write the events of an import, already validated whole (`harness.validate_log`), into
    `session`, which nobody else reads or writes yet (`Session.importing`): IMPORT_CHUNK events
    to a transaction, each chunk's rows made before its transaction begins. Advances `state`
    (new, not saved) as `events_append` would: seqs, head, the last mutation, the lifecycle of
    the imported governor events. A failure leaves the chunks already committed: the caller
    deletes them with the session."""
    for start in range(0, len(envelopes), IMPORT_CHUNK):
        chunk = envelopes[start:start + IMPORT_CHUNK]
        rows = _chain_rows(session, state, chunk, [None] * len(chunk), origin=Origin.AGENT,
                           imported=True)
        state.lifecycle = _fold_governor_events(state, rows)
        with transaction.atomic():
            _insert(rows)


def events_discard_import(session: Session) -> None:
    """Delete the events of an import that did not finish, IMPORT_CHUNK to a transaction as
    they were written. The database refuses to delete any other session's events."""
    last = Event.objects.filter(session=session).order_by("-seq").values_list(
        "seq", flat=True).first()
    for start in range(0, -1 if last is None else last + 1, IMPORT_CHUNK):
        with transaction.atomic():
            rows = Event.objects.filter(session=session, seq__gte=start,
                                        seq__lt=start + IMPORT_CHUNK)
            rows._raw_delete(rows.db)


def _fold_governor_events(
    state: SessionState, rows: list[dict[str, Any]]
) -> lifecycle.LifecycleState:
    folded = lifecycle_of(state)
    for row in rows:
        if row["type"].startswith("reliability/"):
            folded = lifecycle.apply(folded, {"seq": row["seq"], "type": row["type"],
                                              "data": row["data"], "imported": True})
    return folded


def governor_event_append(
    *, session: Session, state: SessionState, type: str, data: Mapping[str, Any]
) -> Event:
    """Append one governor event inside `session_locked`, which saves the projection; the
    lifecycle is advanced here. The session's first governor event is preceded by its
    reference (rules §17.1, taken when the session was created), so every verdict in the log
    comes after the tree it was judged against."""
    if session.reference is not None and lifecycle.reference_of(state.lifecycle) is None:
        _governor_event_write(session, state, lifecycle.REFERENCE, session.reference)
    return _governor_event_write(session, state, type, data)


def _governor_event_write(session: Session, state: SessionState, type: str,
                          data: Mapping[str, Any]) -> Event:
    [fields] = _chain_rows(session, state, [{"type": type, "time": now_ms(), "data": data}],
                           [None], origin=Origin.GOVERNOR, imported=False)
    row = Event(**fields)
    row.save()
    state.lifecycle = lifecycle.apply(
        lifecycle_of(state), {"seq": row.seq, "type": row.type, "data": row.data})
    terminal = state.lifecycle["terminal"]
    facts_record(session=session, event=row, attempts=len(state.lifecycle["attempts"]),
                 terminal_seq=None if terminal is None else terminal["seq"])
    return row
