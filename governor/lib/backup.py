"""A consistent copy of one installation, taken while it serves (docs/operations.md, "Backup and
restore"): the database (SQLite's online backup API, or `pg_dump --format=custom`), the
filesystem blob store and the secret key file, with a `backup.json` listing every file and its
SHA-256. The private signing keys are rows of the database, so they are in the copy; the
directory is made owner-only and every file 0600.

The database goes first: a blob is written before the row that names it commits, and garbage
collection spares every blob younger than its grace period, so each blob the copied database
names is still in the store when the blobs are copied after it."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from django.conf import settings
from django.db import connection

MANIFEST = "backup.json"
SQLITE_FILE = "governor.sqlite3"
PG_DUMP_FILE = "governor.pgdump"
BLOBS = "blobs"
KEY_FILE = "secret_key"  # noqa: S105 - the file name inside a backup, not a secret


class BackupError(Exception):
    """The backup could not be made; the message says why (nothing is left half-written)."""


@dataclass(frozen=True)
class Backup:
    directory: Path
    database: str  # "sqlite" | "postgresql"
    files: dict[str, str]  # path inside the backup -> sha256
    blobs: str  # "copied" | "s3: not copied (...)"


def backup_create(destination: Path) -> Backup:
    """Write the backup into `destination`, which must not exist yet. On any failure the
    partial directory is removed."""
    if destination.exists():
        raise BackupError(f"{destination} exists: a backup goes into a new directory")
    partial = destination.with_name(f".{destination.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(mode=0o700, parents=True)
    try:
        database = _database(partial)
        blobs = _blobs(partial)
        _secret_key(partial)
        files = {str(path.relative_to(partial)): _sha256(path)
                 for path in sorted(partial.rglob("*")) if path.is_file()}
        manifest = {"createdAt": int(time.time() * 1000), "database": database,
                    "blobs": blobs, "files": files}
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
        (partial / MANIFEST).chmod(0o600)
        partial.rename(destination)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return Backup(destination, database, files, blobs)


def _database(into: Path) -> str:
    if connection.vendor == "sqlite":
        connection.ensure_connection()
        target = sqlite3.connect(into / SQLITE_FILE)
        try:
            connection.connection.backup(target)  # one consistent snapshot, writers go on
        finally:
            target.close()
        (into / SQLITE_FILE).chmod(0o600)
        return "sqlite"
    if connection.vendor == "postgresql":
        db = settings.DATABASES["default"]
        env = {**os.environ, "PGPASSWORD": str(db.get("PASSWORD") or "")}
        command = ["pg_dump", "--format=custom", "--no-owner", f"--file={into / PG_DUMP_FILE}",
                   f"--host={db.get('HOST') or '127.0.0.1'}", f"--port={db.get('PORT') or 5432}",
                   f"--username={db.get('USER') or 'postgres'}", str(db["NAME"])]
        try:
            result = subprocess.run(command, env=env, capture_output=True, text=True,  # noqa: S603
                                    timeout=3600, check=False)
        except FileNotFoundError:
            raise BackupError("pg_dump is not installed (apt-get install postgresql-client)") \
                from None
        if result.returncode != 0:
            raise BackupError(f"pg_dump failed: {result.stderr.strip()}")
        (into / PG_DUMP_FILE).chmod(0o600)
        return "postgresql"
    raise BackupError(f"no backup for the {connection.vendor} database")


def _blobs(into: Path) -> str:
    backend = str(cast(dict[str, Any], settings.STORAGES["governor_blobs"])["BACKEND"])
    if not backend.endswith("FileSystemStorage"):
        return "s3: not copied (back the bucket up with its own versioning or replication)"
    source = Path(settings.GOVERNOR_BLOB_DIR)
    target = into / BLOBS
    target.mkdir(mode=0o700)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True, copy_function=shutil.copy2)
    return "copied"


def _secret_key(into: Path) -> None:
    source = Path(os.environ.get("SECRET_KEY_FILE") or settings.VAR_DIR / "secret_key")
    if source.is_file():
        shutil.copy2(source, into / KEY_FILE)
        (into / KEY_FILE).chmod(0o600)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
