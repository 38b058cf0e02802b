"""The fenced blocks of the README and the docs site, and the commands a reader runs in them (with the output the
page shows after each)."""

from __future__ import annotations

import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = frozenset({"bash", "sh", "shell", "console"})
PYTHON = frozenset({"python", "py", "python3"})
OUTPUT = frozenset({"text", "txt", "output"})
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)(.*)$")
TITLE = re.compile(r'title="([^"]+)"')


@dataclass(frozen=True)
class Block:
    """One fenced block: its page (relative to the repository), the line its fence opens on, language and text."""

    page: str
    line: int
    lang: str
    text: str
    title: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}, the {self.lang} block at line {self.line}"


@dataclass
class Command:
    """One command of a shell block (continuation lines and multi-line quotes joined), with the `# ...` lines the
    page shows after it as its output."""

    block: Block
    line: int  # the page's line the command starts on
    text: str
    shown: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.block.page}:{self.line} (the {self.block.lang} block at line {self.block.line}): {self.text!r}"


def pages() -> list[str]:
    """The README and every page of the docs site, as paths relative to the repository (new pages join by
    themselves)."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]


def blocks(page: str) -> list[Block]:
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if opened is None:
            i += 1
            continue
        indent, fence, lang, rest = opened.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = textwrap.dedent("\n".join(line.removeprefix(indent) for line in lines[i + 1 : end]))
        title = TITLE.search(rest)
        found.append(Block(page, i + 1, lang.lower(), body, title[1] if title else None))
        i = end + 1
    return found


def output_after(page_blocks: list[Block], block: Block) -> Block | None:
    """The text block that follows a shell block (the next fenced block of the page), which shows its output."""
    index = page_blocks.index(block)
    following = page_blocks[index + 1] if index + 1 < len(page_blocks) else None
    return following if following is not None and following.lang in OUTPUT else None


def _complete(text: str) -> bool:
    if text.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(text, comments=True)
    except ValueError:  # a quote still open: the command goes on on the next line
        return False
    return text.count("$(") <= text.count(")")


def commands(block: Block) -> list[Command]:
    """The block's commands in order; `# ...` lines after a command are the output the page shows for it."""
    found: list[Command] = []
    pending: list[str] = []
    start = 0
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if not pending:
            if not line.strip():
                continue
            if line.lstrip().startswith("#"):
                if found:
                    found[-1].shown.append(line.lstrip().removeprefix("#").strip())
                continue
            start = number
        pending.append(line)
        if _complete("\n".join(pending)):
            found.append(Command(block, start, "\n".join(pending)))
            pending = []
    if pending:
        found.append(Command(block, start, "\n".join(pending)))
    return found


def one_line(text: str) -> str:
    """A command as one line (continuations joined, spaces squeezed): what the not-run list's prefixes match."""
    return " ".join(text.replace("\\\n", " ").split())
