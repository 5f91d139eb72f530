"""Issue 30: the proof travels with the work to the merge. A certified session's tree is committed
by `governor-agent commit` (trailers, a note with the signed terminal) and pushed to a bare
repository whose pre-receive (or update) hook, `governor-agent git-hook`, accepts a protected
ref only for a commit whose content is a certified tree — offline from the note and the keys
file, or online through GET /api/v1/certifications — and names the files that differ otherwise.
Everything is stock git and the real served stack; nothing is mocked."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from governor.domain.attestation import key_id, sign
from governor.domain.canonical import canonical_bytes, loads_strict
from tests.api.test_contracts import readme_contract
from tests.clients.conftest import agent_env, cli, cli_json, unreachable_url
from tests.live import Live

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
NOTES = "refs/notes/governor"


def git(repo: Path, *args: str, check: bool = True, **env: str
        ) -> subprocess.CompletedProcess[str]:
    """Stock git with no system or user configuration."""
    done = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=120,  # noqa: S607
        check=False, env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1",
                          "GIT_CONFIG_GLOBAL": os.devnull, "LC_ALL": "C", **env})
    if check:
        assert done.returncode == 0, done.stderr
    return done


def new_repository(path: Path, object_format: str, *, bare: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", f"--object-format={object_format}", "-b", "main",
        *(["--bare"] if bare else []))
    git(path, "config", "user.name", "Agent Example")
    git(path, "config", "user.email", "agent@example.com")
    return path


def certify(live: Live, workspace: Path, readme: str = "# Tool\n\n## Install\n",
            snapshot: bool = False) -> dict[str, Any]:
    """Begin the README contract in `workspace`, write README.md, stop: certified."""
    env = {"GOVERNOR_WORKSPACE": "snapshot"} if snapshot else {}

    def run(*args: str, stdin: str | None = None) -> dict[str, Any]:
        done = subprocess.run(  # noqa: S603
            [sys.executable, "-m", "governor_client", *args], cwd=workspace, input=stdin,
            env=agent_env(live, **env), capture_output=True, text=True, timeout=120,
            check=False)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout)) if done.stdout.strip() else {}

    assert run("begin", "-", stdin=json.dumps(readme_contract()))["status"] == "active"
    (workspace / "README.md").write_text(readme)
    final = run("turn-stop")
    assert final["terminal"]["status"] == "certified", final
    return run("status")


def fill(workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('certified')\n")
    (workspace / "src" / "other.py").write_text("print('other')\n")
    (workspace / "run.sh").write_text("#!/bin/sh\nexec python3 src/app.py\n")
    (workspace / "run.sh").chmod(0o755)
    os.symlink("src/app.py", workspace / "link")


@dataclass
class Setup:
    live: Live
    workspace: Path
    remote: Path
    keys: Path
    token: Path
    status: dict[str, Any]

    def commit(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(self.live, self.workspace, "commit", *args)

    def push(self, *refspecs: str) -> subprocess.CompletedProcess[str]:
        return git(self.workspace, "push", "-q", "origin", *refspecs, check=False,
                   PYTHONPATH=agent_env(self.live)["PYTHONPATH"])

    def head(self) -> str:
        return git(self.workspace, "rev-parse", "HEAD").stdout.strip()

    def remote_main(self) -> str:
        return git(self.remote, "rev-parse", "--verify", "-q", "refs/heads/main",
                   check=False).stdout.strip()

    def note(self, rev: str = "HEAD") -> str:
        return git(self.workspace, "notes", f"--ref={NOTES}", "show", rev).stdout


def install(live: Live, remote: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "git-hook", "install", "--repo", str(remote),
         "--protect", "refs/heads/main", "--protect", "refs/heads/release/*", *args],
        env=agent_env(live), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def prepare(live: Live, workspace: Path, tmp_path: Path, object_format: str, *hook_args: str,
            snapshot: bool = False) -> Setup:
    new_repository(workspace, object_format)
    fill(workspace)
    status = certify(live, workspace, snapshot=snapshot)
    keys = tmp_path / "keys.json"
    with live.client() as client:
        keys.write_bytes(client.get("/keys").content)
    token = tmp_path / "token"
    token.write_text(live.token + "\n")
    remote = new_repository(tmp_path / "remote.git", object_format, bare=True)
    install(live, remote, *(hook_args or ("--keys-file", str(keys))))
    git(workspace, "remote", "add", "origin", str(remote))
    return Setup(live, workspace, remote, keys, token, status)


@pytest.fixture(params=["sha256", "sha1"])
def offline(request: pytest.FixtureRequest, live: Live, workspace: Path, tmp_path: Path,
            review_off: None) -> Setup:
    return prepare(live, workspace, tmp_path, request.param)


def test_a_certified_commit_pushed_with_its_note_is_accepted(offline: Setup) -> None:
    done = offline.commit("-m", "Add the README", "--push", "origin", "main")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    tree = offline.status["terminal"]["tree"]["id"]
    assert answer["tree"] == tree and answer["session"] == offline.status["id"]
    assert offline.remote_main() == answer["commit"] == offline.head()
    message = git(offline.workspace, "log", "-1", "--format=%B").stdout
    assert f"Governor-Session: {offline.status['id']}" in message
    assert f"Governor-Terminal: {offline.status['terminal']['receipt']}" in message
    note = loads_strict(offline.note())
    assert note["kind"] == "governor-certification" and "envelope" in note
    assert git(offline.remote, "notes", f"--ref={NOTES}", "show", answer["commit"]).stdout
    assert ".governor" not in git(offline.workspace, "ls-files").stdout
    assert offline.push("HEAD:refs/heads/release/1").returncode == 0  # certified, note there
    deleted = offline.push(":refs/heads/release/1")
    assert deleted.returncode != 0 and "cannot be deleted" in deleted.stderr, deleted.stderr


MUTATIONS: dict[str, tuple[Callable[[Path], None], str]] = {
    "one byte changed": (lambda ws: (ws / "src" / "app.py").write_text("print('certifiee')\n"),
                         "changed: src/app.py"),
    "a file added": (lambda ws: (ws / "src" / "new.py").write_text("x = 1\n"),
                     "added: src/new.py"),
    "a mode flipped": (lambda ws: (ws / "run.sh").chmod(0o644),
                       "mode changed: run.sh (100755 -> 100644)"),
    "a symlink retargeted": (lambda ws: (os.remove(ws / "link"),
                                         os.symlink("src/other.py", ws / "link")),
                             "changed: link"),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_change_after_certification_is_refused_naming_the_path(
        offline: Setup, mutation: str) -> None:
    assert offline.commit().returncode == 0
    certified = offline.head()
    change, named = MUTATIONS[mutation]
    change(offline.workspace)
    git(offline.workspace, "add", "-A", "--", ".", ":!/.governor")
    git(offline.workspace, "commit", "-q", "-m", "one more edit")
    # The forger carries the real note over to the changed commit and pushes both at once.
    git(offline.workspace, "notes", f"--ref={NOTES}", "copy", "-f", certified, "HEAD")
    refused = offline.push(f"{NOTES}:{NOTES}", "HEAD:refs/heads/main")
    assert refused.returncode != 0
    assert named in refused.stderr, refused.stderr
    assert "push refused" in refused.stderr
    assert offline.remote_main() == ""  # nothing was accepted
    verified = subprocess.run(  # noqa: S603 - the same answer from the verifier, online
        [sys.executable, "-m", "governor.verify", "--commit", "HEAD", "--repo",
         str(offline.workspace), "--server", offline.live.url, "--token", str(offline.token),
         "--key", str(offline.keys)], capture_output=True, text=True, timeout=120, check=False)
    assert verified.returncode == 1 and named in verified.stdout, verified.stdout
    assert subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor.verify", "--commit", certified, "--repo",
         str(offline.workspace), "--server", offline.live.url, "--token", str(offline.token),
         "--key", str(offline.keys)], capture_output=True, text=True, timeout=120,
        check=False).returncode == 0


def forged_notes(note: dict[str, Any], other: dict[str, Any]) -> dict[str, dict[str, Any]]:
    statement = loads_strict(base64.b64decode(note["envelope"]["payload"]))
    altered = json.loads(json.dumps(statement))
    altered["predicate"]["reason"] = "forged"
    tampered = {**note, "envelope": {**note["envelope"], "payload": base64.b64encode(
        canonical_bytes(altered)).decode()}}
    stranger = Ed25519PrivateKey.generate()
    resigned = {**note, "envelope": sign(statement, private_key=stranger,
                                         keyid=key_id(stranger.public_key()))}
    return {"an altered envelope": tampered, "another session's envelope": other,
            "an envelope signed by an unknown key": resigned}


def test_forged_notes_are_refused(offline: Setup, live: Live, tmp_path: Path) -> None:
    elsewhere = live.workspace_root / f"other-{tmp_path.name}"
    elsewhere.mkdir()
    new_repository(elsewhere, "sha256")
    certify(live, elsewhere, readme="# Another tool\n\n## Install\n")
    git(elsewhere, "add", "-A", "--", ".", ":!/.governor")
    assert cli(live, elsewhere, "commit").returncode == 0
    other = loads_strict(git(elsewhere, "notes", f"--ref={NOTES}", "show", "HEAD").stdout)
    assert offline.commit().returncode == 0
    note = loads_strict(offline.note())
    for forgery, forged in forged_notes(note, other).items():
        git(offline.workspace, "notes", f"--ref={NOTES}", "add", "-f", "-m",
            json.dumps(forged), "HEAD")
        refused = offline.push(f"+{NOTES}:{NOTES}", "HEAD:refs/heads/main")
        assert refused.returncode != 0, forgery
        assert "push refused" in refused.stderr, (forgery, refused.stderr)
    assert offline.remote_main() == ""
    expected = ("does not verify", "names session", "unknown or untrusted key")
    for forgery, reason in zip(forged_notes(note, other), expected, strict=True):
        git(offline.workspace, "notes", f"--ref={NOTES}", "add", "-f", "-m",
            json.dumps(forged_notes(note, other)[forgery]), "HEAD")
        refused = offline.push(f"+{NOTES}:{NOTES}", "HEAD:refs/heads/main")
        assert reason in refused.stderr, (forgery, refused.stderr)


def test_a_commit_without_a_note_is_refused_and_unprotected_refs_pass(offline: Setup) -> None:
    (offline.workspace / "scratch.txt").write_text("work in progress\n")
    git(offline.workspace, "add", "-A", "--", ".", ":!/.governor")
    git(offline.workspace, "commit", "-q", "-m", "uncertified")
    assert offline.push("HEAD:refs/heads/feature/wip").returncode == 0  # not protected
    refused = offline.push("HEAD:refs/heads/main")
    assert refused.returncode != 0 and "has no note" in refused.stderr, refused.stderr
    refused = offline.push("HEAD:refs/heads/release/1.0")  # protected by the glob
    assert refused.returncode != 0
    assert git(offline.remote, "rev-parse", "refs/heads/feature/wip").stdout.strip() == (
        offline.head())


def test_the_update_hook_gates_the_same_way(live: Live, workspace: Path, tmp_path: Path,
                                            review_off: None) -> None:
    keys = tmp_path / "keys.json"
    with live.client() as client:
        keys.write_bytes(client.get("/keys").content)
    setup = prepare(live, workspace, tmp_path, "sha1", "--kind", "update", "--keys-file",
                    str(keys))
    assert (setup.remote / "hooks" / "update").exists()
    done = setup.commit("--push", "origin", "main")
    assert done.returncode == 0, done.stderr
    certified = setup.head()
    (workspace / "src" / "app.py").write_text("changed\n")
    git(workspace, "commit", "-q", "-am", "edit")
    git(workspace, "notes", f"--ref={NOTES}", "copy", "-f", certified, "HEAD")
    assert setup.push(f"{NOTES}:{NOTES}").returncode == 0
    refused = setup.push("HEAD:refs/heads/main")
    assert refused.returncode != 0 and "changed: src/app.py" in refused.stderr, refused.stderr
    assert setup.remote_main() == certified


def test_online_mode_asks_the_server_and_fails_closed_when_it_cannot(
        live: Live, workspace: Path, tmp_path: Path, review_off: None) -> None:
    token = tmp_path / "hook-token"
    token.write_text(live.token)
    setup = prepare(live, workspace, tmp_path, "sha256", "--server", live.url, "--token-file",
                    str(token))
    assert setup.commit().returncode == 0
    git(workspace, "update-ref", "-d", NOTES)  # online, no note is needed
    assert setup.push("HEAD:refs/heads/main").returncode == 0
    certified = setup.head()
    (workspace / "run.sh").chmod(0o644)
    git(workspace, "commit", "-q", "-am", "mode")
    refused = setup.push("HEAD:refs/heads/main")
    assert "mode changed: run.sh" in refused.stderr, refused.stderr
    git(setup.remote, "config", "governor.server", unreachable_url())
    git(workspace, "reset", "-q", "--hard", certified)
    (workspace / "README.md").write_text("# Tool\n\n## Install\n\nMore.\n")
    git(workspace, "commit", "-q", "-am", "readme")
    refused = setup.push("HEAD:refs/heads/release/2")
    assert refused.returncode != 0
    assert "cannot be reached" in refused.stderr and "fail closed" in refused.stderr
    assert setup.remote_main() == certified


def test_verify_commit_against_the_export_offline(offline: Setup, tmp_path: Path) -> None:
    assert offline.commit().returncode == 0
    export = tmp_path / "session.jsonl"
    cli_json(offline.live, offline.workspace, "export", "-o", str(export))

    def verify(rev: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603
            [sys.executable, "-m", "governor.verify", str(export), "--key", str(offline.keys),
             "--commit", rev, "--repo", str(offline.workspace)], capture_output=True,
            text=True, timeout=120, check=False)

    accepted = verify("HEAD")
    assert accepted.returncode == 0, accepted.stdout
    assert f"is {offline.status['terminal']['tree']['id']}, certified by session" in (
        accepted.stdout)
    (offline.workspace / "src" / "app.py").write_text("print('edited')\n")
    git(offline.workspace, "commit", "-q", "-am", "edit")
    refused = verify("HEAD")
    assert refused.returncode == 1
    assert "1 difference:" in refused.stdout and "changed: src/app.py" in refused.stdout


def test_the_working_tree_must_be_the_certified_tree_to_commit(offline: Setup) -> None:
    (offline.workspace / "src" / "app.py").write_text("print('after certification')\n")
    refused = offline.commit()
    assert refused.returncode == 1
    error = json.loads(refused.stderr)["error"]
    assert error["code"] == "NOT_CERTIFIED" and error["details"]["differences"] == [
        "changed: src/app.py"]
    assert git(offline.workspace, "rev-parse", "--verify", "HEAD", check=False).returncode != 0


def test_a_commit_refused_at_the_index_leaves_the_index_as_it_was(
        live: Live, workspace: Path, review_off: None) -> None:
    """A git attribute that converts content on `git add` makes the staged tree differ from the
    certified one: the commit is refused and what the user had staged is still all there is.
    The attribute is the repository's own (`.git/info/attributes`, which no clone gets), as a
    tree whose `.gitattributes` converts content is never certified (rules §17.9)."""
    new_repository(workspace, "sha256")
    fill(workspace)
    (workspace / ".git" / "info").mkdir(exist_ok=True)
    (workspace / ".git" / "info" / "attributes").write_text("*.txt text\n")
    (workspace / "notes.txt").write_bytes(b"one\r\ntwo\r\n")  # stored as LF by `git add`
    git(workspace, "add", "src/app.py")
    staged = git(workspace, "ls-files", "--stage").stdout
    assert staged.count("\n") == 1
    certify(live, workspace)
    refused = cli(live, workspace, "commit")
    assert refused.returncode == 1, refused.stderr
    error = json.loads(refused.stderr)["error"]
    assert "the index is not exactly the certified tree" in error["message"]
    assert error["details"]["differences"] == ["changed: notes.txt"]
    assert git(workspace, "ls-files", "--stage").stdout == staged
    assert not list((workspace / ".git").glob("index.governor*"))


def test_a_snapshot_sessions_certified_tree_is_committed_and_accepted(
        live: Live, tmp_path: Path, review_off: None) -> None:
    laptop = tmp_path / "laptop"  # under none of the server's roots
    setup = prepare(live, laptop, tmp_path, "sha1", snapshot=True)
    assert setup.status["workspace"]["kind"] == "snapshot"
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "governor_client", "commit", "--push", "origin", "main"],
        cwd=laptop, env=agent_env(live, GOVERNOR_WORKSPACE="snapshot"), capture_output=True,
        text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert setup.remote_main() == setup.head()


def shipped_verifier(tmp_path: Path) -> Path:
    """The files the client package ships for the verifier (clients/python/pyproject.toml
    py-modules, from the server's own files) beside only `cryptography` and `rfc8785` (and
    what they load), as an install of the client would hold them."""
    import importlib.util
    import tomllib

    root = Path(__file__).resolve().parents[2]
    config = tomllib.loads((root / "clients" / "python" / "pyproject.toml").read_text())
    site = tmp_path / "site"
    for module in config["tool"]["setuptools"]["py-modules"]:
        parts = module.split(".")
        for depth in range(1, len(parts)):
            package = Path(*parts[:depth])
            (site / package).mkdir(parents=True, exist_ok=True)
            shutil.copy(root / package / "__init__.py", site / package / "__init__.py")
        shutil.copy(root / Path(*parts).with_suffix(".py"), site / Path(*parts).with_suffix(
            ".py"))
    for dependency in ("cryptography", "rfc8785", "cffi", "_cffi_backend"):
        spec = importlib.util.find_spec(dependency)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        os.symlink(source, site / source.name)
    return site


def test_the_verifier_shipped_in_the_client_package_needs_only_cryptography_and_rfc8785(
        offline: Setup, tmp_path: Path) -> None:
    assert offline.commit().returncode == 0
    export = tmp_path / "session.jsonl"
    cli_json(offline.live, offline.workspace, "export", "-o", str(export))
    site = shipped_verifier(tmp_path)
    done = subprocess.run(  # noqa: S603 - -S: no site-packages, so no Django, no httpx
        [sys.executable, "-S", "-m", "governor.verify", str(export), "--key", str(offline.keys),
         "--commit", "HEAD", "--repo", str(offline.workspace)], cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "GIT_CONFIG_NOSYSTEM": "1",
             "GIT_CONFIG_GLOBAL": os.devnull}, capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "certified by session" in done.stdout
    online = subprocess.run(  # noqa: S603
        [sys.executable, "-S", "-m", "governor.verify", "--commit", "HEAD", "--repo",
         str(offline.workspace), "--server", offline.live.url, "--token", str(offline.token)],
        cwd=tmp_path, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(site)},
        capture_output=True, text=True, timeout=120, check=False)
    assert online.returncode == 0, online.stdout + online.stderr
    assert "WARNING: no --key given" in online.stderr


def documented_ci_commands() -> list[str]:
    """The `python -m governor.verify` lines of the GitHub Actions and GitLab CI examples."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    start = text.index("### In hosted CI: a required check")
    section = text[start:text.index("\n## ", start)]
    return [line.strip().removeprefix("- ") for line in section.splitlines()
            if "python -m governor.verify --commit" in line]


def test_the_ci_examples_run_the_command_the_tests_run(offline: Setup, tmp_path: Path) -> None:
    commands = documented_ci_commands()
    assert len(commands) == 2
    assert offline.commit().returncode == 0
    certified = offline.head()
    runner = tmp_path / "runner"
    runner.mkdir()
    shutil.copy(offline.token, runner / "token")
    shutil.copy(offline.keys, runner / "keys.json")

    def run(command: str, head: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HEAD_SHA": head, "CI_COMMIT_SHA": head,
               "GOVERNOR_URL": offline.live.url, "RUNNER_TEMP": str(runner),
               "GOVERNOR_TOKEN_FILE": str(offline.token),
               "GOVERNOR_KEYS_FILE": str(offline.keys)}
        env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # `python` is this one
        return subprocess.run(["/bin/bash", "-e", "-c", command], cwd=offline.workspace,  # noqa: S603
                              env=env, capture_output=True, text=True, timeout=120,
                              check=False)

    (offline.workspace / "src" / "app.py").write_text("print('edited in review')\n")
    git(offline.workspace, "commit", "-q", "-am", "edit")
    for command in commands:
        accepted = run(command, certified)
        assert accepted.returncode == 0, accepted.stdout + accepted.stderr
        refused = run(command, offline.head())
        assert refused.returncode == 1 and "changed: src/app.py" in refused.stdout


def test_two_agents_push_their_certified_commits_and_notes_to_one_remote(
        offline: Setup, live: Live, tmp_path: Path) -> None:
    assert offline.commit("--push", "origin", "main").returncode == 0
    object_format = git(offline.workspace, "rev-parse", "--show-object-format").stdout.strip()
    elsewhere = live.workspace_root / f"second-{tmp_path.name}"
    new_repository(elsewhere, object_format)
    certify(live, elsewhere, readme="# Second\n\n## Install\n")
    git(elsewhere, "remote", "add", "origin", str(offline.remote))
    done = cli(live, elsewhere, "commit", "--push", "origin", "release/1")
    assert done.returncode == 0, done.stderr  # its notes merged the first agent's
    second = git(elsewhere, "rev-parse", "HEAD").stdout.strip()
    assert git(offline.remote, "rev-parse", "refs/heads/release/1").stdout.strip() == second
    for commit in (offline.head(), second):
        assert git(offline.remote, "notes", f"--ref={NOTES}", "show", commit).returncode == 0
