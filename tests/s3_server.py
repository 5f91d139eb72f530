"""A real S3-compatible server for the blob store's S3 path: moto's standalone server, started
on its own loopback port by the test run (and by benchmark B8) and stopped by it (never a mock
of the client)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CREDENTIALS = {"access_key": "governor-test", "secret_key": "governor-test-secret"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class S3Server:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=CREDENTIALS["access_key"],
                            aws_secret_access_key=CREDENTIALS["secret_key"])

    def bucket(self) -> str:
        name = f"blobs-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def storage(self, bucket: str) -> dict[str, Any]:
        """The `governor_blobs` STORAGES entry for `bucket`, as settings.blob_storage("s3")
        builds it from GOVERNOR_S3_* (plus the test credentials)."""
        return {"BACKEND": "governor.s3_storage.BlobS3Storage",
                "OPTIONS": {"bucket_name": bucket, "endpoint_url": self.endpoint,
                            "region_name": "us-east-1", "location": "", "file_overwrite": True,
                            "default_acl": None, **CREDENTIALS}}

    def environment(self, bucket: str) -> dict[str, str]:
        """The environment that configures a governor process for `bucket`."""
        return {"GOVERNOR_BLOB_STORE": "s3", "GOVERNOR_S3_BUCKET": bucket,
                "GOVERNOR_S3_ENDPOINT_URL": self.endpoint, "GOVERNOR_S3_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key"],
                "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_key"]}


@contextmanager
def moto_server(log: Path | None = None) -> Iterator[S3Server]:
    """moto's server on a free loopback port, until the block ends (its output to `log`). The
    test suite's fixture below and benchmark B8 both start it here."""
    port = _free_port()
    executable = Path(sys.executable).parent / "moto_server"
    with open(log or os.devnull, "wb") as output:
        process = subprocess.Popen([str(executable), "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True,
                                   env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"})
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    said = log.read_text() if log is not None else "(no log kept)"
                    raise RuntimeError(f"moto_server did not start: {said}") from None
                time.sleep(0.1)
        yield S3Server(f"http://127.0.0.1:{port}")
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    with moto_server(Path(tmp_path_factory.mktemp("moto")) / "moto.log") as server:
        yield server
