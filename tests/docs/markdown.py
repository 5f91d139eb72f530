"""The fenced code blocks of the repository's Markdown pages, with where they stand."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    heading: str  # the nearest heading above it, without its #s
    before: str  # the line just above the opening fence

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    heading, index = "", 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        opening = FENCE.match(line)
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        blocks.append(Block(page, index + 1, opening.group(1),
                            "\n".join(lines[index + 1:end]) + "\n", heading,
                            lines[index - 1] if index else ""))
        index = end + 1
    return blocks


# The operator environment directory the docs' profile examples name (rules §17.8): a test that
# runs or loads one moves it under its own directory, this one path and nothing else.
OPERATOR_ENVIRONMENT = "/srv/governor/environments/py311"


def operator_environment_moved(text: str, directory: Path) -> str:
    """`text` with the documented operator environment directory replaced by `directory`."""
    return text.replace(OPERATOR_ENVIRONMENT, str(directory))
