"""rules §6: the two review stages' proposal documents and decision payloads.

    intent proposal    {stage: "intent", sessionId, contractKind, objective, constraints,
                        assumptions, nonGoals, ambiguities, authorship}
                       receipt("intent-proposal", it)
    evidence proposal  {stage: "evidence", sessionId, contractId, contractKind, objective, claims,
                        checks, maxAttempts, authorship, coverage (with `baselines`),
                        protectedChanges?, profileReceipts?, outcome?, approvedIntent: {proposal,
                        proposalReceipt, reviewReceipt}}
                       receipt("contract-proposal", it)
    review decision    {proposalReceipt, decision, decidedBy, feedbackBytes, feedbackReceipt?,
                        intentProposalReceipt? (evidence stage), carriedFrom? (§13),
                        signatures? ([{userId, credentialId, nonce, assertion}], the reviewers'
                        passkey signatures, governor.domain.passkey), commentsCount?,
                        commentsReceipt? (receipt("review-comments", [{path, side, line,
                        body, userId}]): the line comments the agent receives),
                        acceptedFindings? (the tamper findings a person accepted, §17.5),
                        receipt}
    delivery proposal  {stage: "delivery", sessionId, contractId, contractReceipt, objective,
                        attemptReceipt, attempt, tree, startTree, changes, profileReceipts,
                        runReceipts, changesDigest, tokens: [{token: {id, name}, did}],
                        tamperFindings? ([{id, path, line, rule, reason, excerpt}])}
                       receipt("delivery-proposal", it): it binds everything the certified
                       terminal cites (rules §17.10)
                       receipt("intent-review" | "contract-review" | "delivery-review", it
                       without receipt);
                       the feedback text itself is never in it, only its size and receipt
                       ("intent-feedback" | "contract-feedback").
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, cast

from governor.domain.canonical import JSONObject, receipt
from governor.domain.documents import (
    Check,
    Claim,
    ContractDocument,
    DecidedBy,
    EventSignature,
    Intent,
    ReviewDecisionDocument,
    SentComment,
    TokenRef,
    TreeRef,
)
from governor.domain.fields import FieldsInvalid
from governor.domain.outcomes import summary_words
from governor.domain.tamper import TAMPER_CHECK_KIND
from governor.domain.treediff import word_diff

MAX_FEEDBACK_CHARS = 2000
DECISIONS = ("approved", "revision-requested", "rejected", "expired", "cancelled")
STAGE_KINDS = {
    "intent": ("intent-proposal", "intent-review", "intent-feedback"),
    "evidence": ("contract-proposal", "contract-review", "contract-feedback"),
    "delivery": ("delivery-proposal", "delivery-review", "delivery-feedback"),
}


class ReviewError(FieldsInvalid):
    def __init__(self, path: str, message: str) -> None:
        super().__init__([{"path": path, "message": message}])


class IntentProposal(TypedDict):
    stage: Literal["intent"]
    sessionId: str
    contractKind: str
    objective: str
    constraints: list[str]
    assumptions: list[str]
    nonGoals: list[str]
    ambiguities: list[str]
    authorship: JSONObject


class ApprovedIntent(TypedDict):
    proposal: JSONObject
    proposalReceipt: str
    reviewReceipt: str


class EvidenceProposal(TypedDict):
    stage: Literal["evidence"]
    sessionId: str
    contractId: str
    contractKind: str
    objective: str
    claims: list[Claim]
    checks: list[Check]
    maxAttempts: int
    authorship: JSONObject
    coverage: JSONObject
    approvedIntent: ApprovedIntent
    protectedChanges: NotRequired[list[str]]
    environmentChanges: NotRequired[list[str]]
    profileReceipts: NotRequired[dict[str, str]]
    outcome: NotRequired[JSONObject]


class TokenPart(TypedDict):
    """An agent token's part in what a stage decides (rules §17.10): "created the session",
    "began the contract" or "made attempt N"."""

    token: TokenRef
    did: str


class DeliveryProposal(TypedDict):
    stage: Literal["delivery"]
    sessionId: str
    contractId: str
    contractReceipt: str
    objective: str
    attemptReceipt: str
    attempt: int
    tree: TreeRef | None
    startTree: TreeRef | None
    changes: list[dict[str, str]] | None
    profileReceipts: list[str]
    runReceipts: list[str]
    changesDigest: str | None
    tokens: list[TokenPart]
    tamperFindings: NotRequired[list[dict[str, Any]]]


ReviewProposal = IntentProposal | EvidenceProposal | DeliveryProposal


def intent_proposal(*, session_id: str, kind: str, objective: str, intent: Intent,
                    authorship: JSONObject) -> IntentProposal:
    return {
        "stage": "intent", "sessionId": session_id, "contractKind": kind,
        "objective": objective, "constraints": intent["constraints"],
        "assumptions": intent["assumptions"], "nonGoals": intent["nonGoals"],
        "ambiguities": intent["ambiguities"], "authorship": authorship,
    }


def evidence_proposal(*, session_id: str, contract_id: str, kind: str, objective: str,
                      claims: list[Claim], checks: list[Check],
                      max_attempts: int, authorship: JSONObject, coverage: JSONObject,
                      intent_proposal: JSONObject, intent_proposal_receipt: str,
                      intent_review_receipt: str,
                      protected_changes: list[str] | None = None,
                      environment_changes: list[str] | None = None,
                      profile_receipts: dict[str, str] | None = None,
                      outcome: JSONObject | None = None) -> EvidenceProposal:
    """The evidence plan a person approves. The coverage assessment carries every check's
    baseline (§14.5), `protectedChanges` (§14.4) the protected paths this task opens,
    `environmentChanges` (§17.8) the environment paths it opens, and
    `profileReceipts` the receipt of each verifier profile its checks name as the reviewer is
    shown it (so a later edit of the profile shows): all bound by the proposal's receipt."""
    proposal: EvidenceProposal = {
        "stage": "evidence", "sessionId": session_id, "contractId": contract_id,
        "contractKind": kind, "objective": objective, "claims": claims, "checks": checks,
        "maxAttempts": max_attempts, "authorship": authorship, "coverage": coverage,
        "approvedIntent": {"proposal": intent_proposal, "proposalReceipt": intent_proposal_receipt,
                           "reviewReceipt": intent_review_receipt},
    }
    if protected_changes:
        proposal["protectedChanges"] = list(protected_changes)
    if environment_changes:
        proposal["environmentChanges"] = list(environment_changes)
    if profile_receipts:
        proposal["profileReceipts"] = dict(sorted(profile_receipts.items()))
    if outcome is not None:  # the outcome profile bound at begin, and the sentence shown
        proposal["outcome"] = {**outcome, "summary": summary_words(outcome)}
    return proposal


def delivery_proposal(*, session_id: str, contract: ContractDocument,
                      attempts: Sequence[Mapping[str, Any]],
                      changes: list[dict[str, str]] | None, profile_receipts: Sequence[str],
                      run_receipts: Sequence[str], changes_digest: str | None
                      ) -> DeliveryProposal:
    """The third, optional stage (issue 28): what a person approves once every check passed —
    the contract (its receipt), the passing attempt (the last of `attempts`: its receipt and
    the tree it judged), what changed since the contract's start tree, and the rest of what
    the certified terminal will cite (the profiles and runs counted, the changes digest) — bound
    by receipt("delivery-proposal"), with the agent tokens that began the contract and made its
    `attempts`, as the log names them (rules §17.10); and the tamper scan's findings on it
    (rules §17.5), which only an approval accepting each certifies."""
    attempt = attempts[-1]
    proposal: DeliveryProposal = {
        "stage": "delivery", "sessionId": session_id, "contractId": contract["contractId"],
        "contractReceipt": contract["receipt"], "objective": contract["objective"],
        "attemptReceipt": attempt["receipt"], "attempt": attempt["attempt"],
        "tree": attempt.get("tree"), "startTree": contract.get("startTree"),
        "changes": changes, "profileReceipts": sorted(set(profile_receipts)),
        "runReceipts": sorted(set(run_receipts)), "changesDigest": changes_digest,
        "tokens": contract_tokens(contract, attempts),
    }
    findings = tamper_findings(attempt.get("results") or [])
    if findings:
        proposal["tamperFindings"] = findings
    return proposal


def tamper_findings(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The tamper scan's findings in an attempt's results (rules §17.5)."""
    return [finding for result in results if result.get("kind") == TAMPER_CHECK_KIND
            for finding in result.get("findings") or []]


def accepted_findings(raw: object, findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """Rules §17.5: the finding ids a person accepts, each one of `findings` (the pending
    proposal's), sorted and distinct; anything else is refused naming it."""
    if raw is None:
        return []
    if not isinstance(raw, list | tuple) or not all(isinstance(item, str) for item in raw):
        raise ReviewError("accepted_findings", "must be a list of finding ids")
    known = {str(finding.get("id")) for finding in findings}
    unknown = [item for item in raw if item not in known]
    if unknown:
        raise ReviewError("accepted_findings", f"{unknown[0][:200]!r} is not a finding of this "
                                               "proposal")
    return sorted(set(raw))


def contract_tokens(contract: Mapping[str, Any],
                    attempts: Sequence[Mapping[str, Any]]) -> list[TokenPart]:
    """The agent tokens the log names as having begun `contract` and made its `attempts`."""
    parts: list[TokenPart] = []
    if "begunBy" in contract:
        parts.append({"token": contract["begunBy"], "did": "began the contract"})
    parts += [{"token": attempt["madeBy"], "did": f"made attempt {attempt['attempt']}"}
              for attempt in attempts if "madeBy" in attempt]
    return parts


def took_part(parts: Sequence[TokenPart], owned: Collection[int]) -> str | None:
    """Separation of duties at every stage (rules §6.5, §17.10): what the tokens in `owned` (a
    reviewer's own) did among `parts`, in words — "your agent token 'ci-bot' began the contract
    and made attempt 2" — or None when none of them took part."""
    done: dict[int, tuple[str, list[str]]] = {}
    for part in parts:
        token = part["token"]
        if token["id"] in owned:
            done.setdefault(token["id"], (token["name"], []))[1].append(part["did"])
    if not done:
        return None
    return "; ".join(f"your agent token '{name}' {_and(did)}" for name, did in done.values())


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def proposal_receipt(stage: str, proposal: Mapping[str, object]) -> str:
    return receipt(STAGE_KINDS[stage][0], proposal)


def feedback_text(raw: object) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise ReviewError("feedback", "must be text")
    text = raw.strip()
    if len(text) > MAX_FEEDBACK_CHARS:
        raise ReviewError("feedback", f"is {len(text)} characters; at most {MAX_FEEDBACK_CHARS}")
    return text


def decision_payload(*, stage: str, proposal_receipt: str, decision: str,
                     decided_by: DecidedBy, feedback: str = "",
                     intent_proposal_receipt: str | None = None,
                     carried_from: list[str] | None = None,
                     signatures: list[EventSignature] | None = None,
                     comments: list[SentComment] | None = None,
                     accepted: list[str] | None = None) -> ReviewDecisionDocument:
    """The review event's data: who decided what about which receipt; never the feedback.
    `comments`: the reviewers' comments on lines of the delivered change, bound by their count
    and receipt (never their text), as the feedback is.
    `carried_from`: the earlier decision receipts that approvals of this exact receipt carried
    (rules §13); `signatures`: the deciding reviewers' passkey signatures (issue 18)."""
    if decision not in DECISIONS:
        raise ReviewError("decision", f"must be one of {', '.join(DECISIONS)}")
    _, review_kind, feedback_kind = STAGE_KINDS[stage]
    payload: dict[str, object] = {
        "proposalReceipt": proposal_receipt, "decision": decision, "decidedBy": decided_by,
        "feedbackBytes": len(feedback.encode("utf-8")),
    }
    if feedback:
        payload["feedbackReceipt"] = receipt(feedback_kind, feedback)
    if intent_proposal_receipt is not None:
        payload["intentProposalReceipt"] = intent_proposal_receipt
    if carried_from:
        payload["carriedFrom"] = sorted(set(carried_from))
    if signatures:
        payload["signatures"] = signatures
    if comments:
        payload["commentsCount"] = len(comments)
        payload["commentsReceipt"] = receipt("review-comments", comments)
    if accepted:
        payload["acceptedFindings"] = accepted
    payload["receipt"] = receipt(review_kind, payload)
    return cast(ReviewDecisionDocument, payload)


def _by_id(items: Any) -> dict[str, dict[str, Any]]:
    return {str(item.get("id")): item for item in items or [] if isinstance(item, dict)}


def _item_changes(before: Any, after: Any) -> dict[str, Any]:
    old, new = _by_id(before), _by_id(after)
    changed = [(key, sorted(name for name in old[key].keys() | new[key].keys()
                            if old[key].get(name) != new[key].get(name)))
               for key in new if key in old and old[key] != new[key]]
    return {"added": [key for key in new if key not in old],
            "removed": [key for key in old if key not in new], "changed": changed}


def plan_changes(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What a proposal changed against the one it replaced, as Gerrit compares patch sets: the
    objective, the intent lists that differ, and claims and checks by id — added, removed, and
    changed with the names of the fields that differ. `before` and `after` are stored plans."""
    old_intent, new_intent = before.get("intent") or {}, after.get("intent") or {}
    changes: dict[str, Any] = {
        "objective": before.get("objective") != after.get("objective"),
        "intent": [name for name in ("constraints", "assumptions", "nonGoals", "ambiguities")
                   if old_intent.get(name) != new_intent.get(name)],
        "max_attempts": before.get("max_attempts") != after.get("max_attempts"),
        "claims": _item_changes(before.get("claims"), after.get("claims")),
        "checks": _item_changes(before.get("checks"), after.get("checks")),
    }
    changes["texts"] = plan_texts(before, after)
    changes["none"] = not (changes["objective"] or changes["intent"] or changes["max_attempts"]
                           or any(changes[kind][how] for kind in ("claims", "checks")
                                  for how in ("added", "removed", "changed")))
    return changes


INTENT_ITEMS = (("constraints", "Constraint"), ("assumptions", "Assumption"),
                ("nonGoals", "Non-goal"), ("ambiguities", "Ambiguity"))


@dataclass(frozen=True)
class TextChange:
    """One changed text of a proposal, old beside new, as word segments (text, changed);
    `before` is None for an added item, `after` None for a removed one."""

    what: str
    before: list[tuple[str, bool]] | None
    after: list[tuple[str, bool]] | None


def _shown(value: object, *, exact: bool = False) -> str:
    """A value as a reviewer compares it: text as it is, anything else (and, `exact`, text too:
    a check's parameter, where quotes and spaces matter) as JSON."""
    return value if isinstance(value, str) and not exact else json.dumps(value, ensure_ascii=False,
                                                           sort_keys=True)


def _text_change(what: str, before: object, after: object, *, exact: bool = False
                 ) -> TextChange:
    if before is None:
        return TextChange(what, None, [(_shown(after, exact=exact), True)])
    if after is None:
        return TextChange(what, [(_shown(before, exact=exact), True)], None)
    old, new = word_diff(_shown(before, exact=exact), _shown(after, exact=exact))
    return TextChange(what, old, new)


def _list_changes(label: str, before: list[object], after: list[object]) -> list[TextChange]:
    """The items of an intent list that differ, aligned as a line diff aligns lines: a replaced
    run pairs its old and new items in order; the rest are added or removed."""
    rows = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old, new = before[i1:i2], after[j1:j2]
        for index in range(max(len(old), len(new))):
            rows.append(_text_change(label, old[index] if index < len(old) else None,
                                     new[index] if index < len(new) else None))
    return rows


def _items_texts(label: str, before: Any, after: Any, *,
                 exact: bool = False) -> list[TextChange]:
    old, new = _by_id(before), _by_id(after)
    rows = []
    for key in list(old) + [key for key in new if key not in old]:
        if key not in new:
            rows.append(_text_change(f"{label} {key} (removed)", old[key], None, exact=exact))
        elif key not in old:
            rows.append(_text_change(f"{label} {key} (added)", None, new[key], exact=exact))
        else:
            rows += [_text_change(f"{label} {key}: {name}", old[key].get(name),
                                  new[key].get(name), exact=exact)
                     for name in [*old[key], *(n for n in new[key] if n not in old[key])]
                     if old[key].get(name) != new[key].get(name)]
    return rows


def plan_texts(before: dict[str, Any], after: dict[str, Any]) -> list[TextChange]:
    """Every changed text between two stored plans, old beside new with the words that differ
    marked: the objective, each intent list item, each claim's and check's changed field (a
    parameter as exact JSON) and the repair budget."""
    rows = []
    if before.get("objective") != after.get("objective"):
        rows.append(_text_change("Objective", before.get("objective"), after.get("objective")))
    old_intent, new_intent = before.get("intent") or {}, after.get("intent") or {}
    for name, label in INTENT_ITEMS:
        rows += _list_changes(label, list(old_intent.get(name) or []),
                              list(new_intent.get(name) or []))
    rows += _items_texts("Claim", before.get("claims"), after.get("claims"))
    rows += _items_texts("Check", before.get("checks"), after.get("checks"), exact=True)
    if before.get("max_attempts") != after.get("max_attempts"):
        rows.append(_text_change("Repair budget (attempts)", before.get("max_attempts"),
                                 after.get("max_attempts")))
    return rows


# --- when a stage is decided (rules §6, §13, and signed approvals) -----------------------

REFUSED_UNKNOWN = "unknown-decision"
REFUSED_UNSIGNED = "signature-required"
REFUSED_OWN_AGENT = "own-agent"
REFUSED_CARRIED = "carried-approval"
REFUSED_EXPIRED = "expired"
REFUSED_STALE = "stale-receipt"
DECIDING = ("approved", "revision-requested", "rejected")
# Issue 40: a decision on a decided proposal says what became of it.
ALREADY = {"approved": "approved", "revision-requested": "sent back for a revision",
           "rejected": "rejected", "cancelled": "withdrawn, or its contract ended",
           "expired": "expired undecided"}
DECISION_WORDS = {"approved": "an approval", "revision-requested": "a revision request",
                  "rejected": "a rejection"}


@dataclass(frozen=True)
class DecisionFacts:
    """What a reviewer's decision is judged on, read under the session's lock."""

    decision: str  # what the reviewer chose
    status: str  # the review's stored status
    expired: bool  # its time has passed (whatever is stored)
    receipt_is_current: bool  # the posted receipt is this pending proposal's
    signed: bool  # the decision carries the reviewer's passkey signature
    signatures_required: bool  # the project requires approvals to be signed
    own_part: str | None  # what the reviewer's own agent tokens did here (`took_part`)
    carried_is_theirs: bool | None  # None: carries nothing; else it is their approval of it
    approvals_before: int  # distinct reviewers who approved this receipt before
    approved_before: bool  # this reviewer is one of them
    required_approvals: int  # the project's N


@dataclass(frozen=True)
class Verdict:
    """`refused` (a kind and why: nothing is recorded), or an approval that waits for more
    reviewers (`decided` False), or the stage decided with `decision`."""

    decided: bool
    refused: str | None = None
    reason: str = ""
    approvals: int = 0


def decide(facts: DecisionFacts) -> Verdict:
    """Whether and how a reviewer's decision decides the stage. An approval needs the
    receipt of the session's current pending proposal, unexpired; a signature where the project
    requires one; a reviewer who owns no agent token that took part (created the session, began
    the contract, made an attempt); a carried approval that is theirs of exactly this receipt;
    and N distinct reviewers. A revision request or rejection needs only the current receipt,
    and ends the stage at once."""
    approving = facts.decision == "approved"
    if facts.decision not in DECIDING:
        return _refused(REFUSED_UNKNOWN, "decision must be approved, revision-requested or "
                                         "rejected")
    if approving and facts.signatures_required and not facts.signed:
        return _refused(REFUSED_UNSIGNED, "this project requires every approval to be signed "
                                          "with your own passkey, so that anyone can check it "
                                          "offline; nothing was approved")
    if approving and facts.own_part is not None:
        return _refused(REFUSED_OWN_AGENT, f"{facts.own_part}, so you may not approve this "
                                           "proposal: another reviewer must; nothing was "
                                           "approved")
    if approving and facts.carried_is_theirs is False:
        return _refused(REFUSED_CARRIED, "the earlier approval this one would carry is not "
                                         "yours of exactly this receipt in this session; "
                                         "nothing was approved")
    if facts.status == "expired" or (facts.status == "pending" and facts.expired):
        return _refused(REFUSED_EXPIRED, "this proposal expired before it was decided; nothing "
                                         "was approved")
    if facts.status in ALREADY:
        return _refused(REFUSED_STALE, f"this proposal was already {ALREADY[facts.status]}, so "
                                       "it is not the session's current pending proposal and "
                                       f"{DECISION_WORDS[facts.decision]} changes nothing; "
                                       "nothing was recorded")
    if facts.status != "pending" or not facts.receipt_is_current:
        return _refused(REFUSED_STALE, "this is not the session's current pending proposal (it "
                                       "was decided, withdrawn, replaced or changed since the "
                                       "page was loaded); nothing was approved")
    if not approving:
        return Verdict(decided=True)
    approvals = facts.approvals_before + (0 if facts.approved_before else 1)
    return Verdict(decided=approvals >= facts.required_approvals, approvals=approvals)


def _refused(kind: str, reason: str) -> Verdict:
    return Verdict(decided=False, refused=kind, reason=reason)
