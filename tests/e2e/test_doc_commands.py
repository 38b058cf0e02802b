"""Every command a reader runs in the README and the docs site is run here, or listed in NOT_RUN with why.

The longest pages run in files of their own (doc_page_check.OWN_FILE), so pytest-xdist gives them to other workers.

Each page's shell blocks run in order in one bash process (`set -euo pipefail`; exports carry over), from the
repository, with this checkout's .venv/bin first on PATH and a fresh HOME. The docs' Runtime on 127.0.0.1:8080 is
the one the reader starts with `make run` (docs/get-started.md), started here on a free port and shared by the
pages; its banner's token is pasted where a page says so. Long-running commands (`make run`, `nylorun serve`,
`nylorun webhooks`, `nylorun console`, `make docs-serve`) start in the background on free ports, must come up, and
the page's later commands reach them. A connection's link is opened and allowed as a person does
(tests/e2e/consent.py). Output a page shows (`# ...` lines after a command, or the text block after a shell block)
is checked by its words: each whole word of letters must be printed (ids, numbers and times differ per run).

Python blocks: a whole program (every name it uses is defined: ruff finds no F821/F706) runs as a step of its page;
a fragment of an Agent module is compiled only (inside a function, as it would sit in a turn).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from doc_blocks import OUTPUT, PYTHON, ROOT, SHELL, Block, Command, blocks, commands, one_line, pages
from doc_not_run import NOT_ITS_OUTPUT, NOT_RUN, PAGES_ELSEWHERE, fragments, listed
from doc_page_check import OWN_FILE, page_tests

pytestmark = pytest.mark.e2e


runtime, test_page_commands = page_tests(__file__)


def test_every_reader_command_is_run_or_listed() -> None:
    # Given every fenced block of the README and the docs site
    unknown, stale = [], []
    for page in pages():
        for block in blocks(page):
            # Then each is a command (shell, Python), output (text), or data a reader does not run
            if block.lang not in SHELL | PYTHON | OUTPUT | {"json", "yaml", "http", "js", "ini", "toml", ""}:
                unknown.append(
                    f"{block.where}: is this a command a reader runs? (shell/python blocks are run)"
                )
    # And each NOT_RUN entry still names a command of its page (the list cannot go stale)
    for (page, start), why in NOT_RUN.items():
        sources: list[Command | Block] = [c for b in blocks(page) if b.lang in SHELL for c in commands(b)]
        sources += [b for b in blocks(page) if b.lang in PYTHON]
        if not any(listed(page, source) == why and _starts(source, start) for source in sources):
            stale.append(f"NOT_RUN ({page!r}, {start!r}): no such command on the page any more")
    for page in PAGES_ELSEWHERE:
        assert (ROOT / page).exists(), f"PAGES_ELSEWHERE names {page}, which no longer exists"
    for page, line in NOT_ITS_OUTPUT:
        if not any(b.line == line and b.lang in OUTPUT for b in blocks(page)):
            stale.append(f"NOT_ITS_OUTPUT ({page!r}, {line}): no text block opens on that line any more")
    for page, test_file in OWN_FILE.items():
        assert (ROOT / page).exists() and (Path(__file__).parent / test_file).exists(), (page, test_file)
    assert not unknown + stale, "\n".join(unknown + stale)


def _starts(source: Command | Block, start: str) -> bool:
    if isinstance(source, Block):
        return any(line.strip().startswith(start) for line in source.text.splitlines())
    return one_line(source.text).startswith(start)


def test_python_fragments_compile() -> None:
    # Given the Python blocks that are pieces of an Agent module (they use `turn`, `agent`… from around them)
    failures = []
    for page in pages():
        for block in fragments(blocks(page)):
            # When each is compiled where it would sit: in a turn's body
            body = "async def _turn():\n" + textwrap.indent(block.text, "    ") + "\n    pass\n"
            try:
                compile(body, block.where, "exec")
            except SyntaxError as error:
                failures.append(
                    f"{block.where}, its line {block.line + (error.lineno or 1) - 1}: {error.msg}"
                )
    # Then each is valid Python
    assert not failures, "\n".join(failures)


def test_make_test_is_what_ci_runs() -> None:
    # Given `make test`, which the README and docs/contributing.md name and which is only dry-run here
    # Then CI runs exactly it
    assert "\nmake test\n" in (ROOT / ".ci" / "run").read_text()
