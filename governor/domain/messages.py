"""rules §7: the exact texts the agent receives (repair, terminals, review-pending, imported).
What decides is `governor/domain/attempts.py`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

from governor.domain.changes import PROTECTED_CHECK_ID
from governor.domain.tamper import TAMPER_CHECK_KIND

IMPORTED = ("this session was imported: its log is history, shown and folded but never "
            "evaluated, attested or continued by this server")


Result = TypeVar("Result", bound=Mapping[str, object])


def failed(results: Sequence[Result]) -> list[Result]:
    """The results that did not pass (`passed` is exactly true for a pass)."""
    return [result for result in results if result["passed"] is not True]


def _failure_list(checks: Sequence[Mapping[str, object]]) -> str:
    return "\n".join(f"- {r['id']} ({r['kind']}): {r['evidence']}" for r in checks)


PROTECTED_STEER = (
    "The protected paths above changed since the contract started: restore each exactly as it "
    "was (never edit tests or what configures them to make a check pass), or abstain "
    "(reliability_abstain) if the task cannot be done without changing them — only a person's "
    "review can open a protected path.")
TRUSTED_RUN_STEER = (
    "A trusted run counts only if it started after your last change: ask for one with "
    "reliability_code_verify (or `governor-agent run PROFILE`) once the work is done.")

OPERATOR_STEER = (
    "A trusted run above could not run for a reason only the operator can fix (its kind and "
    "reason are named above): it is not a fault of your work, and asking for another run does "
    "not help until the operator has fixed it. Tell the user exactly what the operator must fix, "
    "and stop; or abstain (reliability_abstain) if the task cannot wait.")


TAMPER_STEER = (
    "The tamper scan found code in the changed files that reaches into the verification "
    "machinery (each finding names path:line, the rule and why): remove it — never make a check "
    "pass by detecting, patching or ending the test runner — or abstain (reliability_abstain). "
    "Where the project has a person review deliveries, a finding the task truly needs can only "
    "be accepted by that person.")


def tamper_only(results: Sequence[Mapping[str, object]]) -> bool:
    """Every failed check is the tamper scan's, failed by findings a person could accept
    (rules §17.5), and at least one failed."""
    failures = failed(results)
    return bool(failures) and all(result["kind"] == TAMPER_CHECK_KIND and result.get("findings")
                                  for result in failures)


def budget_words(used: int, maximum: int, *, delivery_review: bool = False) -> str:
    """How much of the repair budget is left after `used` of `maximum` attempts, warning before
    the last one (issue 40). With `delivery_review`, a person's revision request also ends the
    contract once no attempt is left."""
    left = max(maximum - used, 0)
    if left == 0:
        return f"{used} of {maximum} attempts used: none remains, the repair budget is spent."
    if left > 1:
        return f"{used} of {maximum} attempts used: {left} remain."
    ends = ("if it fails, or a person asks for changes to what it delivers, the contract ends "
            "exhausted" if delivery_review else "if it fails, the contract ends exhausted")
    return f"{used} of {maximum} attempts used: 1 remains, and it is the last — {ends}."


def repair_message(
    results: Sequence[Mapping[str, object]], attempt_number: int, max_attempts: int, *,
    delivery_review: bool = False,
) -> str:
    failed_checks = failed(results)
    steers = []
    if any(check.get("id") == PROTECTED_CHECK_ID for check in failed_checks):
        steers.append(PROTECTED_STEER)
    code = [check for check in failed_checks if check.get("kind") == "code_verification_succeeded"]
    if any(check.get("operatorFailure") for check in code):
        steers.append(OPERATOR_STEER)
    if any(not check.get("operatorFailure") for check in code):
        steers.append(TRUSTED_RUN_STEER)
    if any(check.get("kind") == TAMPER_CHECK_KIND for check in failed_checks):
        steers.append(TAMPER_STEER)
    operator_only = all(check.get("operatorFailure") for check in failed_checks)
    return (
        f"Completion is not verified yet: attempt {attempt_number}/{max_attempts} failed "
        f"{len(failed_checks)} of {len(results)} checks.\n"
        f"Failed checks:\n{_failure_list(failed_checks)}\n"
        + "".join(f"{steer}\n" for steer in steers)
        + budget_words(attempt_number, max_attempts, delivery_review=delivery_review) + "\n"
        + ("" if operator_only else
           "Repair only these failed checks; leave what already passes alone. Do not repeat "
           "actions whose outcome is unknown — inspect the current state first instead. Then "
           "verify again.")
    ).rstrip("\n")


def certified_message(terminal: Mapping[str, object]) -> str:
    return (
        "The completion contract is certified: every check passed. Report the result to the user "
        "truthfully — say what was verified and nothing more — and cite the terminal receipt "
        f"{terminal['receipt']}."
    )


def exhausted_message(terminal: Mapping[str, object],
                      results: Sequence[Mapping[str, object]]) -> str:
    failed_checks = failed(results)
    return (
        "The completion contract is exhausted: the last allowed attempt still failed. Do not "
        "claim the task is complete. Explain to the user which checks failed and why:\n"
        f"{_failure_list(failed_checks)}\n"
        f"Cite the terminal receipt {terminal['receipt']}."
    )


def abstained_message(terminal: Mapping[str, object]) -> str:
    return (
        f"You abstained: {terminal['reason']}\n"
        "Do not claim the task is complete. Tell the user why you stopped and cite the terminal "
        f"receipt {terminal['receipt']}."
    )


def terminal_message(terminal: Mapping[str, object],
                     results: Sequence[Mapping[str, object]] = ()) -> str:
    """The text for a terminal; `results` are the final attempt's results (for exhausted)."""
    status = terminal["status"]
    if status == "certified":
        return certified_message(terminal)
    if status == "exhausted":
        return exhausted_message(terminal, results)
    if status == "abstained":
        return abstained_message(terminal)
    raise ValueError(f"terminal status {status!r} is unknown")


REVIEW_PENDING_ALLOW_MESSAGE = (
    "A contract review is still pending, so no completion contract is active yet. You may stop, "
    "but completion must not be claimed as verified: tell the user the work awaits review."
)


def revision_budget_words(used: int, maximum: int) -> str:
    """What a revision request of a delivery made on attempt `used` of `maximum` leaves."""
    left = max(maximum - used, 0)
    if left == 0:
        return (f"This was your last attempt ({used} of {maximum}): if the person asks for "
                "changes, the contract ends exhausted.")
    if left == 1:
        return (f"If the person asks for changes, 1 attempt of {maximum} remains, and it is the "
                "last.")
    return f"If the person asks for changes, {left} of {maximum} attempts remain."


def delivery_pending_message(review_url: str, *, findings: bool = False, used: int,
                             maximum: int) -> str:
    passed = ("Every check passed except the tamper scan, whose findings only a person can "
              "accept" if findings else "Every check passed")
    return (
        f"{passed}, and this project has a person review the delivered change before "
        "it is certified: it is not certified yet. Do not claim the task is complete. Wait for "
        f"the review ({review_url}; reliability_status with wait_seconds, or GET "
        "/sessions/{id}/review?wait=60): an approval certifies it, a revision request comes "
        f"with what to change. {revision_budget_words(used, maximum)}"
    )


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" for line in text.splitlines())


def reviewer_words(feedback: str, comments: Sequence[Mapping[str, object]]) -> str:
    """A person's decision as the agent must answer it: their comment, quoted, and every line
    comment as `path:line` (issue 40)."""
    parts = []
    if feedback:
        parts.append(f"Their comment:\n{_quoted(feedback)}")
    if comments:
        lines = [f"- {comment['path']}:{comment['line']}"
                 f"{' (a line the change removed)' if comment['side'] == 'old' else ''}: "
                 + str(comment["body"]).replace("\n", "\n  ") for comment in comments]
        parts.append("Their comments on lines of the change:\n" + "\n".join(lines))
    return "\n".join(parts)


def revision_requested_message(*, feedback: str, comments: Sequence[Mapping[str, object]],
                               used: int, maximum: int, review_url: str,
                               unchanged: bool) -> str:
    """Issue 40: a person asked for changes to the delivered change; `unchanged`: the workspace
    is still the tree they reviewed, so no attempt was made."""
    head = ("A person reviewed your delivered change and asked for changes: it is not "
            "certified, and the contract is active again.")
    if unchanged:
        head += (" Nothing changed since the tree they reviewed, so this made no attempt and "
                 "used none of the repair budget.")
    words = reviewer_words(feedback, comments)
    return (
        f"{head}\n" + (f"{words}\n" if words else "") +
        "Make the changes they asked for, answering every comment, then verify or stop again: "
        "the next passing attempt opens a new delivery review. "
        f"{budget_words(used, maximum, delivery_review=True)}\n"
        "Do not claim the task is complete; if you cannot make the changes, abstain "
        f"(reliability_abstain) and say why. The review: {review_url}"
    )


DELIVERY_ENDS = {
    "rejected": "a person rejected the delivered change",
    "revision-requested": "a person asked for changes to the delivered change, and the repair "
                          "budget of {maximum} attempts is spent",
    "expired": "the delivery review expired undecided, and the repair budget of {maximum} "
               "attempts is spent",
}


def delivery_decided_message(terminal: Mapping[str, object], *, decision: str, feedback: str,
                             comments: Sequence[Mapping[str, object]], maximum: int) -> str:
    """Issue 40: the terminal a person's decision on the delivered change wrote, as the agent
    hears of it — certified, or exhausted with what the person said — with its receipt."""
    words = reviewer_words(feedback, comments)
    if terminal["status"] == "certified":
        return ("A person reviewed the delivered change and approved it. "
                + certified_message(terminal) + (f"\n{words}" if words else ""))
    why = DELIVERY_ENDS.get(decision, "a person's review ended it").format(maximum=maximum)
    return (
        f"The completion contract is exhausted: {why}. Do not claim the task is complete. Tell "
        "the user what the person said and what remains undone." + (f"\n{words}" if words else "")
        + f"\nCite the terminal receipt {terminal['receipt']}."
    )
