"""The page of a gated change (rules §19.2), for the project's reviewers and operators: base
and head, the diff as on the delivery page, what proved each rule, the findings; and the list
of the project's gated changes. Included from governor/pages_reliability.py's urls."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from governor.lib.errors import NotFound
from governor.lib.live import MemberRequest
from governor.selectors.access import project_for_member
from governor.selectors.changes import change_for_project, change_page_context, changes_listed


@login_required
@require_GET
def change_page(request: MemberRequest, slug: str, change_id: uuid.UUID) -> HttpResponse:
    try:
        project = project_for_member(request.user, slug)
        change = change_for_project(project.pk, change_id)
    except NotFound:
        return render(request, "projects/not_member.html", {"slug": slug}, status=404)
    return render(request, "projects/change.html", {"project": project,
                                                    **change_page_context(change)})


@login_required
@require_GET
def change_list(request: MemberRequest, slug: str) -> HttpResponse:
    try:
        project = project_for_member(request.user, slug)
    except NotFound:
        return render(request, "projects/not_member.html", {"slug": slug}, status=404)
    return render(request, "projects/changes.html", {"project": project,
                                                     "changes": changes_listed(project)})
