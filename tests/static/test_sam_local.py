"""`sam local` (docs/deploy.md "Test with `sam local`"): events/env.json and the page's commands agree with template.yaml.

No Docker here, so sam local itself does not run; these checks hold what it would do with the files, as SAM CLI
1.170.0 does it (samcli/local/lambdafn/env_vars.py, samcli/lib/intrinsic_resolver/intrinsics_symbol_table.py):
* a function gets only the variables its template declares (Globals and its own); a variable in --env-vars that
  the template does not declare is dropped without a word;
* a `!Ref` to a resource resolves to its logical id ("TasksTable"), AWS::StackName to "local", AWS::AccountId to
  "123456789012": none names the deployed stack's resources, so env.json gives each of those variables as
  `stack:<LogicalId>`, filled in from the dev stack (docs/deploy.md); `!Ref` to a parameter resolves to its default
  (or --parameter-overrides), and literal values are kept, so env.json may leave those out.
The dev auth mode in env.json works only beside AWS_SAM_LOCAL, which sam local sets and the template never
does (tests/unit/test_fail_closed.py). Each check runs on the real files and on broken copies.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from nylorun_local import template

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
ENV_FILE = EVENTS / "env.json"
# Pseudo parameters sam local fills with values of its own (a stack named "local" in account 123456789012).
STACK_PSEUDO = {"AWS::StackName", "AWS::StackId", "AWS::AccountId"}
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9:]+)(?:\.[A-Za-z0-9.]+)?\}")


def functions(tpl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in tpl["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}


def declared(tpl: dict[str, Any], function: str) -> dict[str, Any]:
    """The variables a function gets from the template: Globals', then its own over them."""
    globals_ = tpl["Globals"]["Function"].get("Environment", {}).get("Variables", {})
    own = functions(tpl)[function]["Properties"].get("Environment", {}).get("Variables", {})
    return {**globals_, **own}


def references(value: Any) -> Iterator[str]:
    """Every name an intrinsic refers to (Ref, GetAtt, ${…} in Sub), at any depth."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref":
                yield str(inner)
            elif key == "Fn::GetAtt":
                yield str(inner[0])
            elif key == "Fn::Sub":
                text = inner if isinstance(inner, str) else inner[0]
                yield from PLACEHOLDER.findall(text)
            else:
                yield from references(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from references(inner)


def stack_resources(tpl: dict[str, Any], value: Any) -> set[str] | None:
    """None when sam local resolves `value` as deployed; else the resources whose deployed value it stands for
    (empty when only the stack's name or account is named, which may be any resource of the stack)."""
    names = set(references(value))
    resources = names & set(tpl["Resources"])
    if not resources and not names & STACK_PSEUDO:
        return None
    return resources


def env_problems(env: dict[str, Any], tpl: dict[str, Any]) -> list[str]:
    problems = []
    fns = functions(tpl)
    if sorted(env) != sorted(fns):
        problems.append(f"env.json names {sorted(env)}, the template's functions are {sorted(fns)}")
    for function, given in env.items():
        if function not in fns:
            continue
        if not isinstance(given, dict) or not all(isinstance(v, str) for v in given.values()):
            problems.append(f"{function}: sam local takes only strings for a function's variables")
            continue
        variables = declared(tpl, function)
        for name in sorted(set(given) - set(variables)):
            problems.append(f"{function}: {name} is not declared in the template, so sam local drops it")
        for name, value in variables.items():
            resources = stack_resources(tpl, value)
            if resources is None:
                continue
            wanted = {f"stack:{r}" for r in resources or tpl["Resources"]}
            if given.get(name) not in wanted:
                problems.append(f"{function}: {name} must be one of {sorted(wanted)[:3]} (sam local resolves {value})")
    return problems


def auth_problems(env: dict[str, Any], tpl: dict[str, Any]) -> list[str]:
    problems = []
    for function in functions(tpl):
        variables = declared(tpl, function)
        if variables.get("NYLORUN_AUTH") != "jwt":
            problems.append(f"{function}: the template's NYLORUN_AUTH is {variables.get('NYLORUN_AUTH')!r}, not jwt")
        if "AWS_SAM_LOCAL" in variables:
            problems.append(f"{function}: the template declares AWS_SAM_LOCAL (only sam local may set it)")
        mode = env.get(function, {}).get("NYLORUN_AUTH")
        if mode is not None and (function, mode) != ("ApiFunction", "dev"):
            problems.append(f"{function}: env.json sets NYLORUN_AUTH={mode}; only the api function's, to dev")
    if "NYLORUN_DEV_TOKENS" not in env.get("ApiFunction", {}):
        problems.append("ApiFunction: env.json gives no NYLORUN_DEV_TOKENS for the dev mode")
    return problems


def section(readme: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", readme, flags=re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def page_problems(page: str, tpl: dict[str, Any], events: list[str]) -> list[str]:
    text = section(page, "Test with `sam local`")
    if not text:
        return ["docs/deploy.md has no '## Test with `sam local`' section"]
    by_folder = {r["Properties"]["CodeUri"].strip("/").split("/")[-1]: n for n, r in functions(tpl).items()}
    problems = []
    for event in events:
        function = by_folder.get(event.split("-", 1)[0], "?")
        line = f"sam local invoke {function} -e events/{event} --env-vars events/env.json"
        if line not in text:
            problems.append(f"docs/deploy.md does not show `{line}`")
    if "sam local start-api --env-vars events/env.json" not in text:
        problems.append("docs/deploy.md does not show `sam local start-api --env-vars events/env.json`")
    if "Docker" not in text:
        problems.append("docs/deploy.md does not say that sam local needs Docker")
    return problems


# SAM CLI's own resolution of each function's environment with env.json, as `sam local invoke` does it before
# starting a container (LocalLambdaRunner._make_env_vars: SAM CLI 1.170.0, pinned in the Makefile).
_SAM_ENV_PROBE = """
import json, sys
from samcli.commands.local.lib.local_lambda import LocalLambdaRunner
from samcli.lib.providers.sam_function_provider import SamFunctionProvider
from samcli.lib.providers.sam_stack_provider import SamLocalStackProvider
provider = SamFunctionProvider(SamLocalStackProvider.get_stacks("template.yaml")[0])
runner = LocalLambdaRunner(None, provider, ".", ".", env_vars_values=json.load(open("events/env.json")))
print(json.dumps({f: runner._make_env_vars(provider.get(f)).resolve() for f in sys.argv[1:]}))
"""
SAM_PYTHON = ROOT / ".venv-sam" / "bin" / "python"


def real_env() -> dict[str, Any]:
    return dict(json.loads(ENV_FILE.read_text()))


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


def sample_events() -> list[str]:
    return sorted(p.name for p in EVENTS.glob("*.json") if p != ENV_FILE)


def test_env_json_gives_every_function_the_stack_values_sam_local_cannot_resolve() -> None:
    assert env_problems(real_env(), real_template()) == []


def test_only_the_api_function_gets_the_dev_mode_and_only_from_env_json() -> None:
    assert auth_problems(real_env(), real_template()) == []


def test_the_deploy_page_shows_sam_local_for_every_sample_event_and_start_api() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    assert page_problems(page, real_template(), sample_events()) == []


def test_sam_cli_passes_each_function_env_json_values_beside_aws_sam_local() -> None:
    if not SAM_PYTHON.exists():
        pytest.skip("SAM CLI is not installed (make .venv-sam/.installed-1.170.0, as make build does)")
    env = real_env()
    # Given SAM CLI's resolution of every function's environment with events/env.json
    probe = subprocess.run(
        [str(SAM_PYTHON), "-c", _SAM_ENV_PROBE, *env], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_ACCESS_KEY_ID": "static", "AWS_SECRET_ACCESS_KEY": "static"},
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    resolved = json.loads(probe.stdout.strip().splitlines()[-1])
    for function, given in env.items():
        # Then every variable env.json gives reaches the function as given (none dropped as undeclared)
        assert {k: resolved[function].get(k) for k in given} == given, function
        # And sam local marks the container as its own, which lets the api function's dev mode start
        assert resolved[function]["AWS_SAM_LOCAL"] == "true"
        # And no Runtime variable is left at a bare logical id or the fake "local" stack (sam local's guesses)
        ours = {k: v for k, v in resolved[function].items() if k.startswith("NYLORUN_")}
        guesses = {k: v for k, v in ours.items() if v in real_template()["Resources"] or ":local-" in v}
        assert guesses == {}, function


Break = Callable[[dict[str, Any], dict[str, Any]], None]


def _undeclare_dev_tokens(env: dict[str, Any], tpl: dict[str, Any]) -> None:
    del tpl["Resources"]["ApiFunction"]["Properties"]["Environment"]["Variables"]["NYLORUN_DEV_TOKENS"]


@pytest.mark.parametrize(
    ("break_", "problem"),
    [
        pytest.param(lambda e, t: e.pop("SweepFunction"), "env.json names", id="a-function-left-out"),
        pytest.param(_undeclare_dev_tokens, "NYLORUN_DEV_TOKENS is not declared", id="dev-tokens-undeclared"),
        pytest.param(lambda e, t: e["PushFunction"].pop("NYLORUN_PUSH_QUEUE_URL"), "NYLORUN_PUSH_QUEUE_URL must be",
                     id="stack-value-left-out"),
        pytest.param(lambda e, t: e["ApiFunction"].update(NYLORUN_TABLE="stack:FilesBucket"), "NYLORUN_TABLE must be",
                     id="wrong-resource"),
        pytest.param(lambda e, t: e["TurnFunction"].pop("NYLORUN_STATE_MACHINE_ARN"),
                     "NYLORUN_STATE_MACHINE_ARN must be", id="sub-on-stack-name-left-out"),
        pytest.param(lambda e, t: e["ApiFunction"].update(NYLORUN_WAIT="1"), "NYLORUN_WAIT is not declared",
                     id="undeclared-variable"),
    ],
)
def test_env_check_catches_a_broken_copy(break_: Break, problem: str) -> None:
    env, tpl = real_env(), real_template()
    break_(env, tpl)
    assert any(problem in p for p in env_problems(env, tpl)), env_problems(env, tpl)


@pytest.mark.parametrize(
    ("break_", "problem"),
    [
        pytest.param(lambda e, t: e["PushFunction"].update(NYLORUN_AUTH="none"), "PushFunction: env.json sets",
                     id="local-mode-elsewhere"),
        pytest.param(lambda e, t: t["Globals"]["Function"]["Environment"]["Variables"].update(NYLORUN_AUTH="dev"),
                     "not jwt", id="template-not-jwt"),
        pytest.param(lambda e, t: t["Globals"]["Function"]["Environment"]["Variables"].update(AWS_SAM_LOCAL="true"),
                     "declares AWS_SAM_LOCAL", id="template-sets-sam-local"),
        pytest.param(lambda e, t: e["ApiFunction"].pop("NYLORUN_DEV_TOKENS"), "no NYLORUN_DEV_TOKENS", id="no-tokens"),
    ],
)
def test_auth_check_catches_a_broken_copy(break_: Break, problem: str) -> None:
    env, tpl = real_env(), real_template()
    break_(env, tpl)
    assert any(problem in p for p in auth_problems(env, tpl)), auth_problems(env, tpl)


def test_page_check_catches_a_missing_invoke_line() -> None:
    page = (ROOT / "docs" / "deploy.md").read_text()
    broken = page.replace("sam local invoke PushFunction -e events/push-sqs-eventbridge.json", "sam local invoke")
    assert any("push-sqs-eventbridge.json" in p for p in page_problems(broken, real_template(), sample_events()))
