"""Health, settings from the environment, and the deploy checklist."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from governor import settings as settings_module
from governor.startup import prepare
from tests.live import REDIS_URL

ROOT = Path(__file__).resolve().parents[1]


def test_healthz_reports_database_and_broker(db: None) -> None:
    body = Client().get("/healthz").json()
    assert body["database"]["status"] == "ok"
    assert "transport" in body["broker"]


@pytest.mark.parametrize("raw", ["maybe", "2", "tru"])
def test_bad_boolean_fails_loudly(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    monkeypatch.setenv("DEBUG", raw)
    with pytest.raises(ImproperlyConfigured, match="DEBUG"):
        settings_module.env_bool("DEBUG", False)


def test_unsupported_database_url_fails_loudly() -> None:
    with pytest.raises(ImproperlyConfigured, match="unsupported scheme"):
        settings_module.database_from_url("mysql://root@localhost/db")


def test_postgres_database_url_is_parsed() -> None:
    config = settings_module.database_from_url("postgres://u:p%40ss@db.example:5433/gov")
    assert (config["NAME"], config["USER"], config["PASSWORD"], config["HOST"], config["PORT"]) == (
        "gov", "u", "p@ss", "db.example", "5433")


@pytest.mark.redis
def test_healthz_reports_a_redis_broker_that_does_not_answer_as_degraded(
        db: None, settings: Any) -> None:
    settings.BROKER_URL = REDIS_URL
    assert Client().get("/healthz").json()["broker"]["status"] == "ok"
    settings.BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    answer = Client().get("/healthz")
    assert answer.status_code == 200  # the database answers: degraded, not down
    assert answer.json()["status"] == "degraded"
    assert answer.json()["broker"]["status"] == "error"


def test_postgresql_connections_come_from_a_pool_sized_by_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNOR_DB_POOL_MIN_SIZE", "1")
    monkeypatch.setenv("GOVERNOR_DB_POOL_MAX_SIZE", "7")
    monkeypatch.setenv("GOVERNOR_DB_POOL_TIMEOUT", "5")
    config = settings_module.database_from_url("postgres://u@db.example/gov?sslmode=require")
    assert config["OPTIONS"] == {"sslmode": "require",
                                 "pool": {"min_size": 1, "max_size": 7, "timeout": 5}}
    assert config["CONN_MAX_AGE"] == 0  # Django refuses persistent connections with a pool


def test_a_pool_of_size_zero_means_a_connection_per_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNOR_DB_POOL_MAX_SIZE", "0")
    assert "pool" not in settings_module.database_from_url("postgres://u@db.example/gov")[
        "OPTIONS"]


def test_a_pool_whose_minimum_exceeds_its_maximum_fails_loudly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNOR_DB_POOL_MAX_SIZE", "4")
    monkeypatch.setenv("GOVERNOR_DB_POOL_MIN_SIZE", "5")
    with pytest.raises(ImproperlyConfigured, match=r"GOVERNOR_DB_POOL_MIN_SIZE=5: expected 0\.\.4"):
        settings_module.database_from_url("postgres://u@db.example/gov")


def test_the_asgi_application_imports_every_route_before_its_first_request(
        tmp_path: Path) -> None:
    """Otherwise the first requests of each served process wait on the imports (B9)."""
    env = {**os.environ, "GOVERNOR_VAR_DIR": str(tmp_path), "DEBUG": "0"}
    env.pop("DATABASE_URL", None)
    script = ("import sys, governor.asgi; "
              "print(sorted(m for m in ('governor.urls', 'governor.api') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,  # noqa: S603
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['governor.api', 'governor.urls']"


def test_the_asgi_application_freezes_its_start_up_objects_and_defers_full_collections(
        tmp_path: Path) -> None:
    """A full garbage collection pauses every request and poll of a served process for as long
    as it scans all its objects (B9: up to 346 ms): start-up's are frozen, full passes rarer."""
    env = {**os.environ, "GOVERNOR_VAR_DIR": str(tmp_path), "DEBUG": "0"}
    env.pop("DATABASE_URL", None)
    script = "import gc, governor.asgi; print(gc.get_freeze_count(), gc.get_threshold()[2])"
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env,  # noqa: S603
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    frozen, full_after = map(int, result.stdout.split())
    assert frozen > 50_000 and full_after == 100, result.stdout


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_in_a_production_like_environment(tmp_path: Path) -> None:
    env = {**os.environ, "DEBUG": "0", "GOVERNOR_HTTPS": "1",
           "SECRET_KEY": "x" * 20 + "production-secret-key-with-enough-entropy-0123456789",
           "ALLOWED_HOSTS": "governor.example.com", "GOVERNOR_VAR_DIR": str(tmp_path),
           "GOVERNOR_BROKER_URL": "redis://127.0.0.1:6379/0"}
    env.pop("DATABASE_URL", None)
    result = _manage(env, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_bad_setting_stops_manage_py_with_its_name(tmp_path: Path) -> None:
    env = {**os.environ, "DEBUG": "perhaps", "GOVERNOR_VAR_DIR": str(tmp_path)}
    result = _manage(env, "check")
    assert result.returncode != 0
    assert "DEBUG='perhaps'" in result.stderr


def test_settings_import_creates_no_file_and_opens_no_socket(tmp_path: Path) -> None:
    """STYLE 7: the settings only read the environment; start-up does the rest."""
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "SECRET_KEY", "SECRET_KEY_FILE", "GOVERNOR_BROKER_URL",
                          "GOVERNOR_BROKER_CHOICE")}
    env["GOVERNOR_VAR_DIR"] = str(tmp_path / "var")
    probe = ("import socket\n"
             "def refuse(*args, **kwargs): raise SystemExit('a socket was opened')\n"
             "socket.create_connection = refuse\n"
             "socket.socket.connect = refuse\n"
             "from governor import settings\n"
             "print(settings.BROKER_URL)\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "filesystem://"
    assert not (tmp_path / "var").exists()


def test_start_up_creates_the_var_directory_database_and_key_owner_only(tmp_path: Path) -> None:
    env: dict[str, str] = {"GOVERNOR_VAR_DIR": str(tmp_path / "var")}
    prepare(env, redis=("127.0.0.1", 9))  # nothing listens on port 9
    var = tmp_path / "var"
    assert var.stat().st_mode & 0o777 == 0o700
    for name in ("governor.sqlite3", "secret_key"):
        assert (var / name).stat().st_mode & 0o777 == 0o600
    key = (var / "secret_key").read_text()
    assert len(key) > 50
    prepare(env, redis=("127.0.0.1", 9))
    assert (var / "secret_key").read_text() == key  # written once


def test_start_up_chooses_the_broker_once_for_every_process_it_starts(tmp_path: Path) -> None:
    quiet: dict[str, str] = {"GOVERNOR_VAR_DIR": str(tmp_path)}
    prepare(quiet, redis=("127.0.0.1", 9))
    assert quiet["GOVERNOR_BROKER_URL"] == "filesystem://"
    assert "did not answer" in quiet["GOVERNOR_BROKER_CHOICE"]
    assert (tmp_path / "broker" / "queue").is_dir()
    answered: dict[str, str] = {"GOVERNOR_VAR_DIR": str(tmp_path)}
    prepare(answered)  # the Redis server of the test machine
    assert answered["GOVERNOR_BROKER_URL"] == "redis://127.0.0.1:6379/0"
    assert ("database 0 is shared with every other checkout on this host" in
            answered["GOVERNOR_BROKER_CHOICE"])  # issue 40: and how to take another
    assert "set GOVERNOR_BROKER_URL=redis://127.0.0.1:6379/N" in answered["GOVERNOR_BROKER_CHOICE"]
    configured = {"GOVERNOR_VAR_DIR": str(tmp_path), "GOVERNOR_BROKER_URL": "redis://queue:6379/2"}
    prepare(configured)
    assert configured["GOVERNOR_BROKER_URL"] == "redis://queue:6379/2"
    assert "GOVERNOR_BROKER_CHOICE" not in configured
