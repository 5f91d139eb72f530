"""Certified commits: a commit is certified exactly when its content is a certified tree.

A commit's tree id in the certified format is the workspace tree id (`governor.domain.tree`)
of the commit's content — paths, modes, symlink targets, blob bytes — whatever the repository's
object format, leaving out the exclusions recorded beside the certified tree. It is read from
the repository's objects, never from a checkout: `git ls-tree -r -z --full-tree` lists every
blob with its mode; in a SHA-256 repository a blob's object id already is its id here (the same
`sha256("blob " + len + "\\0" + bytes)`), in a SHA-1 repository every distinct blob is read once
through `git cat-file --batch` and hashed. Modes are what a checkout makes of them (git's own
canonical modes: 100755 when the owner exec bit is set, else 100644; 120000 a symlink).

Refused, naming the path (the content could not be a workspace tree): a submodule (gitlink), a
top-level `.governor` (the client's state, never part of a tree), a name git refuses or one that
is not UTF-8, an exclusion whose leading components reach a symlink. Refused, naming the
attribute and the path (rules §17.9): a commit whose own `.gitattributes` files, at any depth,
make a checkout convert a path's content (`governor.domain.checkout`), whatever the exclusions:
every file of the commit travels with a clone.

Pure Python and stock git: no Django; the verifier (`governor.verify`) and the client's commit
command and git hook (`governor_client.gitcommit`) share it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import IO, Any, TypeVar

from governor.domain.attestation import (
    AttestationError,
    verify_envelope,
    workspace_tree_of,
)
from governor.domain.canonical import JSONValueError, canonical_bytes, loads_strict
from governor.domain.checkout import (
    CheckoutAttribute,
    checkout_attributes,
    is_attributes_file,
    refusal_text,
)
from governor.domain.fields import FieldsInvalid
from governor.domain.tree import (
    TREE_ID_PREFIX,
    ManifestEntry,
    PathMatcher,
    TreeError,
    manifest_tree_id,
    refused_name,
    validate_exclusions,
)

NOTES_REF = "refs/notes/governor"
SESSION_TRAILER = "Governor-Session"
TERMINAL_TRAILER = "Governor-Terminal"
NOTE_KIND = "governor-certification"
ZERO_OIDS = frozenset({"0" * 40, "0" * 64})
T = TypeVar("T")
_GITLINK, _SYMLINK = "160000", "120000"


class GitError(Exception):
    """Git could not answer (no such revision, not a repository, git missing)."""


def git(repo: str, *args: str, stdin: bytes | None = None,
        env: Mapping[str, str] | None = None) -> bytes:
    """Stock git's stdout for `args` in `repo`. The environment is kept (`env` added to it): a
    server-side hook's GIT_DIR and quarantine (GIT_OBJECT_DIRECTORY,
    GIT_ALTERNATE_OBJECT_DIRECTORIES) are what make the pushed objects readable. Nothing run
    here needs a filesystem monitor."""
    try:
        done = subprocess.run(  # noqa: S603 - argv, no shell
            ["git", "-C", repo, "-c", "core.fsmonitor=false", *args],  # noqa: S607
            input=stdin, capture_output=True, check=False,
            env=None if env is None else {**os.environ, **env})
    except OSError as exc:
        raise GitError(f"git cannot be run: {exc.strerror}") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {' '.join(args[:2])}: {message[-1] if message else 'failed'}")
    return done.stdout


@dataclass(frozen=True)
class Commit:
    repo: str
    oid: str
    object_format: str  # "sha1" or "sha256"
    tree_oid: str  # the commit's root tree object id
    trailers: Mapping[str, tuple[str, ...]]

    @cached_property
    def entries(self) -> tuple[ManifestEntry, ...]:
        """Every file and symlink of the commit's tree, in `git ls-tree -r` order, with its blob
        id in the certified format (64 hex of the SHA-256 git blob id); read when first asked
        (a SHA-256 commit whose tree object is a certified tree needs no listing)."""
        return _list_entries(self.repo, self.oid, self.object_format)

    @cached_property
    def checkout_attributes(self) -> list[CheckoutAttribute]:
        """What a checkout of the commit would convert (rules §17.9)."""
        return tree_checkout_attributes(self.repo, self.oid, self.entries)


def tree_checkout_attributes(repo: str, treeish: str, entries: Sequence[ManifestEntry]
                             ) -> list[CheckoutAttribute]:
    """The paths of `treeish` (listed as `entries`) whose checkout its own `.gitattributes`
    files convert, read from the objects: a symlink's text is read as git would read it."""
    files = {entry.path: git(repo, "cat-file", "-p", f"{treeish}:{entry.path}")
             for entry in entries if is_attributes_file(entry.path)}
    return checkout_attributes((entry.path for entry in entries), files) if files else []


def resolve_commit(repo: str, rev: str) -> str:
    """The object id of the commit `rev` names."""
    if rev.startswith("-"):
        raise GitError(f"{rev!r} is not a revision")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options",
                   f"{rev}^{{commit}}").decode().strip()
    except GitError:
        raise GitError(f"{rev!r} names no commit in the repository {repo}") from None


def read_tree_entries(repo: str, treeish: str) -> tuple[str, tuple[ManifestEntry, ...]]:
    """(object format, the manifest of `treeish`'s content), read from objects alone."""
    object_format = git(repo, "rev-parse", "--show-object-format").decode().strip()
    return object_format, _list_entries(repo, treeish, object_format)


def _rows(repo: str, treeish: str) -> list[tuple[str, str, str]]:
    """(path, canonical mode, git object id) of every file and symlink of `treeish`."""
    listing = git(repo, "ls-tree", "-r", "-z", "--full-tree", "--end-of-options", treeish)
    rows: list[tuple[str, str, str]] = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, oid = meta.decode().split(" ")
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            raise TreeError(raw_path.decode("utf-8", "backslashreplace"),
                            "the name is not valid UTF-8") from None
        if mode == _GITLINK or kind == "commit":
            raise TreeError(path, "a submodule (gitlink) is no file: it cannot be certified")
        if kind != "blob":
            raise TreeError(path, f"an entry of type {kind} cannot be certified")
        rows.append((path, _canonical_mode(path, mode), oid))
    return rows


def _list_entries(repo: str, treeish: str, object_format: str) -> tuple[ManifestEntry, ...]:
    rows = _rows(repo, treeish)
    if object_format == "sha256":
        ids = {oid: oid for _, _, oid in rows}
    elif object_format == "sha1":
        ids = _sha256_blob_ids(repo, sorted({oid for _, _, oid in rows}))
    else:
        raise GitError(f"unknown object format {object_format!r}")
    return tuple(ManifestEntry(path, mode, ids[oid]) for path, mode, oid in rows)


def read_tree_objects(repo: str, treeish: str, known: dict[str, str]
                      ) -> tuple[tuple[ManifestEntry, ...], dict[str, str]]:
    """The manifest of `treeish`'s content and, for each of its blob ids, the git object
    holding the bytes. `known` (git object id -> certified-format blob id) is read and
    extended, so a second tree of the same repository hashes only the blobs the first lacked
    (a SHA-1 repository's blobs are read to compute their ids)."""
    object_format = git(repo, "rev-parse", "--show-object-format").decode().strip()
    rows = _rows(repo, treeish)
    if object_format == "sha256":
        known.update((oid, oid) for _, _, oid in rows)
    elif object_format == "sha1":
        known.update(_sha256_blob_ids(repo, sorted({oid for _, _, oid in rows} - known.keys())))
    else:
        raise GitError(f"unknown object format {object_format!r}")
    entries = tuple(ManifestEntry(path, mode, known[oid]) for path, mode, oid in rows)
    return entries, {known[oid]: oid for _, _, oid in rows}


def blob_objects(repo: str, treeish: str) -> dict[str, str]:
    """The git object id of each path of `treeish`: where its bytes are read from."""
    return {path: oid for path, _, oid in _rows(repo, treeish)}


def blobs_read(repo: str, oids: Sequence[str]) -> Iterator[tuple[str, bytes]]:
    """(object id, content) of each blob `oids` names, read through one `git cat-file
    --batch`. GitError when one is missing."""
    return _cat_blobs(repo, oids, lambda oid, size, out: out.read(size))


def _cat_blobs(repo: str, oids: Sequence[str],
               take: Callable[[str, int, IO[bytes]], T]) -> Iterator[tuple[str, T]]:
    """(object id, `take(oid, size, stream)`) of each blob `oids` names, in order, through one
    `git cat-file --batch`: `take` reads exactly the blob's `size` bytes from the stream.
    GitError when one is missing."""
    process = subprocess.Popen(  # noqa: S603 - argv, no shell
        ["git", "-C", repo, "-c", "core.fsmonitor=false", "cat-file", "--batch"],  # noqa: S607
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdin is not None and process.stdout is not None
    writer = threading.Thread(target=_feed, args=(process.stdin, oids), daemon=True)
    writer.start()
    out = process.stdout
    try:
        for oid in oids:
            header = out.readline().split()
            if len(header) != 3 or header[1] != b"blob" or header[0].decode() != oid:
                raise GitError(f"git cat-file: blob {oid} is missing")
            taken = take(oid, int(header[2]), out)
            out.read(1)  # the newline after the content
            yield oid, taken
    finally:
        process.kill()
        writer.join()
        out.close()
        process.wait()


def read_commit(repo: str, rev: str) -> Commit:
    oid = resolve_commit(repo, rev)
    object_format = git(repo, "rev-parse", "--show-object-format").decode().strip()
    raw = git(repo, "cat-file", "commit", oid)
    header = raw.partition(b"\n")[0].decode()
    if not header.startswith("tree "):
        raise GitError(f"commit {oid} has no tree")
    return Commit(repo, oid, object_format, header.removeprefix("tree "), _trailers(raw))


def sessions_named(repo: str, commit: Commit, *, depth: int = 50) -> tuple[str, ...]:
    """The sessions the commit's trailers name, else those of its nearest first-parent ancestor
    naming any (an edit committed on top of a certified commit): where to look for the
    certified tree it may differ from."""
    if commit.trailers.get(SESSION_TRAILER):
        return commit.trailers[SESSION_TRAILER]
    log = git(repo, "log", "--first-parent", f"-n{depth}", "--format=%(trailers:key="
              f"{SESSION_TRAILER},valueonly,separator=%x20)", "--end-of-options", commit.oid)
    for line in log.decode("utf-8", "replace").splitlines():
        if line.strip():
            return tuple(line.split())
    return ()


def _canonical_mode(path: str, mode: str) -> str:
    """The mode a checkout gives the entry, as git canonicalises it (cache.h canon_mode)."""
    if mode == _SYMLINK:
        return mode
    number = int(mode, 8)
    if number & 0o170000 != 0o100000:
        raise TreeError(path, f"mode {mode} is not a file's")
    return "100755" if number & 0o100 else "100644"


def _sha256_blob_ids(repo: str, oids: Sequence[str]) -> dict[str, str]:
    """The certified-format id of each blob of a SHA-1 repository, every blob read once, in
    chunks."""
    def digest(oid: str, size: int, out: IO[bytes]) -> str:
        hashed = hashlib.sha256(b"blob %d\0" % size)
        left = size
        while left:
            chunk = out.read(min(left, 1 << 20))
            if not chunk:
                raise GitError(f"git cat-file: blob {oid} is truncated")
            hashed.update(chunk)
            left -= len(chunk)
        return hashed.hexdigest()

    return dict(_cat_blobs(repo, oids, digest))


def _feed(pipe: IO[bytes], oids: Sequence[str]) -> None:
    try:
        for oid in oids:
            pipe.write(oid.encode() + b"\n")
    except BrokenPipeError:
        pass
    finally:
        pipe.close()


def _trailers(raw_commit: bytes) -> dict[str, tuple[str, ...]]:
    """The trailers of the commit message's last paragraph, as `Key: value` lines."""
    message = raw_commit.partition(b"\n\n")[2].decode("utf-8", "replace")
    paragraphs = [block for block in message.strip().split("\n\n") if block.strip()]
    found: dict[str, list[str]] = {}
    if paragraphs:
        for line in paragraphs[-1].splitlines():
            key, sep, value = line.partition(":")
            if sep and key and " " not in key:
                found.setdefault(key.strip(), []).append(value.strip())
    return {key: tuple(values) for key, values in found.items()}


def commit_tree_id(entries: Iterable[ManifestEntry], exclusions: Sequence[str] = ()
                   ) -> tuple[str, tuple[ManifestEntry, ...]]:
    """(the certified-format tree id, its manifest) of a commit's `entries` with `exclusions`
    left out, as `hash_tree` gives it for a checkout of the commit. TreeError names the path
    that no workspace tree could hold."""
    patterns = validate_exclusions(list(exclusions))
    matcher = PathMatcher(patterns) if patterns else None
    listed = list(entries)
    symlinks = {entry.path for entry in listed if entry.mode == _SYMLINK}
    for pattern in patterns:
        leading = pattern.split("/")[:-1]
        for depth in range(1, len(leading) + 1):
            if "/".join(leading[:depth]) in symlinks:
                raise TreeError("/".join(leading[:depth]),
                                f"a symlink that the exclusion {pattern!r} passes through "
                                f"(git refuses such a pathspec)")
    kept = []
    for entry in listed:
        top = entry.path.split("/", 1)[0]
        if top in (".governor", ".git"):
            raise TreeError(entry.path, f"a top-level {top} is never part of a workspace tree")
        if matcher is not None and matcher.matches(entry.path):
            continue
        name = refused_name(entry.path.encode(), symlink=entry.mode == _SYMLINK)
        if name is not None:
            raise TreeError(entry.path, f"git refuses the name {name.decode()!r} in a "
                                        f"checkout")
        kept.append(entry)
    return manifest_tree_id(kept), tuple(kept)


# --- certifications ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Certification:
    """A certified tree whose signed terminal was checked against the trusted keys."""

    session: str
    seq: int
    tree: str
    terminal_receipt: str
    exclusions: tuple[str, ...] = ()
    entries: tuple[ManifestEntry, ...] | None = None
    """The certified tree's manifest when known (checked to hash to `tree`)."""


class CertificationError(Exception):
    pass


def certification_of(envelope: Any, keys: Mapping[str, Any], *,
                     exclusions: Sequence[str] = (),
                     entries: Iterable[Sequence[str]] | None = None) -> Certification:
    """The certification a terminal's DSSE envelope signs, checked against `keys`: a certified
    terminal naming a workspace tree. `entries`, when given, must hash to that tree (so a
    manifest needs no signature of its own); `exclusions` are taken as given (from a verified
    export or the server, never from a note)."""
    try:
        statement = verify_envelope(envelope, keys)
    except AttestationError as exc:
        raise CertificationError(f"the signed terminal does not verify: {exc}") from None
    predicate = statement["predicate"]
    if predicate.get("kind") != "terminal" or predicate.get("status") != "certified":
        raise CertificationError("the envelope does not sign a certified terminal")
    tree = workspace_tree_of(statement)
    if tree is None:
        raise CertificationError("the signed terminal names no workspace tree")
    name = statement["subject"][0]["name"]
    session = name.removeprefix("session:").split("/contract:", 1)[0]
    tree_id = TREE_ID_PREFIX + tree
    manifest = None
    if entries is not None:
        manifest = tuple(ManifestEntry(*entry) for entry in entries)
        try:
            rehashed = manifest_tree_id(manifest)
        except TreeError as exc:
            raise CertificationError(f"the certified manifest is malformed: {exc}") from None
        # A manifest of an excluding tree hashes to the tree id as it is: excluded files are
        # never in it.
        if rehashed != tree_id:
            raise CertificationError("the manifest given does not hash to the signed tree")
    return Certification(session, predicate["eventSeq"], tree_id, predicate["terminalReceipt"],
                         tuple(exclusions), manifest)


def note_text(envelope: Mapping[str, Any], entries: Iterable[Sequence[str]]) -> bytes:
    """The git note `governor-agent commit` adds: the certified terminal's DSSE envelope and
    the certified tree's manifest (which hashes to the signed tree id), canonical JSON."""
    return canonical_bytes({"kind": NOTE_KIND, "envelope": dict(envelope),
                            "entries": [list(entry) for entry in entries]}) + b"\n"


def certification_of_note(raw: bytes, keys: Mapping[str, Any]) -> Certification:
    """The certification a note carries, checked: its envelope against `keys`, its manifest
    against the signed tree. A note carries no exclusions: they are not signed, so a commit
    certified by a note holds exactly the certified files."""
    try:
        note = loads_strict(raw.decode("utf-8").strip())
    except (UnicodeDecodeError, JSONValueError) as exc:
        raise CertificationError(f"the note is not JSON: {exc}") from None
    if type(note) is not dict or note.get("kind") != NOTE_KIND or set(note) != {
            "kind", "envelope", "entries"} or type(note["entries"]) is not list:
        raise CertificationError(f"the note is not a {NOTE_KIND} note")
    if any(type(entry) is not list or len(entry) != 3 for entry in note["entries"]):
        raise CertificationError("the note's entries are not [path, mode, blob] triples")
    return certification_of(note["envelope"], keys, entries=note["entries"])


def read_note(repo: str, notes: str, commit_oid: str) -> bytes | None:
    """The note `notes` (a notes ref or a notes commit id) holds for `commit_oid`, None when
    there is none (whatever the notes tree's fan-out)."""
    try:
        listing = git(repo, "ls-tree", "-r", "-z", "--end-of-options", notes)
    except GitError:
        return None
    for record in listing.split(b"\0"):
        meta, _, path = record.partition(b"\t")
        if path.replace(b"/", b"").decode("ascii", "replace") == commit_oid:
            return git(repo, "cat-file", "blob", meta.split(b" ")[2].decode())
    return None


@dataclass(frozen=True)
class Verdict:
    ok: bool
    summary: str
    differences: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        return [self.summary, *(f"  {difference}" for difference in self.differences)]


def judge_commit(commit: Commit, certifications: Sequence[Certification]) -> Verdict:
    """Is the commit's content exactly one of `certifications` (already checked)? The commit's
    id is computed with each one's exclusions. A commit whose trailers name a session or a
    terminal is certified only by that session's, that terminal's, certification. A commit a
    checkout would convert (its `.gitattributes`, rules §17.9) is refused first, naming the
    attributes and paths. When it is not certified: the files that differ from the nearest
    certified manifest."""
    short = commit.oid[:12]
    try:
        converted = commit.checkout_attributes
    except TreeError as exc:
        return Verdict(False, f"FAIL: commit {short} cannot be certified: {exc}")
    if converted:
        return Verdict(False, f"FAIL: commit {short} cannot be certified: "
                              f"{refusal_text(converted)}",
                       tuple(f"converted on checkout: {item}" for item in converted))
    sessions = commit.trailers.get(SESSION_TRAILER, ())
    terminals = commit.trailers.get(TERMINAL_TRAILER, ())
    named = [c for c in certifications
             if (not sessions or c.session in sessions)
             and (not terminals or c.terminal_receipt in terminals)]
    if commit.object_format == "sha256":
        # A SHA-256 tree object whose id is a certified tree's is that tree (the server hashed
        # it as a valid workspace tree): no listing needed.
        for certification in reversed(named):
            if certification.tree == TREE_ID_PREFIX + commit.tree_oid:
                return _certified(short, certification)
    computed: dict[tuple[str, ...], tuple[str, tuple[ManifestEntry, ...]]] = {}
    try:
        for certification in reversed(named):
            if certification.exclusions not in computed:
                computed[certification.exclusions] = commit_tree_id(
                    commit.entries, certification.exclusions)
            if computed[certification.exclusions][0] == certification.tree:
                return _certified(short, certification)
        plain = computed.get(()) or commit_tree_id(commit.entries)
    except TreeError as exc:
        return Verdict(False, f"FAIL: commit {short} cannot be certified: {exc}")
    if not certifications:
        return Verdict(False, f"FAIL: commit {short} is {plain[0]}: no certification of that "
                              f"content was found")
    if not named:
        wanted = ", ".join([*(f"session {s}" for s in sessions),
                            *(f"terminal {t}" for t in terminals)])
        found = ", ".join(sorted({c.session for c in certifications}))
        return Verdict(False, f"FAIL: commit {short} names {wanted}, but the certifications "
                              f"found are of session {found}")
    nearest = None
    for certification in named:
        if certification.entries is None:
            continue
        found_entries = computed.get(certification.exclusions, plain)[1]
        differences = manifest_differences(certification.entries, found_entries)
        if nearest is None or len(differences) < len(nearest[1]):
            nearest = (certification, differences)
    if nearest is None:
        return Verdict(False, f"FAIL: commit {short} is {plain[0]}, not a certified tree "
                              f"(the certified manifest is unknown: the differing files cannot "
                              f"be named)")
    certification, differences = nearest
    count = len(differences)
    return Verdict(False, f"FAIL: commit {short} is {computed[certification.exclusions][0]}, "
                          f"not {certification.tree}, the tree session {certification.session} "
                          f"certified (terminal at seq {certification.seq}); {count} "
                          f"difference{'' if count == 1 else 's'}:", differences)


def _certified(short: str, certification: Certification) -> Verdict:
    if certification.session.startswith("change:"):  # rules §19.2: gated at the pull request
        return Verdict(True, f"OK: commit {short} is {certification.tree}, certified by gated "
                             f"change {certification.session.removeprefix('change:')}")
    return Verdict(True, f"OK: commit {short} is {certification.tree}, certified by session "
                         f"{certification.session} (terminal at seq {certification.seq})")


def manifest_differences(certified: Iterable[ManifestEntry],
                         found: Iterable[ManifestEntry]) -> tuple[str, ...]:
    """`added`, `removed`, `changed` (content; with the modes when they differ too) or `mode
    changed`, one line per path, of `found` against `certified`."""
    before = {entry.path: entry for entry in certified}
    after = {entry.path: entry for entry in found}
    lines = []
    for path in sorted(before.keys() | after.keys()):
        old, new = before.get(path), after.get(path)
        if old is None:
            lines.append(f"added: {path}")
        elif new is None:
            lines.append(f"removed: {path}")
        elif old.blob != new.blob:
            modes = f" (mode {old.mode} -> {new.mode})" if old.mode != new.mode else ""
            lines.append(f"changed: {path}{modes}")
        elif old.mode != new.mode:
            lines.append(f"mode changed: {path} ({old.mode} -> {new.mode})")
    return tuple(lines)


def glob_matches(pattern: str, ref: str) -> bool:
    """Does a protected-ref pattern match `ref`? The exclusions' glob syntax (`*` never
    crosses "/", `**` any depth), so `refs/heads/release/*` is one level."""
    try:
        return PathMatcher([pattern]).matches(ref) or pattern == ref
    except FieldsInvalid:  # a pattern the syntax refuses still protects its literal ref
        return pattern == ref
