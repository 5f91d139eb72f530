"""Every command the docs give — `manage.py …`, `governor-agent …`, `python -m governor.verify
…` (and `bench`), `make …`, in inline code and in the lines of `sh` blocks, in README.md and
docs/*.md — exists and takes the arguments written (issue 40: docs/reviewing.md gave
`governor_project --delivery-review required`, which answers `invalid choice`). This covers the
synopses and the blocks no test runs (a deployment's commands, the git server hook's
installation) as far as their parsers go.

Such a span is a synopsis: capitalised words (`SLUG`, `FILE`, `N`) stand for values, `[…]` for
an optional part and `a|b` for a choice. Each is parsed by the command's own parser, with every
optional part written and once for each alternative — never run (the blocks a reader is told to
run are run by tests/docs/test_runnable_snippets.py and the tests README.md names). A span that
only names a command or its options (`governor-agent git-hook`, `python -m governor.verify
--commit`) is checked for those names alone.
"""

from __future__ import annotations

import argparse
import itertools
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.core.management import get_commands, load_command_class
from governor_client.cli import build_parser

from tests.docs.markdown import FENCE, PAGES, ROOT, fenced_blocks

PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.[a-z]+)?$")  # SLUG, FILE, KEYS.json
VALUES = {"N": "60"}  # a number where one is needed (`--grace-seconds N`)


@dataclass(frozen=True)
class Span:
    where: str
    words: tuple[str, ...]  # from the command's name on


def inline_spans() -> Iterator[Span]:
    """The inline code spans of every page, outside fenced blocks, whitespace collapsed."""
    for page in PAGES:
        lines, kept, fenced = page.read_text(encoding="utf-8").splitlines(), [], False
        for line in lines:
            if FENCE.match(line.strip()) or line.strip() == "```":
                fenced = not fenced
                kept.append("")
            else:
                kept.append("" if fenced else line)
        text = "\n".join(kept)
        for match in re.finditer(r"`([^`]+)`", text):
            number = text.count("\n", 0, match.start()) + 1
            try:
                words = shlex.split(match.group(1))  # as a shell would: quotes removed
            except ValueError:  # unbalanced quotes: not a command
                words = match.group(1).split()
            yield Span(f"{page.relative_to(ROOT)}:{number}", tuple(words))


def shell_lines() -> Iterator[Span]:
    """The command lines of every `sh` block and the `ExecStart=` lines of every `ini` block (a
    systemd unit), a line ending in a backslash joined with the next, a here-document's body
    left out, each up to its first shell operator."""
    for page in PAGES:
        for block in fenced_blocks(page):
            if block.language not in ("sh", "ini"):
                continue
            text, ending = block.text.replace("\\\n", " "), None
            for offset, line in enumerate(text.splitlines()):
                if block.language == "ini":  # a systemd unit: its commands only
                    if not line.startswith("ExecStart="):
                        continue
                    line = line.removeprefix("ExecStart=")
                if ending is not None:
                    ending = None if line.strip() == ending else ending
                    continue
                if heredoc := re.search(r"<<-?\s*'?(\w+)'?", line):
                    ending = heredoc.group(1)
                try:
                    words = shlex.split(line, comments=True)
                except ValueError:
                    continue
                cut = next((i for i, word in enumerate(words)  # `|`, `&&`, `>`, `2>&1`, …
                            if re.match(r"^\d?[|&;<>]", word)), len(words))
                words = words[:cut]
                inside = next((i for i, word in enumerate(words) if "$(" in word), None)
                if inside is not None:  # the command substitution's own words are not its
                    words = words[:inside + 1]
                yield Span(f"{block.page.relative_to(ROOT)}:{block.line + 1 + offset}",
                           tuple(words))


def commands_named(program: tuple[str, ...]) -> list[Span]:
    """The inline spans and the `sh` blocks' lines that give `program` (its words), each from
    the word after it."""
    found = []
    for span in itertools.chain(inline_spans(), shell_lines()):
        words = tuple(word.rsplit("/", 1)[-1] if "/bin/" in word else word  # .venv/bin/python
                      for word in span.words)
        for start in range(len(words) - len(program) + 1):
            if words[start:start + len(program)] == program:
                rest = span.words[start + len(program):]
                if rest[:1] not in (("…",), ("...",)):  # not `make …`, naming them all
                    found.append(Span(span.where, rest))
                break
    return found


def variants(words: tuple[str, ...]) -> list[list[str]]:
    """The argument lists a synopsis stands for: brackets dropped, each `a|b` once per
    alternative, placeholders filled, an ellipsis or a comment ending it."""
    cleaned: list[list[str]] = []
    for word in words:
        if word in ("…", "...", "#") or word.startswith("#"):
            break
        bare = word.strip("[]")
        if word and not bare or bare == "|":  # a bracket or a bar alone
            continue
        word = bare
        cleaned.append([VALUES.get(choice, "x") if PLACEHOLDER.match(choice) else choice
                        for choice in word.split("|")])
    return [list(choice) for choice in itertools.product(*cleaned)]


class Refused(Exception):
    pass


class Strict(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise Refused(message)


def strict(parser: argparse.ArgumentParser) -> None:
    """`parser` and its subparsers raise rather than exit on an error."""
    parser.error = Strict.error.__get__(parser)  # type: ignore[method-assign]
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                strict(sub)


def manage_parser(name: str) -> argparse.ArgumentParser:
    commands = get_commands()
    assert name in commands, f"no management command {name!r}"
    parser = load_command_class(commands[name], name).create_parser("manage.py", name)
    strict(parser)
    return parser


MANAGE = [span for span in commands_named(("manage.py",)) if span.words]
AGENT = commands_named(("governor-agent",))
VERIFY = commands_named(("python", "-m", "governor.verify"))
MODULES = ("governor.verify", "bench", "bench.b1_harness")  # the modules the docs run
MAKE = commands_named(("make",))


def test_the_spans_are_found() -> None:
    assert len(MANAGE) > 30 and len(AGENT) > 20 and len(VERIFY) > 10 and len(MAKE) > 30
    assert ("governor_project", "set", "SLUG", "--review-mode", "off|required") in {
        span.words for span in MANAGE}


def named_only(parser: argparse.ArgumentParser, words: list[str]) -> bool:
    """Whether `words` only name options of `parser` (each an option it has), with no value."""
    options = {option for action in parser._actions for option in action.option_strings}  # noqa: SLF001
    return all(word in options for word in words)


@pytest.mark.parametrize("span", MANAGE, ids=[span.where for span in MANAGE])
def test_a_documented_management_command_takes_its_arguments(span: Span) -> None:
    name, *rest = span.words
    parser = manage_parser(name)
    for args in variants(tuple(rest)):
        try:
            parser.parse_args(args)
        except Refused as exc:
            if not named_only(parser, args):
                raise AssertionError(f"{span.where}: manage.py {name} {' '.join(args)}: "
                                     f"{exc}") from None


def agent_commands() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = build_parser()
    strict(parser)
    commands = next(action for action in parser._actions  # noqa: SLF001
                    if isinstance(action, argparse._SubParsersAction))  # noqa: SLF001
    return parser, dict(commands.choices)


@pytest.mark.parametrize("span", AGENT, ids=[span.where for span in AGENT])
def test_a_documented_governor_agent_command_takes_its_arguments(span: Span) -> None:
    if not span.words or span.words[0].startswith("/"):  # the name alone, or a path under it
        return
    parser, commands = agent_commands()
    for args in variants(span.words):
        assert args[0] in commands, f"{span.where}: no governor-agent {args[0]}"
        try:
            parser.parse_args(args)
        except Refused as exc:
            if not named_only(commands[args[0]], args[1:]):
                raise AssertionError(f"{span.where}: governor-agent {' '.join(args)}: "
                                     f"{exc}") from None


def test_the_cli_synopsis_lists_every_governor_agent_command_and_no_other() -> None:
    """docs/integrations.md, "The CLI": one line per command, its name first."""
    page = ROOT / "docs" / "integrations.md"
    (synopsis,) = [block for block in fenced_blocks(page) if block.heading == "The CLI"]
    listed = {line.split()[0] for line in synopsis.text.splitlines()
              if line.startswith("  ") and not line.startswith("   ")}
    assert listed == set(agent_commands()[1])


@pytest.mark.parametrize("module", MODULES)
def test_every_option_of_a_python_module_the_docs_give_is_one_it_has(module: str) -> None:
    """`python -m governor.verify --reviewer-keys`, `python -m bench --charts`: each option a
    span or a block line gives is in the module's own `--help`."""
    spans = commands_named(("python", "-m", module))
    assert spans, f"the docs give no python -m {module}"
    help_text = subprocess.run(  # noqa: S603
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True,
        check=True).stdout
    for span in spans:
        for word in span.words:
            if word.startswith("--"):
                assert re.search(rf"(^|[\s\[,]){re.escape(word)}\b", help_text), (
                    f"{span.where}: python -m {module} has no {word}")


def test_every_option_of_the_celery_worker_the_docs_give_is_one_it_has() -> None:
    """docs/deployment.md's worker commands and systemd units."""
    spans = [span for span in commands_named(("python", "-m", "celery"))
             if span.words[:3] == ("-A", "governor.celery", "worker")]
    assert len(spans) >= 3
    help_text = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "celery", "-A", "governor.celery", "worker", "--help"], cwd=ROOT,
        capture_output=True, text=True, check=True).stdout
    for span in spans:
        for word in span.words[3:]:
            if word.startswith("-"):
                assert re.search(rf"(^|[\s\[,]){re.escape(word)}\b", help_text), (
                    f"{span.where}: the celery worker has no {word}")


def test_every_make_target_the_docs_name_is_one_the_makefile_has() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.MULTILINE))
    for span in MAKE:
        named = [word for word in span.words if "=" not in word][:1]
        for target in named:
            assert target in targets, f"{span.where}: the Makefile has no target {target!r}"
