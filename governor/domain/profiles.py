"""rules §8 "Profile": what an operator may configure as a trusted verifier command.

Input (snake_case, as an operator form or API sends it)::

    {
      "id": "unit-tests",                # kebab-case, ≤ 128
      "description": "…",                # 1..500 characters after trimming
      "argv": ["pytest", "-q"],          # command (absolute path or bare name, ≤ 1024) + ≤ 50 args
      "timeout_ms": 120000,              # optional; 1,000..900,000
      "sandbox_mode": "read-only",       # optional; "read-only" | "workspace-write"
      "required": true,                  # optional
      "env": {"CI": "1"},                # optional; ≤ 64 names, values strings ≤ 4096
      "limits": {…},                     # optional; any of LIMITS below
      "rootfs": "/srv/images/py311",     # optional; directory used as / instead of the host's
      "environment": ["/srv/governor/environments/py311"],  # optional; what the command
                                         #   needs beside the tree (see "Environment" below)
      "protected_paths": ["tests/**"],   # optional; patterns no contract naming it may change
      "report": "junit",                 # optional; the command writes a JUnit report
      "plugin_autoload": false,          # optional; a report profile's pytest loads installed
                                         #   plugins itself (off: PYTEST_DISABLE_PLUGIN_AUTOLOAD)
      "heldout": "hidden-tests",         # optional; a held-out suite mounted read-only at
                                         #   /governor-heldout (rules §18.2)
      "oracle": "golden-outputs",        # optional; a held-out suite whose cases the command
                                         #   answers on stdout (rules §18.3)
      "show_output_to_reviewers": false  # optional; output policy, does not change how it runs
    }

Limits (defaults and inclusive bounds), set as rlimits on every process of the sandbox:

    memory_bytes  RLIMIT_AS      address space per process      2 GiB    64 MiB .. 64 GiB
    pids          RLIMIT_NPROC   processes of the sandbox user    256         8 .. 4,096
    file_bytes    RLIMIT_FSIZE   largest file a process writes  256 MiB   1 MiB .. 16 GiB
    cpu_seconds   RLIMIT_CPU     CPU seconds per process          600         1 .. 3,600
    open_files    RLIMIT_NOFILE  descriptors per process        1,024        16 .. 65,536
    output_bytes  (kept, not a limit on the command) output kept per stream
                                                                64 KiB        0 .. 1 MiB

`pids` counts host-wide processes of the sandbox user, so runs at the same time share it
(verification/sandbox.py explains why). Where the worker can make a cgroup per run
(verification/cgroups.py), `memory_bytes` and `pids` also cap the whole run: its total memory
and its total processes.

Environment (rules §17.8, "the environment is the operator's"): a run sees the workspace tree
and nothing else of the workspace (rules §10.1's exclusions keep installed dependencies out of
the tree id). What else the command needs is the profile's `environment`, ≤ 16 directories,
none inside another, each of one of two forms:

    an operator directory   an absolute path outside every workspace root (a venv or a
                            toolchain the operator built): mounted read-only into the sandbox at
                            the same path, never hashed — the agent cannot write it, and the
                            profile receipt names it. Not `/`, and not at or under a place the
                            sandbox mounts itself (SANDBOX_PLACES)
    a workspace directory   a relative path the project's exclusions exclude (`.venv`,
                            `node_modules`; checked when a run starts, as exclusions are the
                            project's): hashed as a tree of its own when the session's reference
                            is taken and at every run, materialised beside the tree, its digest
                            (`environment_digest`) recorded with the run; a run whose directory
                            differs from the reference's is `environment-changed`, and a result
                            counts only while the environment still hashes to what it ran with

Where each lies is judged against the project when a profile is loaded
(governor/services/profiles.py `profile_environment_judged`) and again when a run starts.

The definition (camelCase) holds exactly what changes how the command runs; its receipt is the
profile receipt. Description, `required` and the output policy are not part of it. Fields added
after the first version (`environment`, `protectedPaths`, `report`, `pluginAutoload`, `heldout`,
`oracle`) enter the definition only when set, so the receipts of profiles that do not use them
never changed.

Plugin autoload (rules §17.3): a report profile runs with `PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`,
so pytest loads no plugin merely because an installed package's metadata (a `*.dist-info`
the agent may write into the workspace, which `python -m pytest` puts on `sys.path`) names it;
plugins the command needs are named with `-p`. `plugin_autoload: true` lets pytest load them
itself; it is refused on a profile without a report.
"""

from __future__ import annotations

import re
from typing import Any, NotRequired, TypedDict

from governor.domain.canonical import receipt
from governor.domain.contracts import patterns_problem
from governor.domain.fields import (
    PROFILE_ID_RE,
    FieldErrors,
    FieldsInvalid,
    join_path,
    string_field,
)
from governor.domain.heldout import MOUNT as HELDOUT_MOUNT
from governor.domain.heldout import suite_name_problem
from governor.domain.reports import FORMATS as REPORT_FORMATS

MAX_ID_CHARS = 128
MAX_DESCRIPTION_CHARS = 500
MAX_COMMAND_CHARS = 1024
MAX_ARGS = 50
MAX_ARG_CHARS = 4096
TIMEOUT_MS_RANGE = (1_000, 900_000)
DEFAULT_TIMEOUT_MS = 120_000
SANDBOX_MODES = ("read-only", "workspace-write")
MAX_ENV_VARS = 64
MAX_ENV_NAME_CHARS = 256
MAX_ENV_VALUE_CHARS = 4096
MAX_ROOTFS_CHARS = 1024
MAX_ENVIRONMENT_PATHS = 16
MAX_ENVIRONMENT_PATH_CHARS = 1024

# Where the sandbox mounts its own file systems (verification/sandbox.py): an operator
# environment directory, mounted at its own path, may be none of them nor hold one, and may not
# lie inside those the sandbox fills itself (SANDBOX_OWN).
SANDBOX_PLACES = ("/proc", "/dev", "/tmp", "/workspace", "/governor-report",  # noqa: S108
                  "/governor-stream", "/outcome-data", HELDOUT_MOUNT, "/etc", "/usr", "/bin",
                  "/sbin", "/lib", "/lib64")
SANDBOX_OWN = ("/proc", "/dev", "/workspace", "/governor-report", "/governor-stream",
               "/outcome-data", HELDOUT_MOUNT)

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_NAME_RE = re.compile(r"KEY|PASSWORD|SECRET|TOKEN", re.IGNORECASE)

KIB, MIB, GIB = 1024, 1024**2, 1024**3

# name -> (default, lowest, highest, camelCase name in the definition)
LIMITS: dict[str, tuple[int, int, int, str]] = {
    "memory_bytes": (2 * GIB, 64 * MIB, 64 * GIB, "memoryBytes"),
    "pids": (256, 8, 4096, "pids"),
    "file_bytes": (256 * MIB, 1 * MIB, 16 * GIB, "fileBytes"),
    "cpu_seconds": (600, 1, 3600, "cpuSeconds"),
    "open_files": (1024, 16, 65_536, "openFiles"),
    "output_bytes": (64 * KIB, 0, 1 * MIB, "outputBytes"),
}

FIELDS = frozenset(
    {
        "id",
        "description",
        "argv",
        "timeout_ms",
        "sandbox_mode",
        "required",
        "env",
        "limits",
        "rootfs",
        "environment",
        "protected_paths",
        "report",
        "plugin_autoload",
        "heldout",
        "oracle",
        "show_output_to_reviewers",
    }
)
REQUIRED_FIELDS = ("id", "description", "argv")
# What a stored profile keeps under the same names (its `id` is the model's `profile_id`).
STORED_FIELDS = tuple(sorted(FIELDS - {"id"}))


class ProfileLimits(TypedDict):
    memoryBytes: int
    pids: int
    fileBytes: int
    cpuSeconds: int
    openFiles: int
    outputBytes: int


class ProfileDefinition(TypedDict):
    """Everything that changes how a profile's command runs: the document its receipt covers,
    stored with every receipt (`ProfileVersion`), copied into each run as it was requested, and
    read by the sandbox as it is."""

    id: str
    argv: list[str]
    timeoutMs: int
    sandboxMode: str
    env: dict[str, str]
    limits: ProfileLimits
    rootfs: str | None
    environment: NotRequired[list[str]]
    protectedPaths: NotRequired[list[str]]
    report: NotRequired[str]
    pluginAutoload: NotRequired[bool]
    heldout: NotRequired[str]
    oracle: NotRequired[str]


class ProfileError(FieldsInvalid):
    """A refused profile, naming every failing field (``argv/2``, ``env/API_TOKEN``)."""

    root = "(profile)"


def _text(errors: FieldErrors, path: str, value: object, low: int, high: int) -> str | None:
    """`value` if it is a string of `low`..`high` characters with no NUL, else None (recorded)."""
    text = string_field(errors, path, value)
    if text is None:
        return None
    if "\x00" in text:
        errors.add(path, "must not contain a NUL character")
        return None
    if not low <= len(text) <= high:
        errors.add(path, f"must be {low}..{high} characters long (got {len(text)})")
        return None
    return text


def _integer(errors: FieldErrors, path: str, value: object, low: int, high: int) -> int | None:
    if type(value) is not int:  # True is not 1 here, and neither is 1.0
        errors.add(path, "must be an integer")
        return None
    if not low <= value <= high:
        errors.add(path, f"must be between {low:,} and {high:,} (got {value:,})")
        return None
    return value


def _boolean(errors: FieldErrors, path: str, value: object) -> bool | None:
    if type(value) is not bool:
        errors.add(path, "must be true or false")
        return None
    return value


def _profile_id(errors: FieldErrors, value: object) -> str | None:
    text = _text(errors, "id", value, 1, MAX_ID_CHARS)
    if text is not None and not PROFILE_ID_RE.match(text):
        errors.add(
            "id",
            "must be kebab-case: lowercase letters and digits in words joined by "
            "single hyphens (e.g. unit-tests)",
        )
        return None
    return text


def _description(errors: FieldErrors, value: object) -> str | None:
    if type(value) is str and not value.strip():
        errors.add("description", "must not be empty or blank")
        return None
    return _text(
        errors,
        "description",
        value.strip() if type(value) is str else value,
        1,
        MAX_DESCRIPTION_CHARS,
    )


def _argv(errors: FieldErrors, value: object) -> list[str] | None:
    if type(value) is not list:
        errors.add("argv", "must be a list: the command and its arguments")
        return None
    if not value:
        errors.add("argv", "must name a command")
        return None
    before = len(errors.items)
    command = _text(errors, "argv/0", value[0], 1, MAX_COMMAND_CHARS)
    if command is not None and not _is_command(command):
        errors.add(
            "argv/0",
            "must be an absolute path or a bare command name found on the "
            "sandbox PATH (no relative paths)",
        )
    if len(value) - 1 > MAX_ARGS:
        errors.add("argv", f"has {len(value) - 1} arguments; at most {MAX_ARGS} are allowed")
    for index, arg in enumerate(value[1:], start=1):
        _text(errors, join_path("", "argv", index), arg, 1, MAX_ARG_CHARS)
    return list(value) if len(errors.items) == before else None


def _is_command(command: str) -> bool:
    if command.startswith("/"):
        return command != "/"
    return "/" not in command and command not in (".", "..")


def _env(errors: FieldErrors, value: object) -> dict[str, str] | None:
    if type(value) is not dict:
        errors.add("env", "must be an object of NAME: value")
        return None
    if len(value) > MAX_ENV_VARS:
        errors.add("env", f"has {len(value)} variables; at most {MAX_ENV_VARS} are allowed")
    before = len(errors.items)
    for name, item in value.items():
        path = join_path("", "env", name)
        if _text(errors, path, name, 1, MAX_ENV_NAME_CHARS) is None:
            continue
        if not ENV_NAME_RE.match(name):
            errors.add(
                path,
                "is not a valid environment variable name "
                "(letters, digits and _, not starting with a digit)",
            )
        elif SECRET_NAME_RE.search(name):
            errors.add(
                path,
                "looks like a credential (the name contains KEY, PASSWORD, SECRET "
                "or TOKEN); verifier profiles never carry secrets",
            )
        text = _text(errors, path, item, 0, MAX_ENV_VALUE_CHARS)
        if name == "PATH" and text is not None:
            # The agent writes the workspace: a PATH entry in it (or a relative one, resolved
            # from /workspace) would let the agent choose the binary the operator named.
            for entry in text.split(":"):
                if not entry.startswith("/") or entry == "/workspace" or entry.startswith(
                    "/workspace/"
                ):
                    errors.add(path, f"entry {entry!r} must be an absolute directory outside "
                                     "/workspace")
    return dict(value) if len(errors.items) == before else None


def _limits(errors: FieldErrors, value: object) -> dict[str, int] | None:
    if type(value) is not dict:
        errors.add("limits", "must be an object")
        return None
    before = len(errors.items)
    for name in value:
        if name not in LIMITS:
            errors.add(join_path("", "limits", name), f"unknown limit (known: {', '.join(LIMITS)})")
    limits: dict[str, int] = {}
    for name, (default, low, high, _camel) in LIMITS.items():
        if name not in value:
            limits[name] = default
        elif (
            item := _integer(errors, join_path("", "limits", name), value[name], low, high)
        ) is not None:
            limits[name] = item
    return limits if len(errors.items) == before else None


def _rootfs(errors: FieldErrors, value: object) -> str | None:
    if value is None or value == "":
        return None
    text = _text(errors, "rootfs", value, 1, MAX_ROOTFS_CHARS)
    if text is None:
        return None
    if not text.startswith("/"):
        errors.add("rootfs", "must be an absolute path")
    elif text.rstrip("/") == "":
        errors.add("rootfs", "must not be the host's root directory")
    elif ".." in text.split("/"):
        errors.add("rootfs", "must not contain a '..' segment")
    else:
        return text
    return None


def operator_environment(paths: list[str] | tuple[str, ...]) -> list[str]:
    """The operator directories of an `environment` (absolute paths), mounted read-only."""
    return [path for path in paths if path.startswith("/")]


def workspace_environment(paths: list[str] | tuple[str, ...]) -> list[str]:
    """The workspace directories of an `environment` (relative paths), hashed and copied in."""
    return [path for path in paths if not path.startswith("/")]


def _operator_path(errors: FieldErrors, path: str, text: str) -> str | None:
    segments = text.split("/")[1:]
    if "\\" in text or any(part in ("", ".", "..") for part in segments):
        errors.add(path, "must be an absolute directory path without empty, '.' or '..' "
                         "segments or backslashes (e.g. /srv/governor/environments/py311)")
        return None
    for place in SANDBOX_PLACES:
        if text == place or place.startswith(text + "/") or (
                place in SANDBOX_OWN and text.startswith(place + "/")):
            where = "under" if text.startswith(place + "/") else "at or above"
            errors.add(path, f"must not be {where} {place}, which the sandbox mounts itself")
            return None
    return text


def _environment_path(errors: FieldErrors, path: str, value: object) -> str | None:
    text = _text(errors, path, value, 1, MAX_ENVIRONMENT_PATH_CHARS)
    if text is None:
        return None
    if text.startswith("/"):
        return _operator_path(errors, path, text)
    segments = text.split("/")
    if "\\" in text or any(part in ("", ".", "..") for part in segments):
        errors.add(path, "must be a relative directory path without empty, '.' or '..' "
                         "segments or backslashes (e.g. .venv or web/node_modules)")
        return None
    if segments[0] in (".git", ".governor"):
        errors.add(path, f"must not be under {segments[0]}/, which no tree holds")
        return None
    return text


def _environment(errors: FieldErrors, value: object) -> list[str] | None:
    if type(value) is not list:
        errors.add("environment", "must be a list of directory paths")
        return None
    if len(value) > MAX_ENVIRONMENT_PATHS:
        errors.add("environment", f"has {len(value)} paths; at most {MAX_ENVIRONMENT_PATHS} "
                                  "are allowed")
        return None
    before = len(errors.items)
    paths = [_environment_path(errors, join_path("", "environment", index), item)
             for index, item in enumerate(value)]
    if len(errors.items) != before:
        return None
    for index, path in enumerate(paths):
        assert path is not None
        for other in paths[:index]:
            assert other is not None
            if path == other:
                errors.add(join_path("", "environment", index), f"repeats {path!r}")
            elif path.startswith(other + "/") or other.startswith(path + "/"):
                errors.add(join_path("", "environment", index),
                           f"{path!r} and {other!r} overlap: declare the outer one only")
    return sorted(str(path) for path in paths) if len(errors.items) == before else None


def _protected_paths(errors: FieldErrors, value: object) -> list[str] | None:
    if value == []:
        return []
    return patterns_problem(errors, "protected_paths", value)


def _report(errors: FieldErrors, value: Any) -> str | None:
    if value in (None, ""):
        return None
    if value not in REPORT_FORMATS:
        errors.add("report", f"must be one of {', '.join(REPORT_FORMATS)} (or left out)")
    return value if value in REPORT_FORMATS else None


def _suite(errors: FieldErrors, path: str, value: object) -> str | None:
    """A held-out suite's name (rules §18.2, §18.3); whether the project has it is checked
    where the profile is stored."""
    if value in (None, ""):
        return None
    if (problem := suite_name_problem(value)) is not None:
        errors.add(path, problem)
        return None
    return str(value)


def validate_profile(raw: object) -> dict[str, Any]:
    """§8: the profile `raw` describes, with every default filled in (snake_case), or
    ProfileError listing every failing field."""
    errors = FieldErrors()
    if type(raw) is not dict:
        raise ProfileError([{"path": "", "message": "must be an object"}])
    errors.keys("", raw, FIELDS, REQUIRED_FIELDS)
    profile: dict[str, Any] = {
        "id": _profile_id(errors, raw["id"]) if "id" in raw else None,
        "description": _description(errors, raw["description"]) if "description" in raw else None,
        "argv": _argv(errors, raw["argv"]) if "argv" in raw else None,
        "timeout_ms": _integer(
            errors, "timeout_ms", raw.get("timeout_ms", DEFAULT_TIMEOUT_MS), *TIMEOUT_MS_RANGE
        ),
        "sandbox_mode": raw.get("sandbox_mode", SANDBOX_MODES[0]),
        "required": _boolean(errors, "required", raw.get("required", True)),
        "env": _env(errors, raw.get("env", {})),
        "limits": _limits(errors, raw.get("limits", {})),
        "rootfs": _rootfs(errors, raw.get("rootfs")),
        "environment": _environment(errors, raw.get("environment", [])),
        "protected_paths": _protected_paths(errors, raw.get("protected_paths", [])),
        "report": _report(errors, raw.get("report")),
        "plugin_autoload": _boolean(errors, "plugin_autoload", raw.get("plugin_autoload", False)),
        "heldout": _suite(errors, "heldout", raw.get("heldout")),
        "oracle": _suite(errors, "oracle", raw.get("oracle")),
        "show_output_to_reviewers": _boolean(
            errors, "show_output_to_reviewers", raw.get("show_output_to_reviewers", False)
        ),
    }
    if profile["sandbox_mode"] not in SANDBOX_MODES:
        errors.add("sandbox_mode", f"must be one of {', '.join(SANDBOX_MODES)}")
    if profile["plugin_autoload"] and raw.get("report") in (None, ""):
        errors.add("plugin_autoload", "applies only to a report profile (rules §17.3: only "
                                      "those run with plugin autoload off)")
    if profile["oracle"] and raw.get("report") not in (None, ""):
        errors.add("oracle", "an oracle profile is judged by its outputs, not a test report: "
                             "leave report out (rules §18.3)")
    if profile["oracle"] and profile["sandbox_mode"] == "workspace-write":
        errors.add("oracle", "an oracle profile only reads: its sandbox_mode must be read-only")
    if profile["heldout"] and profile["sandbox_mode"] == "workspace-write":
        # A workspace-write run keeps its changes when it passes: code under test that copied
        # /governor-heldout into its tree would hand the held-out files to the agent.
        errors.add("heldout", "a held-out profile only reads: its sandbox_mode must be "
                              "read-only (a workspace-write run keeps what it writes, and the "
                              "code under test could write the held-out files into the tree)")
    if errors.items:
        raise ProfileError(errors.items)
    return profile


def profile_definition(validated: dict[str, Any]) -> ProfileDefinition:
    """The canonical definition of a validated profile: everything that changes how it runs."""
    limits = validated["limits"]
    definition: ProfileDefinition = {
        "id": validated["id"],
        "argv": list(validated["argv"]),
        "timeoutMs": validated["timeout_ms"],
        "sandboxMode": validated["sandbox_mode"],
        "env": dict(validated["env"]),
        "limits": {"memoryBytes": limits["memory_bytes"], "pids": limits["pids"],
                   "fileBytes": limits["file_bytes"], "cpuSeconds": limits["cpu_seconds"],
                   "openFiles": limits["open_files"], "outputBytes": limits["output_bytes"]},
        "rootfs": validated["rootfs"],
    }
    if validated["environment"]:
        definition["environment"] = list(validated["environment"])
    if validated["protected_paths"]:
        definition["protectedPaths"] = sorted(set(validated["protected_paths"]))
    if validated["report"]:
        definition["report"] = validated["report"]
    if validated["plugin_autoload"]:
        definition["pluginAutoload"] = True
    if validated["heldout"]:
        definition["heldout"] = validated["heldout"]
    if validated["oracle"]:
        definition["oracle"] = validated["oracle"]
    return definition


def profile_receipt(definition: ProfileDefinition) -> str:
    """Rule 1.4 `code-verification-profile`: the receipt of a profile definition."""
    return receipt("code-verification-profile", definition)
