"""rules §10 limits and bad input in the admin: a project's tree limits and exclusions are
refused with the field and the reason, and nothing is stored."""

from __future__ import annotations

import html
import re

import pytest
from django.test import Client

from governor.models import Project
from tests.pages.test_admin_operations import operator, submit

__all__ = ["operator"]  # the fixture, used by name


def field_errors(page: str, field: str) -> str:
    found = re.search(rf'<div class="form-row errors field-{field}">(.*?)</div>', page,
                      re.DOTALL)
    return html.unescape(found.group(1)) if found else ""


@pytest.mark.parametrize(("field", "value", "message"), [
    ("tree_exclusions", '["node_modules/**", "/dist"]',
     "tree_exclusions/1: must not start or end with '/'"),
    ("tree_exclusions", '["[[:alpha:]]"]', "POSIX character classes"),
    ("tree_max_files", "0", "greater than or equal to 1"),
    ("tree_max_bytes", "0", "greater than or equal to 1"),
])
def test_rule_10_project_tree_settings_are_refused_naming_the_field_and_reason(
    operator: Client, field: str, value: str, message: str
) -> None:
    answer = submit(operator, "/admin/governor/project/add/", slug="trees", name="Trees",
                    review_mode="required", authoring_mode="current-agent", delivery_review="off",
                    unattended_evidence="any",
                    workspace_roots="[]", **{field: value})
    assert answer.status_code == 200
    errors = field_errors(answer.content.decode(), field)
    assert message in errors, errors
    assert not Project.objects.filter(slug="trees").exists()


def test_rule_10_project_exclusions_are_stored_from_the_admin(operator: Client) -> None:
    answer = submit(operator, "/admin/governor/project/add/", slug="trees", name="Trees",
                    review_mode="required", authoring_mode="current-agent", delivery_review="off",
                    unattended_evidence="any",
                    workspace_roots="[]", tree_exclusions='["node_modules/**", "*.pyc"]',
                    tree_max_files="5000")
    assert answer.status_code == 302, field_errors(answer.content.decode(), "tree_exclusions")
    project = Project.objects.get(slug="trees")
    assert (project.tree_exclusions, project.tree_max_files) == (
        ["node_modules/**", "*.pyc"], 5000)
