"""tests/workers.py: what each pytest-xdist worker has of its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from tests.live import REDIS_URL
from tests.workers import ROOT, worker_environment, worker_redis_url


def test_each_worker_has_a_redis_database_below_the_base_one() -> None:
    base = "redis://127.0.0.1:6379/15"
    assert [worker_redis_url(base, w) for w in (None, "gw0", "gw1", "gw3")] == [
        base, base, "redis://127.0.0.1:6379/14", "redis://127.0.0.1:6379/12"]
    with pytest.raises(RuntimeError, match="worker gw3 would need Redis database -1"):
        worker_redis_url("redis://127.0.0.1:6379/2", "gw3")


def test_each_worker_has_a_var_directory_of_its_own_and_sets_it_once() -> None:
    assert worker_environment({"GOVERNOR_TEST_REDIS_URL": "redis://h:1/9"}, None) == {}
    first = worker_environment({"GOVERNOR_TEST_REDIS_URL": "redis://h:1/9"}, "gw2")
    assert first == {"GOVERNOR_TEST_REDIS_URL": "redis://h:1/7", "GOVERNOR_TEST_WORKER": "gw2",
                     "GOVERNOR_VAR_DIR": str(ROOT / "var" / "pytest-gw2")}
    assert worker_environment(first, "gw2") == {}  # a process the worker started: set already
    assert worker_environment({"GOVERNOR_VAR_DIR": "/srv/v"}, "gw1")["GOVERNOR_VAR_DIR"] == \
        "/srv/v/pytest-gw1"


def test_this_process_uses_what_its_worker_was_given() -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        assert Path(settings.VAR_DIR) == Path(os.environ["GOVERNOR_VAR_DIR"]).resolve()
        assert Path(settings.VAR_DIR).name == f"pytest-{worker}"
    assert os.environ.get("GOVERNOR_TEST_REDIS_URL", "redis://127.0.0.1:6379/15") == REDIS_URL
