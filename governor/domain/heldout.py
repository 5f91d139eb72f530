"""rules §18: held-out evidence — suites of files and cases the agent never sees, and the
verdicts on a program's outputs computed where the agent's code never runs.

A suite is what an operator loads from a directory: its files (mounted read-only at
`/governor-heldout` for the runs of a profile naming it with `heldout`), and optionally its
cases, the lines of `cases.jsonl` at the top of the directory (never a file of the mount: a
profile may name the same suite for both, and the expected values never enter the sandbox)::

    {"id": "add-1", "input": [1, 2], "expected": 3, "compare": "exact"}
    {"id": "pi", "input": "pi", "expected": 3.14159, "compare": "number", "tolerance": 1e-4}
    {"id": "primes", "input": 10, "expected": [7, 5, 3, 2], "compare": "unordered"}

`exact` compares by canonical JSON (rules §1: 1 equals 1.0, true never equals 1); `number`
compares the same structure with every number within `tolerance` (default 0) of the expected
one (a boolean is not a number); `unordered` compares two lists as multisets of canonical
values.

The version document (the payload of its `heldout-suite` receipt) names the suite and lists
each file's path, mode, blob id and size, and the cases' blob id and count — never a byte of
either. What an agent is ever shown of a suite is `agent_view`: name, version receipt, file and
case counts.

An oracle run (a profile with `oracle`) reads the cases' `{id, input}` as JSON lines on stdin
(`oracle_stdin`) and prints one `{id, output}` JSON line per case; `parse_oracle_output` reads
that strictly and `judge_outputs` compares it with the expected values, outside the sandbox.
"""

from __future__ import annotations

import json
import math
import posixpath
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from governor.domain.canonical import (
    JSONValueError,
    _no_duplicate_keys,
    canonical_bytes,
    check_json_value,
    loads_strict,
    receipt,
)
from governor.domain.fields import PROFILE_ID_RE, FieldErrors, FieldsInvalid
from governor.domain.tree import blob_id

SUITE_RECEIPT_KIND = "heldout-suite"
ORACLE_RECEIPT_KIND = "heldout-oracle-outcomes"
CASES_FILE = "cases.jsonl"
MOUNT = "/governor-heldout"  # where a held-out profile's run sees the suite's files

MAX_NAME_CHARS = 128
MAX_FILES = 2_000
MAX_PATH_CHARS = 1024
MAX_FILE_BYTES = 16 * 1024**2
MAX_SUITE_BYTES = 128 * 1024**2  # every file of a suite, cases.jsonl included
MAX_CASES = 10_000
MAX_CASE_LINE_BYTES = 256 * 1024
MAX_CASE_ID_CHARS = 128
MAX_ORACLE_OUTPUT_BYTES = 32 * 1024**2  # an oracle run's stdout, in all
NAMED_CASES = 20  # failing case ids named in evidence
SHOWN_INPUTS = 5  # failing cases whose input the agent's repair text shows
MAX_SHOWN_INPUT_CHARS = 500

COMPARES = ("exact", "number", "unordered")
CASE_FIELDS = frozenset({"id", "input", "expected", "compare", "tolerance"})
CASE_REQUIRED = ("id", "input", "expected", "compare")
CASE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]*$")
MODES = ("100644", "100755")
REFUSED_SEGMENTS = frozenset({"", ".", ".."})


class SuiteError(FieldsInvalid):
    """A refused suite, naming every failing file, line and field (``cases.jsonl:3/compare``)."""

    root = "(suite)"


class OracleOutputError(ValueError):
    """`bad-output`: an oracle run's stdout broke the protocol; `line` is the first offending
    line (1-based)."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


@dataclass(frozen=True)
class Case:
    id: str
    input: Any
    expected: Any
    compare: str
    tolerance: float = 0


@dataclass(frozen=True)
class SuiteFile:
    path: str
    mode: str
    data: bytes


@dataclass(frozen=True)
class Suite:
    name: str
    files: tuple[SuiteFile, ...]
    cases: tuple[Case, ...] | None  # None: no cases.jsonl
    cases_data: bytes | None  # cases.jsonl as loaded


def suite_name_problem(name: object) -> str | None:
    """Why `name` cannot name a suite, or None: kebab-case, ≤ MAX_NAME_CHARS, as profile ids."""
    if type(name) is not str:
        return "must be a string"
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        return f"must be 1..{MAX_NAME_CHARS} characters long (got {len(name)})"
    if not PROFILE_ID_RE.match(name):
        return ("must be kebab-case: lowercase letters and digits in words joined by single "
                "hyphens (e.g. golden-outputs)")
    return None


def _path_problem(path: str) -> str | None:
    if not path or len(path) > MAX_PATH_CHARS:
        return f"a path must be 1..{MAX_PATH_CHARS} characters long"
    if "\x00" in path or "\\" in path or path.startswith("/"):
        return "must be a relative path without NUL or backslashes"
    if any(part in REFUSED_SEGMENTS for part in path.split("/")):
        return "must not have empty, '.' or '..' segments"
    if any(part.lower() == ".git" for part in path.split("/")):
        return "must not be under .git"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    return None


def parse_cases(data: bytes, *, source: str = CASES_FILE) -> tuple[Case, ...]:
    """The cases of a `cases.jsonl`, or SuiteError naming every offending line and field
    (``cases.jsonl:3/tolerance``). One JSON object per line; a final newline is allowed, an
    empty line is not."""
    errors = FieldErrors()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if len(lines) > MAX_CASES:
        raise SuiteError([{"path": source, "message": f"has {len(lines):,} cases; at most "
                                                      f"{MAX_CASES:,} are allowed"}])
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        where = f"{source}:{number}"
        if len(line) > MAX_CASE_LINE_BYTES:
            errors.add(where, f"is {len(line):,} bytes; a case line may have at most "
                              f"{MAX_CASE_LINE_BYTES:,}")
            continue
        try:
            raw = loads_strict(line)
        except JSONValueError as exc:
            errors.add(where, f"is not JSON ({exc})")
            continue
        case = _case(errors, where, raw)
        if case is None:
            continue
        if case.id in seen:
            errors.add(f"{where}/id", f"repeats case id {case.id!r} (first on line "
                                      f"{seen[case.id]})")
            continue
        seen[case.id] = number
        cases.append(case)
    if errors.items:
        raise SuiteError(errors.items)
    if not cases:
        raise SuiteError([{"path": source, "message": "holds no case"}])
    return tuple(cases)


def stored_cases(data: bytes) -> tuple[Case, ...]:
    """The cases of a `cases.jsonl` that `parse_cases` accepted when its suite was loaded (the
    blob store checks the bytes against their id on every read): read again without judging
    every value again, as a run reads them."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return tuple(Case(id=raw["id"], input=raw["input"], expected=raw["expected"],
                      compare=raw["compare"], tolerance=raw.get("tolerance", 0))
                 for raw in json.loads(b"[" + b",".join(lines) + b"]"))


def _case(errors: FieldErrors, where: str, raw: object) -> Case | None:
    if type(raw) is not dict:
        errors.add(where, "must be a JSON object {id, input, expected, compare, tolerance?}")
        return None
    before = len(errors.items)
    errors.keys(where, raw, CASE_FIELDS, CASE_REQUIRED)
    case_id = raw.get("id")
    if "id" in raw and (type(case_id) is not str or not 1 <= len(case_id) <= MAX_CASE_ID_CHARS
                        or not CASE_ID_RE.match(case_id)):
        errors.add(f"{where}/id", f"must be 1..{MAX_CASE_ID_CHARS} characters: letters, digits "
                                  "and . _ : - (not first)")
    compare = raw.get("compare")
    if "compare" in raw and compare not in COMPARES:
        errors.add(f"{where}/compare", f"must be one of {', '.join(COMPARES)} (got "
                                       f"{str(compare)[:40]!r})")
    tolerance = raw.get("tolerance", 0)
    if "tolerance" in raw:
        if compare != "number":
            errors.add(f"{where}/tolerance", "applies only to compare: number")
        elif type(tolerance) not in (int, float):
            errors.add(f"{where}/tolerance", "must be a number")
        elif tolerance < 0:
            errors.add(f"{where}/tolerance", f"must not be negative (got {tolerance})")
    expected = raw.get("expected")
    if compare == "unordered" and "expected" in raw and type(expected) is not list:
        errors.add(f"{where}/expected", "must be a list for compare: unordered")
    if len(errors.items) != before:
        return None
    return Case(id=str(case_id), input=raw["input"], expected=expected, compare=str(compare),
                tolerance=tolerance)


def parse_suite(name: str, entries: Iterable[tuple[str, str, bytes]]) -> Suite:
    """A suite from a directory's entries (path, mode, bytes): every regular file but a top
    `cases.jsonl` is a file of the suite; that one holds its cases. SuiteError names every
    refused entry: a bad name or path, a mode other than a regular file's, a file or the whole
    over the caps, a bad case line."""
    errors = FieldErrors()
    if (problem := suite_name_problem(name)) is not None:
        errors.add("name", problem)
    files: list[SuiteFile] = []
    cases_data: bytes | None = None
    total = count = 0
    seen: set[str] = set()
    for path, mode, data in entries:
        count += 1
        if (problem := _path_problem(path)) is not None:
            errors.add(path or "(empty path)", problem)
            continue
        if path in seen:
            errors.add(path, "appears twice")
            continue
        seen.add(path)
        if mode not in MODES:
            errors.add(path, f"must be a regular file (mode {' or '.join(MODES)}, got {mode}): "
                             "links, devices and other entries are refused")
            continue
        if len(data) > MAX_FILE_BYTES:
            errors.add(path, f"is {len(data):,} bytes; a file may have at most "
                             f"{MAX_FILE_BYTES:,}")
            continue
        total += len(data)
        if path == CASES_FILE:
            cases_data = data
        else:
            files.append(SuiteFile(path, mode, data))
    if count - (cases_data is not None) > MAX_FILES:
        errors.add("(files)", f"{count:,} files; at most {MAX_FILES:,} are allowed")
    if total > MAX_SUITE_BYTES:
        errors.add("(files)", f"{total:,} bytes in all; at most {MAX_SUITE_BYTES:,} are allowed")
    if not count:
        errors.add("(files)", "the suite holds no file and no cases")
    cases: tuple[Case, ...] | None = None
    if cases_data is not None and not errors.items:
        try:
            cases = parse_cases(cases_data)
        except SuiteError as exc:
            errors.items.extend(exc.errors)
    if errors.items:
        raise SuiteError(errors.items)
    _no_file_under_another(files)
    return Suite(name=name, files=tuple(sorted(files, key=lambda item: item.path)),
                 cases=cases, cases_data=cases_data)


def _no_file_under_another(files: Sequence[SuiteFile]) -> None:
    paths = {item.path for item in files}
    for item in files:
        parent = posixpath.dirname(item.path)
        while parent:
            if parent in paths:
                raise SuiteError([{"path": item.path, "message": f"lies under the file {parent}"}])
            parent = posixpath.dirname(parent)


def version_document(suite: Suite) -> dict[str, Any]:
    """The payload of the suite version's receipt: its name, each file's path, mode, blob id
    and size, and its cases' blob id and count (null without cases)."""
    return {
        "name": suite.name,
        "files": [{"path": item.path, "mode": item.mode, "blob": blob_id(item.data),
                   "size": len(item.data)} for item in suite.files],
        "cases": (None if suite.cases is None or suite.cases_data is None
                  else {"blob": blob_id(suite.cases_data), "count": len(suite.cases)}),
    }


def version_receipt(document: Mapping[str, Any]) -> str:
    """Rule 1.4 `heldout-suite`: the receipt of one version of a suite."""
    return receipt(SUITE_RECEIPT_KIND, document)


def agent_view(document: Mapping[str, Any], version: str) -> dict[str, Any]:
    """Rule 18.1: all an agent is ever shown of a suite version (and all an export carries):
    its name, version receipt, and file and case counts."""
    cases = document.get("cases")
    return {"name": document["name"], "version": version, "files": len(document["files"]),
            "cases": cases["count"] if isinstance(cases, Mapping) else 0}


# --- oracle runs (rule 18.3) ---------------------------------------------------------------------


_LINE_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def oracle_stdin(cases: Sequence[Case]) -> bytes:
    """What an oracle run reads on stdin: one compact `{id, input}` JSON line per case (keys
    sorted), in the suite's order. Never an expected value. The inputs were checked by rule 1.2
    when the suite was loaded, so the standard encoder writes them losslessly."""
    encode = _LINE_ENCODER.encode
    return "".join(encode({"id": case.id, "input": case.input}) + "\n"
                   for case in cases).encode("utf-8")


# Output that is plain, one value a line, is read in one pass by the C scanner with one hook per
# object (duplicate keys) and every value then checked by rule 1.2 (NaN, -0.0, unsafe integers).
# Anything else — a line it refuses, a value spanning lines, an integer -0 it would read as 0 —
# is read line by line by `loads_strict`, which names the first offending line and says why.
_FAST_DECODER = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)
# The token -0 (an integer), wherever it could stand: never after a word character, a dot or a
# quote, never before a digit, a dot or an exponent. Inside a string it only costs the fast path.
_INTEGER_MINUS_ZERO = re.compile(rb'(?<![\w."])-0(?![\d.eE])')


def _plain_lines(stdout: bytes) -> list[Any] | None:
    """Each line's value when every line is one plain JSON value, else None."""
    if _INTEGER_MINUS_ZERO.search(stdout):
        return None
    try:
        text = stdout.decode("utf-8")
        values, position, size = [], 0, len(text)
        while position < size:
            value, end = _FAST_DECODER.raw_decode(text, position)
            if (end < size and text[end] != "\n") or text.find("\n", position, end) != -1:
                return None
            check_json_value(value)
            values.append(value)
            position = end + 1
    except (ValueError, RecursionError):  # JSONDecodeError, JSONValueError, UTF-8, ints
        return None
    return values


def parse_oracle_output(stdout: bytes, case_ids: Sequence[str], *,
                        cap: int = MAX_ORACLE_OUTPUT_BYTES) -> dict[str, Any]:
    """Each case's output, read strictly from an oracle run's stdout: one plain JSON object
    `{id, output}` per line for every case and nothing else, at most `cap` bytes in all (a
    final newline is allowed). OracleOutputError names the first offending line: over the cap,
    not JSON, not such an object, an unknown or repeated id, fewer or more lines than cases."""
    if len(stdout) > cap:
        crossed = stdout[:cap].count(b"\n") + 1
        raise OracleOutputError(crossed, f"the output is over the cap of {cap:,} bytes")
    lines = stdout.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    plain = _plain_lines(stdout) if len(lines) <= len(case_ids) else None
    known = set(case_ids)
    outputs: dict[str, Any] = {}
    for number, line in enumerate(lines, start=1):
        if number > len(case_ids):
            raise OracleOutputError(number, f"more lines than the {len(case_ids):,} cases")
        try:
            value = plain[number - 1] if plain is not None else loads_strict(line)
        except JSONValueError as exc:
            raise OracleOutputError(number, f"not JSON ({_unquoted(exc.reason)})") from None
        if type(value) is not dict or set(value) != {"id", "output"}:
            raise OracleOutputError(number, 'must be a JSON object {"id", "output"} and '
                                            "nothing else")
        case_id = value["id"]
        if type(case_id) is not str or case_id not in known:
            raise OracleOutputError(number, "an id that is not one of the cases given"
                                            if type(case_id) is str else "an id that is not "
                                            "a string")
        if case_id in outputs:
            raise OracleOutputError(number, f"repeats case id {case_id!r}")
        outputs[case_id] = value["output"]
    if len(outputs) < len(case_ids):
        missing = next(case_id for case_id in case_ids if case_id not in outputs)
        raise OracleOutputError(len(lines) + 1, f"the output ended after {len(lines):,} "
                                                f"line{'s' if len(lines) != 1 else ''}; "
                                                f"{len(case_ids):,} cases were given (first "
                                                f"missing: {missing})")
    return outputs


# Why a line is not strict JSON, in words that quote nothing of it: the record and the agent's
# repair text carry the problem, and the line is what the code under test chose to print — it
# can read the mounted held-out files and every case's input, and a quoted key, id or number's
# digits would carry them out of the run (docs/security.md).
_QUOTING_REASONS = (("duplicate object key", "a duplicate object key"),
                    ("number ", "a number out of range"),
                    ("object key ", "an object key that is not a string"))


def _unquoted(reason: str) -> str:
    for start, said in _QUOTING_REASONS:
        if reason.startswith(start):
            return said
    return reason


def matches(case: Case, output: Any) -> bool:
    """Whether `output` is what `case` expects, by its `compare` (never raises: output that is
    not lossless JSON matches nothing)."""
    try:
        check_json_value(output)
    except JSONValueError:
        return False
    if case.compare == "exact":
        return canonical_bytes(output) == canonical_bytes(case.expected)
    if case.compare == "number":
        return _close(output, case.expected, case.tolerance)
    if type(output) is not list or type(case.expected) is not list:
        return False
    return (Counter(canonical_bytes(item) for item in output)
            == Counter(canonical_bytes(item) for item in case.expected))


def _is_number(value: object) -> bool:
    return type(value) in (int, float)


def _close(output: Any, expected: Any, tolerance: float) -> bool:
    if _is_number(expected):
        return (_is_number(output) and math.isfinite(output)
                and abs(output - expected) <= tolerance)
    if type(expected) is list:
        return (type(output) is list and len(output) == len(expected)
                and all(_close(o, e, tolerance) for o, e in zip(output, expected, strict=True)))
    if type(expected) is dict:
        return (type(output) is dict and set(output) == set(expected)
                and all(_close(output[key], item, tolerance) for key, item in expected.items()))
    return canonical_bytes(output) == canonical_bytes(expected)


@dataclass(frozen=True)
class OracleVerdict:
    """What an oracle run's outputs show: each case `passed` or `failed`, in the suite's order."""

    outcomes: dict[str, str]

    @property
    def failing(self) -> list[str]:
        return [case_id for case_id, outcome in self.outcomes.items() if outcome != "passed"]

    @property
    def matched(self) -> int:
        return len(self.outcomes) - len(self.failing)

    def record(self, suite: Mapping[str, Any],
               inputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The part of the run's `reliability/code-verification` event (agent-visible): the
        suite as an agent sees it, the counts, the first failing ids (with the inputs of the
        first SHOWN_INPUTS of them, from `inputs`, for the repair text), and a receipt over
        every case's outcome."""
        shown = [[case_id, shown_input(inputs[case_id])]
                 for case_id in self.failing[:SHOWN_INPUTS] if inputs and case_id in inputs]
        return {**suite, "matched": self.matched, "failing": self.failing[:NAMED_CASES],
                **({"inputs": shown} if shown else {}),
                "outcomes": receipt(ORACLE_RECEIPT_KIND,
                                    sorted([case_id, outcome]
                                           for case_id, outcome in self.outcomes.items()))}


def judge_outputs(cases: Sequence[Case], outputs: Mapping[str, Any]) -> OracleVerdict:
    """Each case against its output (a case with no output fails)."""
    return OracleVerdict({case.id: "passed" if case.id in outputs
                          and matches(case, outputs[case.id]) else "failed"
                          for case in cases})


def all_failed(cases: Sequence[Case]) -> OracleVerdict:
    """The verdict of a run whose outputs could not be read: every case failed."""
    return OracleVerdict({case.id: "failed" for case in cases})


JUDGED = ("exit", None)  # the command ran to its end: its output tells what it computed


def oracle_judged(record: dict[str, Any], cases: Sequence[Case], suite: Mapping[str, Any],
                  output: bytes | None) -> tuple[str, list[list[str]] | None]:
    """Rule 18.3: judge an oracle run by its output, in `record` (the result being recorded):
    the verdict under `oracle`, and `passed` only if every case matched too — otherwise the
    failure kind `bad-output` (the output broke the protocol) or `outputs-differ`. A run that
    timed out answered nothing: every case failed. One that never ran (`configuration`,
    `infrastructure`) judged nothing and keeps no outcomes. Returns the detail for operators
    and the per-case outcomes to keep beside the run (the baseline's are what failed before the
    work)."""
    kind = record["failureKind"]
    if kind not in (*JUDGED, "timeout"):
        record["oracle"] = dict(suite)
        return "", None
    inputs = {case.id: case.input for case in cases}
    if kind == "timeout":
        verdict, problem = all_failed(cases), "the run timed out before it answered"
    else:
        try:
            outputs = parse_oracle_output(output or b"", [case.id for case in cases])
        except OracleOutputError as exc:
            verdict, problem = all_failed(cases), str(exc)
        else:
            verdict, problem = judge_outputs(cases, outputs), None
    if problem is not None:
        record["oracle"] = {**suite, "problem": problem}
        if record["passed"]:
            record.update(passed=False, failureKind="bad-output")
        detail = f"bad-output: {problem}" if kind != "timeout" else ""
    else:
        record["oracle"] = verdict.record(suite, inputs)
        detail = ""
        if verdict.failing and record["passed"]:
            record.update(passed=False, failureKind="outputs-differ")
            detail = oracle_evidence(record["oracle"])
    return detail, [[case_id, outcome] for case_id, outcome in sorted(verdict.outcomes.items())]


def oracle_evidence(oracle: Mapping[str, Any], *, inputs: bool = False) -> str:
    """Rule 18.3: "expected outputs: 48 of 50 match; failing: a, b" (or why none were read);
    with `inputs`, the agent's repair text: the inputs of the first failing cases too — never
    an expected value, which the record does not hold."""
    total = oracle.get("cases")
    if isinstance(oracle.get("problem"), str):
        return f"expected outputs: bad-output ({oracle['problem']}), 0 of {total} read"
    if "matched" not in oracle:
        return f"expected outputs: not judged, 0 of {total} read"
    matched, failing = oracle.get("matched"), oracle.get("failing") or []
    text = f"expected outputs: {matched} of {total} match"
    if failing:
        more = int(total or 0) - int(matched or 0) - len(failing)
        text += "; failing: " + ", ".join(str(item) for item in failing)
        text += f" and {more} more" if more > 0 else ""
    shown = oracle.get("inputs") or []
    if inputs and shown:
        text += "; their inputs: " + "; ".join(f"{case_id} ← {value}"
                                                for case_id, value in shown)
    return text


def shown_input(value: Any) -> str:
    """A failing case's input as the agent's repair text shows it (canonical, shortened)."""
    text = canonical_bytes(value).decode("utf-8")
    return text if len(text) <= MAX_SHOWN_INPUT_CHARS else (
        text[:MAX_SHOWN_INPUT_CHARS - 1] + "…")


VERSION_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


def binding_problem(data: Mapping[str, Any]) -> str | None:
    """What the offline verifier refuses in a `reliability/code-verification` event that names
    a held-out suite (rules §18.1: exports carry digests, never contents): each suite it names
    is bound by a version receipt with its counts, inside the run's own receipt; an oracle's
    verdict agrees with itself and with `passed`. None when it holds, or names no suite."""
    named = [field for field in ("heldout", "oracle") if field in data]
    if named and "receipt" not in data:
        return "a run that names a held-out suite has no result receipt"
    for field in named:
        suite = data[field]
        if type(suite) is not dict or suite_name_problem(suite.get("name")) is not None:
            return f"{field}: not a held-out suite's name"
        if type(suite.get("version")) is not str or not VERSION_RE.match(suite["version"]):
            return f"{field}: its version is not a heldout-suite receipt"
        if any(type(suite.get(count)) is not int or suite[count] < 0
               for count in ("files", "cases")):
            return f"{field}: its file and case counts are not counts"
    oracle = data.get("oracle")
    if type(oracle) is dict and "matched" in oracle:
        matched, cases, failing = oracle.get("matched"), oracle["cases"], oracle.get("failing")
        if type(matched) is not int or not 0 <= matched <= cases:
            return "oracle: matched is not between 0 and the case count"
        if type(failing) is not list or len(failing) != min(cases - matched, NAMED_CASES):
            return "oracle: the failing cases named do not agree with the count matched"
        if type(oracle.get("outcomes")) is not str or not VERSION_RE.match(oracle["outcomes"]):
            return "oracle: its outcomes are not a receipt"
    if data.get("passed") is True and type(oracle) is dict and (
            oracle.get("matched") != oracle.get("cases")):
        return "oracle: the run passed with cases that did not match"
    return None


# --- the names of held-out tests (rule 18.2) -----------------------------------------------------

NOT_IN_SUITE = "(not a test of the held-out suite)"
_TEST_ID_RE = re.compile(r"^(?P<classname>[^\[]*)::(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
                         r"(?P<params>\[.*\])?$", re.DOTALL)


def _suite_definitions(files: Sequence[tuple[str, str, bytes]]) -> dict[str, tuple[set[str],
                                                                                  set[str]]]:
    """Each dotted classname a test of a suite's Python file can have — every suffix of
    `governor-heldout.<path dotted, without .py>`, whatever pytest's rootdir — with the
    functions and classes the file defines."""
    known: dict[str, tuple[set[str], set[str]]] = {}
    for path, _mode, data in files:
        if not path.endswith(".py"):
            continue
        text = data.decode("utf-8", "replace")
        defined = (set(re.findall(r"^\s*(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)", text,
                                  re.MULTILINE)),
                   set(re.findall(r"^\s*class\s+([A-Za-z_][A-Za-z0-9_]*)", text, re.MULTILINE)))
        parts = ["governor-heldout", *path[:-3].split("/")]
        for start in range(len(parts)):
            known[".".join(parts[start:])] = defined
    return known


def held_out_test_names(files: Sequence[tuple[str, str, bytes]],
                        ids: Iterable[str]) -> dict[str, str]:
    """Rule 18.2: the name each test id of a held-out run's report (or stream) is shown and
    kept by. Every such id reaches the agent (the failing tests it must repair), and the code
    under test runs in the runner's process, where it can write a report of its own: an id
    it made up could carry the held-out files out of the run. So an id is kept only when it is
    one of the suite's — its classname a suite file's module (and classes that file defines),
    its name a function that file defines — and a parameterised test's parameters (which are
    values, perhaps expected ones) become their ordinal among the test's (`[#2]`). Any other
    id becomes `(not a test of the held-out suite)::#n`, numbered in sorted order: one to one,
    quoting nothing."""
    known = _suite_definitions(files)
    names: dict[str, str] = {}
    params: dict[tuple[str, str], list[str]] = {}
    strangers: list[str] = []
    for test in sorted(set(ids)):
        match = _TEST_ID_RE.match(test)
        module = match and _module_of(known, match["classname"])
        if match is None or module is None or match["name"] not in known[module][0]:
            strangers.append(test)
        elif match["params"] is None:
            names[test] = test
        else:
            params.setdefault((match["classname"], match["name"]), []).append(test)
    for (classname, name), tests in params.items():
        for number, test in enumerate(tests, start=1):
            names[test] = f"{classname}::{name}[#{number}]"
    for number, test in enumerate(strangers, start=1):
        names[test] = f"{NOT_IN_SUITE}::#{number}"
    return names


def _module_of(known: Mapping[str, tuple[set[str], set[str]]], classname: str) -> str | None:
    """The suite module `classname` names (with classes its file defines after it), or None."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if module in known:
            return module if set(parts[end:]) <= known[module][1] else None
    return None
