"""Rules §17.9, the reading of `.gitattributes` (`governor/domain/checkout.py`), with stock git
as the oracle: for every case, each attribute git gives a path that converts its content on
checkout (`git check-attr`, case-insensitive as a clone on macOS or Windows is, no system,
global or info/attributes file) is found, naming the path and the attribute; attributes that
convert nothing (`binary`, `-text`, `export-ignore`, `linguist-*`) are never found."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from governor.domain.checkout import (
    CHECKOUT_ATTRIBUTES,
    checkout_attributes,
    is_attributes_file,
    refusal_text,
)

PATHS = ["calc.py", "src/calc.py", "src/deep/calc.py", "Calc.PY", "docs/a.txt", "a.txt",
         "run.bat", "sub/x.sh", "sub/dir/y.sh", "sub/dir/Z.C", "img/logo.png", "we ird.py",
         "café.py", "x[1].py", "data/a/b/c.json", "data/c.json", "README.md", "foo/bar",
         "fooX/bar", "foo/x/y/bar", ".gitattributes", "sub/.gitattributes"]

CASES: dict[str, dict[str, str]] = {
    "a name at any depth": {".gitattributes": "calc.py ident\n"},
    "an anchored name": {".gitattributes": "/calc.py ident\n"},
    "one directory level": {".gitattributes": "src/*.py eol=crlf\n"},
    "any number of directories": {".gitattributes": "src/**/*.py text\n**/b/* filter=lfs\n"},
    "a leading and a glued double star": {".gitattributes": "**/calc.py crlf\nfoo**/bar ident\n"},
    "a deeper file's own base": {".gitattributes": "# comment\n\n",
                                 "sub/.gitattributes": "*.sh eol=lf\ndir/*.c ident\n"},
    "a macro of the top-level file": {".gitattributes": "[attr]kw ident eol=crlf\n*.md kw\n"},
    "a macro of a macro": {".gitattributes": "[attr]a b\n[attr]b working-tree-encoding=UTF-16\n"
                                             "*.bat a\n"},
    "a quoted pattern": {".gitattributes": '"we ird.py" text\n"caf\\303\\251.py" ident\n'},
    "byte-wise wildcards": {".gitattributes": "caf??.py ident\nx\\[1\\].py text=auto\n"},
    "classes": {".gitattributes": "[[:upper:]]*.PY working-tree-encoding=latin1\n"
                                  "[!a-c]*.json crlf\n[a-c].txt eol=crlf\n"},
    "case on either side": {".gitattributes": "CALC.py ident\nsub/DIR/*.c text\n"},
    "the attributes files themselves": {".gitattributes": ".gitattributes ident\n"},
    "a byte order mark and CRLF lines": {".gitattributes": "\ufeffcalc.py ident\r\n*.md text\r\n"},
    "every state of every attribute": {
        ".gitattributes": "*.py ident\n*.txt text\n*.bat eol=crlf\n*.sh crlf=input\n"
                          "*.json filter=lfs\n*.md working-tree-encoding=UTF-8\n"},
}

HARMLESS: dict[str, dict[str, str]] = {
    "binary and unset states": {".gitattributes": "*.png binary\n*.py -text -ident -eol\n"
                                                  "*.txt !text !filter\n*.md -crlf\n"},
    "attributes that convert nothing": {
        ".gitattributes": "*.md linguist-documentation\ndocs/** linguist-generated=true\n"
                          "docs/ export-ignore\n*.json -diff merge=union whitespace=-trail\n"
                          "*.py diff=python export-subst\n"},
    "a negative pattern, a directory pattern, a subdirectory's macro": {
        ".gitattributes": "!calc.py ident\nsrc/ text\n",
        "sub/.gitattributes": "[attr]kw ident\n"},
}


def git_converting(tmp_path: Path, files: dict[str, str]) -> set[tuple[str, str]]:
    """(path, attribute) for each checkout attribute stock git sets or values on PATHS."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_ATTR_NOSYSTEM": "1"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)  # noqa: S603,S607
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_bytes(text.encode())
    done = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), "-c", "core.ignorecase=true", "-c",  # noqa: S607
         f"core.attributesFile={os.devnull}", "check-attr", "-z", "--stdin", "-a"],
        input="\0".join(PATHS).encode() + b"\0", capture_output=True, env=env, check=True)
    fields = done.stdout.split(b"\0")[:-1]
    found = set()
    for index in range(0, len(fields), 3):
        path, attribute, value = (field.decode() for field in fields[index:index + 3])
        if attribute in CHECKOUT_ATTRIBUTES and value not in ("unset", "unspecified"):
            found.add((path, attribute))
    return found


def ours(files: dict[str, str]) -> set[tuple[str, str]]:
    return {(item.path, item.state.split("=", 1)[0]) for item in checkout_attributes(
        PATHS, {path: text.encode() for path, text in files.items()})}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_17_9_every_converting_attribute_git_gives_is_found(tmp_path: Path,
                                                                 case: str) -> None:
    expected = git_converting(tmp_path, CASES[case])
    assert expected, "the case sets something for git"
    assert ours(CASES[case]) == expected


@pytest.mark.parametrize("case", sorted(HARMLESS))
def test_rule_17_9_attributes_that_convert_nothing_are_not_refused(tmp_path: Path,
                                                                   case: str) -> None:
    assert git_converting(tmp_path, HARMLESS[case]) == set()
    assert ours(HARMLESS[case]) == set()


def test_rule_17_9_an_assertion_counts_even_where_a_later_line_unsets_it(
        tmp_path: Path) -> None:
    """Wider than git, on purpose: the reading never depends on which line wins."""
    files = {".gitattributes": "*.py ident\ncalc.py -ident\n"}
    assert ("calc.py", "ident") not in git_converting(tmp_path, files)
    assert ("calc.py", "ident") in ours(files)


def test_rule_17_9_the_refusal_names_the_attribute_the_path_and_the_line() -> None:
    found = checkout_attributes(["calc.py", "test_calc.py", "README.md"], {
        ".gitattributes": b"*.png binary\ncalc.py ident\n[attr]crlf-files eol=crlf\n"
                          b"*.md crlf-files\n"})
    assert [str(item) for item in found] == [
        "`eol=crlf` applies to README.md (.gitattributes:4, through the macro `crlf-files`)",
        "`ident` applies to calc.py (.gitattributes:2)"]
    assert "`ident` applies to calc.py" in refusal_text(found)
    assert is_attributes_file("sub/.GitAttributes") and not is_attributes_file("gitattributes")
