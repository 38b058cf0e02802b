"""Every command a reader runs in the README and the docs site is run here, or listed in NOT_RUN with why.

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

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from consent import disconnect
from doc_blocks import (
    OUTPUT,
    PYTHON,
    ROOT,
    SHELL,
    Block,
    Command,
    blocks,
    commands,
    one_line,
    output_after,
    pages,
)
from doc_pages import Step, missing_words, run_page
from doc_servers import Server, Servers

pytestmark = pytest.mark.e2e

NEEDS_AWS = "needs AWS credentials"
NEEDS_DOCKER = "needs Docker"
# The third reason: what another test or CI already runs (or a checkout this repository does not hold); running it
# again here would add minutes to `make test` for nothing it does not already prove.
ELSEWHERE = "run elsewhere: "

# Pages not run here at all.
PAGES_ELSEWHERE = {"docs/tutorial.md": ELSEWHERE + "tests/e2e/test_tutorial.py follows the page literally"}
# (page, the start of the command as one line): why it is not run.
NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "make test"): ELSEWHERE + "CI (.ci/run runs `make test`); `make -n test` is run here",
    ("docs/contributing.md", "make test"): ELSEWHERE
    + "CI (.ci/run runs `make test`); `make -n test` is run here",
    ("docs/calling/cli.md", "pip install "): ELSEWHERE + "tests/e2e/test_installed.py installs the wheel",
    ("docs/get-started.md", "pip install "): ELSEWHERE + "tests/e2e/test_installed.py installs the wheel",
    ("docs/calling/clients.md", "npm "): ELSEWHERE
    + "tests/e2e/test_a2a_js.py installs @a2a-js/sdk 1.3.0 (npm ci)",
    ("docs/conformance.md", "python run_tck.py"): ELSEWHERE
    + "the A2A TCK's own checkout (a2aproject/a2a-tck)",
    ("docs/performance.md", "make bench"): ELSEWHERE + "bench/ (minutes of load; a measurement, not a check)",
    ("docs/deploy.md", "make build"): ELSEWHERE + "tests/static/test_own_agent.py runs `make build`",
    ("docs/deploy.md", "make validate"): ELSEWHERE
    + "`make test`, whose first line is the same sam validate --lint",
    ("docs/deploy.md", ".venv-sam/bin/sam deploy"): NEEDS_AWS,
    ("docs/deploy.md", "export POOL=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "export CLIENT=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "export REGION=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "aws "): NEEDS_AWS,
    ("docs/deploy.md", "export TOKEN=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "export BASE=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "curl -s $BASE"): NEEDS_AWS,
    ("docs/deploy.md", "export SECRET_ARN=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "export NEW=$(openssl rand"): NEEDS_AWS
    + " (the new secret goes into the deployed stack)",
    ("docs/deploy.md", "export OLD=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "export PUSH_FUNCTION=$(aws "): NEEDS_AWS,
    ("docs/deploy.md", "NYLORUN_TOKEN=$TOKEN .venv/bin/nylorun send $BASE"): NEEDS_AWS,
    ("docs/deploy.md", "jq --slurpfile r /tmp/stack.json"): NEEDS_AWS + " (reads the stack's resources)",
    ("docs/deploy.md", ".venv-sam/bin/sam local "): NEEDS_DOCKER,
    ("docs/deploy.md", "curl -s http://127.0.0.1:3000/"): NEEDS_DOCKER + " (sam local start-api)",
    ("docs/deploy.md", "client = await create_client(f\"{os.environ['BASE']}"): NEEDS_AWS,
    ("docs/reference/parameters.md", "sam deploy "): NEEDS_AWS,
    ("docs/writing/model-agents.md", "sam deploy "): NEEDS_AWS,
}
# Commands run in another form, each with why.
INSTEAD = {
    "make test": "make -n test",  # what CI runs (.ci/run); -n: that it resolves, without running it inside itself
}
# What the reader types to a command that asks (the page says it in prose: "Type `A-1001`", "Type `y`").
TYPED = {'"I want a refund"': "A-1001\ny\n"}
# Text blocks after a command that are not what it prints here, each with why.
NOT_ITS_OUTPUT = {
    ("docs/calling/cli.md", 137): "the fields of `--json`, not the jq filter's output shown above it",
    ("docs/operate.md", 131): "dead letters: the page shows a DLQ holding one",
    ("docs/operate.md", 174): "dead letters being redriven: the page shows a DLQ holding some",
}


def listed(page: str, source: Command | Block) -> str | None:
    if page in PAGES_ELSEWHERE:
        return PAGES_ELSEWHERE[page]
    if isinstance(source, Block):
        lines = [line.strip() for line in source.text.splitlines()]
        return next((why for (p, start), why in NOT_RUN.items() if p == page and any(
            line.startswith(start) for line in lines)), None)  # fmt: skip
    line = one_line(source.text)
    return next((why for (p, start), why in NOT_RUN.items() if p == page and line.startswith(start)), None)


def fragments(page_blocks: list[Block]) -> set[Block]:
    """The Python blocks that are not whole programs: ruff finds a name they use undefined (F821) or a `return`
    outside a function (F706)."""
    python = [block for block in page_blocks if block.lang in PYTHON]
    if not python:
        return set()
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"doc-python-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    files = {str(folder / f"b{i}.py"): block for i, block in enumerate(python)}
    for name, block in files.items():
        Path(name).write_text(block.text)
    found = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--select", "F821,F706",
                            "--output-format", "json", *files], check=False, capture_output=True, text=True)  # fmt: skip
    return {files[finding["filename"]] for finding in json.loads(found.stdout or "[]")}


def steps_of(page: str) -> list[Step]:
    """The page's commands and whole Python programs that run here, in order."""
    page_blocks = blocks(page)
    partial = fragments(page_blocks)
    found: list[Step] = []
    for block in page_blocks:
        if block.lang in SHELL:
            for command in commands(block):
                if listed(page, command) is None:
                    line = one_line(command.text)
                    if line.split("#")[0].strip() in INSTEAD:
                        command.text = INSTEAD[line.split("#")[0].strip()]
                    found.append(Step(command))
        elif block.lang in PYTHON and block not in partial and listed(page, block) is None:
            found.append(Step(block))
    return found


def answers(steps: list[Step]) -> dict[int, str]:
    typed: dict[int, str] = {}
    for index, step in enumerate(steps):
        if isinstance(step.source, Command):
            line = one_line(step.source.text)
            shown = [
                s.split(": ", 1)[1]
                for s in step.source.shown
                if s.startswith(("Approve? [y/n]:", "Your answer:"))
            ]
            if shown:
                typed[index] = "".join(f"{answer}\n" for answer in shown)
            elif line.startswith("nylorun send") and "--no-wait" not in line:
                typed.update((index, text) for key, text in TYPED.items() if key in line)
    return typed


RUN_PAGES = [page for page in pages() if page not in PAGES_ELSEWHERE and steps_of(page)]


@pytest.fixture(scope="module")
def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NYLORUN_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    return env


@pytest.fixture(scope="module")
def servers(environment: dict[str, str]) -> Iterator[Servers]:
    started = Servers(environment)
    yield started
    started.stop_all()


@pytest.fixture(scope="module")
def reader(servers: Servers, environment: dict[str, str]) -> Server:
    """The Runtime the reader starts with `make run` (docs/get-started.md) and the pages call on port 8080."""
    return servers.start("make run", environment, "the reader's `make run`")


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


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_commands(page: str, servers: Servers, reader: Server, environment: dict[str, str]) -> None:
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
