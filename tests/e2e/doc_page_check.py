"""The per-page check of the docs commands test, shared by the files that split the pages between pytest-xdist
workers (`make test` deals whole files to workers: one file holding every page would run for minutes alone)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from consent import disconnect
from doc_blocks import PYTHON, Command, blocks, output_after, pages
from doc_not_run import NOT_ITS_OUTPUT, PAGES_ELSEWHERE, answers, steps_of
from doc_pages import missing_words, run_page
from doc_servers import Server, Servers

# The pages that take longest, each run by a test file of its own (so by a worker of its own); every other page
# is run by tests/e2e/test_doc_commands.py.
OWN_FILE = {
    "docs/operate.md": "test_doc_commands_operate.py",  # about 30 admin commands and a Runtime of its own
    "docs/contributing.md": "test_doc_commands_contributing.py",  # the unit tests, as the page runs them
}


def pages_of(test_file: str) -> list[str]:
    """The pages with commands to run that `test_file` runs."""
    run = [page for page in pages() if page not in PAGES_ELSEWHERE and steps_of(page)]
    if test_file == "test_doc_commands.py":
        return [page for page in run if page not in OWN_FILE]
    return [page for page in run if OWN_FILE.get(page) == test_file]


@dataclass
class DocsRuntime:
    """What a reader has running while following the docs: the servers the pages start, among them the Runtime
    the reader started with `make run` (docs/get-started.md) that the pages call on port 8080."""

    servers: Servers
    reader: Server
    environment: dict[str, str]


@contextmanager
def docs_runtime() -> Iterator[DocsRuntime]:
    """The reader's `make run` started (and every server a page starts stopped at the end)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NYLORUN_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    servers = Servers(env)
    try:
        yield DocsRuntime(servers, servers.start("make run", env, "the reader's `make run`"), env)
    finally:
        servers.stop_all()


def check_page(page: str, runtime: DocsRuntime) -> None:
    servers, reader, environment = runtime.servers, runtime.reader, runtime.environment
    # Given the page's commands, in order, and the reader's `make run` on the docs' port 8080, whose subject has not
    # connected payments yet (a connection outlives its task: each page starts without, as the page shows)
    steps = steps_of(page)
    disconnect(f"http://127.0.0.1:{reader.port}", reader.token or "")
    # When they run in one shell, as the reader runs them
    run = run_page(steps, servers, reader, environment, answers(steps))
    # Then every command succeeds
    failed = next((step for step in steps if not step.ended), None)
    assert run.exit_code == 0 and failed is None, (
        f"{failed.where if failed else page} failed (exit {run.exit_code}), as run: {failed.script if failed else ''}"
        f"\n--- its output:\n{failed.output[-4000:] if failed else ''}"
    )
    # And prints the words of what the page shows after it
    problems = []
    page_blocks = blocks(page)
    for step in steps:
        printed = step.output + (step.server.output if step.server else "")
        if isinstance(step.source, Command) and (missing := missing_words(step.source.shown, printed)):
            problems.append(
                f"{step.where}: the page shows {missing} after it; it printed:\n{printed[-2000:]}"
            )
    for block in dict.fromkeys(step.block for step in steps):
        shown = output_after(page_blocks, block)
        if shown is None or (page, shown.line) in NOT_ITS_OUTPUT:
            continue
        if (
            block.lang in PYTHON and "print(" not in block.text
        ):  # a module that prints nothing: the text is not its output
            continue
        printed = "".join(step.output for step in steps if step.block == block) + run.servers_output()
        if missing := missing_words(shown.text.splitlines(), printed):
            problems.append(f"{block.where}: the text block at line {shown.line} shows {missing}; it printed:\n"
                            f"{printed[-2000:]}")  # fmt: skip
    assert not problems, "\n\n".join(problems)


def page_tests(
    test_file: str,
) -> tuple[Callable[[], Iterator[DocsRuntime]], Callable[[str, DocsRuntime], None]]:
    """The module-scoped `runtime` fixture and the per-page test of `test_file` (it assigns both to module names,
    as pytest finds them)."""

    @pytest.fixture(scope="module")
    def runtime() -> Iterator[DocsRuntime]:
        with docs_runtime() as started:
            yield started

    @pytest.mark.parametrize("page", pages_of(Path(test_file).name))
    def test_page_commands(page: str, runtime: DocsRuntime) -> None:
        check_page(page, runtime)

    return runtime, test_page_commands
