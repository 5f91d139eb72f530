"""Start-up checks (Django system checks): `governor_serve`, `runserver`, `migrate` and `check`
refuse to go on while one of them fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core import checks


def secret_paths() -> list[Path]:
    """The var directory and the files that hold secrets: the SQLite database with its -wal and
    -shm (the private signing keys and token digests live there) and the secret key file."""
    paths = [settings.VAR_DIR]
    database = settings.DATABASES["default"]
    if str(database["ENGINE"]).endswith("sqlite3"):
        paths += [Path(f"{database['NAME']}{suffix}") for suffix in ("", "-wal", "-shm")]
    if settings.SECRET_KEY_PATH is not None:
        paths.append(settings.SECRET_KEY_PATH)
    return paths


@checks.register(checks.Tags.security)
def secrets_are_owner_only(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Group or others may use none of them: a hard link to the database in a workspace would
    otherwise be readable by the sandbox's uid."""
    errors: list[checks.CheckMessage] = []
    for path in secret_paths():
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            continue
        if mode & 0o077:
            wanted = 0o700 if path.is_dir() else 0o600
            errors.append(checks.Error(
                f"{path} has mode {mode:04o}: other users may read it, and so may the sandbox "
                f"through a hard link; it must be {wanted:04o}",
                hint=f"chmod {wanted:o} {path}", id="governor.E001",
            ))
    return errors
