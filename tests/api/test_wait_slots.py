"""A long poll costs the server its re-reads, so one token holds at most
GOVERNOR_MAX_WAITS_PER_TOKEN of them at once; the next is a 429 with Retry-After, and every way
out frees the slot.
(tests/integration/test_long_poll.py runs the same against a live, multi-process server.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.http import HttpRequest
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from governor.lib.errors import TooManyWaits
from governor.lib.waits import ABANDONED_AFTER, long_poll, slot_claim, slot_release
from governor.models import AgentToken, Project, WaitSlot
from governor.services.tokens import token_create
from tests.api.test_code_verification import add_profile
from tests.conftest import AgentClient
from verification.models import VerificationRun


@contextmanager
def wait_slot(waiter: Any, seconds: int) -> Iterator[None]:
    """Hold a wait slot as a long poll of up to `seconds` does, released on every way out."""
    held = slot_claim(waiter, seconds)
    try:
        yield
    finally:
        slot_release(held)


pytestmark = pytest.mark.django_db


@pytest.fixture
def token(project: Project, agent_owner: Any) -> AgentToken:
    return token_create(project=project, name="waiter", owner=agent_owner)[0]


def hold_all(stack: ExitStack, token: AgentToken, seconds: int = 30) -> None:
    for _ in range(4):
        stack.enter_context(wait_slot(token, seconds))


def test_a_token_holds_at_most_four_waits_and_the_fifth_says_when_to_retry(
    token: AgentToken, settings: Any
) -> None:
    assert settings.GOVERNOR_MAX_WAITS_PER_TOKEN == 4
    with ExitStack() as stack:
        hold_all(stack, token, seconds=20)
        with pytest.raises(TooManyWaits) as refused, wait_slot(token, 5):
            pass
    assert 1 <= refused.value.retry_after <= 20
    assert "GOVERNOR_MAX_WAITS_PER_TOKEN" in refused.value.message
    assert not WaitSlot.objects.exists()


def test_the_cap_is_a_setting(token: AgentToken, settings: Any) -> None:
    settings.GOVERNOR_MAX_WAITS_PER_TOKEN = 1
    with wait_slot(token, 5), pytest.raises(TooManyWaits), wait_slot(token, 5):
        pass


def test_other_tokens_are_not_limited_by_one_tokens_waits(
    token: AgentToken, project: Project, agent_owner: Any
) -> None:
    other, _ = token_create(project=project, name="other", owner=agent_owner)
    with ExitStack() as stack:
        hold_all(stack, token)
        with wait_slot(other, 5):
            assert WaitSlot.objects.filter(token=other).count() == 1


def test_a_wait_that_raises_frees_its_slot(token: AgentToken) -> None:
    with pytest.raises(RuntimeError), wait_slot(token, 5):
        raise RuntimeError("the database went away mid-wait")
    assert not WaitSlot.objects.exists()


def test_a_read_without_wait_takes_no_slot(token: AgentToken) -> None:
    with ExitStack() as stack:
        hold_all(stack, token)
        with wait_slot(token, 0):
            assert WaitSlot.objects.count() == 4


def test_a_slot_left_by_a_dead_process_frees_after_its_wait_and_a_grace(
    token: AgentToken,
) -> None:
    now = timezone.now()
    for slot in range(4):  # as a killed process leaves them: never released
        WaitSlot.objects.create(token=token, slot=slot, until=now - timedelta(seconds=1))
    with pytest.raises(TooManyWaits) as refused, wait_slot(token, 5):
        pass
    assert refused.value.retry_after <= ABANDONED_AFTER.total_seconds()
    WaitSlot.objects.filter(slot=0).update(until=now - ABANDONED_AFTER - timedelta(seconds=1))
    with wait_slot(token, 5):
        assert WaitSlot.objects.count() == 4


def test_the_api_answers_429_with_retry_after_on_both_long_poll_routes(
    project: Project, agent: AgentClient, session: dict
) -> None:
    token = AgentToken.objects.get(name="agent")
    profile = add_profile(project, "unit-tests", ["/bin/true"])
    run = VerificationRun.objects.create(session_id=session["id"], profile=profile,
                                         profile_receipt=profile.receipt, definition={})
    with ExitStack() as stack:
        hold_all(stack, token)
        for path in (f"/sessions/{session['id']}/review", f"/code-verifications/{run.pk}"):
            response = agent.get(path, wait=2)
            assert response.status_code == 429, response.content
            assert response.json()["error"]["code"] == "TOO_MANY_WAITS"
            assert 1 <= int(response["Retry-After"]) <= 30
        assert agent.get(f"/sessions/{session['id']}/review").status_code == 200
    assert agent.get(f"/sessions/{session['id']}/review", wait=1).status_code == 200
    assert not WaitSlot.objects.exists()


def test_a_slot_whose_wait_is_just_answering_says_retry_in_a_second(token: AgentToken) -> None:
    """A client that honours Retry-After exactly asks again right as the held waits end; their
    slots are about to be released, not abandoned, so the answer is 1 s, not the 30 s grace."""
    now = timezone.now()
    for slot in range(4):
        WaitSlot.objects.create(token=token, slot=slot, until=now - timedelta(milliseconds=200))
    with pytest.raises(TooManyWaits) as refused, wait_slot(token, 5):
        pass
    assert refused.value.retry_after == 1


def test_a_persons_page_waits_are_counted_apart_from_agent_tokens(
    token: AgentToken, reviewer: Any, settings: Any
) -> None:
    """The live parts of the pages wait per signed-in person (GOVERNOR_MAX_WAITS_PER_USER);
    they never take an agent token's slots, nor the reverse."""
    assert settings.GOVERNOR_MAX_WAITS_PER_USER == 4
    with ExitStack() as stack:
        for _ in range(4):
            stack.enter_context(wait_slot(reviewer, 30))
        with wait_slot(token, 5):  # the agent still waits
            pass
        hold_all(stack, token)
        with pytest.raises(TooManyWaits) as refused, wait_slot(reviewer, 5):
            pass
    assert "GOVERNOR_MAX_WAITS_PER_USER" in refused.value.message
    assert "this person already holds 4 long polls" in refused.value.message
    assert not WaitSlot.objects.exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_slots_claim_and_release_are_one_statement_each_that_skips_the_log(
        token: AgentToken) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only (DATABASE_URL)")
    with connection.cursor() as cursor:
        cursor.execute("SELECT relpersistence FROM pg_class WHERE relname = %s",
                       [WaitSlot._meta.db_table])
        assert cursor.fetchone() == ("u",)  # UNLOGGED: its commits do not wait for the disk
    with CaptureQueriesContext(connection) as queries, wait_slot(token, 30):
        pass
    statements = [query["sql"].split(" ", 1)[0] for query in queries]
    assert statements == ["SELECT", "INSERT", "DELETE"], queries.captured_queries


def test_a_long_poll_whose_first_read_fails_frees_its_slot(token: AgentToken) -> None:
    """The slot is claimed together with the first read: a read that fails releases it."""
    def failing_read() -> None:
        raise RuntimeError("the read failed")

    async def poll() -> None:
        await long_poll(HttpRequest(), waiter=token, seconds=5, topics=[], read=failing_read,
                        settled=lambda _: True)

    with pytest.raises(RuntimeError, match="the read failed"):
        async_to_sync(poll)()
    assert not WaitSlot.objects.filter(token=token).exists()
