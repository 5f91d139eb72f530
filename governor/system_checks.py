"""Start-up checks (Django system checks): `governor_serve`, `runserver`, `migrate` and `check`
refuse to go on while one of them fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core import checks

from governor.models import Project


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


def data_directories() -> list[tuple[Path, str]]:
    """What an agent must never reach through a workspace: the var directory (the database with
    the private signing keys, the secret key, the caches) and, in the filesystem store, the
    blob directory (every kept file of every project), with the names they are configured by."""
    from django.core.files.storage import FileSystemStorage, storages

    places = [(settings.VAR_DIR, "the server's data directory (GOVERNOR_VAR_DIR)")]
    if isinstance(storages["governor_blobs"], FileSystemStorage):
        places.append((settings.GOVERNOR_BLOB_DIR, "the blob directory (GOVERNOR_BLOB_DIR)"))
    return [(Path(path).resolve(), name) for path, name in places]


def configured_workspace_roots() -> list[tuple[str, str | None]]:
    """Every workspace root with the project that lists it (None: GOVERNOR_WORKSPACE_ROOTS);
    only the setting's while the database is not migrated yet."""
    from django.db import DatabaseError


    roots: list[tuple[str, str | None]] = [
        (root, None) for root in settings.GOVERNOR_WORKSPACE_ROOTS]
    try:
        projects = list(Project.objects.values_list("slug", "workspace_roots"))
    except DatabaseError:
        return roots
    for slug, listed in projects:
        roots += [(root, slug) for root in listed if isinstance(root, str)]
    return roots


@checks.register(checks.Tags.security)
def workspace_roots_outside_data(app_configs: Any = None,
                                 **kwargs: Any) -> list[checks.CheckMessage]:
    """Issue 25: a workspace root inside (or holding) var/ or the blob directory lets an agent
    that writes there, or binds a workspace there, reach the signing keys, the database or
    every project's kept files. A warning, not a refusal: moving a root is the operator's
    decision, and an installation bootstrapped before the demo root left var/ still starts."""
    warnings: list[checks.CheckMessage] = []
    data = data_directories()
    for root, slug in configured_workspace_roots():
        where = "GOVERNOR_WORKSPACE_ROOTS" if slug is None else f"project {slug}'s workspace roots"
        resolved = Path(root).resolve()
        for directory, name in data:
            if resolved == directory or directory in resolved.parents:
                relation = "is inside"
            elif resolved in directory.parents:
                relation = "contains"
            else:
                continue
            hint = ("remove it from GOVERNOR_WORKSPACE_ROOTS" if slug is None else
                    "give the project a root outside it, in the admin's project page or with "
                    f"`manage.py governor_project set {slug} --workspace-root DIR` (the demo "
                    "project's default is workspaces/ beside var/, "
                    "GOVERNOR_DEMO_WORKSPACE_ROOT)")
            warnings.append(checks.Warning(
                f"the workspace root {root} ({where}) {relation} {name} {directory}: an agent "
                "that works there can read the signing keys, the database or other projects' "
                "files", hint=hint, id="governor.W001"))
    return warnings


@checks.register(checks.Tags.security)
def outcome_data_outside_workspaces(app_configs: Any = None,
                                    **kwargs: Any) -> list[checks.CheckMessage]:
    """rules §15.2: an outcome is judged by what its probe reads in GOVERNOR_OUTCOME_DATA_DIR.
    Inside a workspace root (or holding one) an agent that works there could write the data,
    or the probe, its own outcome is judged by. A warning, as for W001."""
    if not settings.GOVERNOR_OUTCOME_DATA_DIR:
        return []
    data = Path(settings.GOVERNOR_OUTCOME_DATA_DIR).resolve()
    warnings: list[checks.CheckMessage] = []
    for root, slug in configured_workspace_roots():
        resolved = Path(root).resolve()
        if resolved == data or resolved in data.parents:
            relation = "is inside"
        elif data in resolved.parents:
            relation = "holds"
        else:
            continue
        where = "GOVERNOR_WORKSPACE_ROOTS" if slug is None else f"project {slug}'s workspace roots"
        warnings.append(checks.Warning(
            f"the outcome data directory {settings.GOVERNOR_OUTCOME_DATA_DIR} "
            f"(GOVERNOR_OUTCOME_DATA_DIR) {relation} the workspace root {root} ({where}): an "
            "agent that works there can change the data, or the probe, its outcome is judged by",
            hint="give GOVERNOR_OUTCOME_DATA_DIR a directory outside every workspace root "
                 "(docs/outcomes.md: outcome-data/ beside workspaces/ in the checkout)",
            id="governor.W002"))
    return warnings
