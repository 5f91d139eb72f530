"""Uploading a directory as a snapshot (rules §11.1): the agent's workspace on a machine that
shares no disk with the governor.

The tree is computed by stock git — the reference the server's ids are defined by (§10.1) — in a
private repository, with the command §10.1 gives and the project's exclusions (asked from the
server, so both sides compute the same tree). Git's index there is the stat cache: a re-upload
reads only what changed. Only the blobs the server lacks are sent (after a first upload, only
the blobs the last snapshot did not hold are even asked about), in parallel — small ones packed
into batches (`POST /blobs`, at most BATCH_BYTES and BATCH_BLOBS each, or the server's caps if
lower), large ones one `PUT` each —, each read from the workspace and checked against its id (a
file that changed since it was hashed aborts the upload: hash again); then the manifest, as the
changed entries over the last snapshot this workspace sent (`base`) when there is one.

The repository is the client's own and lies outside the workspace: a workspace holds whatever
its writer put there (a cloned repository can carry a `.governor/` of its own), and git runs the
commands its repository's config names (`core.fsmonitor`, hooks, filter drivers) with the
agent's token in reach. It is in the user's cache directory (`$XDG_CACHE_HOME`, else `~/.cache`), in
`governor-agent/snapshots/<sha256 of the workspace's canonical path>/` (made 0700; refused
unless the user's alone, or when inside the workspace), beside the upload lock and the record of
the last snapshot sent, which belong with the index they guard and extend. Then:

- it is used only as the client made it: on making it the client records the workspace's path
  and the SHA-256 of the config `git init` wrote (`repository.json`); a repository without that
  record, for another path or with another config (one something else made there, or one
  left half made) is deleted and made again;
- every git call passes `-c core.fsmonitor=false -c core.hooksPath=/dev/null` (no command run
  here needs either), and `info/attributes` unsets every filter and conversion for every path,
  which outranks the workspace's `.gitattributes`;
- git's environment is PATH and GIT_ENVIRONMENT only: no system, user or home config,
  attributes or ignore file; none of the agent's variables (no GIT_* such as GIT_EXTERNAL_DIFF,
  GIT_SSH or GIT_CONFIG_PARAMETERS, no pager, editor or askpass, not the token).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governor_client.client import GovernorClient
from governor_client.errors import GovernorError, StateUnusable
from governor_client.statedir import StateDir, open_state_dir

GIT_DIR = "snapshot.git"
REPOSITORY_RECORD = "repository.json"
LAST_SNAPSHOT = "snapshot.json"
UPLOAD_LOCK = "upload.lock"
MODES = frozenset({"100644", "100755", "120000"})
MISSING_PER_REQUEST = 10_000
# Blobs under LARGE_BLOB bytes travel in batches of at most BATCH_BYTES and BATCH_BLOBS: one
# request per few hundred files instead of one each, still several requests to send in parallel.
LARGE_BLOB = 1024 * 1024
BATCH_BYTES = 4 * 1024 * 1024
BATCH_BLOBS = 1000
# §10.1: git's own conversions and the machine's configuration never touch the bytes hashed.
GIT_CONFIG = ("-c", "core.autocrlf=false", "-c", "core.fileMode=true", "-c", "core.symlinks=true",
              "-c", "core.ignorecase=false", "-c", "core.precomposeunicode=false",
              "-c", "core.safecrlf=false", "-c", "core.quotepath=false")
ATTRIBUTES = "* -text -filter -ident -working-tree-encoding\n"
# Nothing for git to run of its own accord, whatever a config says.
RUN_NOTHING = ("-c", "core.fsmonitor=false", "-c", f"core.hooksPath={os.devnull}")
GIT_ENVIRONMENT = {"LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
                    "GIT_ATTR_NOSYSTEM": "1"}

Progress = Callable[[int, int, int, int], None]  # blobs sent, blobs to send, bytes, total bytes


class SnapshotError(GovernorError):
    def __init__(self, message: str) -> None:
        super().__init__(None, "SNAPSHOT", message)


@dataclass(frozen=True)
class LocalTree:
    id: str  # gittree:sha256:<hex>
    entries: dict[str, tuple[str, str]]  # path -> (mode, blob id)


def _git(git_dir: Path, root: Path, *args: str) -> bytes:
    git = shutil.which("git")
    if git is None:
        raise SnapshotError("git is not installed: a snapshot's tree is computed by git (2.29 or "
                            "later, for SHA-256 object names)")
    result = subprocess.run(  # noqa: S603 - git with fixed arguments and pathspecs
        [git, "--no-pager", f"--git-dir={git_dir}", f"--work-tree={root}", *RUN_NOTHING,
         *GIT_CONFIG, *args],
        cwd=root, env={"PATH": os.environ.get("PATH", os.defpath), **GIT_ENVIRONMENT},
        stdin=subprocess.DEVNULL, capture_output=True, check=False)
    if result.returncode != 0:
        raise SnapshotError(f"git {args[0]} failed: "
                            f"{result.stderr.decode('utf-8', 'replace').strip()}")
    return result.stdout


def cache_dir(root: Path) -> Path:
    """Where the snapshot state of the workspace `root` (a canonical path) is kept."""
    configured = os.environ.get("XDG_CACHE_HOME", "")
    cache = Path(configured) if os.path.isabs(configured) else Path.home() / ".cache"
    return cache / "governor-agent" / "snapshots" / hashlib.sha256(os.fsencode(root)).hexdigest()


@contextmanager
def _snapshot_state(root: Path) -> Iterator[StateDir]:
    """The directory of `root`'s snapshot state, made private to the user."""
    path = cache_dir(root)
    snapshots = path.parent  # <cache>/governor-agent/snapshots
    if snapshots.resolve().is_relative_to(root):
        raise SnapshotError(f"the snapshot cache {snapshots} lies inside the workspace it would "
                            "hash: set XDG_CACHE_HOME to a directory outside it")
    with contextlib.ExitStack() as opened:
        try:
            snapshots.parent.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            for directory in (snapshots.parent, snapshots):
                directory.mkdir(mode=0o700, exist_ok=True)
            state = opened.enter_context(
                open_state_dir(snapshots, path.name, create=True, mode=0o700))
            owner = os.fstat(state.fd)
        except OSError as exc:
            raise SnapshotError(f"cannot use the snapshot cache {path}: {exc.strerror}") from None
        if owner.st_uid != os.geteuid() or owner.st_mode & 0o077:
            raise SnapshotError(f"{path} is not yours alone (owner uid {owner.st_uid}, mode "
                                f"{stat.S_IMODE(owner.st_mode):o}): remove it, and "
                                "governor-agent makes it again")
        yield state


def _record_of(git_dir: Path, root: Path) -> dict[str, str] | None:
    """The record that says this client made the repository at `git_dir`, as it is now, for
    `root` (None while there is no repository)."""
    try:
        config = (git_dir / "config").read_bytes()
    except FileNotFoundError:
        return None
    return {"workspace": str(root), "config_sha256": hashlib.sha256(config).hexdigest()}


def _repository(state: StateDir, root: Path) -> Path:
    """The git directory of `root`'s snapshots, exactly as this client made it: made (again)
    when it is not."""
    git_dir = state.path / GIT_DIR
    try:
        record = json.loads(state.read_text(REPOSITORY_RECORD) or "null")
    except (ValueError, StateUnusable):
        record = None
    if record is not None and record == _record_of(git_dir, root):
        return git_dir
    state.remove(REPOSITORY_RECORD)  # first: a repository half made again is never taken
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(git_dir)
    _git(git_dir, root, "init", "-q", "--template=", "--object-format=sha256")
    (git_dir / "info").mkdir()
    (git_dir / "info" / "attributes").write_text(ATTRIBUTES)
    state.replace(REPOSITORY_RECORD, json.dumps(_record_of(git_dir, root)))
    return git_dir


def local_tree(root: Path, exclusions: list[str], state: StateDir) -> LocalTree:
    """The tree of `root` as rules §10.1 defines it, with its entries."""
    git_dir = _repository(state, root)
    pathspecs = [".", ":!/.governor", *(f":(exclude,glob){p}" for p in exclusions)]
    _git(git_dir, root, "add", "-A", "-f", "--", *pathspecs)
    entries: dict[str, tuple[str, str]] = {}
    for record in _git(git_dir, root, "ls-files", "-s", "-z").split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, blob, _stage = meta.decode().split(" ")
        path = raw_path.decode("utf-8", "surrogateescape")
        if mode not in MODES:
            raise SnapshotError(f"{path!r} cannot be part of a snapshot (git mode {mode}: a "
                                "nested repository?)")
        entries[path] = (mode, blob)
    tree = _git(git_dir, root, "write-tree").decode().strip()
    return LocalTree("gittree:sha256:" + tree, entries)


def _content(root: Path, path: str, mode: str, blob: str) -> bytes:
    full = root / path
    data = os.fsencode(os.readlink(full)) if mode == "120000" else full.read_bytes()
    digest = hashlib.sha256(b"blob %d\0" % len(data))
    digest.update(data)
    if digest.hexdigest() != blob:
        raise SnapshotError(f"{path!r} changed while the snapshot was being uploaded: upload again")
    return data


def _last(state: StateDir, session_id: str) -> dict[str, Any] | None:
    try:
        last = json.loads(state.read_text(LAST_SNAPSHOT) or "null")
    except (OSError, ValueError, StateUnusable):
        return None
    return last if isinstance(last, dict) and last.get("session") == session_id else None


def _remember(state: StateDir, session_id: str, tree: LocalTree) -> None:
    state.replace(LAST_SNAPSHOT, json.dumps({"session": session_id, "tree": tree.id,
                                             "entries": tree.entries}))


class UploadInProgress(SnapshotError):
    """Another process of this workspace is uploading (a hook's background upload)."""


@contextmanager
def upload_lock(state: StateDir, wait: float | None) -> Iterator[None]:
    """One upload per workspace at a time (git's index is not shared). `wait`: seconds to wait
    for the one running (None: as long as it takes)."""
    fd = state.open(UPLOAD_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except BlockingIOError:
                if deadline is None or time.monotonic() >= deadline:
                    raise UploadInProgress("upload in progress: another upload of this "
                                           "workspace has not finished yet") from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def upload(client: GovernorClient, session_id: str, root: Path, *,
           progress: Progress | None = None, workers: int = 8,
           wait: float | None = None) -> dict[str, Any]:
    """Upload `root` as the session's newest snapshot; its answer `{tree, files, bytes, …}` plus
    `sent_blobs` and `sent_bytes`. An unchanged tree is not sent again. Waits at most `wait`
    seconds for an upload of the same workspace already running (UploadInProgress)."""
    root = root.resolve()
    with _snapshot_state(root) as state, upload_lock(state, wait):
        return _upload(client, session_id, root, state, progress=progress, workers=workers)


def _upload(client: GovernorClient, session_id: str, root: Path, state: StateDir, *,
            progress: Progress | None, workers: int) -> dict[str, Any]:
    project = client.project()
    tree = local_tree(root, list(project["tree_exclusions"]), state)
    last = _last(state, session_id)
    if last is not None and last.get("tree") == tree.id:
        return {"tree": tree.id, "files": len(tree.entries), "sent_blobs": 0, "sent_bytes": 0,
                "unchanged": True}
    before = last.get("entries") if last is not None else None
    if isinstance(before, Mapping):
        try:  # the changes over the last snapshot, whose blobs the server keeps with it
            return _send(client, session_id, root, tree, state, progress, workers,
                         project, base=(str(last["tree"]), before))  # type: ignore[index]
        except GovernorError as error:
            if error.status != 404:
                raise
            # the base is gone (the state names another session's?): send the tree whole
    return _send(client, session_id, root, tree, state, progress, workers, project,
                 base=None)


def _send(client: GovernorClient, session_id: str, root: Path, tree: LocalTree, state: StateDir,
          progress: Progress | None, workers: int, project: Mapping[str, Any],
          base: tuple[str, Mapping[str, Any]] | None) -> dict[str, Any]:
    known = set() if base is None else {entry[1] for entry in base[1].values()
                                        if isinstance(entry, list | tuple) and len(entry) == 2}
    blobs: dict[str, tuple[str, str]] = {}
    for path, (mode, blob) in tree.entries.items():
        if blob not in known:
            blobs.setdefault(blob, (path, mode))
    wanted = sorted(blobs)
    missing: list[str] = []
    for start in range(0, len(wanted), MISSING_PER_REQUEST):
        missing += client.blobs_missing(wanted[start:start + MISSING_PER_REQUEST])
    sizes = {blob: _size(root, *blobs[blob]) for blob in missing}
    total, sent, sent_bytes = sum(sizes.values()), 0, 0

    def send(batch: bool, group: list[str]) -> tuple[int, int]:
        contents = [(blob, _content(root, *blobs[blob], blob)) for blob in group]
        if batch:
            client.put_blobs(contents)
        else:
            client.put_blob(*contents[0])
        return len(contents), sum(len(data) for _blob, data in contents)

    if progress is not None:
        progress(0, len(missing), 0, total)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for done in as_completed([pool.submit(send, batch, group)
                                  for batch, group in _groups(missing, sizes, project)]):
            count, size = done.result()
            sent, sent_bytes = sent + count, sent_bytes + size
            if progress is not None:
                progress(sent, len(missing), sent_bytes, total)
    if base is None:
        answer = client.create_snapshot(session_id, [
            {"path": p, "mode": m, "blob": b} for p, (m, b) in tree.entries.items()])
    else:
        earlier = base[1]
        changed: list[dict[str, Any]] = [
            {"path": p, "mode": m, "blob": b} for p, (m, b) in tree.entries.items()
            if tuple(earlier.get(p) or ()) != (m, b)]
        changed += [{"path": p, "mode": "100644", "blob": None}
                    for p in earlier if p not in tree.entries]
        answer = client.create_snapshot(session_id, changed, base=base[0])
    if answer["tree"] != tree.id:
        raise SnapshotError(f"the server computed {answer['tree']} for the tree git computed as "
                            f"{tree.id}")
    _remember(state, session_id, tree)
    return {**answer, "sent_blobs": sent, "sent_bytes": sent_bytes}


def _groups(missing: list[str], sizes: Mapping[str, int],
            project: Mapping[str, Any]) -> list[tuple[bool, list[str]]]:
    """The requests that send `missing`, (batch?, ids): each large blob alone (a PUT), the
    others packed in batches within this client's and the server's caps (a server that names
    no batch caps takes one PUT per blob)."""
    if "max_batch_bytes" not in project:
        return [(False, [blob]) for blob in missing]
    cap_bytes = min(BATCH_BYTES, int(project["max_batch_bytes"]))
    cap_blobs = min(BATCH_BLOBS, int(project["max_batch_blobs"]))
    groups: list[tuple[bool, list[str]]] = []
    batch: list[str] = []
    batch_bytes = 0
    for blob in missing:
        framed = sizes[blob] + 86  # the header line: 64 hex, a space, up to 20 digits, \n
        if sizes[blob] >= LARGE_BLOB or framed > cap_bytes:
            groups.append((False, [blob]))
            continue
        if batch and (batch_bytes + framed > cap_bytes or len(batch) >= cap_blobs):
            groups.append((True, batch))
            batch, batch_bytes = [], 0
        batch.append(blob)
        batch_bytes += framed
    return groups + ([(True, batch)] if batch else [])


def _size(root: Path, path: str, mode: str) -> int:
    full = root / path
    return len(os.fsencode(os.readlink(full))) if mode == "120000" else full.lstat().st_size
