"""Fixtures of the reviewer-page tests: a project whose contracts need review, its reviewer
rita signed in, and a proposal waiting at the intent stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.models import Project
from reviews.models import Review
from tests.conftest import AgentClient
from tests.pages import propose, reviewer_client


@pytest.fixture
def review_project(project: Project) -> Project:
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    return project


@pytest.fixture
def rita(reviewer: Any, review_project: Project) -> Client:
    return reviewer_client("rita", "rita-password-1")


@pytest.fixture
def intent_review(agent: AgentClient, workspace: Path, review_project: Project) -> Review:
    return propose(agent, workspace)[1]
