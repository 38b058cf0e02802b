"""The docs' deploy of your own Agent, followed literally in fresh folders: docs/tutorial.md's Agent written in the
reader's folder from its blocks titled with a path under agents/, docs/deploy.md "Deploy your own Agents"'s
agents/requirements.txt written in a copy of the Runtime's tracked files (the reader's checkout), the tutorial's
"7. Deploy it" `cp` and `make build` run, then what the stack would serve with its `sam deploy` parameters. SAM CLI
itself resolves each function's layers and NYLORUN_AGENTS from template.yaml (as `sam local` and `sam build` do),
and the Agents are loaded as the Runtime loads them, from the built layer trees. Shown clean on the real files and
dirty on broken copies. About a minute (the build).
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
TUTORIAL, DEPLOY = Path("docs/tutorial.md"), Path("docs/deploy.md")
# The tutorial's steps this follows, and the deploy page's section with the Agents' requirements
SERVE_STEP, DEPLOY_STEP, OWN_AGENTS = "## 3. Serve it locally", "## 7. Deploy it", "## Deploy your own Agents"
READER, CHECKOUT = "my-first-agent", "nylorun-runtime-aws"  # the tutorial's folder, and the Runtime's clone
FENCE = re.compile(r"^```(\w*)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="([^"]+)"')  # MkDocs Material's code block title: the file's path
AS_DEPLOYED = "the tutorial's deploy"
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


def section(page: str, heading: str) -> str:
    """The page's section under `heading`, to the next heading of its level; it starts with the heading."""
    assert f"\n{heading}\n" in page, f"the page has no section {heading!r}"
    start = page.index(f"\n{heading}\n") + 1
    end = page.find("\n## ", start + len(heading))
    return page[start : end if end != -1 else None]


def files(text: str) -> dict[str, str]:
    """The file blocks: those titled with a path under agents/ (```python title="agents/shop.py")."""
    found = {}
    for _, info, body in FENCE.findall(text):
        title = TITLE.search(info)
        if title and title.group(1).startswith("agents/"):
            found[title.group(1)] = body
    return found


def command_line(text: str, prefix: str) -> str:
    """The one command of the section's bash blocks that starts with `prefix` (continuation lines joined)."""
    lines = [
        line
        for lang, _, body in FENCE.findall(text)
        if lang == "bash"
        for line in body.replace("\\\n", " ").splitlines()
        if line.startswith(prefix)
    ]
    assert len(lines) == 1, f"{text.partition(chr(10))[0]!r}: {len(lines)} commands start with {prefix!r}"
    return lines[0]


def command(text: str, prefix: str) -> list[str]:
    return shlex.split(command_line(text, prefix), comments=True)


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


def deployment_problems(folder: Path, tutorial: str, template: str = "template.yaml") -> list[str]:
    """What the tutorial's deploy would serve, from the built folder: your Agents and the deploy page's requirements
    from AgentsLayer, no example anywhere in the functions' layers, and the examples only with ExampleAgents=true."""
    parameters = deploy_parameters(section(tutorial, DEPLOY_STEP))
    requirements = requirement_modules(section((folder / DEPLOY).read_text(), OWN_AGENTS))
    yours = [ref.split(":")[0].strip() for ref in parameters.get("Agents", "").split(",") if ref.strip()]
    agents_tree = built(folder, "AgentsLayer")
    problems = [f"AgentsLayer's built tree lacks {m}" for m in yours + requirements
                if not has_module(agents_tree, m)]  # fmt: skip
    examples_on = {**parameters, "ExampleAgents": "true"}
    examples_only = {**parameters, "ExampleAgents": "true", "Agents": ""}
    as_deployed, with_examples, only_examples = resolve(folder, template, [parameters, examples_on, examples_only])
    for case, functions in [(AS_DEPLOYED, as_deployed), ("ExampleAgents=true", with_examples),
                            ("examples only", only_examples)]:  # fmt: skip
        if len({json.dumps(f) for f in functions.values()}) != 1:
            problems.append(f"{case}: the functions do not all get the same layers and Agents")
    # The tutorial's deploy (ExampleAgents as it says, false): no layer the functions get has the examples
    deployed = next(iter(as_deployed.values()))
    names = [name for name, _ in deployed["layers"]]
    if "AgentsLayer" not in names:
        problems.append(f"{AS_DEPLOYED}: the functions' layers {names} lack AgentsLayer")
    trees = [built(folder, name) for name in names]
    for name, tree in zip(names, trees, strict=True):
        if any(tree.rglob(EXAMPLES_PACKAGE)):
            problems.append(f"{AS_DEPLOYED}: layer {name}, which the functions get, contains {EXAMPLES_PACKAGE}")
    served = load(folder, deployed["layers"], deployed["agents"])
    if "error" in served:
        return [*problems, f"{AS_DEPLOYED}: loading NYLORUN_AGENTS={deployed['agents']!r} failed: {served['error']}"]
    if not served["agents"]:
        problems.append(f"{AS_DEPLOYED}: NYLORUN_AGENTS={deployed['agents']!r} serves no Agent")
    for name, module_file in served["agents"].items():
        if not within(module_file, agents_tree):
            problems.append(f"{AS_DEPLOYED}: serves {name!r} from {module_file}, not from AgentsLayer (yours only)")
    # Every module your Agents import, beyond the standard library and what the Runtime imported already, is in a
    # layer the functions get (else an ImportError on Lambda), and from AgentsLayer where that has it
    for module, module_file in served["imported"].items():
        if not any(has_module(tree, module) for tree in trees):
            problems.append(f"{AS_DEPLOYED}: your Agents import {module}, which no layer the functions get has")
        elif has_module(agents_tree, module) and not within(module_file, agents_tree):
            problems.append(f"{AS_DEPLOYED}: {module} is imported from {module_file}, not from AgentsLayer")
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
    """The reader's checkout, built; the reader's own folder beside it (READER)."""
    assert (SAM_VENV / "bin" / "sam").exists(), "SAM CLI's venv is missing: `make test` installs it ($(SAM_STAMP))"
    # Given a fresh checkout: the Runtime's tracked files, as a clone gives them
    base = tmp_path_factory.mktemp("own-agent")
    folder, reader = base / CHECKOUT, base / READER
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
    # When the tutorial's Agent is written in the reader's folder exactly as shown (its step 2)
    tutorial = (folder / TUTORIAL).read_text()
    agent = files(tutorial)
    assert any(path.endswith(".py") for path in agent), f"{TUTORIAL} shows no file titled agents/*.py"
    # And the deploy page's agents/requirements.txt in the checkout, exactly as shown
    own_agents = section((folder / DEPLOY).read_text(), OWN_AGENTS)
    needs = files(own_agents)
    assert "agents/requirements.txt" in needs and requirement_modules(own_agents), f"{DEPLOY}: no requirement {needs}"
    for root, written in [(reader, agent), (folder, needs)]:
        for path, body in written.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(body)
    # And the tutorial's step 7 runs: its `cp` from the reader's folder into the checkout, then `make build` there
    step = section(tutorial, DEPLOY_STEP)
    env = {**os.environ, "NYLORUN_CHECKOUT": str(folder)}
    copy = subprocess.run(["bash", "-ec", command_line(step, "cp ")], cwd=reader, env=env, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert copy.returncode == 0, copy.stderr
    started = time.monotonic()
    build = subprocess.run(
        command(step, "make build"), cwd=folder, capture_output=True, text=True, timeout=900, check=False
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    print(f"make build in the fresh folder: {time.monotonic() - started:.1f} s")
    return folder


def test_the_walk_through_builds_and_serves_your_agent_and_not_the_examples(folder: Path) -> None:
    # When what the tutorial's deploy would serve is worked out from the built checkout
    problems = deployment_problems(folder, (folder / TUTORIAL).read_text())
    # Then your Agent and the deploy page's requirement are in AgentsLayer, it serves exactly yours, and the examples
    # only when asked
    assert problems == []


def test_the_deploy_page_deploys_the_tutorials_agent() -> None:
    # Given the tutorial's deploy and the deploy page's section on your own Agents
    tutorial = section((ROOT / TUTORIAL).read_text(), DEPLOY_STEP)
    deploy = section((ROOT / DEPLOY).read_text(), OWN_AGENTS)
    # When their `sam deploy` parameters are read
    # Then the deploy page deploys the Agent the tutorial writes, as the tutorial does
    assert deploy_parameters(deploy) == deploy_parameters(tutorial)


def _template_edit(edit: Callable[[str], str]) -> Callable[[Path, str], tuple[str, str]]:
    def broken(folder: Path, tutorial: str) -> tuple[str, str]:
        (folder / "template-broken.yaml").write_text(edit((folder / "template.yaml").read_text()))
        return tutorial, "template-broken.yaml"

    return broken


def _tutorial_edit(old: str, new: str) -> Callable[[Path, str], tuple[str, str]]:
    def broken(folder: Path, tutorial: str) -> tuple[str, str]:
        assert old in section(tutorial, DEPLOY_STEP)
        return tutorial.replace(old, new), "template.yaml"

    return broken


ALWAYS_EXAMPLES = "[!Ref RuntimeLayer, !Ref AgentsLayer, !Ref ExamplesLayer]"
BROKEN: dict[str, tuple[Callable[[Path, str], tuple[str, str]], str]] = {
    "a typo'd module in the tutorial's Agents": (
        _tutorial_edit("Agents=shop:agent", "Agents=shpo:agent"),
        "AgentsLayer's built tree lacks shpo",
    ),
    "the tutorial's deploy turning the examples on": (
        _tutorial_edit("ExampleAgents=false", "ExampleAgents=true"),
        f"{AS_DEPLOYED}: layer ExamplesLayer, which the functions get, contains nylorun_examples",
    ),
    "the examples layer attached unconditionally": (
        _template_edit(lambda t: t.replace("- [!Ref RuntimeLayer, !Ref AgentsLayer]", f"- {ALWAYS_EXAMPLES}")),
        f"{AS_DEPLOYED}: layer ExamplesLayer, which the functions get, contains nylorun_examples",
    ),
    "the examples named unconditionally": (
        _template_edit(lambda t: t.replace(", !Ref Agents]", ", !Join [',', [nylorun_examples:AGENTS, !Ref Agents]]]")),
        f"{AS_DEPLOYED}: serves 'echo' from",
    ),
    "no AgentsLayer": (
        _template_edit(lambda t: t.replace(", !Ref AgentsLayer", "")),
        f"{AS_DEPLOYED}: the functions' layers ['RuntimeLayer'] lack AgentsLayer",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_the_check_fails_on_a_broken_copy(folder: Path, case: str) -> None:
    # Given the built folder with its tutorial or template broken in one way
    edit, expected = BROKEN[case]
    tutorial, template = edit(folder, (folder / TUTORIAL).read_text())
    # When checked
    problems = deployment_problems(folder, tutorial, template)
    # Then the check names it
    assert any(p.startswith(expected) for p in problems), problems


def serve_command(folder: Path) -> list[str]:
    """The tutorial's `nylorun serve` (its step 3)."""
    args = command(section((folder / TUTORIAL).read_text(), SERVE_STEP), "nylorun serve")
    assert args[:2] == ["nylorun", "serve"], args
    return args


@pytest.fixture
def served_locally(folder: Path) -> Iterator[str]:
    # Given the tutorial's local command, run in the reader's folder (its step 3), without auth or push
    env = {k: v for k, v in os.environ.items() if not k.startswith("NYLORUN_")}
    args = [*serve_command(folder)[2:], "--auth", "none", "--no-push"]
    with nylorun_serve(args, "", cwd=folder.parent / READER, env=env) as base:
        yield base


def test_nylorun_serve_serves_your_agent_from_the_agents_folder(folder: Path, served_locally: str) -> None:
    # Given the Agents that the tutorial's --agents names, as the reader's agents/ declares them
    args, reader = serve_command(folder), folder.parent / READER
    yours = load_from([reader / "agents", folder / "layers" / "runtime"], reader, args[args.index("--agents") + 1])
    assert yours.get("agents"), yours
    # When the local Runtime's Agents and their cards are fetched
    listed = [agent["name"] for agent in httpx.get(served_locally, timeout=10).json()["agents"]]
    cards = {name: httpx.get(f"{served_locally}/{name}/.well-known/agent-card.json", timeout=10) for name in listed}
    # Then it serves exactly yours (imported from ./agents), not the examples (--no-examples), each with its card
    assert listed == sorted(yours["agents"])
    assert {name: card.status_code for name, card in cards.items()} == dict.fromkeys(listed, 200)


def sam_local_problems(samconfig: dict[str, Any], env_json: dict[str, dict[str, str]]) -> list[str]:
    """sam local (docs/deploy.md "Test with `sam local`") takes its parameters from samconfig's local_invoke and
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
