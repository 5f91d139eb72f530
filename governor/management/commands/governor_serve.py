"""Run the web server and a Celery worker in the foreground until Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Serve the API, reviewer pages and admin (gunicorn, threaded) plus a Celery worker."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default=os.environ.get("GOVERNOR_BIND", "127.0.0.1:8000"))
        parser.add_argument("--threads", type=int, default=64)
        parser.add_argument("--no-worker", action="store_true", help="web only")

    def handle(self, *args: Any, **options: Any) -> None:
        bin_dir = os.path.dirname(sys.executable)
        web = [
            os.path.join(bin_dir, "gunicorn"), "governor.wsgi:application",
            "--bind", options["bind"], "--worker-class", "gthread", "--workers", "2",
            "--threads", str(options["threads"]), "--timeout", "90", "--access-logfile", "-",
        ]
        worker = [
            os.path.join(bin_dir, "celery"), "-A", "governor.celery", "worker",
            "--loglevel", "INFO", "--concurrency", "2", "--without-gossip", "--without-mingle",
            # Periodic work (expiring reviews and lost runs) rides in the worker: one process.
            "--beat", "--schedule", str(settings.VAR_DIR / "celerybeat-schedule"),
        ]
        host = options["bind"]
        self.stdout.write(f"broker: {settings.BROKER_URL} ({settings.BROKER_REASON})")
        database = settings.DATABASES["default"]
        self.stdout.write(f"database: {str(database['ENGINE']).rsplit('.', 1)[-1]} "
                          f"{database['NAME']}")
        self.stdout.write(self.style.SUCCESS(
            f"reviewer inbox http://{host}/reviews/  ·  API docs http://{host}/api/v1/docs  ·  "
            f"admin http://{host}/admin/  ·  Ctrl-C stops"
        ))
        children = [subprocess.Popen(web)]  # noqa: S603 - fixed argv
        if not options["no_worker"]:
            children.append(subprocess.Popen(worker))  # noqa: S603

        def stop(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        try:
            while all(child.poll() is None for child in children):
                time.sleep(0.5)
            self.stderr.write("a child process exited; stopping")
        except KeyboardInterrupt:
            self.stdout.write("stopping")
        finally:
            for child in children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in children:
                try:
                    child.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    child.kill()
