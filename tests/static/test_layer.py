"""The Lambda layer ships the Runtime and nothing else: no local stack, no client or CLI, no demo Agents, and none
of the packages only those need (moto, uvicorn, a2a-sdk, rich). Checked on the real layer and on a broken copy."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "runtime"  # template.yaml's RuntimeLayer ContentUri (tests/static/test_template.py)

# Requirements the layer must not install: the local stack's and the client's.
FORBIDDEN_REQUIREMENTS = {"moto", "uvicorn", "a2a-sdk", "rich", "pyyaml"}
# Modules no file of the layer may import, and names no file or folder in it may have.
FORBIDDEN_IMPORTS = {"moto", "uvicorn", "a2a", "rich", "yaml", "nylorun_local", "nylorun_client", "nylorun_examples"}
FORBIDDEN_PATHS = {
    "nylorun/local": "the local stack (local/nylorun_local)",
    "nylorun/client": "the client (client/nylorun_client)",
    "nylorun/cli.py": "the CLI (client/nylorun_client)",
    "nylorun/console": "the console (client/nylorun_client/console): served locally only",
    "nylorun/agents": "the demo Agents (examples/nylorun_examples)",
    "nylorun_local": "the local stack",
    "nylorun_client": "the client",
    "nylorun_examples": "the demo Agents",
}
IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import|import\s+([\w.]+(?:\s*,\s*[\w.]+)*))", re.MULTILINE)


def requirement_problems(requirements: Path) -> list[str]:
    problems = []
    for line in requirements.read_text().splitlines():
        name = re.split(r"[\s\[<>=!~;]", line.split("#", 1)[0].strip(), maxsplit=1)[0].lower().replace("_", "-")
        if name in FORBIDDEN_REQUIREMENTS:
            problems.append(f"{requirements.name}: {line.strip()}")
    return problems


def tree_problems(layer: Path) -> list[str]:
    problems = []
    for path in sorted(layer.rglob("*")):
        relative = path.relative_to(layer).as_posix()
        if "__pycache__" in relative:
            continue
        for forbidden, what in FORBIDDEN_PATHS.items():
            if relative == forbidden or relative.startswith(forbidden + "/"):
                problems.append(f"{relative}: {what} belongs outside the layer")
        if path.suffix == ".py":
            for match in IMPORT.finditer(path.read_text()):
                modules = [match.group(1)] if match.group(1) else re.split(r"\s*,\s*", match.group(2))
                for module in modules:
                    if module.split(".")[0] in FORBIDDEN_IMPORTS:
                        problems.append(f"{relative}: imports {module}")
    return problems


def layer_problems(layer: Path) -> list[str]:
    return requirement_problems(layer / "requirements.txt") + tree_problems(layer)


def test_the_layer_ships_only_the_runtime() -> None:
    # Given the layer's tree and requirements, as `sam build` packs them
    # Then nothing of the local stack, the client or the examples is in it, nor what only they need
    assert layer_problems(LAYER) == []


@pytest.mark.parametrize(
    ("plant", "expected"),
    [
        ("local", "nylorun/local: the local stack"),
        ("client", "nylorun/client: the client"),
        ("cli", "nylorun/cli.py: the CLI"),
        ("console", "nylorun/console: the console"),
        ("agents", "nylorun/agents: the demo Agents"),
        ("requirement", "requirements.txt: moto"),
        ("import", "nylorun/engine/agent.py: imports nylorun_examples"),
    ],
)
def test_a_broken_copy_of_the_layer_fails(tmp_path: Path, plant: str, expected: str) -> None:
    # Given a copy of the layer with one piece of another home put back in
    copy = tmp_path / "runtime"
    shutil.copytree(LAYER, copy, ignore=shutil.ignore_patterns("__pycache__"))
    if plant == "local":
        shutil.copytree(ROOT / "local" / "nylorun_local", copy / "nylorun" / "local", symlinks=True)
    elif plant == "client":
        shutil.copytree(ROOT / "client" / "nylorun_client", copy / "nylorun" / "client")
    elif plant == "console":
        shutil.copytree(ROOT / "client" / "nylorun_client" / "console", copy / "nylorun" / "console")
    elif plant == "cli":
        shutil.copy(ROOT / "client" / "nylorun_client" / "command.py", copy / "nylorun" / "cli.py")
    elif plant == "agents":
        shutil.copytree(ROOT / "examples" / "nylorun_examples", copy / "nylorun" / "agents")
    elif plant == "requirement":
        with (copy / "requirements.txt").open("a") as handle:
            handle.write("moto[server]==5.2.5\n")
    else:
        agent = copy / "nylorun" / "engine" / "agent.py"
        agent.write_text(agent.read_text() + "\nfrom nylorun_examples import AGENTS  # noqa: E402\n")
    # Then the check names it
    problems = layer_problems(copy)
    assert any(problem.startswith(expected) for problem in problems), problems
