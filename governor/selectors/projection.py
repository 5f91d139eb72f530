"""The session's projection (`SessionState`) against a fold over its log (docs/architecture.md,
"The log and its projection"): they must always be equal."""

from __future__ import annotations

from typing import Any

from governor.domain import harness, lifecycle
from governor.domain.chain import ENVELOPE_TO_META, GENESIS
from governor.models import Event, Origin, Session, SessionState


def _envelope(event: Event) -> dict[str, Any]:
    envelope: dict[str, Any] = {"type": event.type, "time": event.time, "data": event.data}
    for wire, stored in ENVELOPE_TO_META:
        if event.meta and stored in event.meta:
            envelope[wire] = event.meta[stored]
    return envelope


def projection_from_log(session: Session) -> dict[str, Any]:
    """The projection recomputed from the events alone."""
    trace = harness.TraceState()
    folded = lifecycle.initial_state()
    head, next_seq, last_mutation = GENESIS, 0, -1
    events = Event.objects.filter(session=session).order_by("seq")
    for event in events.iterator(chunk_size=2000):
        imported = bool(event.meta and event.meta.get("imported"))
        if event.origin == Origin.AGENT:
            trace.count = event.seq  # governor events take seqs but leave the trace alone
            harness.validate_event(trace, _envelope(event), index=event.seq,
                                   allow_reliability=imported,
                                   extra_types=frozenset(session.project.extra_event_types))
            if harness.is_workspace_mutation(event.type, event.tool_name):
                last_mutation = event.seq
        if event.type.startswith("reliability/"):
            folded = lifecycle.apply(folded, {"seq": event.seq, "type": event.type,
                                              "data": event.data, "imported": imported})
        head, next_seq = event.hash, event.seq + 1
    return {"next_seq": next_seq, "head": head, "trace": trace.to_json(), "lifecycle": folded,
            "last_mutation_seq": last_mutation}


def stored_projection(state: SessionState) -> dict[str, Any]:
    return {"next_seq": state.next_seq, "head": state.head, "trace": state.trace,
            "lifecycle": state.lifecycle or lifecycle.initial_state(),
            "last_mutation_seq": state.last_mutation_seq}


def projection_differences(session: Session) -> list[str]:
    """Names of the projection fields that differ from the fold (empty when they agree)."""
    try:
        expected = projection_from_log(session)
    except (harness.InvariantError, lifecycle.LifecycleError) as exc:
        # e.g. an operator unregistered an event type this log uses: say so, per session.
        return [f"log (no longer folds: {exc})"]
    actual = stored_projection(SessionState.objects.get(session=session))
    return [name for name in expected if expected[name] != actual[name]]
