"""Long polls wait on a wake-up sent when the deciding transaction commits, re-check the
database at a bounded interval, and write nothing while they wait (governor.lib.waits,
governor.lib.notify). A lost wake-up costs at most the re-check interval, never a wrong
answer. (tests/integration/test_long_poll.py runs long polls against the served ASGI stack.)"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governor.lib import notify
from governor.services.reviews import review_cancel
from reviews.models import Review
from tests.api.test_review_api import begin
from tests.conftest import AgentClient
from tests.live import REDIS_URL

# A second thread decides while the request waits: committed data, on PostgreSQL (SQLite's
# shared in-memory test database cannot be flushed after it).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres]


def later(seconds: float, action: Callable[[], Any]) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        try:
            action()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def pending(project: Any, agent: AgentClient, session: dict) -> Review:
    project.review_mode = "required"
    project.save(update_fields=["review_mode"])
    begin(agent, session)
    return Review.objects.get(session_id=session["id"])


def timed_wait(agent: AgentClient, session: dict, seconds: int) -> tuple[dict, float]:
    started = time.monotonic()
    answer = agent.get(f"/sessions/{session['id']}/review", wait=seconds)
    assert answer.status_code == 200, answer.content
    return answer.json()["review"], time.monotonic() - started


def test_a_waiting_client_wakes_when_the_decision_commits(
    project: Any, agent: AgentClient, session: dict, settings: Any
) -> None:
    settings.GOVERNOR_WAIT_RECHECK_MS = 20_000  # only the wake-up can end this wait early
    pending(project, agent, session)
    session_obj = Review.objects.get().session
    withdraw = later(0.3, lambda: review_cancel(session=session_obj))
    review, seconds = timed_wait(agent, session, 10)
    withdraw.join()
    assert review["status"] == "cancelled"
    assert seconds < 3, seconds


def test_a_lost_wakeup_costs_at_most_the_recheck_interval_and_the_answer_is_right(
    project: Any, agent: AgentClient, session: dict, settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.GOVERNOR_WAIT_RECHECK_MS = 400
    monkeypatch.setattr(notify, "announce", lambda topic: None)  # every wake-up is lost
    pending(project, agent, session)
    session_obj = Review.objects.get().session
    withdraw = later(0.3, lambda: review_cancel(session=session_obj))
    review, seconds = timed_wait(agent, session, 10)
    withdraw.join()
    assert review["status"] == "cancelled"
    assert review["decision_receipt"] == Review.objects.get().decision_receipt
    assert seconds < 0.3 + 0.4 + 1.5, seconds  # the decision, one re-check, slack


def test_nothing_is_written_while_a_long_poll_waits(
    project: Any, agent: AgentClient, session: dict, settings: Any
) -> None:
    settings.GOVERNOR_WAIT_RECHECK_MS = 50
    pending(project, agent, session)
    with CaptureQueriesContext(connection) as queries:
        review, seconds = timed_wait(agent, session, 1)
    assert review["status"] == "pending" and seconds >= 1
    statements = [query["sql"].lstrip().split()[0].upper() for query in queries]
    writes = [query["sql"] for query in queries
              if query["sql"].lstrip().split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert statements.count("SELECT") >= 10  # it re-read every 50 ms
    # Only its wait slot: claimed and released.
    assert len(writes) == 2 and all("governor_waitslot" in sql for sql in writes), writes


@pytest.mark.redis
def test_redis_carries_a_wakeup_from_any_process(settings: Any) -> None:
    """The announcing process need not be the waiting one: Redis pub/sub carries it."""
    settings.BROKER_URL = REDIS_URL

    async def wait_for_a_publish() -> tuple[bool, float]:
        async with notify.Listener(notify.run_topic("r-1")) as heard:
            publisher = redis.Redis.from_url(REDIS_URL)  # as another process would
            started = time.monotonic()
            publisher.publish(notify.channel(REDIS_URL, notify.run_topic("r-1")), b"")
            publisher.close()
            return await heard.wait(5), time.monotonic() - started

    woken, seconds = asyncio.run(wait_for_a_publish())
    assert woken and seconds < 1, seconds


@pytest.mark.redis
def test_a_listener_on_several_topics_wakes_for_any_of_them(settings: Any) -> None:
    """The inbox waits on every project its reviewer reviews: one listener, many topics, heard
    in the same process and through Redis from another."""
    settings.BROKER_URL = REDIS_URL
    topics = [notify.inbox_topic("p-1"), notify.inbox_topic("p-2")]

    async def wait_for_each() -> list[bool]:
        heard_each = []
        async with notify.Listener(*topics) as heard:
            publisher = redis.Redis.from_url(REDIS_URL)  # as another process would
            publisher.publish(notify.channel(REDIS_URL, topics[0]), b"")
            publisher.close()
            heard_each.append(await heard.wait(5))
            settings.BROKER_URL = "filesystem://"  # this process alone hears the next one
            notify.announce(topics[1])
            heard_each.append(await heard.wait(5))
            heard_each.append(await heard.wait(0.2))  # nothing more was announced
        return heard_each

    assert asyncio.run(wait_for_each()) == [True, True, False]


@pytest.mark.redis
def test_without_redis_a_long_poll_still_answers_by_rechecking(
    project: Any, agent: AgentClient, session: dict, settings: Any
) -> None:
    settings.BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    settings.GOVERNOR_WAIT_RECHECK_MS = 300
    pending(project, agent, session)
    review, seconds = timed_wait(agent, session, 1)
    assert review["status"] == "pending" and 1 <= seconds < 4, seconds


def subscribers_in(url: str) -> int:
    """Connections named as the wake-up subscribers, in the Redis database of `url`."""
    db = int(url.rsplit("/", 1)[1])
    clients = redis.Redis.from_url(url).client_list()
    return sum(1 for client in clients
               if client["name"] == notify.SUBSCRIBER_NAME and int(client["db"]) == db)


@pytest.mark.redis
def test_a_hundred_waiters_in_one_process_share_one_redis_connection(settings: Any) -> None:
    settings.BROKER_URL = REDIS_URL

    async def hundred_waiters() -> tuple[int, list[bool]]:
        async with contextlib.AsyncExitStack() as stack:
            heard = [await stack.enter_async_context(notify.Listener(notify.run_topic(f"r{n}")))
                     for n in range(100)]
            connections = subscribers_in(REDIS_URL)
            publisher = redis.Redis.from_url(REDIS_URL)  # as another process would
            for n in (3, 97):
                publisher.publish(notify.channel(REDIS_URL, notify.run_topic(f"r{n}")), b"")
            publisher.close()
            woken = await asyncio.gather(*[listener.wait(n in (3, 97) and 5 or 0.3)
                                           for n, listener in enumerate(heard)])
            return connections, woken

    connections, woken = asyncio.run(hundred_waiters())
    assert connections == 1
    assert [n for n, was in enumerate(woken) if was] == [3, 97]  # each hears its own topic


@pytest.mark.redis
def test_after_redis_drops_the_connection_waiters_are_woken_and_hear_again(
        settings: Any) -> None:
    """An announcement may pass while the subscriber reconnects: every waiter re-reads once it
    is back, and later announcements are heard again."""
    settings.BROKER_URL = REDIS_URL

    async def dropped() -> tuple[bool, bool]:
        async with notify.Listener(notify.run_topic("r-drop")) as heard:
            admin = redis.Redis.from_url(REDIS_URL)
            db = int(REDIS_URL.rsplit("/", 1)[1])
            for client in admin.client_list():
                if client["name"] == notify.SUBSCRIBER_NAME and int(client["db"]) == db:
                    admin.client_kill_filter(_id=client["id"])
            woken_on_return = await heard.wait(5)
            admin.publish(notify.channel(REDIS_URL, notify.run_topic("r-drop")), b"")
            admin.close()
            return woken_on_return, await heard.wait(5)

    woken_on_return, heard_after = asyncio.run(dropped())
    assert woken_on_return and heard_after
