"""`governor-agent gate --base REV --head REV [--observe]`: certify a pull request's change with
no session (rules §19.3), from any CI.

Both trees are read from git's objects (no checkout of the head: the head's code is never
executed here — the governor's sandbox runs it), with the project's exclusions; the blobs the
governor lacks are uploaded (`POST /blobs/missing`, then batches), the change is sent (`POST
/changes`: the base whole, the head as its changes over the base) and waited for (`GET
/changes/{id}?wait=`), its runs shown on stderr as they go. Certified: the signed attestation is
checked here against the keys the governor publishes, and added to the head commit as the note
of rules §16.3 (refs/notes/governor). The exit status is 0 only when certified — always 0 in
observe mode, which records and prints what the gate would have done.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TextIO, cast

from governor.domain.canonical import canonical_bytes
from governor.domain.commits import (
    NOTES_REF,
    CertificationError,
    GitError,
    blobs_read,
    certification_of,
    commit_tree_id,
    git,
    note_text,
    read_tree_objects,
    resolve_commit,
)
from governor.domain.tree import ManifestEntry, TreeError
from governor.verify import load_trusted_keys
from governor_client.client import GovernorClient
from governor_client.errors import GovernorError, GovernorUnreachable

MISSING_PER_REQUEST = 10_000
BATCH_BYTES = 8 * 1024 * 1024
BATCH_BLOBS = 1000
WAIT_SECONDS = 30
UPLOADS = 4  # batches in flight at once
DEFAULT_TIMEOUT = 3600


class GateRefused(GovernorError):
    """A change the gate cannot send: the field and the reason."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(None, "GATE_REFUSED", f"{field}: {message}",
                         [{"path": field, "message": message}])


class Tree:
    """One side of the change, read from git's objects: its certified-format entries and, for
    each blob id, the git object holding its bytes."""

    def __init__(self, repo: str, field: str, rev: str, exclusions: Sequence[str],
                 known: dict[str, str]) -> None:
        try:
            self.commit = resolve_commit(repo, rev)
            entries, objects = read_tree_objects(repo, self.commit, known)
            self.id, kept = commit_tree_id(entries, exclusions)
        except GitError as exc:
            raise GateRefused(field, str(exc)) from None
        except TreeError as exc:
            raise GateRefused(field, f"commit {rev} cannot be a tree the governor judges: "
                                     f"{exc}") from None
        self.entries: tuple[ManifestEntry, ...] = kept
        self.objects = {entry.blob: objects[entry.blob] for entry in kept}
        # What the project's exclusions leave out: never judged, yet a merge carries it.
        self.excluded = {entry.path: entry for entry in set(entries) - set(kept)}

    def excluded_changes(self, base: Tree) -> list[str]:
        """The paths the exclusions leave out that differ from the base's."""
        return sorted((path for path in {*base.excluded, *self.excluded}
                       if base.excluded.get(path) != self.excluded.get(path)),
                      key=lambda path: path.encode())

    def as_entries(self) -> list[dict[str, str]]:
        return [{"path": e.path, "mode": e.mode, "blob": e.blob} for e in self.entries]

    def changes_over(self, base: Tree) -> list[dict[str, Any]]:
        before = {e.path: e for e in base.entries}
        now = {e.path: e for e in self.entries}
        changed: list[dict[str, Any]] = [{"path": e.path, "mode": e.mode, "blob": e.blob}
                                         for e in self.entries if before.get(e.path) != e]
        changed += [{"path": path, "mode": "100644", "blob": None}
                    for path in before if path not in now]
        return changed


def _is_ancestor(repo: str, base: str, head: str) -> bool:
    try:
        git(repo, "merge-base", "--is-ancestor", base, head)
    except GitError:
        return False
    return True


def _batches(contents: Iterator[tuple[str, bytes]], project: dict[str, Any]
             ) -> Iterator[list[tuple[str, bytes]]]:
    cap_bytes = min(BATCH_BYTES, int(project.get("max_batch_bytes") or BATCH_BYTES))
    cap_blobs = min(BATCH_BLOBS, int(project.get("max_batch_blobs") or BATCH_BLOBS))
    batch: list[tuple[str, bytes]] = []
    size = 0
    for blob, data in contents:
        framed = len(data) + 86
        if batch and (size + framed > cap_bytes or len(batch) >= cap_blobs):
            yield batch
            batch, size = [], 0
        batch.append((blob, data))
        size += framed
    if batch:
        yield batch


def upload(client: GovernorClient, repo: str, trees: Sequence[Tree], project: dict[str, Any],
           say: Callable[[str], None]) -> tuple[int, int]:
    """Send the blobs of `trees` the governor lacks, read from git's objects; (blobs, bytes)."""
    objects: dict[str, str] = {}
    for tree in trees:
        objects.update(tree.objects)
    wanted = sorted(objects)
    missing: list[str] = []
    for start in range(0, len(wanted), MISSING_PER_REQUEST):
        missing += client.blobs_missing(wanted[start:start + MISSING_PER_REQUEST])
    say(f"{len(wanted)} blobs in the two trees, {len(missing)} to upload")
    by_oid = {objects[blob]: blob for blob in missing}
    sent = sent_bytes = 0

    def contents() -> Iterator[tuple[str, bytes]]:
        for oid, data in blobs_read(repo, sorted(by_oid)):
            yield by_oid[oid], data

    single = int(project.get("max_batch_bytes") or BATCH_BYTES)

    def send(batch: list[tuple[str, bytes]]) -> tuple[int, int]:
        if len(batch) == 1 and len(batch[0][1]) + 86 > single:
            client.put_blob(*batch[0])
        else:
            client.put_blobs(batch)
        return len(batch), sum(len(data) for _blob, data in batch)

    # Batches go UPLOADS at a time (the server stores them in parallel); at most twice that
    # many are read ahead of the answers, so memory stays bounded by the batch cap.
    with ThreadPoolExecutor(max_workers=UPLOADS) as pool:
        pending: set[Future[tuple[int, int]]] = set()
        for batch in _batches(contents(), project):
            pending.add(pool.submit(send, batch))
            if len(pending) >= 2 * UPLOADS:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    count, size = future.result()
                    sent, sent_bytes = sent + count, sent_bytes + size
                say(f"uploaded {sent}/{len(missing)} blobs, {sent_bytes / 1e6:.1f} MB")
        for future in pending:
            count, size = future.result()
            sent, sent_bytes = sent + count, sent_bytes + size
    if missing:
        say(f"uploaded {sent}/{len(missing)} blobs, {sent_bytes / 1e6:.1f} MB")
    return sent, sent_bytes


def _run_state(run: dict[str, Any]) -> str:
    if run["passed"] is None:
        return str(run["state"])
    return "passed" if run["passed"] else str(run["failureKind"] or "failed")


def _runs_line(answer: dict[str, Any]) -> str:
    return ", ".join(f"{run['profile']} on the {run['role']}: {_run_state(run)}"
                     for run in answer["runs"]) or "no runs"


def gate(client: GovernorClient, repo: str, *, base_rev: str, head_rev: str, observe: bool,
         out: TextIO, err: TextIO, timeout: float = DEFAULT_TIMEOUT) -> int:
    """Gate the change from `base_rev` to `head_rev` of `repo`; the exit status."""
    def say(text: str) -> None:
        print(f"governor-agent gate: {text}", file=err, flush=True)

    project = dict(client.project())
    exclusions = [str(pattern) for pattern in cast(list[Any],
                                                   project.get("tree_exclusions") or [])]
    known: dict[str, str] = {}  # git object id -> blob id, shared by the two trees
    base = Tree(repo, "base", base_rev, exclusions, known)
    head = Tree(repo, "head", head_rev, exclusions, known)
    if not _is_ancestor(repo, base.commit, head.commit):
        raise GateRefused("base", f"{base_rev} ({base.commit[:12]}) is not an ancestor of the "
                                  f"head {head_rev} ({head.commit[:12]}): bring the head up to "
                                  "date with the base (merge or rebase it) and gate again — the "
                                  "gate judges a change by its base branch's policy and tests "
                                  "as they are now, never by an older commit's")
    if unjudged := head.excluded_changes(base):
        shown = ", ".join(unjudged[:5]) + (f" and {len(unjudged) - 5} more"
                                           if len(unjudged) > 5 else "")
        raise GateRefused("head", f"the head changes {len(unjudged)} committed path"
                                  f"{'s' if len(unjudged) != 1 else ''} the project's tree "
                                  f"exclusions leave out of every tree the governor judges "
                                  f"({shown}): a merge would carry them unjudged (a stale "
                                  "__pycache__ .pyc runs instead of its source). Remove them "
                                  "from the head (they belong in .gitignore), or ask the "
                                  "operator to narrow tree_exclusions")
    say(f"base {base.commit[:12]} is {base.id}; head {head.commit[:12]} is {head.id}")
    upload(client, repo, [base, head], project, say)
    body: dict[str, Any] = {"base": {"commit": base.commit, "tree": base.id},
                            "head": {"commit": head.commit, "changes": head.changes_over(base)}}
    if observe:
        body["observe"] = True
    try:  # a base the governor keeps already is named by its id alone
        answer = client.gate_change(body)
    except GovernorError as error:
        if not any(item.get("path") == "base.tree" for item in error.details or []
                   if isinstance(item, dict)):
            raise
        body["base"] = {"commit": base.commit, "entries": base.as_entries()}
        answer = client.gate_change(body)
    say(f"change {answer['id']}: {answer['changed']} paths changed; {answer['url']}")
    deadline = time.monotonic() + timeout
    last = ""
    while answer["status"] == "running":
        line = _runs_line(answer)
        if line != last:
            say(line)
            last = line
        if time.monotonic() > deadline:
            say(f"no verdict within {timeout:.0f} s")
            return 0 if observe else 1
        answer = client.change(answer["id"], wait=WAIT_SECONDS)
    say(_runs_line(answer))
    certified = answer["status"] == "certified"
    for proof in answer["proofs"]:
        say(f"proved [{proof['rule']}] {proof['text']}")
    for finding in answer["findings"]:
        print(f"[{finding['rule']}] {finding['message']}", file=out)
    noted = None
    if certified:
        noted = _note(client, repo, head, answer)
    verdict = ("certified" if certified else "not certified") + (
        " (observe mode: the gate records, never fails)" if observe else "")
    print(json.dumps({"change": answer["id"], "status": answer["status"],
                      "observe": observe, "url": answer["url"], "note": noted,
                      "findings": len(answer["findings"])}), file=out)
    say(verdict)
    return 0 if certified or observe else 1


def _note(client: GovernorClient, repo: str, head: Tree, answer: dict[str, Any]) -> str:
    """rules §16.3: the signed attestation, checked against the keys the governor publishes,
    added to the head commit as its note; the notes ref."""
    keys = load_trusted_keys(canonical_bytes({"keys": client.keys()}))
    try:
        certification = certification_of(answer["envelope"], keys,
                                          entries=[list(e) for e in head.entries])
    except CertificationError as exc:
        raise GateRefused("envelope", f"the governor's certification does not verify: {exc}"
                          ) from None
    if certification.tree != head.id:
        raise GateRefused("envelope", f"the governor certified {certification.tree}, not the "
                                      f"head's tree {head.id}")
    # A CI machine often has no git identity: the notes commit is then made as the gate.
    identity = {} if _configured(repo, "user.email") else {
        "GIT_AUTHOR_NAME": "governor-agent gate", "GIT_AUTHOR_EMAIL": "gate@governor.invalid",
        "GIT_COMMITTER_NAME": "governor-agent gate",
        "GIT_COMMITTER_EMAIL": "gate@governor.invalid"}
    git(repo, "notes", f"--ref={NOTES_REF}", "add", "-f", "-F", "-", head.commit,
        stdin=note_text(answer["envelope"], [list(e) for e in head.entries]), env=identity)
    return NOTES_REF


def _configured(repo: str, key: str) -> bool:
    try:
        return bool(git(repo, "config", "--get", key).strip())
    except GitError:
        return False


def gate_main(client: GovernorClient, args: Any) -> int:
    try:
        return gate(client, args.repo, base_rev=args.base, head_rev=args.head,
                    observe=args.observe, out=sys.stdout, err=sys.stderr)
    except GovernorError as error:
        # Observe mode never fails on a verdict or an unreachable governor; bad input (a
        # revision, a refusal naming a field) fails in either mode, with the server's words.
        print(json.dumps(error.as_dict(), ensure_ascii=False), file=sys.stderr)
        return 0 if args.observe and isinstance(error, GovernorUnreachable) else 1
    except (GitError, OSError) as error:
        print(json.dumps({"error": {"code": "GIT", "message": str(error)}}), file=sys.stderr)
        return 1
