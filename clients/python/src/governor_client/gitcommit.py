"""Certified commits on the agent's side and at the merge.

`governor-agent commit` commits the session's certified tree and nothing else: the working tree
must hash to the certified tree (with the project's exclusions), the index is staged from it
(`git add -A -f`, the exclusions and `.governor` left out) and must itself be exactly the
certified tree (else it is left as it was), no `.gitattributes` of it may convert a path's
content on checkout (rules §17.9; refused naming the attribute and the path), the commit carries
the trailers `Governor-Session` and `Governor-Terminal`, and a note under `refs/notes/governor`
carries the signed terminal (DSSE envelope) with the certified manifest; `--push REMOTE BRANCH`
pushes the notes ref, then the branch.

`governor-agent git-hook pre-receive|update` gates a git server's protected refs (git config
`governor.protectedRefs`, glob patterns, several values or whitespace-separated): the new commit
of every update of a protected ref must be certified, offline from the pushed note and the keys
in `governor.keysFile`, or online through `governor.server` (with `governor.tokenFile`, an agent
token of the project; keys from `governor.keysFile`, else the server's published keys). Any
doubt refuses: no note, a note that does not verify, a server that cannot be reached, no mode
configured, a protected ref deleted, a commit whose `.gitattributes` convert a path on checkout.
Unprotected refs are never looked at.

The rules themselves (tree ids, notes, what certifies a commit) are `governor.domain.commits`,
shipped in this package beside `governor.verify`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from governor.domain.canonical import canonical_bytes
from governor.domain.checkout import refusal_text
from governor.domain.commits import (
    NOTES_REF,
    SESSION_TRAILER,
    TERMINAL_TRAILER,
    ZERO_OIDS,
    Certification,
    CertificationError,
    GitError,
    Verdict,
    certification_of,
    certification_of_note,
    commit_tree_id,
    git,
    glob_matches,
    judge_commit,
    manifest_differences,
    note_text,
    read_commit,
    read_note,
    read_tree_entries,
    tree_checkout_attributes,
)
from governor.domain.fields import FieldsInvalid
from governor.domain.tree import TreeError, hash_tree
from governor.verify import ServerError, load_trusted_keys, server_certifications, server_get
from governor_client.client import GovernorClient
from governor_client.errors import GovernorError


class CommitRefused(GovernorError):
    def __init__(self, message: str, details: Any = None) -> None:
        super().__init__(None, "NOT_CERTIFIED", message, details)


# --- governor-agent commit ----------------------------------------------------------------------


def latest_certification(client: GovernorClient, session_id: str) -> tuple[Certification,
                                                                           dict[str, Any]]:
    """The session's newest certified terminal, its envelope checked here against the keys the
    server publishes; (certification, envelope)."""
    items = client.certifications(session=session_id)
    if not items:
        raise CommitRefused(f"session {session_id} has no certified terminal: nothing to commit")
    item = items[0]
    keys = load_trusted_keys(canonical_bytes({"keys": client.keys()}))
    try:
        certification = certification_of(item["envelope"], keys, exclusions=item["exclusions"],
                                          entries=item["entries"])
    except CertificationError as exc:
        raise CommitRefused(str(exc)) from None
    return certification, item["envelope"]


def commit_certified(client: GovernorClient, session_id: str, root: Path, *,
                     message: str | None = None,
                     push: Sequence[str] | None = None) -> dict[str, Any]:
    certification, envelope = latest_certification(client, session_id)
    repo = str(root)
    assert certification.entries is not None
    try:
        hashed = hash_tree(repo, exclusions=certification.exclusions, max_files=sys.maxsize,
                           max_bytes=sys.maxsize)
    except TreeError as exc:
        raise CommitRefused(f"the working tree cannot be hashed: {exc}") from None
    if hashed.id != certification.tree:
        differences = manifest_differences(certification.entries, hashed.manifest)
        raise CommitRefused(f"the working tree is {hashed.id}, not {certification.tree}, the "
                            f"tree session {session_id} certified: commit refused",
                            {"differences": list(differences)})
    try:
        _stage_exactly(repo, certification)
        git(repo, "commit", "-q", "--allow-empty", "-m",
            message or f"Certified work of session {session_id}",
            "--trailer", f"{SESSION_TRAILER}: {certification.session}",
            "--trailer", f"{TERMINAL_TRAILER}: {certification.terminal_receipt}")
        commit = read_commit(repo, "HEAD")
        verdict = judge_commit(commit, [certification])
        if not verdict.ok:
            raise CommitRefused(f"commit {commit.oid} was made but is not certified (a commit "
                                f"hook changed it?): no note added", {"verdict": verdict.lines()})
        git(repo, "notes", f"--ref={NOTES_REF}", "add", "-f", "-F", "-", commit.oid,
            stdin=note_text(envelope, certification.entries))
        pushed = None
        if push:
            remote, branch = push
            merge_remote_notes(repo, remote)
            git(repo, "push", "-q", remote, f"{NOTES_REF}:{NOTES_REF}")
            git(repo, "push", "-q", remote, f"{commit.oid}:refs/heads/{branch}")
            pushed = {"remote": remote, "branch": branch}
    except (GitError, TreeError) as exc:
        raise CommitRefused(str(exc)) from None
    return {"commit": commit.oid, "tree": certification.tree, "session": certification.session,
            "terminal": certification.terminal_receipt, "note": NOTES_REF, "pushed": pushed}


def _stage_exactly(repo: str, certification: Certification) -> None:
    """Stage the working tree (`git add -A -f`, the exclusions and `.governor` left out) in a
    copy of the index, and put the copy in place only when it is exactly the certified tree:
    a refusal leaves the index as it was."""
    index = Path(repo, git(repo, "rev-parse", "--git-path", "index").decode().strip())
    staging = index.with_name("index.governor")
    if index.exists():
        shutil.copy2(index, staging)  # git's stat data kept: only changed files are re-read
    try:
        excludes = [f":(exclude,glob){pattern}" for pattern in certification.exclusions]
        alone = {"GIT_INDEX_FILE": str(staging)}
        git(repo, "-c", "core.autocrlf=false", "add", "-A", "-f", "--", ".", ":!/.governor",
            *excludes, env=alone)
        staged = git(repo, "write-tree", env=alone).decode().strip()
        entries = read_tree_entries(repo, staged)[1]
        staged_id, staged_manifest = commit_tree_id(entries)
        if staged_id != certification.tree:
            assert certification.entries is not None
            differences = manifest_differences(certification.entries, staged_manifest)
            raise CommitRefused("the index is not exactly the certified tree (files the "
                                "project excludes are tracked, or a git attribute filters "
                                "content): commit refused, the index left as it was",
                                {"differences": list(differences)})
        converted = tree_checkout_attributes(repo, staged, entries)
        if converted:
            raise CommitRefused(f"{refusal_text(converted)}: commit refused, the index left as "
                                f"it was", {"converted": [str(item) for item in converted]})
        os.replace(staging, index)
    finally:
        staging.unlink(missing_ok=True)


def merge_remote_notes(repo: str, remote: str) -> None:
    """Merge the remote's governor notes into ours (other agents' certifications), keeping our
    note where both annotate one commit, so the notes push is a fast-forward."""
    fetched = "refs/notes/governor-remote"
    try:
        git(repo, "fetch", "-q", remote, f"+{NOTES_REF}:{fetched}")
    except GitError:
        return  # the remote has no notes yet
    try:
        git(repo, "notes", f"--ref={NOTES_REF}", "merge", "-q", "-s", "ours", fetched)
    finally:
        git(repo, "update-ref", "-d", fetched)


# --- governor-agent git-hook --------------------------------------------------------------------


@dataclass(frozen=True)
class HookConfig:
    protected: tuple[str, ...]
    keys_file: str | None
    server: str | None
    token_file: str | None


def _config(repo: str, key: str, *, every: bool = False) -> list[str]:
    try:
        raw = git(repo, "config", "--get-all" if every else "--get", key)
    except GitError:
        return []  # unset
    return raw.decode().split("\n")[:-1] if every else [raw.decode().strip()]


def hook_config(repo: str) -> HookConfig:
    patterns = [p for value in _config(repo, "governor.protectedRefs", every=True)
                for p in value.split()]

    def one(key: str) -> str | None:
        values = _config(repo, key)
        return values[0] if values and values[0] else None

    return HookConfig(tuple(patterns), one("governor.keysFile"), one("governor.server"),
                      one("governor.tokenFile"))


def check_update(repo: str, config: HookConfig, ref: str, new: str,
                 notes: str | None) -> Verdict:
    """The verdict on updating protected `ref` to `new`; `notes` the notes commit this push
    brings for refs/notes/governor (else the repository's)."""
    if new in ZERO_OIDS:
        return Verdict(False, f"FAIL: {ref} is protected: it cannot be deleted through the gate")
    try:
        commit = read_commit(repo, new)
        if config.server is not None:
            if config.token_file is None:
                return Verdict(False, "FAIL: governor.server is set without governor.tokenFile")
            token = Path(config.token_file).read_text(encoding="utf-8").strip()
            if config.keys_file is not None:
                keys = load_trusted_keys(Path(config.keys_file).read_bytes())
            else:
                keys = load_trusted_keys(canonical_bytes(
                    server_get(config.server, token, "/api/v1/keys")))
            return judge_commit(commit, server_certifications(config.server, token, keys,
                                                              commit, repo))
        if config.keys_file is None:
            return Verdict(False, "FAIL: neither governor.keysFile (offline) nor governor.server "
                                  "(online) is configured: protected refs fail closed")
        keys = load_trusted_keys(Path(config.keys_file).read_bytes())
        raw = read_note(repo, notes or NOTES_REF, commit.oid)
        if raw is None:
            return Verdict(False, f"FAIL: commit {commit.oid[:12]} has no note under {NOTES_REF} "
                                  f"(push it with the branch: governor-agent commit --push)")
        return judge_commit(commit, [certification_of_note(raw, keys)])
    except ServerError as exc:
        return Verdict(False, f"FAIL: {exc}: protected refs fail closed")
    except (GitError, OSError, CertificationError, FieldsInvalid, ValueError) as exc:
        return Verdict(False, f"FAIL: {exc}")


def run_hook(kind: str, argv: Sequence[str], stdin: TextIO, out: TextIO,
             repo: str = ".") -> int:
    """Exit status of the `pre-receive` (updates on stdin) or `update` (REF OLD NEW) hook."""
    if kind == "update":
        if len(argv) != 3:
            print("governor: the update hook takes REF OLD NEW", file=out)
            return 1
        updates = [(argv[0], argv[1], argv[2])]
    else:
        updates = []
        for line in stdin.read().splitlines():
            old, new, ref = line.split(" ", 2)
            updates.append((ref, old, new))
    config = hook_config(repo)
    notes = next((new for ref, _, new in updates if ref == NOTES_REF and new not in ZERO_OIDS),
                 None)
    refused = 0
    for ref, _, new in updates:
        if not any(glob_matches(pattern, ref) for pattern in config.protected):
            continue
        verdict = check_update(repo, config, ref, new, notes)
        print(f"governor: {ref}:", file=out)
        for line in verdict.lines():
            print(f"governor:   {line}", file=out)
        if not verdict.ok:
            refused += 1
    if refused:
        print(f"governor: push refused: {refused} protected ref{'' if refused == 1 else 's'} "
              f"not certified", file=out)
    return 1 if refused else 0


def install_hook(repo: str, kind: str, settings: Mapping[str, str | Sequence[str] | None]
                 ) -> dict[str, Any]:
    """Write the `kind` hook of the (bare) repository at `repo`, calling this interpreter, and
    set the given governor.* config."""
    git_dir = Path(git(repo, "rev-parse", "--absolute-git-dir").decode().strip())
    for key, value in settings.items():
        if value is None:
            continue
        values = [value] if isinstance(value, str) else list(value)
        if _config(repo, f"governor.{key}"):
            git(repo, "config", "--unset-all", f"governor.{key}")
        for item in values:
            git(repo, "config", "--add", f"governor.{key}", item)
    hooks = git_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    path = hooks / kind
    path.write_text("#!/bin/sh\n# Installed by governor-agent git-hook install.\n"
                    f"exec {shlex.quote(sys.executable)} -m governor_client git-hook {kind} "
                    '"$@"\n', encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return {"hook": str(path), "protectedRefs": list(hook_config(repo).protected)}


def hook_main(args: Any) -> int:
    if args.hook == "install":
        result = install_hook(args.repo, args.kind, {
            "protectedRefs": args.protect or None, "keysFile": args.keys_file,
            "server": args.server, "tokenFile": args.token_file})
        print(canonical_bytes(result).decode())
        return 0
    return run_hook(args.hook, args.args, sys.stdin, sys.stderr,
                    repo=args.repo or os.environ.get("GIT_DIR") or ".")
