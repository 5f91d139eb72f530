"""Reported outcomes (issue 31): a reviewer says how an ended contract really turned out, as a
hash-chained `reliability/outcome-report` event (governor.domain.reliability)."""

from __future__ import annotations

from django.contrib.auth.models import User

from governor.domain import reliability
from governor.lib.errors import Conflict, Invalid
from governor.models import Event, Session
from governor.selectors.sessions import lifecycle_of
from governor.services.events import governor_event_append, session_locked


def outcome_report(*, session: Session, user: User, kind: object, reason: object,
                   check: object = None) -> reliability.OutcomeReport:
    """Record `user`'s report on the session's ended contract; the event's data. Refused, with
    nothing stored, naming the field: a session whose contract has not ended, an imported
    terminal, a kind that does not fit the terminal, a missing reason, an unknown check, or
    the same report by the same reviewer twice. The caller has checked that `user` reviews the
    session's project."""
    with session_locked(session) as state:
        folded = lifecycle_of(state)
        contract, terminal = folded["contract"], folded["terminal"]
        if contract is None or terminal is None:
            raise Invalid("the session has not ended: a report is about a terminal",
                          details=[{"path": "session", "message": "has no ended contract "
                                    "(certified, exhausted or abstained)"}])
        if terminal["imported"]:
            raise Invalid("the terminal was imported: this server did not decide it",
                          details=[{"path": "session", "message": "its terminal was imported "
                                    "from another log; only this server's can be reported"}])
        try:
            payload = reliability.report_payload(
                contract=contract["data"], terminal=terminal["data"], kind=kind,
                reason=reason, check=check or None, user_id=user.pk)
        except reliability.ReportInvalid as exc:
            raise Invalid(str(exc), details=exc.errors) from None
        for earlier in Event.objects.filter(session=session,
                                            type=reliability.OUTCOME_REPORT).values_list(
                                                "data", flat=True):
            if (earlier.get("terminalReceipt"), earlier.get("kind"), earlier.get("check"),
                    earlier.get("reportedBy")) == (payload["terminalReceipt"], payload["kind"],
                                                   payload.get("check"), payload["reportedBy"]):
                raise Conflict("you already reported this", details=[
                    {"path": "kind", "message": f"you already reported "
                     f"\"{reliability.REPORT_KINDS[payload['kind']][1]}\" for this contract"}])
        governor_event_append(session=session, state=state, type=reliability.OUTCOME_REPORT,
                              data=payload)
    return payload
