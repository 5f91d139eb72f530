"""rules §1.1–1.3: canonical JSON (RFC 8785 test vectors), strict intake, receipts."""

from __future__ import annotations

import hashlib
import re
import struct
from decimal import Decimal
from typing import Any

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.domain.canonical import (
    JSONValueError,
    canonical_bytes,
    canonical_bytes_checked,
    canonical_equal,
    check_json_value,
    loads_strict,
    receipt,
)


def ieee(hex_bits: str) -> float:
    """The double whose IEEE 754 bit pattern is `hex_bits` (how RFC 8785 Appendix B names them)."""
    return struct.unpack(">d", bytes.fromhex(hex_bits))[0]


# --- rule 1.1: RFC 8785 serialisation ---------------------------------------------------------


def test_rule_1_1_rfc8785_section_3_2_2_example_serialises_exactly() -> None:
    source = r"""{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"""
    expected = (
        r"""{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"""
        r""""string":"€$\u000f\nA'B\"\\\\\"/"}"""
    )
    assert canonical_bytes(loads_strict(source)) == expected.encode("utf-8")


def test_rule_1_1_keys_sort_by_utf16_code_units_as_in_rfc8785_section_3_2_3() -> None:
    source = r"""{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"""
    expected = (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )
    assert canonical_bytes(loads_strict(source)) == expected.encode("utf-8")


def test_rule_1_1_utf16_order_puts_an_astral_key_before_u_fb33_unlike_code_point_order() -> None:
    value = {"\ufb33": 1, "\U0001f600": 2}
    assert sorted(value) == ["\ufb33", "\U0001f600"]  # code point order would be wrong
    assert canonical_bytes(value) == '{"\U0001f600":2,"\ufb33":1}'.encode()


def test_rule_1_1_unicode_is_not_normalised_as_in_rfc8785_section_3_2_4() -> None:
    expected = bytes.fromhex(
        "7b 22 55 6e 6e 6f 72 6d 61 6c 69 7a 65 64 20 55 6e 69 63 6f 64 65 22 3a 22 41 cc 8a 22 7d"
    )
    assert canonical_bytes(loads_strict(r'{"Unnormalized Unicode":"A\u030a"}')) == expected


@pytest.mark.parametrize(
    ("hex_bits", "text"),
    [
        ("0000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("ffefffffffffffff", "-1.7976931348623157e+308"),
        ("433fffffffffffff", "9007199254740991"),
        ("c33fffffffffffff", "-9007199254740991"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("44b52d02c7e14af7", "1.0000000000000001e+23"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"),
        ("41b3de4355555554", "333333333.33333325"),
        ("41b3de4355555555", "333333333.3333333"),
        ("41b3de4355555556", "333333333.3333334"),
        ("41b3de4355555557", "333333333.33333343"),
        ("becbf647612f3696", "-0.0000033333333333333333"),
        ("43143ff3c1cb0959", "1424953923781206.2"),
    ],
)
def test_rule_1_1_rfc8785_appendix_b_numbers_serialise_exactly(hex_bits: str, text: str) -> None:
    assert canonical_bytes(ieee(hex_bits)) == text.encode()


@pytest.mark.parametrize(
    ("source", "text"),
    [
        ("1E30", "1e+30"),
        ("4.50", "4.5"),
        ("2e-3", "0.002"),
        ("0.0000001", "1e-7"),
        ("333333333.33333329", "333333333.3333333"),
        ("1.0", "1"),
        ("-1.5e0", "-1.5"),
        ("0.000000000000000000000000001", "1e-27"),
    ],
)
def test_rule_1_1_numbers_use_ecmascript_formatting(source: str, text: str) -> None:
    assert canonical_bytes(loads_strict(source)) == text.encode()


def test_rule_1_1_strings_are_minimally_escaped() -> None:
    value = '\b\t\n\f\r\x0f\x1f/\u2028"\\é'
    assert canonical_bytes(value) == b'"\\b\\t\\n\\f\\r\\u000f\\u001f/\xe2\x80\xa8\\"\\\\\xc3\xa9"'


def test_rule_1_1_output_has_no_whitespace() -> None:
    assert (
        canonical_bytes(loads_strict('{ "b" : [ 1 , 2 ] ,\n "a" : { } }')) == b'{"a":{},"b":[1,2]}'
    )


# --- rule 1.2: refusals -----------------------------------------------------------------------


@pytest.mark.parametrize("source", ["NaN", "Infinity", "-Infinity", "[1, NaN]", "1e400", "-1e400"])
def test_rule_1_2_non_finite_numbers_are_refused_on_intake(source: str) -> None:
    with pytest.raises(JSONValueError):
        loads_strict(source)


@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), float("-inf"), ieee("7ff0000000000000")]
)
def test_rule_1_2_non_finite_numbers_are_refused_on_serialisation(value: float) -> None:
    with pytest.raises(JSONValueError, match="not finite"):
        canonical_bytes(value)


@pytest.mark.parametrize("source", ["-0", "-0.0", "-0e7", "[-0]", '{"a": -0.0}'])
def test_rule_1_2_negative_zero_is_refused(source: str) -> None:
    with pytest.raises(JSONValueError, match="negative zero"):
        loads_strict(source)


def test_rule_1_2_negative_zero_is_refused_on_serialisation() -> None:
    with pytest.raises(JSONValueError, match="negative zero"):
        canonical_bytes(ieee("8000000000000000"))
    assert canonical_bytes(0.0) == b"0"


@pytest.mark.parametrize(
    "source", ["9007199254740992", "-9007199254740992", "9007199254740992.0", "1e16", "[2e20]",
               "10000000000000000", "9" * 5000, "-" + "9" * 5000]  # 5000: past int()'s limit
)
def test_rule_1_2_integers_beyond_2_53_minus_1_are_refused(source: str) -> None:
    with pytest.raises(JSONValueError, match="2\\^53"):
        loads_strict(source)


@pytest.mark.parametrize(
    "value",
    [
        2**53,
        -(2**53),
        10**30,
        ieee("4340000000000000"),  # 2^53, RFC 8785 Appendix B
        ieee("c340000000000000"),
        ieee("4430000000000000"),  # 295147905179352830000
        ieee("444b1ae4d6e2ef4e"),  # 999999999999999700000
        ieee("444b1ae4d6e2ef4f"),  # 999999999999999900000
    ],
)
def test_rule_1_2_values_written_as_unsafe_integer_literals_are_refused(value: float) -> None:
    with pytest.raises(JSONValueError, match="2\\^53"):
        canonical_bytes(value)


def test_rule_1_2_the_largest_safe_integers_are_accepted() -> None:
    assert canonical_bytes([2**53 - 1, -(2**53 - 1)]) == b"[9007199254740991,-9007199254740991]"
    assert loads_strict("9007199254740991") == 2**53 - 1


@pytest.mark.parametrize(
    "source", ['"\\ud800"', '"a\\udc00b"', '{"\\ud83d": 1}', '["\\ude00\\ud83d"]']
)
def test_rule_1_2_lone_surrogates_are_refused_on_intake(source: str) -> None:
    with pytest.raises(JSONValueError, match="surrogate"):
        loads_strict(source)


@pytest.mark.parametrize("value", ["\ud800", {"k\udfff": 1}, ["ok", "\ud83d"]])
def test_rule_1_2_lone_surrogates_are_refused_on_serialisation(value: Any) -> None:
    with pytest.raises(JSONValueError, match="surrogate"):
        canonical_bytes(value)


def test_rule_1_2_a_surrogate_pair_escape_is_one_character() -> None:
    assert loads_strict('"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize(
    "source", ['{"a": 1, "a": 1}', '{"x": {"b": 1, "b": 2}}', '[{"k": 1, "k": 1}]']
)
def test_rule_1_2_duplicate_keys_are_refused(source: str) -> None:
    with pytest.raises(JSONValueError, match="duplicate"):
        loads_strict(source)


def test_rule_1_2_invalid_utf8_is_refused() -> None:
    with pytest.raises(JSONValueError, match="UTF-8"):
        loads_strict(b'"\xff"')


@pytest.mark.parametrize(
    "value",
    [(1, 2), {1, 2}, b"bytes", Decimal("1.5"), {1: "non-string key"}, object(), [complex(1, 2)]],
)
def test_rule_1_2_non_json_python_values_are_refused(value: Any) -> None:
    with pytest.raises(JSONValueError):
        check_json_value(value)


def test_rule_1_2_refusals_name_the_place() -> None:
    with pytest.raises(JSONValueError) as refused:
        canonical_bytes({"checks": [{"value": float("nan")}], "a/b": 1})
    assert refused.value.path == "/checks/0/value"


def test_rule_1_2_true_and_1_are_different_values() -> None:
    assert not canonical_equal(True, 1)
    assert not canonical_equal([False], [0])
    assert canonical_equal(1, 1.0)
    assert receipt("attempt", {"passed": True}) != receipt("attempt", {"passed": 1})
    assert receipt("attempt", [False]) != receipt("attempt", [0])


# --- rule 1.3: receipts -----------------------------------------------------------------------


def test_rule_1_3_receipt_is_sha256_of_jcs_of_kind_and_payload() -> None:
    expected = hashlib.sha256(b'{"kind":"attempt","payload":{"a":[true,null],"b":1}}').hexdigest()
    assert receipt("attempt", {"b": 1.0, "a": [True, None]}) == "sha256:" + expected


def test_rule_1_3_receipt_format_is_sha256_and_64_lowercase_hex() -> None:
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", receipt("contract", {"id": "c"}))


def test_rule_1_3_key_order_never_matters_for_receipts() -> None:
    left = {"b": 1, "a": {"y": [1, {"q": 2, "p": 3}], "x": "€"}}
    right = {"a": {"x": "€", "y": [1, {"p": 3, "q": 2}]}, "b": 1}
    assert receipt("terminal", left) == receipt("terminal", right)


def test_rule_1_3_the_kind_is_part_of_the_receipt() -> None:
    assert receipt("attempt", {"a": 1}) != receipt("terminal", {"a": 1})


def test_rule_1_3_receipts_refuse_what_rule_1_2_refuses() -> None:
    with pytest.raises(JSONValueError):
        receipt("attempt", {"score": float("nan")})


# --- the fast path used for hashing appended events -------------------------------------------


_scalars = (st.none() | st.booleans()
            | st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
            | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0 or
                                                                        str(f)[0] != "-")
            | st.text(alphabet=st.characters(blacklist_categories=["Cs"])))
_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=6),
                      children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(_values)
def test_rule_1_1_fast_canonical_path_equals_rfc8785(value: object) -> None:
    assert canonical_bytes_checked(value) == rfc8785.dumps(value)


def test_rule_1_1_fast_path_orders_astral_keys_by_utf16_code_units() -> None:
    value = {"\U0001f600": 1, "\ufb33": 2}
    assert canonical_bytes_checked(value) == rfc8785.dumps(value)
    assert canonical_bytes_checked(value).index("\ufb33".encode()) > 0
