"""Outcome contracts: delivery certified is not the goal achieved.

After a delivery contract is certified the server keeps measuring the business metric the work
was for, with an operator's probe, and judges it against a target and guardrails inside a time
window. This module holds the rules, as plain functions over plain data:

- `validate_outcome_profile`: what an operator may configure (snake_case input, every field
  refused with its name and the rule), `outcome_definition` and `outcome_profile_receipt`;
- `agent_view`: what an agent sees of a profile (never argv or env);
- `parse_probe_output`: the strict reading of a probe's stdout;
- `evaluate`: the status after an observation; `deadline_passed_status` when the deadline passed
  without one;
- the event documents (`outcome_contract_payload`, `observation_payload`,
  `outcome_terminal_payload`), each with its receipt, and the words people and agents read.

Input::

    {
      "id": "checkout-conversion",          # kebab-case, ≤ 128, unique per project
      "description": "…",                   # 1..500 characters after trimming
      "argv": ["/usr/bin/python3", "-c", "…"],  # as a verifier profile's
      "env": {"WINDOW": "7d"},              # optional; no credential-looking names
      "timeout_ms": 120000,                 # optional; 1,000..900,000
      "metrics": [{"name": "conversion", "unit": "ratio"}],        # 1..20, names unique
      "target": {"id": "conversion-up", "metric": "conversion",
                 "operator": "gte", "value": 0.031},
      "guardrails": [{"id": "errors-flat", "metric": "error_rate",
                      "operator": "lte", "value": 0.01}],           # optional; ≤ 10
      "minimum_sample_size": 1000,          # optional; 1..1e9
      "max_data_age_ms": 86400000,          # optional; 1 ms..180 d (default 24 h)
      "not_before_ms": 0,                   # optional; 0..180 d, ≤ deadline_ms
      "deadline_ms": 604800000,             # optional; 1 ms..180 d (default 7 d)
      "observe_every_ms": 3600000,          # optional; 1 min..7 d (default 1 h)
      "attribution": "correlational",       # optional; direct | correlational | experiment
      "network": "none"                     # optional; none | host
    }
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

from governor.domain.canonical import (
    JSONObject,
    JSONValueError,
    check_json_value,
    loads_strict,
    receipt,
)
from governor.domain.fields import FieldErrors, FieldsInvalid, join_path
from governor.domain.profiles import (
    DEFAULT_TIMEOUT_MS,
    LIMITS,
    TIMEOUT_MS_RANGE,
    _argv,
    _description,
    _env,
    _integer,
    _profile_id,
)

SECOND_MS = 1000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

MAX_METRICS = 20
MAX_METRIC_NAME_CHARS = 128
MAX_UNIT_CHARS = 64
MAX_GUARDRAILS = 10
MAX_SAMPLE_SIZE = 1_000_000_000
MAX_WINDOW_MS = 180 * DAY_MS
DEFAULT_MAX_DATA_AGE_MS = 24 * HOUR_MS
DEFAULT_DEADLINE_MS = 7 * DAY_MS
DEFAULT_OBSERVE_EVERY_MS = HOUR_MS
OBSERVE_EVERY_RANGE = (MINUTE_MS, 7 * DAY_MS)
FUTURE_DATA_MS = 5 * MINUTE_MS
PROBE_OUTPUT_BYTES = 64 * 1024
AGENT_OBSERVE_INTERVAL_MS = MINUTE_MS

METRIC_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
OPERATORS = ("gte", "lte", "eq", "delta-gte", "delta-lte")
OPERATOR_WORDS = {"gte": "≥", "lte": "≤", "eq": "=", "delta-gte": "rises by at least",
                  "delta-lte": "rises by at most"}
ATTRIBUTIONS = ("direct", "correlational", "experiment")
NETWORKS = ("none", "host")
FAILURE_KINDS = ("exit", "timeout", "configuration", "infrastructure", "invalid-output")
OBSERVING = "observing"
TERMINAL_STATUSES = ("achieved", "missed", "inconclusive", "expired")
TRIGGERS = ("schedule", "agent", "reviewer")

FIELDS = frozenset({"id", "description", "argv", "env", "timeout_ms", "metrics", "target",
                    "guardrails", "minimum_sample_size", "max_data_age_ms", "not_before_ms",
                    "deadline_ms", "observe_every_ms", "attribution", "network"})
REQUIRED_FIELDS = ("id", "description", "argv", "metrics", "target")
STORED_FIELDS = tuple(sorted(FIELDS - {"id"}))
PREDICATE_FIELDS = frozenset({"id", "metric", "operator", "value"})
PROBE_OUTPUT_FIELDS = frozenset({"dataAsOf", "metrics", "sampleSize"})


class OutcomeProfileError(FieldsInvalid):
    """A refused outcome profile, naming every failing field (``target/operator``)."""

    root = "(outcome profile)"


class ProbeOutputInvalid(ValueError):
    """A probe's stdout that is not exactly the one JSON object the rules allow."""


class Predicate(TypedDict):
    """The target or a guardrail: `metric` compared by `operator` with `value`."""

    id: str
    metric: str
    operator: str
    value: float


class OutcomeDefinition(TypedDict):
    """What an outcome profile's receipt covers (`outcome_definition`)."""

    id: str
    argv: list[str]
    env: dict[str, str]
    timeoutMs: int
    metrics: list[dict[str, str]]
    target: Predicate
    guardrails: list[Predicate]
    minimumSampleSize: int | None
    maxDataAgeMs: int
    notBeforeMs: int
    deadlineMs: int
    observeEveryMs: int
    attribution: str
    network: str


class ProbeOutput(TypedDict):
    """A probe's stdout as the strict reading of §2 accepts it."""

    dataAsOf: int
    metrics: dict[str, float]
    sampleSize: NotRequired[int]


class OutcomeContractDocument(TypedDict):
    """`reliability/outcome-contract`: the bound profile, the baseline and the window."""

    outcomeContractId: str
    deliveryContractId: str
    deliveryContractReceipt: str
    profile: JSONObject
    profileReceipt: str
    baseline: JSONObject | None
    startedAt: int
    notBeforeAt: int
    deadlineAt: int
    receipt: str


class ObservationDocument(TypedDict):
    """`reliability/outcome-observation`."""

    outcomeContractId: str
    contractId: str
    observation: int
    trigger: str
    observedAt: int
    profileReceipt: str
    bound: bool
    result: JSONObject | None
    evaluation: JSONObject
    receipt: str


class OutcomeTerminalDocument(TypedDict):
    """`reliability/outcome-terminal`."""

    outcomeContractId: str
    contractId: str
    outcomeContractReceipt: str
    status: str
    reason: str
    causalClaimPermitted: bool
    observationReceipt: NotRequired[str]
    receipt: str


# --- §1: the profile --------------------------------------------------------------------------


def _finite(errors: FieldErrors, path: str, value: Any) -> float | int | None:
    if type(value) not in (int, float) or (type(value) is float and not math.isfinite(value)):
        errors.add(path, "must be a finite number")
        return None
    try:
        check_json_value(value)
    except JSONValueError as exc:
        errors.add(path, exc.reason)
        return None
    number: float | int = value
    return number


def _metrics(errors: FieldErrors, value: object) -> list[dict[str, str]] | None:
    if type(value) is not list:
        errors.add("metrics", "must be a list of {name, unit}")
        return None
    if not 1 <= len(value) <= MAX_METRICS:
        errors.add("metrics", f"must declare 1..{MAX_METRICS} metrics (got {len(value)})")
        return None
    before = len(errors.items)
    metrics: list[dict[str, str]] = []
    seen: set[str] = set()
    for index, item in enumerate(value):
        path = join_path("", "metrics", index)
        if type(item) is not dict:
            errors.add(path, "must be an object {name, unit}")
            continue
        errors.keys(path, item, ("name", "unit"))
        name, unit = item.get("name"), item.get("unit", "")
        if type(name) is not str or not 1 <= len(name) <= MAX_METRIC_NAME_CHARS \
                or not METRIC_NAME_RE.match(name):
            errors.add(join_path(path, "name"), "must match ^[A-Za-z][A-Za-z0-9_.-]*$ and be "
                                                f"1..{MAX_METRIC_NAME_CHARS} characters")
            continue
        if name in seen:
            errors.add(join_path(path, "name"), f"repeats the metric {name!r}")
        seen.add(name)
        if type(unit) is not str or len(unit) > MAX_UNIT_CHARS or "\x00" in unit:
            errors.add(join_path(path, "unit"), f"must be a string of at most {MAX_UNIT_CHARS} "
                                                "characters")
            continue
        metrics.append({"name": name, "unit": unit})
    return metrics if len(errors.items) == before else None


def _predicate(errors: FieldErrors, path: str, value: object,
               metrics: list[dict[str, str]] | None) -> Predicate | None:
    if type(value) is not dict:
        errors.add(path, "must be an object {id, metric, operator, value}")
        return None
    before = len(errors.items)
    errors.keys(path, value, PREDICATE_FIELDS, sorted(PREDICATE_FIELDS))
    predicate_id = value.get("id")
    if "id" in value and (type(predicate_id) is not str or not 1 <= len(predicate_id) <= 128
                          or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", predicate_id)):
        errors.add(join_path(path, "id"), "must be kebab-case, 1..128 characters")
    names = {metric["name"] for metric in metrics or []}
    if "metric" in value and metrics is not None and value["metric"] not in names:
        errors.add(join_path(path, "metric"), f"{value['metric']!r} is not a declared metric "
                                              f"(declared: {', '.join(sorted(names))})")
    if "operator" in value and value["operator"] not in OPERATORS:
        errors.add(join_path(path, "operator"), f"must be one of {', '.join(OPERATORS)}")
    if "value" in value:
        _finite(errors, join_path(path, "value"), value["value"])
    if len(errors.items) != before:
        return None
    return {"id": value["id"], "metric": value["metric"], "operator": value["operator"],
            "value": value["value"]}


def _window(errors: FieldErrors, name: str, raw: Mapping[str, object], default: int,
            low: int, high: int = MAX_WINDOW_MS) -> int | None:
    return _integer(errors, name, raw.get(name, default), low, high)


def validate_outcome_profile(raw: object) -> dict[str, Any]:
    """The outcome profile `raw` describes, with every default filled in (snake_case), or
    OutcomeProfileError listing every failing field and its rule."""
    errors = FieldErrors()
    if type(raw) is not dict:
        raise OutcomeProfileError([{"path": "", "message": "must be an object"}])
    errors.keys("", raw, FIELDS, REQUIRED_FIELDS)
    metrics = _metrics(errors, raw["metrics"]) if "metrics" in raw else None
    target = _predicate(errors, "target", raw["target"], metrics) if "target" in raw else None
    guardrails: list[Predicate] | None = []
    raw_guardrails = raw.get("guardrails", [])
    if type(raw_guardrails) is not list:
        errors.add("guardrails", "must be a list of predicates")
        guardrails = None
    elif len(raw_guardrails) > MAX_GUARDRAILS:
        errors.add("guardrails", f"has {len(raw_guardrails)} predicates; at most "
                                 f"{MAX_GUARDRAILS} are allowed")
        guardrails = None
    else:
        parsed = [_predicate(errors, join_path("", "guardrails", index), item, metrics)
                  for index, item in enumerate(raw_guardrails)]
        guardrails = None if any(item is None for item in parsed) else [
            item for item in parsed if item is not None]
    if target is not None and guardrails is not None:
        seen = {target["id"]}
        for index, guardrail in enumerate(guardrails):
            if guardrail["id"] in seen:
                errors.add(join_path("", "guardrails", index, "id"),
                           f"repeats the predicate id {guardrail['id']!r} (ids are unique "
                           "across the target and guardrails)")
            seen.add(guardrail["id"])
    sample = raw.get("minimum_sample_size")
    if sample is not None:
        sample = _integer(errors, "minimum_sample_size", sample, 1, MAX_SAMPLE_SIZE)
    deadline = _window(errors, "deadline_ms", raw, DEFAULT_DEADLINE_MS, 1)
    not_before = _window(errors, "not_before_ms", raw, 0, 0)
    if deadline is not None and not_before is not None and not_before > deadline:
        errors.add("not_before_ms", f"must not be after deadline_ms ({not_before:,} > "
                                    f"{deadline:,})")
    profile: dict[str, Any] = {
        "id": _profile_id(errors, raw["id"]) if "id" in raw else None,
        "description": _description(errors, raw["description"]) if "description" in raw else None,
        "argv": _argv(errors, raw["argv"]) if "argv" in raw else None,
        "env": _env(errors, raw.get("env", {})),
        "timeout_ms": _integer(errors, "timeout_ms", raw.get("timeout_ms", DEFAULT_TIMEOUT_MS),
                               *TIMEOUT_MS_RANGE),
        "metrics": metrics,
        "target": target,
        "guardrails": guardrails,
        "minimum_sample_size": sample,
        "max_data_age_ms": _window(errors, "max_data_age_ms", raw, DEFAULT_MAX_DATA_AGE_MS, 1),
        "not_before_ms": not_before,
        "deadline_ms": deadline,
        "observe_every_ms": _window(errors, "observe_every_ms", raw, DEFAULT_OBSERVE_EVERY_MS,
                                    *OBSERVE_EVERY_RANGE),
        "attribution": raw.get("attribution", "correlational"),
        "network": raw.get("network", "none"),
    }
    if profile["attribution"] not in ATTRIBUTIONS:
        errors.add("attribution", f"must be one of {', '.join(ATTRIBUTIONS)}")
    if profile["network"] not in NETWORKS:
        errors.add("network", f"must be one of {', '.join(NETWORKS)}")
    if errors.items:
        raise OutcomeProfileError(errors.items)
    return profile


def outcome_definition(validated: Mapping[str, Any]) -> OutcomeDefinition:
    """Everything that changes what a profile measures or how it is judged: the document its
    receipt covers. The description is not part of it."""
    return {
        "id": validated["id"], "argv": list(validated["argv"]), "env": dict(validated["env"]),
        "timeoutMs": validated["timeout_ms"], "metrics": validated["metrics"],
        "target": validated["target"], "guardrails": validated["guardrails"],
        "minimumSampleSize": validated["minimum_sample_size"],
        "maxDataAgeMs": validated["max_data_age_ms"], "notBeforeMs": validated["not_before_ms"],
        "deadlineMs": validated["deadline_ms"], "observeEveryMs": validated["observe_every_ms"],
        "attribution": validated["attribution"], "network": validated["network"],
    }


def outcome_profile_receipt(definition: Mapping[str, object]) -> str:
    return receipt("outcome-profile", definition)


def agent_view(definition: Mapping[str, Any], description: str, profile_receipt: str
               ) -> JSONObject:
    """What an agent (and a reviewer's proposal) sees: never argv, env or network."""
    return {
        "id": definition["id"], "description": description, "metrics": definition["metrics"],
        "target": definition["target"], "guardrails": definition["guardrails"],
        "minimumSampleSize": definition["minimumSampleSize"],
        "windows": {"maxDataAgeMs": definition["maxDataAgeMs"],
                    "notBeforeMs": definition["notBeforeMs"],
                    "deadlineMs": definition["deadlineMs"],
                    "observeEveryMs": definition["observeEveryMs"]},
        "attribution": definition["attribution"],
        "causalClaimPermitted": definition["attribution"] != "correlational",
        "receipt": profile_receipt,
    }


def probe_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The sandbox definition a probe runs with: always read-only, default limits, 64 KiB of
    stdout kept (more is `invalid-output`), the profile's network choice."""
    limits = {camel: default for default, _low, _high, camel in LIMITS.values()}
    limits["outputBytes"] = PROBE_OUTPUT_BYTES
    return {"id": definition["id"], "argv": list(definition["argv"]),
            "timeoutMs": definition["timeoutMs"], "sandboxMode": "read-only",
            "env": dict(definition["env"]), "limits": limits, "rootfs": None,
            "network": definition["network"]}


# --- words ------------------------------------------------------------------------------------


def duration_words(ms: int) -> str:
    """A window length as people say it: "day 7", "hour 6", "minute 30", "immediately"."""
    if ms == 0:
        return "certification"
    for size, unit in ((DAY_MS, "day"), (HOUR_MS, "hour"), (MINUTE_MS, "minute"),
                       (SECOND_MS, "second")):
        if ms % size == 0:
            return f"{unit} {ms // size}"
    return f"{ms:,} ms"


def predicate_words(predicate: Mapping[str, Any]) -> str:
    return f"{predicate['metric']} {OPERATOR_WORDS[predicate['operator']]} {predicate['value']}"


def summary_words(view: Mapping[str, Any]) -> str:
    """The reviewer's sentence: "after delivery: conversion ≥ 0.031 between day 1 and day 7;
    correlational" (guardrails and a minimum sample follow)."""
    windows = view["windows"]
    text = (f"after delivery: {predicate_words(view['target'])} between "
            f"{duration_words(windows['notBeforeMs'])} and "
            f"{duration_words(windows['deadlineMs'])}; {view['attribution']}")
    if view["guardrails"]:
        text += "; guardrails: " + ", ".join(predicate_words(g) for g in view["guardrails"])
    if view.get("minimumSampleSize"):
        text += f"; at least {view['minimumSampleSize']:,} samples"
    return text


def attribution_words(causal: bool) -> str:
    return "caused by" if causal else "correlated with"


# --- §2: the probe's output -------------------------------------------------------------------


def parse_probe_output(stdout: bytes, *, truncated: bool, metrics: list[dict[str, str]],
                       max_data_age_ms: int, now_ms: int) -> ProbeOutput:
    """`{dataAsOf, metrics, sampleSize?}` from a probe's stdout, or ProbeOutputInvalid saying
    why: exactly one JSON object (surrounding whitespace allowed) with only those keys, the
    declared metric names and no other, each finite; `dataAsOf` positive epoch ms, at most five
    minutes ahead of `now_ms` and at most `max_data_age_ms` old."""
    if truncated:
        raise ProbeOutputInvalid(f"stdout is longer than {PROBE_OUTPUT_BYTES:,} bytes")
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise ProbeOutputInvalid("stdout is not UTF-8") from None
    if not text.strip():
        raise ProbeOutputInvalid("stdout is empty: expected one JSON object")
    try:
        value = loads_strict(text.strip())
    except JSONValueError as exc:
        raise ProbeOutputInvalid(f"stdout is not exactly one JSON object: {exc.reason}") from None
    except ValueError as exc:  # two objects, trailing text, broken JSON
        raise ProbeOutputInvalid(f"stdout is not exactly one JSON object: {exc}") from None
    if type(value) is not dict:
        raise ProbeOutputInvalid("stdout must be a JSON object")
    extra = sorted(set(value) - PROBE_OUTPUT_FIELDS)
    if extra:
        raise ProbeOutputInvalid(f"unknown keys {extra} (allowed: dataAsOf, metrics, "
                                 "sampleSize)")
    as_of = value.get("dataAsOf")
    if type(as_of) is not int or as_of <= 0:
        raise ProbeOutputInvalid("dataAsOf must be a positive integer (epoch milliseconds)")
    if as_of > now_ms + FUTURE_DATA_MS:
        raise ProbeOutputInvalid(f"dataAsOf is {as_of - now_ms:,} ms in the future (at most "
                                 f"{FUTURE_DATA_MS:,})")
    if now_ms - as_of > max_data_age_ms:
        raise ProbeOutputInvalid(f"the data is {now_ms - as_of:,} ms old (at most "
                                 f"{max_data_age_ms:,})")
    observed = value.get("metrics")
    if type(observed) is not dict:
        raise ProbeOutputInvalid("metrics must be an object of name: number")
    declared = {metric["name"] for metric in metrics}
    if set(observed) != declared:
        missing, undeclared = sorted(declared - set(observed)), sorted(set(observed) - declared)
        raise ProbeOutputInvalid(
            "metrics must hold exactly the declared names"
            + (f"; missing {missing}" if missing else "")
            + (f"; undeclared {undeclared}" if undeclared else ""))
    for name, number in observed.items():
        if type(number) not in (int, float) or not math.isfinite(number):
            raise ProbeOutputInvalid(f"metrics/{name} must be a finite number")
    result: ProbeOutput = {"dataAsOf": as_of, "metrics": dict(sorted(observed.items()))}
    if "sampleSize" in value:
        sample = value["sampleSize"]
        if type(sample) is not int or sample < 0:
            raise ProbeOutputInvalid("sampleSize must be a non-negative integer")
        result["sampleSize"] = sample
    return result


def probe_record(run: Mapping[str, Any], parsed: ProbeOutput | None, why: str | None
                 ) -> dict[str, Any]:
    """A probe's result as recorded: how the sandbox run ended (never its output, only each
    stream's size and receipt) and, when it passed and its output was valid, the values.
    `run` is the sandbox record; `why` says why the output was refused."""
    passed = bool(run["passed"]) and parsed is not None
    kind = run["failureKind"] if not run["passed"] else (None if parsed else "invalid-output")
    record: dict[str, Any] = {
        "passed": passed, "failureKind": kind, "exitCode": run["exitCode"],
        "signal": run["signal"], "durationMs": run["durationMs"],
        "stdout": run["stdout"], "stderr": run["stderr"],
    }
    if why:
        record["problem"] = why
    if parsed is not None and passed:
        record.update(parsed)
    return record


# --- §5: evaluation ---------------------------------------------------------------------------


def predicate_holds(predicate: Predicate, observed: Mapping[str, float],
                    baseline: Mapping[str, float] | None) -> tuple[bool | None, float | None]:
    """(holds, the compared value): None when a `delta-*` predicate has no baseline value."""
    value = observed[predicate["metric"]]
    operator = predicate["operator"]
    if operator.startswith("delta-"):
        if baseline is None or predicate["metric"] not in baseline:
            return None, None
        value = value - baseline[predicate["metric"]]
    bound = predicate["value"]
    holds = {"gte": value >= bound, "lte": value <= bound, "eq": value == bound,
             "delta-gte": value >= bound, "delta-lte": value <= bound}[operator]
    return holds, value


def evaluate(contract: Mapping[str, Any], result: Mapping[str, Any] | None, now_ms: int
             ) -> dict[str, Any]:
    """The status after one observation (`result` None: refused as unbound):

    probe unbound or failed → observing, or inconclusive at or after the deadline; before
    notBeforeAt → observing; sample size below the minimum → observing, or inconclusive at the
    deadline; otherwise the target and every guardrail are compared (`delta-*` compare observed
    minus baseline): all hold → achieved, else observing before the deadline, missed at or
    after it. A `delta-*` predicate without a baseline value cannot be compared, like a failed
    probe."""
    profile = contract["profile"]
    at_deadline = now_ms >= contract["deadlineAt"]
    if result is None or not result["passed"]:
        why = "the probe is unbound" if result is None else f"the probe failed " \
              f"({result['failureKind']})"
        return {"status": "inconclusive" if at_deadline else OBSERVING, "why": why,
                "predicates": []}
    if now_ms < contract["notBeforeAt"]:
        return {"status": OBSERVING, "why": "before the window opens", "predicates": []}
    minimum = profile.get("minimumSampleSize")
    if minimum and result.get("sampleSize", 0) < minimum:
        return {"status": "inconclusive" if at_deadline else OBSERVING,
                "why": f"sample size {result.get('sampleSize', 0):,} is below {minimum:,}",
                "predicates": []}
    baseline = (contract.get("baseline") or {}).get("metrics")
    rows = []
    for role, predicate in [("target", profile["target"]),
                            *(("guardrail", g) for g in profile["guardrails"])]:
        holds, compared = predicate_holds(predicate, result["metrics"], baseline)
        rows.append({"id": predicate["id"], "role": role, "holds": holds,
                     "observed": result["metrics"][predicate["metric"]], "compared": compared})
    if any(row["holds"] is None for row in rows):
        return {"status": "inconclusive" if at_deadline else OBSERVING,
                "why": "a delta predicate has no baseline to compare with", "predicates": rows}
    if all(row["holds"] for row in rows):
        return {"status": "achieved", "why": "the target and every guardrail hold",
                "predicates": rows}
    failing = ", ".join(row["id"] for row in rows if not row["holds"])
    return {"status": "missed" if at_deadline else OBSERVING, "why": f"not holding: {failing}",
            "predicates": rows}


def deadline_passed_status(observations: Sequence[Mapping[str, Any]]) -> str | None:
    """At the deadline with no valid observation the status is `expired` (None otherwise)."""
    valid = [o for o in observations if (o.get("result") or {}).get("passed")]
    return None if valid else "expired"


def judge(contract: Mapping[str, Any], result: Mapping[str, Any] | None, now_ms: int,
          earlier: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """`evaluate`, then: at or after the deadline, an observation that is not valid (the probe
    unbound or failed) after no valid one before it is `expired`, not `inconclusive`."""
    evaluation = evaluate(contract, result, now_ms)
    invalid = result is None or not result["passed"]
    if (invalid and now_ms >= contract["deadlineAt"]
            and deadline_passed_status(earlier) == "expired"):
        evaluation = {**evaluation, "status": "expired",
                      "why": f"{evaluation['why']}, and no valid observation came before the "
                             "deadline"}
    return evaluation


# --- event documents --------------------------------------------------------------------------


def outcome_contract_payload(*, outcome_contract_id: str, delivery_contract: Mapping[str, Any],
                             view: Mapping[str, Any], baseline: JSONObject | None,
                             started_at: int) -> OutcomeContractDocument:
    """`reliability/outcome-contract`, written when the delivery contract is certified: the
    window counts from then; the baseline is the probe taken when the contract activated."""
    windows = view["windows"]
    document: dict[str, object] = {
        "outcomeContractId": outcome_contract_id,
        "deliveryContractId": delivery_contract["contractId"],
        "deliveryContractReceipt": delivery_contract["receipt"],
        "profile": view, "profileReceipt": view["receipt"], "baseline": baseline,
        "startedAt": started_at, "notBeforeAt": started_at + windows["notBeforeMs"],
        "deadlineAt": started_at + windows["deadlineMs"],
    }
    document["receipt"] = receipt("outcome-contract", document)
    return cast(OutcomeContractDocument, document)


def observation_payload(*, contract: Mapping[str, Any], number: int, trigger: str,
                        observed_at: int, profile_receipt: str, result: JSONObject | None,
                        evaluation: JSONObject) -> ObservationDocument:
    """`reliability/outcome-observation`. `result` None: refused, the profile's receipt is not
    the bound one (the probe did not run)."""
    document: dict[str, object] = {
        "outcomeContractId": contract["outcomeContractId"],
        "contractId": contract["deliveryContractId"], "observation": number,
        "trigger": trigger, "observedAt": observed_at, "profileReceipt": profile_receipt,
        "bound": result is not None, "result": result, "evaluation": evaluation,
    }
    document["receipt"] = receipt("outcome-observation", document)
    return cast(ObservationDocument, document)


def outcome_terminal_payload(*, contract: Mapping[str, Any], status: str, reason: str,
                             observation_receipt: str | None) -> OutcomeTerminalDocument:
    causal = contract["profile"]["attribution"] != "correlational"
    document: dict[str, object] = {
        "outcomeContractId": contract["outcomeContractId"],
        "contractId": contract["deliveryContractId"],
        "outcomeContractReceipt": contract["receipt"], "status": status, "reason": reason,
        "causalClaimPermitted": causal,
    }
    if observation_receipt is not None:
        document["observationReceipt"] = observation_receipt
    document["receipt"] = receipt("outcome-terminal", document)
    return cast(OutcomeTerminalDocument, document)


def terminal_reason(status: str, evaluation: Mapping[str, Any] | None,
                    contract: Mapping[str, Any]) -> str:
    """The sentence a terminal carries; "correlated with", never "caused", when attribution is
    correlational."""
    work = attribution_words(contract["profile"]["attribution"] != "correlational")
    target = predicate_words(contract["profile"]["target"])
    if status == "achieved":
        return f"The outcome was achieved ({target}); it is {work} the certified delivery."
    if status == "missed":
        return f"The outcome was missed at the deadline ({evaluation and evaluation['why']})."
    if status == "inconclusive":
        return f"The outcome is inconclusive at the deadline ({evaluation and evaluation['why']})."
    return "The outcome expired: the deadline passed with no valid observation."


def status_words(status: str, contract: Mapping[str, Any] | None) -> str:
    """What an agent is told about the outcome after delivery is certified."""
    if contract is None:
        return ""
    if status == OBSERVING:
        return (f"delivery-certified; outcome: observing ({summary_words(contract['profile'])})."
                " Do not claim the business goal: it is not measured as reached yet.")
    work = attribution_words(contract["profile"]["attribution"] != "correlational")
    return (f"delivery-certified; outcome: {status}. Any business result is {work} the "
            "delivery, as the outcome terminal says; claim no more than it does.")
