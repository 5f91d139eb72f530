"""Reviewer pages (server-rendered, htmx-enhanced): the inbox and one proposal with its decision.

Without JavaScript every decision is a plain POST answered by a redirect; with htmx the same POST
returns the decision panel partial. A refused decision re-renders the page (or the panel) saying
that nothing was approved and why."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.db.models import Count, Max, Min, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from governor.domain.changes import PROTECTED_CHECK_ID
from governor.domain.review import ReviewError, plan_changes
from governor.lib.errors import Conflict, Invalid
from governor.lib.live import (
    MemberRequest,
    Shown,
    live_answer,
    live_url,
    signed_in_live,
    version_of,
)
from governor.lib.notify import inbox_topic
from governor.lib.waits import off_thread
from governor.selectors.access import review_for_reviewer, reviewed_projects
from governor.selectors.changes import changes_reviewed
from governor.selectors.heldout import session_suites
from governor.selectors.passkeys import passkeys_of
from governor.selectors.plan import delivery_budget, delivery_shown, plan_details
from governor.selectors.reviews import (
    carried_approval,
    comments_answered,
    comments_shown,
    review_as_read,
)
from governor.selectors.timeline import changes_so_far, check_parameters, user_requests
from governor.services import passkeys
from governor.services import reviews as review_services
from reviews.forms import DecisionForm
from reviews.models import Review, Stage, Status
from reviews.passkey_views import signing_elsewhere

DECISION_PANEL = "reviews/partials/decision.html"


INBOX_PAGE_SIZE = 50
RECENTLY_DECIDED = 10
REVISIONS_READ = 20  # the earlier proposals of a session searched for feedback and a base


def _inbox_shown(user: User) -> Shown:
    """The version of what the inbox list shows: the proposals waiting (how many, the newest)
    and the latest decision in the projects `user` reviews; it changes with time alone when the
    first waiting proposal's time runs out."""
    now = timezone.now()
    waiting = Q(status=Status.PENDING, expires_at__gt=now)
    row = Review.objects.filter(session__project__in=reviewed_projects(user)).aggregate(
        waiting=Count("pk", filter=waiting), newest=Max("created_at", filter=waiting),
        decided=Max("decided_at"), soonest=Min("expires_at", filter=waiting))
    soonest = row.pop("soonest")
    return Shown(version_of(row), None if soonest is None else (soonest - now).total_seconds())


def _inbox_list(user: User, page_number: Any, *, delay: int = 0) -> dict[str, object]:
    """The inbox's live part: a page of the waiting proposals. Its version is read before the
    proposals, so a change in between is shown at the next wait, never missed."""
    shown = _inbox_shown(user)
    pending = (Review.objects.select_related("session__project").defer("plan")
               .filter(status=Status.PENDING, expires_at__gt=timezone.now(),
                       session__project__in=reviewed_projects(user))
               .order_by("-created_at"))
    # A page at a time: the inbox stays fast with a thousand proposals waiting (benchmark B6).
    page = Paginator(pending, INBOX_PAGE_SIZE).get_page(page_number)
    return {"reviews": list(page.object_list), "page": page,
            "live": {"url": live_url("reviews:inbox_live", version=shown.version,
                                     page=page.number), "delay": delay}}


@login_required
@require_GET
def inbox(request: MemberRequest) -> HttpResponse:
    decided = (Review.objects.select_related("session__project", "decided_by").defer("plan")
               .filter(session__project__in=reviewed_projects(request.user),
                       decided_at__isnull=False)
               .order_by("-decided_at")[:RECENTLY_DECIDED])
    gated = changes_reviewed(request.user, RECENTLY_DECIDED)
    return render(request, "reviews/inbox.html",
                  {**_inbox_list(request.user, request.GET.get("page")), "decided": decided,
                   "gated": gated})


@signed_in_live
async def inbox_live(request: HttpRequest, user: User) -> HttpResponse:
    """The inbox's live part (`reviews/partials/inbox_list.html`) once a proposal in one of the
    person's projects is opened or decided."""
    projects = await off_thread(request, lambda: list(
        reviewed_projects(user).values_list("project_id", flat=True)))
    page_number = request.GET.get("page")
    return await live_answer(
        request, user=user, topics=[inbox_topic(project) for project in projects],
        shown=lambda: _inbox_shown(user),
        fragment=lambda delay: render(request, "reviews/partials/inbox_list.html",
                                      _inbox_list(user, page_number, delay=delay)))


def _next_review(review: Review) -> Review | None:
    """What followed a decided proposal: the evidence proposal an approved intent opened (it
    names the intent's receipt); after any other end, the session's next proposal, which
    replaced it. None while it is pending or after an approved evidence plan."""
    if review.status == Status.PENDING or (review.stage == Stage.EVIDENCE
                                           and review.status == Status.APPROVED):
        return None
    later = (Review.objects.filter(session_id=review.session_id, created_at__gte=review.created_at)
             .exclude(pk=review.pk).defer("plan").order_by("created_at"))
    if review.status != Status.APPROVED:
        return later.filter(stage=Stage.INTENT).first()
    for candidate in later.filter(stage=Stage.EVIDENCE):
        if candidate.proposal["approvedIntent"]["proposalReceipt"] == review.receipt:
            return candidate
    return None


def _panel(request: MemberRequest, review: Review, *, form: DecisionForm | None = None,
           refusal: str = "", refusal_title: str = "", just_decided: bool = False,
           confirming: bool = False) -> dict[str, object]:
    approvals = list(review.approvals.values_list("user_id", flat=True))
    pending = review.status == Status.PENDING and review.expires_at > timezone.now()
    return {
        "review": review, "pending": pending, "refusal": refusal, "refusal_title": refusal_title,
        "just_decided": just_decided, "confirming": confirming,
        "form": form, "feedback_field": (form or DecisionForm()).fields["feedback"],
        "typed": form.data.get("feedback", "") if form is not None else "",
        "approvals": len(approvals),
        "required_approvals": review.session.project.required_approvals,
        "approved_by_me": request.user.pk in approvals, "next_review": _next_review(review),
        "carried": carried_approval(request.user, review) if pending else None,
        "signing": {"required": review.session.project.require_signed_approvals,
                    "passkeys": len(passkeys_of(request.user)) if pending else 0,
                    "elsewhere": signing_elsewhere(request) if pending else "",
                    "here": f"{request.scheme}://{request.get_host()}",
                    "rp_id": settings.WEBAUTHN_RP_ID},
        "signatures": [] if pending else list(review.signatures.select_related(
            "passkey", "user").order_by("created_at")),
        "budget": delivery_budget(review) if review.stage == Stage.DELIVERY else None,
    }


def _revision(review: Review) -> dict[str, object] | None:
    """The memory of earlier rounds: the latest feedback given in this session before this
    proposal (the one it answers), and what changed against the previous proposal of its stage.
    None for a session's first proposal of its stage."""
    earlier = list(Review.objects.filter(session_id=review.session_id,
                                         created_at__lt=review.created_at)
                   .order_by("-created_at")[:REVISIONS_READ])
    previous = next((other for other in earlier if other.stage == review.stage), None)
    if previous is None:
        return None
    answered = next((other for other in earlier if other.feedback), None)
    delivery = review.stage == Stage.DELIVERY  # a new passing attempt, not a new plan
    return {"previous": previous, "answered": answered,
            "comments": comments_answered(previous, review) if delivery else [],
            "changes": None if delivery else plan_changes(previous.plan, review.plan)}


# How a reviewer reads each check's baseline (rules §14.5): (label, badge class, what it
# means for the evidence).
BASELINE_TEXTS = {
    "fails": ("fails now", "ok", "will show the work"),
    "passes": ("passes already", "warn", "shows nothing this task did (a constraint at most)"),
    "unknown": ("unknown", "info", "decided by the trusted run on the contract-start tree"),
}


def diff_view(request: HttpRequest) -> str:
    """The diff layout a page was asked for: "split" (side by side) or "unified"."""
    return "split" if request.GET.get("diff") == "split" else "unified"


def _delivery(request: HttpRequest, review: Review) -> dict[str, object]:
    pending = review.status == Status.PENDING and review.expires_at > timezone.now()
    return {"proposal": review.proposal, **delivery_shown(review),
            "diff_view": diff_view(request), "comments": comments_shown(review),
            "commenting": pending,
            "comment_at": (request.GET.get("path", ""), request.GET.get("comment", ""))}


def _proposal(request: HttpRequest, review: Review) -> dict[str, object]:
    proposal = review.proposal
    if review.stage == Stage.DELIVERY:
        return _delivery(request, review)
    if review.stage != Stage.EVIDENCE:
        return {"proposal": proposal, "requests": user_requests(
            review.session, up_to_seq=review.plan.get("started_at_seq"))}
    coverage = proposal.get("coverage") or {}
    findings = coverage.get("findings", [])
    baselines = coverage.get("baselines") or {}
    details = plan_details(review.session, proposal)
    checks = [{**check_parameters(check), "anchor": f"check-{index}",
               "baseline": BASELINE_TEXTS.get(baselines.get(check.get("id"), "")),
               **details.get(str(check.get("id")), {})}
              for index, check in enumerate(proposal.get("checks", []))]
    anchors = {check["id"]: check["anchor"] for check in checks}
    covered = {row.get("id"): row for row in coverage.get("claims", [])}
    claims = [{**claim, "coverage": covered.get(claim.get("id")),
               "check_links": [(check_id, anchors.get(check_id, ""))
                               for check_id in claim.get("checkIds", [])]}
              for claim in proposal.get("claims", [])]
    return {
        "proposal": proposal, "coverage": coverage, "checks": checks, "claims": claims,
        "errors": [finding for finding in findings if finding.get("severity") == "error"],
        "warnings": [finding for finding in findings if finding.get("severity") != "error"],
        "approved_intent": proposal.get("approvedIntent") or {},
        "protected_changes": proposal.get("protectedChanges") or [],
        "environment_changes": proposal.get("environmentChanges") or [],
        # rules §17.3: the built-in runner-control entries the project does not protect.
        "runner_control_exempt": next((check.get("exempt") or [] for check in
                                       proposal.get("checks", [])
                                       if check.get("id") == PROTECTED_CHECK_ID), []),
        "changes": changes_so_far(review.session), "diff_view": diff_view(request),
    }


def _render(request: MemberRequest, review: Review, *, status: int = 200,
            **panel: Any) -> HttpResponse:
    context = _panel(request, review, **panel)
    if request.htmx:
        return render(request, DECISION_PANEL, context, status=status)
    return render(request, "reviews/detail.html",
                  {**context, **_proposal(request, review), "revision": _revision(review),
                   "heldout_suites": session_suites(review.session, profiles=[
                       str(check.get("profile")) for check in review.proposal.get("checks", [])
                       if check.get("kind") == "code_verification_succeeded"])},
                  status=status)


def _current(review: Review) -> Review:
    """The review as read: one whose time has passed is expired (fails closed)."""
    return review_as_read(review)


@login_required
@require_http_methods(["GET", "POST"])
def detail(request: MemberRequest, review_id: str) -> HttpResponse:
    review = review_for_reviewer(request.user, review_id)
    if request.method == "GET":
        return _render(request, _current(review))
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _render(request, _current(review), form=form, status=400,
                       refusal="the form was incomplete or invalid (see below)",
                       refusal_title="Nothing was decided.")
    if form.needs_confirmation:
        return _render(request, _current(review), form=form, confirming=True)
    try:
        signed = _signed(request, review, form)
        review = review_services.review_decide(
            user=request.user, review=review, receipt=form.cleaned_data["receipt"],
            decision=form.cleaned_data["decision"], feedback=form.cleaned_data["feedback"],
            carried_from=form.cleaned_data["carried_from"], signed=signed,
            accepted_findings=request.POST.getlist("accepted_findings"))
    except review_services.DecisionRefused as exc:
        review.refresh_from_db()
        approving = form.cleaned_data["decision"] == Status.APPROVED
        return _render(request, _current(review), form=form, status=409, refusal=exc.message,
                       refusal_title="Nothing was approved." if approving
                       else "Nothing was changed.")
    except (Invalid, ReviewError) as exc:
        # a finding that does not exist is bad input naming its field (rules §17.5)
        named = isinstance(exc, ReviewError) and exc.errors[0]["path"] == "accepted_findings"
        return _render(request, review, form=form, status=422 if named else 400,
                       refusal=str(exc), refusal_title="Nothing was decided.")
    review.refresh_from_db()
    if request.htmx:
        return _render(request, review, just_decided=True)
    messages.success(request, _outcome(review))
    return redirect("reviews:detail", review_id=review.pk)


@login_required
@require_POST
def comment(request: MemberRequest, review_id: str) -> HttpResponse:
    """A reviewer's comment on one line of a pending delivery's change; back to that line."""
    review = review_for_reviewer(request.user, review_id)
    view = "split" if request.POST.get("diff") == "split" else "unified"
    try:
        added = review_services.review_comment_add(
            user=request.user, review=review, path=request.POST.get("path", ""),
            spot=request.POST.get("spot", ""), body=request.POST.get("body", ""))
    except (Invalid, ReviewError, Conflict) as exc:
        messages.error(request, f"The comment was not added: {exc}")
        return redirect(f"{reverse('reviews:detail', args=[review.pk])}?diff={view}#changes")
    messages.success(request, "Your comment was added. The agent receives it with your "
                              "decision.")
    return redirect(f"{reverse('reviews:detail', args=[review.pk])}?diff={view}"
                    f"#comment-{added.pk}")


def _signed(request: MemberRequest, review: Review, form: DecisionForm) -> passkeys.Signed | None:
    """The passkey signature static/passkeys.js posted with the decision, verified; None when
    the form carries none (pages without JavaScript, reviewers without a passkey)."""
    if not form.cleaned_data["assertion"]:
        return None
    try:
        credential = json.loads(form.cleaned_data["assertion"])
    except ValueError:
        raise passkeys.PasskeyRefused("the signature is not the authenticator's JSON answer",
                                      field="assertion") from None
    return passkeys.decision_signature(
        request.user, review, receipt=form.cleaned_data["receipt"],
        decision=form.cleaned_data["decision"], credential=credential, state=request.session)


def _outcome(review: Review) -> str:
    if review.status == Status.PENDING:
        return "Your approval is recorded; more reviewers must approve this exact receipt."
    if review.status == Status.APPROVED and review.stage == Stage.INTENT:
        return "Intent approved. The evidence plan is now waiting for review."
    if review.status == Status.APPROVED:
        return "Evidence approved. The contract is active."
    if review.status == Status.REVISION_REQUESTED:
        return "Revision requested. Nothing was approved; the agent will read your feedback."
    return "Rejected. Nothing was approved."
