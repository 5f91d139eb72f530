"""rules §19: certifying a change at the pull request, with no session.

A change is a base tree and a head tree. Its **policy** comes from the project's settings and,
optionally, from `.governor-gate.toml` at the root of the **base** tree (never the head: a
change cannot loosen its own gate). The file's keys are named as the project settings are; it
can only tighten them: lists are added to the project's, a true boolean turns a setting on.

    required_profiles = ["pytest"]           # verifier profiles that must run and pass
    protected_paths = ["tests/**"]            # added to the project's and the runner control
    changes_within = ["src/**", "tests/**"]   # scope: every changed path must match one
    tamper_scan = true                        # the §17.5 scan of the changed Python files
    require_discriminating_evidence = true    # a report profile must show fail-to-pass ≥ 1

Held-out suites (§18) are named through the profiles that run them: a required profile whose
definition mounts a held-out suite or an oracle brings that evidence into the gate.

The verdict (`judge_change`) is a pure function of the policy, the changes between the trees,
the protected changes, the tamper findings and the runs of the policy's profiles on the base
(the baseline) and on the head (with the base's protected content laid over it, §17.2). Every
finding is worded as a repair text naming the path or test and the rule.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from governor.domain.canonical import receipt
from governor.domain.changes import WorkspaceChange, offending, offending_text
from governor.domain.fields import FieldErrors, FieldsInvalid
from governor.domain.reports import against_baseline
from governor.domain.tree import validate_exclusions

POLICY_FILE = ".governor-gate.toml"
MAX_POLICY_BYTES = 64 * 1024
MAX_PROFILES = 20
LIST_KEYS = ("required_profiles", "protected_paths", "changes_within")
BOOL_KEYS = ("tamper_scan", "require_discriminating_evidence")
KEYS = (*LIST_KEYS, *BOOL_KEYS)
PROFILE_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,127}$")

# Finding rules: each a rule of the gate a change can break.
RULE_POLICY = "gate-policy"  # §19.1: the head changed the policy file
RULE_PROTECTED = "protected-paths"  # §17.2, §14.3
RULE_SCOPE = "changes-within"  # §14.2
RULE_TAMPER = "tamper-free"  # §17.5
RULE_PROFILE = "profile-passed"  # §8: the head run of a required profile passed
RULE_BASELINE = "fail-to-pass"  # §14.7, §17.6: the head against the base's tests
RULE_CHECKOUT = "checkout-bytes"  # §17.9: a checkout of the head must be its bytes
RULES = (RULE_POLICY, RULE_PROTECTED, RULE_SCOPE, RULE_TAMPER, RULE_PROFILE, RULE_BASELINE,
         RULE_CHECKOUT)


class PolicyError(FieldsInvalid):
    """The base's policy file is refused: `errors` names the line and the key."""


def _key_line(text: str, key: str) -> int | None:
    """The line (1-based) where `key` is assigned at the top level of the TOML text."""
    pattern = re.compile(rf'^\s*("?){re.escape(key)}\1\s*=')
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def policy_file_parse(raw: bytes) -> dict[str, Any]:
    """The keys of a `.governor-gate.toml`, checked: PolicyError naming the line and the key
    of every refusal (a file that does not parse: the line the parser names)."""
    where = POLICY_FILE
    if len(raw) > MAX_POLICY_BYTES:
        raise PolicyError([{"path": where, "message": f"{len(raw)} bytes; at most "
                                                      f"{MAX_POLICY_BYTES}"}])
    try:
        text = raw.decode("utf-8")
        document = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise PolicyError([{"path": where, "message": f"not UTF-8: {exc}"}]) from None
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError([{"path": where, "message": f"does not parse as TOML: {exc}"}]
                          ) from None
    errors = FieldErrors()

    def at(key: str) -> str:
        line = _key_line(text, key)
        return f"{where}:{line} {key}" if line else f"{where} {key}"

    policy: dict[str, Any] = {}
    for key, value in document.items():
        if key not in KEYS:
            errors.add(at(key), f"unknown key; the keys are {', '.join(KEYS)}")
        elif key in BOOL_KEYS:
            if type(value) is not bool:
                errors.add(at(key), "must be true or false")
            else:
                policy[key] = value
        elif type(value) is not list or any(type(item) is not str for item in value):
            errors.add(at(key), "must be a list of strings")
        elif key == "required_profiles":
            bad = [item for item in value if not PROFILE_ID.match(item)]
            if bad:
                errors.add(at(key), f"{bad[0]!r} is not a profile id (kebab-case)")
            elif len(set(value)) > MAX_PROFILES:
                errors.add(at(key), f"at most {MAX_PROFILES} profiles")
            else:
                policy[key] = sorted(set(value))
        else:
            try:
                policy[key] = list(validate_exclusions(value, key))
            except FieldsInvalid as exc:
                errors.add(at(key), "; ".join(f"{e['path']}: {e['message']}"
                                              for e in exc.errors))
    if errors.items:
        raise PolicyError(errors.items)
    return policy


@dataclass(frozen=True)
class Policy:
    """The gate policy of one change: what the project says, tightened by the base's file."""

    required_profiles: tuple[str, ...]
    protected_paths: tuple[str, ...]
    changes_within: tuple[str, ...] | None
    tamper_scan: bool
    require_discriminating_evidence: bool
    from_file: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"required_profiles": list(self.required_profiles),
                "protected_paths": list(self.protected_paths),
                "changes_within": (None if self.changes_within is None
                                   else list(self.changes_within)),
                "tamper_scan": self.tamper_scan,
                "require_discriminating_evidence": self.require_discriminating_evidence,
                "from_file": self.from_file}

    @property
    def receipt(self) -> str:
        return receipt("gate-policy", self.as_dict())


def gate_policy(*, project_required: Sequence[str], project_protected: Sequence[str],
                project_discriminating: bool, file: Mapping[str, Any] | None) -> Policy:
    """The policy: the project's settings (its required profiles, protected paths and
    discriminating-evidence setting) with the base's file (`policy_file_parse`) added."""
    from_file = file is not None
    file = file or {}
    within = file.get("changes_within")
    return Policy(
        required_profiles=tuple(sorted({*project_required, *file.get("required_profiles", [])})),
        protected_paths=tuple(sorted({*project_protected, *file.get("protected_paths", [])})),
        changes_within=None if within is None else tuple(within),
        tamper_scan=bool(file.get("tamper_scan", True)),
        require_discriminating_evidence=(project_discriminating
                                         or bool(file.get("require_discriminating_evidence"))),
        from_file=from_file)


# --- the verdict --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunOutcome:
    """What one finished run of a profile says, for the verdict."""

    profile: str
    passed: bool
    failure: str | None = None  # failure kind, when it did not pass
    tests: Mapping[str, str] | None = None  # a report profile's outcomes by test id
    receipt: str | None = None  # its result receipt


@dataclass
class Verdict:
    certified: bool
    findings: list[dict[str, Any]] = field(default_factory=list)
    proofs: list[dict[str, Any]] = field(default_factory=list)


def _finding(rule: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"rule": rule, "message": message, **extra}


def judge_change(*, policy: Policy, changes: Sequence[WorkspaceChange],
                 protected: Sequence[WorkspaceChange], sections: Sequence[str],
                 tamper: Sequence[Mapping[str, Any]], tamper_more: int,
                 base_runs: Mapping[str, RunOutcome], head_runs: Mapping[str, RunOutcome],
                 report_profiles: Sequence[str], converted: str = "",
                 converted_paths: Sequence[str] = ()) -> Verdict:
    """rules §19.2: certified only when no protected path changed (the policy file included),
    every changed path is within scope, the tamper scan found nothing, every required profile
    passed on the head, and every report profile's tests that ran on the base passed on the
    head (with fail-to-pass ≥ 1 when discriminating evidence is required). `proofs` says what
    proved each rule; `findings` what failed, as repair texts."""
    findings: list[dict[str, Any]] = []
    proofs: list[dict[str, Any]] = []
    count = len(changes)
    if converted:
        findings.append(_finding(RULE_CHECKOUT, converted, paths=list(converted_paths)))
    policy_changes = [c for c in protected if c.path == POLICY_FILE]
    if policy_changes:
        findings.append(_finding(
            RULE_POLICY, f"{POLICY_FILE} ({policy_changes[0].kind}): a change cannot change "
            "its own gate — the policy is read from the base. Restore the file as the base has "
            "it, and propose the policy change on its own, for a person to merge.",
            paths=[POLICY_FILE]))
    others = [c for c in protected if c.path != POLICY_FILE]
    if others:
        findings.append(_finding(
            RULE_PROTECTED, f"{len(others)} protected path{'s' if len(others) != 1 else ''} "
            f"changed against the base: {offending_text(others, sections)}. Restore them as "
            "the base has them (the runs judged the base's version anyway), or ask a person "
            "to change them in a change of their own.",
            paths=[c.path for c in others]))
    else:
        proofs.append({"rule": RULE_PROTECTED, "text": f"none of the {count} changed paths "
                       f"is protected ({len(policy.protected_paths)} patterns and the runner "
                       "control)"})
    if policy.changes_within is not None:
        check = {"id": RULE_SCOPE, "kind": "changes_within",
                 "paths": list(policy.changes_within)}
        outside = offending(check, changes)  # type: ignore[arg-type]
        if outside:
            findings.append(_finding(
                RULE_SCOPE, f"{len(outside)} changed path{'s' if len(outside) != 1 else ''} "
                f"outside the allowed patterns ({', '.join(policy.changes_within)}): "
                f"{offending_text(outside)}. Undo those changes, or split them into a change "
                "the policy allows.", paths=[c.path for c in outside]))
        else:
            proofs.append({"rule": RULE_SCOPE, "text": f"all {count} changed paths match "
                           f"{', '.join(policy.changes_within)}"})
    if policy.tamper_scan:
        if tamper:
            listed = "; ".join(f"{f['path']}:{f['line']} {f['rule']} ({f['reason']})"
                               for f in tamper)
            more = f"; and {tamper_more} more" if tamper_more else ""
            findings.append(_finding(
                RULE_TAMPER, f"the changed code reaches into the verification machinery: "
                f"{listed}{more}. Remove that code: the tests must judge the change, not be "
                "steered by it.", paths=sorted({str(f["path"]) for f in tamper}),
                tamper=[dict(f) for f in tamper]))
        else:
            proofs.append({"rule": RULE_TAMPER, "text": "the tamper scan found nothing in the "
                           "changed Python files"})
    for profile in policy.required_profiles:
        head = head_runs.get(profile)
        if head is None or not head.passed:
            why = "did not run" if head is None else (head.failure or "failed")
            findings.append(_finding(
                RULE_PROFILE, f"the profile {profile} did not pass on the head ({why}), run "
                "with the base's protected content. Fix the code until it passes.",
                profile=profile))
        else:
            proofs.append({"rule": RULE_PROFILE, "profile": profile,
                           "text": f"{profile} passed on the head", "receipt": head.receipt})
        if profile not in report_profiles or head is None or head.tests is None:
            continue
        base = base_runs.get(profile)
        if base is None or base.tests is None:
            findings.append(_finding(
                RULE_BASELINE, f"the profile {profile} has no test report from the base, so "
                "the head's tests cannot be compared with it. Fix the base's run (its report) "
                "and gate again.", profile=profile))
            continue
        held, text = against_baseline(base.tests, head.tests,
                                      discriminating=policy.require_discriminating_evidence)
        if held:
            proofs.append({"rule": RULE_BASELINE, "profile": profile, "text": text})
        else:
            findings.append(_finding(
                RULE_BASELINE, f"{profile}: {text}. Every test the base ran must pass on the "
                "head: restore deleted or skipped tests and make failing ones pass.",
                profile=profile))
    return Verdict(not findings, findings, proofs)


def findings_text(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per finding: its rule and its repair text."""
    return [f"[{f['rule']}] {f['message']}" for f in findings]
