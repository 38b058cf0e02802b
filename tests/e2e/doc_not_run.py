"""Which docs commands are not run here and why, and the steps of a page that are (commands, whole programs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from doc_blocks import PYTHON, SHELL, Block, Command, blocks, commands, one_line
from doc_pages import Step

NEEDS_AWS = "needs AWS credentials"
NEEDS_DOCKER = "needs Docker"
# The third reason: what another test or CI already runs (or a checkout this repository does not hold); running it
# again here would add minutes to `make test` for nothing it does not already prove.
ELSEWHERE = "run elsewhere: "

# Pages not run here at all.
PAGES_ELSEWHERE = {"docs/tutorial.md": ELSEWHERE + "tests/e2e/test_tutorial.py follows the page literally"}
BY_CI = ELSEWHERE + "CI (.ci/run runs `make test`); `make -n test` is run here"
# (page, the start of the command as one line): why it is not run.
NOT_RUN: dict[tuple[str, str], str] = {
    ("README.md", "make test"): BY_CI,
    ("docs/contributing.md", "make test"): BY_CI,
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
