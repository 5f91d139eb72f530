"""rules §18 on plain data: a suite and its cases as loaded, the version receipt, the comparisons
judged outside the sandbox, and the strict reading of an oracle run's output."""

from __future__ import annotations

import json

import pytest

from governor.domain.canonical import receipt
from governor.domain.coverage import assess, evidence_source
from governor.domain.heldout import (
    MAX_CASE_LINE_BYTES,
    MAX_FILE_BYTES,
    Case,
    OracleOutputError,
    SuiteError,
    agent_view,
    all_failed,
    judge_outputs,
    matches,
    oracle_evidence,
    oracle_stdin,
    parse_cases,
    parse_oracle_output,
    parse_suite,
    version_document,
    version_receipt,
)


def jsonl(*cases: dict[str, object]) -> bytes:
    return b"".join(json.dumps(case).encode() + b"\n" for case in cases)


CASES = jsonl(
    {"id": "add-1", "input": [1, 2], "expected": 3, "compare": "exact"},
    {"id": "pi", "input": "pi", "expected": 3.14159, "compare": "number", "tolerance": 0.001},
    {"id": "primes", "input": 10, "expected": [7, 5, 3, 2], "compare": "unordered"},
)


def refused(data: bytes) -> list[dict[str, str]]:
    with pytest.raises(SuiteError) as caught:
        parse_cases(data)
    return caught.value.errors


# --- rule 18.1: suites --------------------------------------------------------------------------


def test_rule_18_1_a_suite_holds_its_files_and_its_cases_apart() -> None:
    suite = parse_suite("golden", [("tests/test_a.py", "100644", b"def test(): pass\n"),
                                   ("cases.jsonl", "100644", CASES),
                                   ("run.sh", "100755", b"#!/bin/sh\n")])
    assert [item.path for item in suite.files] == ["run.sh", "tests/test_a.py"]
    assert suite.cases is not None and [case.id for case in suite.cases] == [
        "add-1", "pi", "primes"]
    assert suite.cases[1] == Case("pi", "pi", 3.14159, "number", 0.001)


def test_rule_18_1_cases_jsonl_below_the_top_is_an_ordinary_file() -> None:
    suite = parse_suite("golden", [("more/cases.jsonl", "100644", b"not cases")])
    assert suite.cases is None and [item.path for item in suite.files] == ["more/cases.jsonl"]


def test_rule_18_1_a_duplicate_case_id_is_refused_naming_the_line_and_field() -> None:
    errors = refused(CASES + jsonl({"id": "pi", "input": 1, "expected": 1, "compare": "exact"}))
    assert errors == [{"path": "cases.jsonl:4/id",
                       "message": "repeats case id 'pi' (first on line 2)"}]


def test_rule_18_1_a_line_that_is_not_json_is_refused_naming_it() -> None:
    errors = refused(CASES + b"{not json}\n")
    assert errors[0]["path"] == "cases.jsonl:4" and "is not JSON" in errors[0]["message"]


def test_rule_18_1_an_empty_line_is_refused_but_a_final_newline_is_not() -> None:
    assert refused(CASES + b"\n" + CASES[:10])[0]["path"] == "cases.jsonl:4"
    assert len(parse_cases(CASES.rstrip(b"\n"))) == 3


def test_rule_18_1_an_unknown_compare_is_refused_naming_the_field() -> None:
    errors = refused(jsonl({"id": "a", "input": 1, "expected": 1, "compare": "fuzzy"}))
    assert errors == [{"path": "cases.jsonl:1/compare",
                       "message": "must be one of exact, number, unordered (got 'fuzzy')"}]


def test_rule_18_1_a_negative_tolerance_is_refused_naming_the_field() -> None:
    errors = refused(jsonl({"id": "a", "input": 1, "expected": 1, "compare": "number",
                            "tolerance": -0.5}))
    assert errors == [{"path": "cases.jsonl:1/tolerance",
                       "message": "must not be negative (got -0.5)"}]


def test_rule_18_1_a_tolerance_outside_number_and_unknown_fields_are_refused() -> None:
    errors = refused(jsonl({"id": "a", "input": 1, "expected": 1, "compare": "exact",
                            "tolerance": 1, "hint": "x"}))
    assert {error["path"] for error in errors} == {"cases.jsonl:1/tolerance",
                                                   "cases.jsonl:1/hint"}


def test_rule_18_1_missing_fields_and_bad_ids_are_named() -> None:
    errors = refused(jsonl({"id": "has space", "input": 1}))
    assert {error["path"] for error in errors} == {
        "cases.jsonl:1/id", "cases.jsonl:1/expected", "cases.jsonl:1/compare"}


def test_rule_18_1_unordered_expects_a_list() -> None:
    errors = refused(jsonl({"id": "a", "input": 1, "expected": 1, "compare": "unordered"}))
    assert errors[0]["path"] == "cases.jsonl:1/expected"


def test_rule_18_1_non_json_values_are_refused_as_everywhere() -> None:
    assert "is not JSON" in refused(b'{"id": "a", "input": NaN, "expected": 1, '
                                    b'"compare": "exact"}\n')[0]["message"]
    assert "is not JSON" in refused(b'{"id": "a", "id": "b", "input": 1, "expected": 1, '
                                    b'"compare": "exact"}\n')[0]["message"]


def test_rule_18_1_a_case_line_over_the_cap_is_refused_naming_it() -> None:
    line = json.dumps({"id": "a", "input": "x" * MAX_CASE_LINE_BYTES, "expected": 1,
                       "compare": "exact"}).encode() + b"\n"
    errors = refused(CASES + line)
    assert errors[0]["path"] == "cases.jsonl:4" and "at most" in errors[0]["message"]


def test_rule_18_1_a_file_over_the_cap_and_bad_paths_and_links_are_refused_naming_them() -> None:
    with pytest.raises(SuiteError) as caught:
        parse_suite("golden", [("big.bin", "100644", b"x" * (MAX_FILE_BYTES + 1)),
                               ("../escape.py", "100644", b""),
                               ("link", "120000", b"/etc/passwd"),
                               (".git/config", "100644", b"")])
    paths = [error["path"] for error in caught.value.errors]
    assert paths == ["big.bin", "../escape.py", "link", ".git/config"]


def test_rule_18_1_a_bad_suite_name_and_a_bad_case_are_all_named() -> None:
    with pytest.raises(SuiteError) as caught:
        parse_suite("Golden Outputs", [("cases.jsonl", "100644", b"[]\n")])
    assert [error["path"] for error in caught.value.errors] == ["name"]


def test_rule_18_1_the_version_receipt_covers_names_paths_modes_bytes_and_cases() -> None:
    entries = [("tests/test_a.py", "100644", b"one"), ("cases.jsonl", "100644", CASES)]
    document = version_document(parse_suite("golden", entries))
    assert document["cases"]["count"] == 3 and document["files"][0]["size"] == 3
    assert version_receipt(document) == receipt("heldout-suite", document)
    assert version_receipt(document) == version_receipt(
        version_document(parse_suite("golden", list(reversed(entries)))))
    changed = [("tests/test_a.py", "100755", b"one"), ("cases.jsonl", "100644", CASES)]
    others = [version_document(parse_suite("golden", changed)),
              version_document(parse_suite("other", entries)),
              version_document(parse_suite("golden", [entries[0]]))]
    assert len({version_receipt(item) for item in [document, *others]}) == 4


def test_rule_18_1_an_agent_sees_only_name_version_and_counts() -> None:
    document = version_document(parse_suite("golden", [("a.py", "100644", b"secret"),
                                                       ("cases.jsonl", "100644", CASES)]))
    view = agent_view(document, "sha256:" + "0" * 64)
    assert view == {"name": "golden", "version": "sha256:" + "0" * 64, "files": 1, "cases": 3}


# --- rule 18.3: comparisons ---------------------------------------------------------------------


def test_rule_18_3_exact_compares_canonical_json() -> None:
    case = Case("a", None, {"x": [1, 2.0], "y": True}, "exact")
    assert matches(case, {"y": True, "x": [1.0, 2]})
    assert not matches(case, {"x": [1, 2], "y": 1})  # true is never 1
    assert not matches(Case("b", None, 1, "exact"), True)
    assert not matches(case, {"x": [2, 1], "y": True})


def test_rule_18_3_number_compares_within_the_tolerance() -> None:
    case = Case("a", None, 3.14159, "number", 0.001)
    assert matches(case, 3.1412) and not matches(case, 3.15)
    assert not matches(case, True) and not matches(case, "3.14159")
    nested = Case("b", None, {"mean": 2.5, "tags": ["a"]}, "number", 0.1)
    assert matches(nested, {"mean": 2.45, "tags": ["a"]})
    assert not matches(nested, {"mean": 2.45, "tags": ["b"]})
    assert matches(Case("c", None, 3, "number"), 3.0) and not matches(
        Case("c", None, 3, "number"), 3.0001)


def test_rule_18_3_unordered_compares_lists_as_multisets() -> None:
    case = Case("a", None, [7, 5, 3, 2], "unordered")
    assert matches(case, [2, 3, 5, 7]) and not matches(case, [2, 3, 5])
    assert not matches(Case("b", None, [1, 1, 2], "unordered"), [1, 2, 2])
    assert not matches(case, {"0": 7})


def test_rule_18_3_an_object_equal_to_everything_cannot_exist_in_json() -> None:
    class Equal:
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    assert not matches(Case("a", None, 3, "exact"), Equal())  # outputs arrive as JSON only


# --- rule 18.3: oracle runs ---------------------------------------------------------------------


SUITE_CASES = parse_cases(CASES)
IDS = [case.id for case in SUITE_CASES]


def test_rule_18_3_stdin_carries_ids_and_inputs_never_expected_values() -> None:
    lines = oracle_stdin(SUITE_CASES).splitlines()
    assert [json.loads(line) for line in lines] == [
        {"id": "add-1", "input": [1, 2]}, {"id": "pi", "input": "pi"},
        {"id": "primes", "input": 10}]
    assert b"expected" not in oracle_stdin(SUITE_CASES) and b"3.14159" not in oracle_stdin(
        SUITE_CASES)


def out(*pairs: tuple[object, object]) -> bytes:
    return b"".join(json.dumps({"id": i, "output": o}).encode() + b"\n" for i, o in pairs)


def test_rule_18_3_outputs_are_judged_per_case_in_any_order() -> None:
    outputs = parse_oracle_output(out(("primes", [2, 3, 5, 7]), ("add-1", 3), ("pi", 3.2)), IDS)
    verdict = judge_outputs(SUITE_CASES, outputs)
    assert verdict.outcomes == {"add-1": "passed", "pi": "failed", "primes": "passed"}
    record = verdict.record({"name": "golden", "version": "v", "files": 0, "cases": 3})
    assert record["matched"] == 2 and record["failing"] == ["pi"]
    assert oracle_evidence(record) == "expected outputs: 2 of 3 match; failing: pi"
    assert "3.14159" not in json.dumps(record)


def bad(stdout: bytes, cap: int = 1 << 20) -> OracleOutputError:
    with pytest.raises(OracleOutputError) as caught:
        parse_oracle_output(stdout, IDS, cap=cap)
    return caught.value


def test_rule_18_3_a_line_that_is_not_json_is_bad_output_naming_it() -> None:
    error = bad(out(("add-1", 3)) + b"PASSED\n" + out(("pi", 3)))
    assert error.line == 2 and "not JSON" in str(error)


def test_rule_18_3_an_unknown_or_repeated_id_is_bad_output_naming_the_line() -> None:
    assert bad(out(("add-1", 3), ("nope", 1), ("pi", 3))).line == 2
    error = bad(out(("add-1", 3), ("add-1", 3), ("pi", 3)))
    assert error.line == 2 and "repeats" in error.reason


def test_rule_18_3_fewer_or_more_lines_than_cases_are_bad_output() -> None:
    fewer = bad(out(("add-1", 3), ("pi", 3)))
    assert fewer.line == 3 and "first missing: primes" in fewer.reason
    more = bad(out(("add-1", 3), ("pi", 3), ("primes", []), ("add-1", 3)))
    assert more.line == 4 and "more lines" in more.reason
    assert bad(b"").line == 1


def test_rule_18_3_extra_keys_and_non_objects_are_bad_output() -> None:
    assert bad(b'{"id": "add-1", "output": 3, "passed": true}\n').line == 1
    assert bad(b"[1]\n").line == 1
    assert bad(b'{"id": 1, "output": 3}\n').line == 1


def test_rule_18_3_output_over_the_cap_is_bad_output_naming_the_line_it_crosses() -> None:
    error = bad(out(("add-1", 3), ("pi", "x" * 500)), cap=100)
    assert error.line == 2 and "cap" in error.reason


def test_rule_18_3_garbage_never_crashes_the_reader() -> None:
    for stdout in (b"\xff\xfe\n", b"\x00", b'{"id": "add-1", "output": NaN}', b"\n\n\n",
                   b'{"id": "add-1", "output": 1e999}\n', b"9" * 5000 + b"\n"):
        assert bad(stdout).line >= 1


def test_rule_18_3_an_unreadable_run_fails_every_case() -> None:
    assert all_failed(SUITE_CASES).failing == IDS
    record = {"name": "golden", "version": "v", "files": 0, "cases": 3,
              "problem": "line 2: not JSON"}
    assert oracle_evidence(record) == ("expected outputs: bad-output (line 2: not JSON), 0 of "
                                       "3 read")


# --- rule 18.4: coverage ------------------------------------------------------------------------


def test_rule_18_4_checks_judged_by_one_suite_are_one_source() -> None:
    tests = {"id": "a", "kind": "code_verification_succeeded", "profile": "hidden-tests",
             "minCount": 1}
    outputs = {**tests, "id": "b", "profile": "golden-outputs"}
    other = {**tests, "id": "c", "profile": "lint"}
    suites = {"hidden-tests": "golden", "golden-outputs": "golden"}
    assert evidence_source(tests, suites) == "heldout:golden"
    assert evidence_source(other, suites) == "trusted-profile:lint"
    claim = {"id": "works", "statement": "it works", "importance": "critical",
             "verification": "deterministic", "checkIds": ["a", "b"],
             "minimumIndependentSources": 2}
    result = assess("Fix it", [claim], [tests, outputs], heldout=suites)
    assert result["evidenceSources"] == {"a": "heldout:golden", "b": "heldout:golden"}
    assert ("error", "insufficient_independent_sources") in [
        (f["severity"], f["code"]) for f in result["findings"]]
    with_lint = assess("Fix it", [{**claim, "checkIds": ["a", "c"]}], [tests, other],
                       heldout=suites)
    assert with_lint["claims"][0]["sources"] == ["heldout:golden", "trusted-profile:lint"]


@pytest.mark.parametrize("line", [
    b'{"id": "add-1", "output": -0}', b'{"id": "add-1", "output": [1,-0]}',
    b'{"id": "add-1", "output": -0.0}', b'{"id": "add-1", "output": NaN}',
    b'{"id": "add-1", "output": 9007199254740993}', b'{"id": "add-1", "id": "pi", "output": 1}',
    b'{"id": "add-1",\n"output": 1}', b'{"id": "add-1", "output": "\\ud800"}',
    b'{"id": "add-1", "output": 1} {"id": "pi", "output": 2}',
])
def test_rule_18_3_the_one_pass_reading_refuses_what_the_strict_one_refuses(line: bytes) -> None:
    """Whatever reads the output, a value rule 1.2 refuses is bad-output on its line."""
    with pytest.raises(OracleOutputError) as caught:
        parse_oracle_output(line + b"\n" + out(("pi", 3), ("primes", [])), IDS)
    assert caught.value.line == 1


def test_rule_18_3_ids_and_strings_holding_minus_zero_still_read() -> None:
    cases = parse_cases(jsonl({"id": "case-0", "input": 1, "expected": "x -0 y",
                               "compare": "exact"}))
    outputs = parse_oracle_output(b'{"id":"case-0","output":"x -0 y"}\n', ["case-0"])
    assert judge_outputs(cases, outputs).outcomes == {"case-0": "passed"}


def test_rule_18_2_held_out_test_ids_are_the_suites_own_or_numbered() -> None:
    """Whatever pytest's rootdir, a test of the suite keeps its id; made-up ids and every
    parameter are numbered, quoting nothing the report's writer chose."""
    from governor.domain.heldout import held_out_test_names
    files = [("tests/test_hidden.py", "100644",
              b"class TestMul:\n    def test_big(self):\n        pass\n\n\n"
              b"def test_mul_hidden():\n    pass\n"), ("data.txt", "100644", b"secret")]
    ids = ["tests.test_hidden::test_mul_hidden", "test_hidden::test_mul_hidden",
           "governor-heldout.tests.test_hidden.TestMul::test_big",
           "tests.test_hidden::test_mul_hidden[6-7-42]", "tests.test_hidden::test_mul_hidden[1]",
           "SECRET.tests.test_hidden::test_mul_hidden", "tests.test_hidden.Nope::test_big",
           "tests.test_hidden::test_undefined", "no-separator secret"]
    names = held_out_test_names(files, ids)
    assert names == {
        "tests.test_hidden::test_mul_hidden": "tests.test_hidden::test_mul_hidden",
        "test_hidden::test_mul_hidden": "test_hidden::test_mul_hidden",
        "governor-heldout.tests.test_hidden.TestMul::test_big":
            "governor-heldout.tests.test_hidden.TestMul::test_big",
        "tests.test_hidden::test_mul_hidden[1]": "tests.test_hidden::test_mul_hidden[#1]",
        "tests.test_hidden::test_mul_hidden[6-7-42]": "tests.test_hidden::test_mul_hidden[#2]",
        "SECRET.tests.test_hidden::test_mul_hidden": "(not a test of the held-out suite)::#1",
        "no-separator secret": "(not a test of the held-out suite)::#2",
        "tests.test_hidden.Nope::test_big": "(not a test of the held-out suite)::#3",
        "tests.test_hidden::test_undefined": "(not a test of the held-out suite)::#4",
    }
    assert len(set(names.values())) == len(names)


@pytest.mark.parametrize("line", [
    b'{"id":"a","output":{"SECRET":1,"SECRET":2}}',
    b'{"id":"SECRET","output":1}',
    b'{"id":"a","output":1' + b"7" * 40 + b"e999}",
])
def test_rule_18_3_bad_output_never_quotes_the_output(line: bytes) -> None:
    from governor.domain.heldout import OracleOutputError, parse_oracle_output
    with pytest.raises(OracleOutputError) as refused:
        parse_oracle_output(line + b"\n", ["a"])
    assert "SECRET" not in str(refused.value) and "7777" not in str(refused.value)
    assert str(refused.value).startswith("line 1: ")
