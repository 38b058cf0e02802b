"""README "Deploy your own Agent", followed literally in a fresh folder: the Runtime's tracked files (what step 1's
clone gives), the section's file blocks written as shown, its `make build` run, then what the stack would serve
with its `sam deploy` parameters. SAM CLI itself resolves each function's layers and NYLORUN_AGENTS from
template.yaml (as `sam local` and `sam build` do), and the Agents are loaded as the Runtime loads them, from the
built layer trees. Shown clean on the real files and dirty on broken copies. About a minute (the build).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import nylorun_serve

ROOT = Path(__file__).resolve().parents[2]
SAM_VENV = ROOT / ".venv-sam"  # `make test` installs it first ($(SAM_STAMP))
HEADING = "## Deploy your own Agent"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# The example Agents' layer and package: attached and served only with ExampleAgents=true.
EXAMPLES_LAYER, EXAMPLES_PACKAGE = "ExamplesLayer", "nylorun_examples"

# Each function's layers (name, ContentUri) and NYLORUN_AGENTS, as SAM CLI resolves template.yaml for parameter values.
RESOLVE = """
import json, sys
from samcli.lib.providers.sam_function_provider import SamFunctionProvider
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider
found = []
for overrides in json.loads(sys.argv[2]):
    stacks, _ = SamLocalStackProvider.get_stacks(sys.argv[1], parameter_overrides=overrides)
    found.append({
        f.name: {"layers": [[layer.name, layer.codeuri] for layer in f.layers],
                 "agents": ((f.environment or {}).get("Variables") or {}).get("NYLORUN_AGENTS", "")}
        for f in SamFunctionProvider(stacks, ignore_code_extraction_warnings=True).get_all()
    })
print(json.dumps(found))
"""

# The Runtime's own loader (the api and turn functions both call it); prints each served Agent's module file, and
# the top-level modules outside the standard library that loading the Agents imported, with their files.
LOAD = """
import json, sys, sysconfig
from nylorun.engine.agent import load_registry
before = set(sys.modules)
registry = load_registry()
agents = {name: sys.modules[registry.get(name).run.__module__].__file__ for name in registry.names()}
stdlib = sysconfig.get_paths()["stdlib"]
new = {name.split(".")[0] for name in set(sys.modules) - before}
files = {name: getattr(sys.modules.get(name), "__file__", None) for name in sorted(new)}
print(json.dumps({"agents": agents, "imported": {n: f for n, f in files.items() if f and not f.startswith(stdlib)}}))
"""


def section(readme: str) -> str:
    start = readme.index(HEADING)
    end = readme.find("\n## ", start + len(HEADING))
    return readme[start : end if end != -1 else None]


def files(text: str) -> dict[str, str]:
    """The section's file blocks: those whose first line is a comment naming a path under agents/."""
    found = {}
    for _, body in FENCE.findall(text):
        first = body.partition("\n")[0]
        if first.startswith("# agents/"):
            found[first[2:].strip()] = body
    return found


def command(text: str, prefix: str) -> list[str]:
    """The one command of the section's bash blocks that starts with `prefix` (continuation lines joined)."""
    lines = [
        line
        for lang, body in FENCE.findall(text)
        if lang == "bash"
        for line in body.replace("\\\n", " ").splitlines()
        if line.startswith(prefix)
    ]
    assert len(lines) == 1, f"README {HEADING!r}: {len(lines)} commands start with {prefix!r}"
    return shlex.split(lines[0], comments=True)


def deploy_parameters(text: str) -> dict[str, str]:
    """The `--parameter-overrides` of the section's `sam deploy`."""
    args = command(text, ".venv-sam/bin/sam deploy")
    start = args.index("--parameter-overrides") + 1
    pairs = [a.split("=", 1) for a in args[start:] if "=" in a and not a.startswith("-")]
    return dict(pairs)  # type: ignore[arg-type]


def requirement_modules(text: str) -> list[str]:
    """Import names of agents/requirements.txt's requirements (each is its distribution name here)."""
    body = files(text)["agents/requirements.txt"]
    names = [re.split(r"[\s\[<>=!~;]", line.strip(), maxsplit=1)[0] for line in body.splitlines()]
    return [n.lower().replace("-", "_") for n in names if n and not n.startswith("#")]


def resolve(folder: Path, template: str, cases: list[dict[str, str]]) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(SAM_VENV / "bin" / "python"), "-c", RESOLVE, template, json.dumps(cases)],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def built(folder: Path, layer: str) -> Path:
    """A layer's built tree: what Lambda extracts to /opt/python."""
    return folder / ".aws-sam" / "build" / layer / "python"


def has_module(tree: Path, module: str) -> bool:
    return (tree / module).is_dir() or (tree / f"{module}.py").is_file() or any(tree.glob(f"{module}.*.so"))


def import_tree(folder: Path, name: str, code_uri: str) -> Path:
    """Where to import a layer from here: its built tree, except RuntimeLayer's source, as its built tree holds arm64
    binaries (pydantic-core) this machine cannot import (this venv supplies the Runtime's dependencies instead)."""
    return folder / code_uri if name == "RuntimeLayer" else built(folder, name)


def load(folder: Path, layers: list[list[str]], nylorun_agents: str) -> dict[str, Any]:
    """The Agents the functions would serve: a fresh process with the layers first on its path, in their order, and
    NYLORUN_AGENTS as deployed."""
    return load_from([import_tree(folder, name, uri) for name, uri in layers], folder, nylorun_agents)


def load_from(path: list[Path], folder: Path, nylorun_agents: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NYLORUN_") and k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, path))
    env["NYLORUN_AGENTS"] = nylorun_agents
    result = subprocess.run(
        [sys.executable, "-c", LOAD], cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1]}
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def within(path: str | None, tree: Path) -> bool:
    return path is not None and Path(path).resolve().is_relative_to(tree.resolve())


def deployment_problems(folder: Path, readme: str, template: str = "template.yaml") -> list[str]:
    """What the README's deploy would serve, from the built folder: your Agents and their dependencies from
    AgentsLayer, no example anywhere in the functions' layers, and the examples only with ExampleAgents=true."""
    text = section(readme)
    parameters = deploy_parameters(text)
    yours = [ref.split(":")[0].strip() for ref in parameters.get("Agents", "").split(",") if ref.strip()]
    agents_tree = built(folder, "AgentsLayer")
    problems = [f"AgentsLayer's built tree lacks {m}" for m in yours + requirement_modules(text)
                if not has_module(agents_tree, m)]  # fmt: skip
    examples_on = {**parameters, "ExampleAgents": "true"}
    examples_only = {**parameters, "ExampleAgents": "true", "Agents": ""}
    as_deployed, with_examples, only_examples = resolve(folder, template, [parameters, examples_on, examples_only])
    for case, functions in [("README", as_deployed), ("ExampleAgents=true", with_examples),
                            ("examples only", only_examples)]:  # fmt: skip
        if len({json.dumps(f) for f in functions.values()}) != 1:
            problems.append(f"{case}: the functions do not all get the same layers and Agents")
    # The README's deploy (ExampleAgents as it says, false): no layer the functions get has the examples
    deployed = next(iter(as_deployed.values()))
    names = [name for name, _ in deployed["layers"]]
    if "AgentsLayer" not in names:
        problems.append(f"README: the functions' layers {names} lack AgentsLayer")
    trees = [built(folder, name) for name in names]
    for name, tree in zip(names, trees, strict=True):
        if any(tree.rglob(EXAMPLES_PACKAGE)):
            problems.append(f"README: layer {name}, which the functions get, contains {EXAMPLES_PACKAGE}")
    served = load(folder, deployed["layers"], deployed["agents"])
    if "error" in served:
        return [*problems, f"README: loading NYLORUN_AGENTS={deployed['agents']!r} failed: {served['error']}"]
    if not served["agents"]:
        problems.append(f"README: NYLORUN_AGENTS={deployed['agents']!r} serves no Agent")
    for name, module_file in served["agents"].items():
        if not within(module_file, agents_tree):
            problems.append(f"README: serves {name!r} from {module_file}, not from AgentsLayer (yours only)")
    # Every module your Agents import, beyond the standard library and what the Runtime imported already, is in a
    # layer the functions get (else an ImportError on Lambda), and from AgentsLayer where that has it
    for module, module_file in served["imported"].items():
        if not any(has_module(tree, module) for tree in trees):
            problems.append(f"README: your Agents import {module}, which no layer the functions get has")
        elif has_module(agents_tree, module) and not within(module_file, agents_tree):
            problems.append(f"README: {module} is imported from {module_file}, not from AgentsLayer")
    # The switch on: the examples beside yours; on with no Agents of yours: the examples alone
    examples_tree = built(folder, EXAMPLES_LAYER)
    for case, functions, expect_yours in [("ExampleAgents=true", with_examples, True),
                                          ("examples only", only_examples, False)]:  # fmt: skip
        resolved = next(iter(functions.values()))
        if EXAMPLES_LAYER not in [name for name, _ in resolved["layers"]]:
            problems.append(f"{case}: {EXAMPLES_LAYER} is not attached")
        loaded = load(folder, resolved["layers"], resolved["agents"])
        if "error" in loaded:
            problems.append(f"{case}: loading NYLORUN_AGENTS={resolved['agents']!r} failed: {loaded['error']}")
            continue
        if not any(within(f, examples_tree) for f in loaded["agents"].values()):
            problems.append(f"{case}: the examples are not served ({sorted(loaded['agents'])})")
        if any(within(f, agents_tree) for f in loaded["agents"].values()) != expect_yours:
            problems.append(f"{case}: yours are {'not ' if expect_yours else ''}served ({sorted(loaded['agents'])})")
    return problems


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    assert (SAM_VENV / "bin" / "sam").exists(), "SAM CLI's venv is missing: `make test` installs it ($(SAM_STAMP))"
    # Given a fresh folder with the Runtime's tracked files, as step 1's clone gives them
    folder = tmp_path_factory.mktemp("my-agents")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source, target = ROOT / name, folder / name
        if not (source.exists() or source.is_symlink()):
            continue  # deleted in this working tree, not yet committed
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    # And SAM CLI's venv, which `make build` would otherwise install there first (about 40 s)
    (folder / ".venv-sam").symlink_to(SAM_VENV)
    # When the section's files are written exactly as shown (steps 2 and 3)
    text = section((folder / "README.md").read_text())
    written = files(text)
    assert "agents/requirements.txt" in written and any(p.endswith(".py") for p in written), written
    for path, body in written.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(body)
    # And its build command runs there (step 5)
    started = time.monotonic()
    build = subprocess.run(
        command(text, "make build"), cwd=folder, capture_output=True, text=True, timeout=900, check=False
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    print(f"make build in the fresh folder: {time.monotonic() - started:.1f} s")
    return folder


def test_the_walk_through_builds_and_serves_your_agent_and_not_the_examples(folder: Path) -> None:
    # When what the README's deploy would serve is worked out from the built folder
    problems = deployment_problems(folder, (folder / "README.md").read_text())
    # Then your Agent and requests are in AgentsLayer, it serves exactly yours, and the examples only when asked
    assert problems == []


def _template_edit(edit: Callable[[str], str]) -> Callable[[Path, str], tuple[str, str]]:
    def broken(folder: Path, readme: str) -> tuple[str, str]:
        (folder / "template-broken.yaml").write_text(edit((folder / "template.yaml").read_text()))
        return readme, "template-broken.yaml"

    return broken


def _readme_edit(old: str, new: str) -> Callable[[Path, str], tuple[str, str]]:
    def broken(folder: Path, readme: str) -> tuple[str, str]:
        assert old in section(readme)
        return readme.replace(old, new), "template.yaml"

    return broken


ALWAYS_EXAMPLES = "[!Ref RuntimeLayer, !Ref AgentsLayer, !Ref ExamplesLayer]"
BROKEN: dict[str, tuple[Callable[[Path, str], tuple[str, str]], str]] = {
    "a typo'd module in the README's Agents": (
        _readme_edit("Agents=repo_agent:AGENTS", "Agents=repo_agnet:AGENTS"),
        "AgentsLayer's built tree lacks repo_agnet",
    ),
    "the README's deploy turning the examples on": (
        _readme_edit("ExampleAgents=false", "ExampleAgents=true"),
        "README: layer ExamplesLayer, which the functions get, contains nylorun_examples",
    ),
    "the examples layer attached unconditionally": (
        _template_edit(lambda t: t.replace("- [!Ref RuntimeLayer, !Ref AgentsLayer]", f"- {ALWAYS_EXAMPLES}")),
        "README: layer ExamplesLayer, which the functions get, contains nylorun_examples",
    ),
    "the examples named unconditionally": (
        _template_edit(lambda t: t.replace(", !Ref Agents]", ", !Join [',', [nylorun_examples:AGENTS, !Ref Agents]]]")),
        "README: serves 'echo' from",
    ),
    "no AgentsLayer": (
        _template_edit(lambda t: t.replace(", !Ref AgentsLayer", "")),
        "README: the functions' layers ['RuntimeLayer'] lack AgentsLayer",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_check_fails_on_a_broken_copy(folder: Path, case: str) -> None:
    # Given the built folder with its README or template broken in one way
    edit, expected = BROKEN[case]
    readme, template = edit(folder, (folder / "README.md").read_text())
    # When checked
    problems = deployment_problems(folder, readme, template)
    # Then the check names it
    assert any(p.startswith(expected) for p in problems), problems


@pytest.fixture
def served_locally(folder: Path) -> Iterator[str]:
    # Given the section's local command, run in the folder (step 4), without auth or push
    args = command(section((folder / "README.md").read_text()), ".venv/bin/nylorun serve")
    assert args[:2] == [".venv/bin/nylorun", "serve"], args
    env = {k: v for k, v in os.environ.items() if not k.startswith("NYLORUN_")}
    with nylorun_serve([*args[2:], "--auth", "none", "--no-push"], "", cwd=folder, env=env) as base:
        yield base


def test_nylorun_serve_serves_your_agent_from_the_agents_folder(folder: Path, served_locally: str) -> None:
    # Given the Agents that the README's --agents names, as agents/ declares them
    args = command(section((folder / "README.md").read_text()), ".venv/bin/nylorun serve")
    yours = load_from([folder / "agents", folder / "layers" / "runtime"], folder, args[args.index("--agents") + 1])
    assert yours.get("agents"), yours
    # When the local Runtime's Agents and their cards are fetched
    listed = [agent["name"] for agent in httpx.get(served_locally, timeout=10).json()["agents"]]
    cards = {name: httpx.get(f"{served_locally}/{name}/.well-known/agent-card.json", timeout=10) for name in listed}
    # Then it serves exactly yours (imported from ./agents), not the examples (--no-examples), each with its card
    assert listed == sorted(yours["agents"])
    assert {name: card.status_code for name, card in cards.items()} == dict.fromkeys(listed, 200)


def sam_local_problems(samconfig: dict[str, Any], env_json: dict[str, dict[str, str]]) -> list[str]:
    """sam local (README "Test with sam local") takes its parameters from samconfig's local_invoke and
    local_start_api sections: every function that events/env.json has serve the examples must get ExamplesLayer."""
    problems = []
    for command_name in ("local_invoke", "local_start_api"):
        pairs = samconfig.get("default", {}).get(command_name, {}).get("parameters", {}).get("parameter_overrides", [])
        overrides = dict(p.split("=", 1) for p in ([pairs] if isinstance(pairs, str) else pairs))
        functions = resolve(ROOT, "template.yaml", [overrides])[0]
        for name, values in env_json.items():
            layers = [layer for layer, _ in functions[name]["layers"]]
            if EXAMPLES_PACKAGE in values.get("NYLORUN_AGENTS", "") and EXAMPLES_LAYER not in layers:
                problems.append(f"sam {command_name}: {name} serves the examples (env.json) but gets only {layers}")
    return problems


def _without_local_sections(samconfig: dict[str, Any]) -> dict[str, Any]:
    return {**samconfig, "default": {k: v for k, v in samconfig["default"].items() if not k.startswith("local")}}


@pytest.mark.parametrize(("edit", "expected"), [
    pytest.param(lambda c: c, None, id="samconfig.toml"),
    pytest.param(
        _without_local_sections, "sam local_invoke: ApiFunction serves the examples (env.json) but gets only",
        id="without its sam local sections",
    ),
])  # fmt: skip
def test_sam_local_attaches_the_examples_that_env_json_serves(
    edit: Callable[[dict[str, Any]], dict[str, Any]], expected: str | None
) -> None:
    # Given samconfig.toml (or a copy without its sam local sections) and events/env.json
    samconfig = edit(tomllib.loads((ROOT / "samconfig.toml").read_text()))
    env_json = json.loads((ROOT / "events" / "env.json").read_text())
    # When SAM CLI resolves each function's layers with the parameters sam local would use
    problems = sam_local_problems(samconfig, env_json)
    # Then the functions env.json points at the examples get their layer (and the broken copy is caught)
    assert problems == [] if expected is None else any(p.startswith(expected) for p in problems), problems
