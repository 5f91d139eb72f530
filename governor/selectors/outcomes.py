"""Reads of outcome contracts: the agent's view of the profiles (and of the one a begin binds),
the status, what a certified delivery's answer adds, the timeline panel."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from governor.domain import lifecycle
from governor.domain.canonical import JSONObject
from governor.domain.outcome_chart import outcome_charts
from governor.domain.outcomes import agent_view, status_words, summary_words
from governor.lib.clock import now_ms
from governor.lib.errors import Conflict, Invalid
from governor.lib.live import version_of
from governor.models import Event, Project, Session, SessionState
from verification.models import OutcomeContract, OutcomeProfile

BOUND, OBSERVING, DROPPED = "bound", "observing", "dropped"
LOST_REQUEST_MS = 60_000  # after the probe's time limit: a requested observation never taken


def outcome_profiles_view(project: Project) -> list[JSONObject]:
    """Each outcome profile as an agent sees it (never argv, env or network), with the
    sentence a reviewer reads."""
    views = []
    for profile in OutcomeProfile.objects.filter(project=project).order_by("profile_id"):
        view = agent_view(profile.definition(), profile.description, profile.receipt)
        views.append({**view, "summary": summary_words(view)})
    return views


def outcome_binding(project: Project, name: Any) -> dict[str, Any]:
    """The agent's view of the profile `name` as a begin binds it, or a refusal naming it."""
    profile = (OutcomeProfile.objects.filter(project=project, profile_id=name).first()
               if type(name) is str else None)
    if profile is None:
        known = sorted(OutcomeProfile.objects.filter(project=project)
                       .values_list("profile_id", flat=True))
        raise Invalid(f"outcome_profile: {name!r} is not an outcome profile of this project "
                      f"(known: {', '.join(known) or 'none'})",
                      details=[{"path": "outcome_profile",
                                "message": f"unknown outcome profile {name!r}"}])
    return agent_view(profile.definition(), profile.description, profile.receipt)


def outcome_document(session: Session, row: OutcomeContract) -> dict[str, Any]:
    for data in (Event.objects.filter(session=session, type=lifecycle.OUTCOME_CONTRACT)
                 .order_by("-seq").values_list("data", flat=True)):
        if data.get("outcomeContractId") == row.pk:
            return dict(data)
    raise Conflict(f"outcome contract {row.pk} has no record in the log")


def outcome_observations(session: Session, outcome_id: str) -> list[dict[str, Any]]:
    rows = (Event.objects.filter(session=session, type=lifecycle.OUTCOME_OBSERVATION)
            .order_by("seq").values_list("data", flat=True))
    return [data for data in rows if data.get("outcomeContractId") == outcome_id]


def outcome_status(*, session: Session) -> dict[str, Any]:
    """`{status, contract, observations, terminal?}` of the session's latest outcome contract:
    status `none` without one, `bound` until its delivery is certified."""
    row = (OutcomeContract.objects.filter(session=session).order_by("-created_at").first())
    if row is None:
        return {"status": "none", "contract": None, "observations": []}
    if row.status in (BOUND, DROPPED):
        return {"status": row.status, "contract": None, "observations": [],
                "profile": row.binding}
    contract = outcome_document(session, row)
    answer: dict[str, Any] = {"status": row.status, "contract": contract,
                              "observations": outcome_observations(session, row.pk)}
    terminal = (Event.objects.filter(session=session, type=lifecycle.OUTCOME_TERMINAL)
                .order_by("-seq").values_list("data", flat=True).first())
    if terminal and terminal.get("outcomeContractId") == row.pk:
        answer["terminal"] = terminal
    answer["message"] = status_words(row.status, contract)
    requested = outcome_requested_at(row)
    if requested is not None and not _answered(answer["observations"], requested):
        answer["pending"] = {"requestedAt": requested}
    return answer


def _answered(observations: list[dict[str, Any]], requested: int) -> bool:
    """Whether an observation asked for at `requested` is among those read. The row is read
    before the log, so a worker committing between the two reads shows its observation while
    the row still says pending: the log decides."""
    return any(o["trigger"] != "schedule" and o["observedAt"] >= requested
               for o in observations)


def outcome_version(session: Session) -> str:
    """The version of what the outcome panel shows: the events appended, the outcome's status
    and the observation on its way."""
    next_seq = SessionState.objects.filter(session=session).values_list("next_seq",
                                                                        flat=True).get()
    row = (OutcomeContract.objects.filter(session=session).order_by("-created_at").first())
    return version_of(next_seq, row and row.status, row and outcome_requested_at(row))


def outcome_requested_at(row: OutcomeContract, now: int | None = None) -> int | None:
    """When the observation asked for (by the agent or a reviewer) that a worker has not
    recorded yet was asked for; None when there is none, or when it is lost (its task not run
    within the probe's time limit and a minute more)."""
    requested = row.requested_at_ms
    if requested is None or row.status != OBSERVING:
        return None
    at = now_ms() if now is None else now
    lost_at = requested + int(row.definition.get("timeoutMs", 0)) + LOST_REQUEST_MS
    return requested if at < lost_at else None


def _utc(ms: int) -> tuple[str, str]:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S"), moment.isoformat()


def outcome_panel(session: Session) -> dict[str, object] | None:
    """The timeline's outcome panel: the status, the sentence, the window, a chart per metric
    and the observations (None when the session watches no outcome)."""
    status = outcome_status(session=session)
    if status["status"] == "none":
        return None
    contract = status["contract"]
    view = contract["profile"] if contract else status["profile"]
    panel: dict[str, object] = {
        "status": status["status"], "summary": summary_words(view),
        "attribution": view["attribution"], "causal": view["causalClaimPermitted"],
        "contract": contract, "terminal": status.get("terminal"), "charts": [],
        "observations": [], "requested": None,
    }
    if "pending" in status:
        panel["requested"] = _utc(status["pending"]["requestedAt"])[0]
    if contract:
        opens, deadline = _utc(contract["notBeforeAt"]), _utc(contract["deadlineAt"])
        panel["window"] = {"opens": opens[0], "opens_iso": opens[1], "deadline": deadline[0],
                           "deadline_iso": deadline[1]}
        panel["charts"] = outcome_charts(contract, status["observations"])
        panel["observations"] = [
            {**row, "observed": _utc(row["observedAt"])[0],
             "values": sorted(((row.get("result") or {}).get("metrics") or {}).items())}
            for row in status["observations"]]
    return panel


def outcome_words(session: Session, terminal: Any) -> str:
    """What a certified delivery's answer adds: `delivery-certified` with the outcome status,
    and not to claim the business goal ("" when the contract watches no outcome)."""
    if not isinstance(terminal, dict) or terminal.get("status") != "certified":
        return ""
    row = OutcomeContract.objects.filter(
        session=session, delivery_contract_id=terminal.get("contractId")).first()
    if row is None or row.status in (BOUND, DROPPED):
        return ""
    return status_words(row.status, outcome_document(session, row))
