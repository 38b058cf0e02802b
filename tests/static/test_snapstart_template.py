"""The SnapStart variant of the template (scripts/snapstart_template.py, `make build SNAPSTART=1`): clean under
`sam validate --lint` and cfn-lint's serverless rules, and, as SAM transforms it, every route of the api function
invokes alias `live` (SnapStart runs only on published versions and their aliases:
https://docs.aws.amazon.com/lambda/latest/dg/snapstart.html), SnapStart is on, and each deploy's ApiVersionStamp
publishes its own version. The plain template is checked beside it: its routes still invoke the function.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from nylorun_local import template

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "snapstart_template.py"
SAM_VENV = ROOT / ".venv-sam"  # `make test` installs it first ($(SAM_STAMP))
CFN_LINT = Path(sys.executable).parent / "cfn-lint"
ALIAS = "ApiFunctionAliaslive"  # SAM's logical id for AutoPublishAlias `live` on ApiFunction
# Two deploys' stamps, as `$(date +%s)` gives them, and the first again (a deploy that reuses its stamp)
STAMPS = {"one": "1767225600", "two": "1767225601", "one-again": "1767225600"}


def write_variant(source: Path, target: Path) -> subprocess.CompletedProcess[str]:
    """Run the script as `make snapstart-template` does."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(source), str(target)], capture_output=True, text=True, check=False
    )


def _run_all(commands: dict[str, list[str]], cwd: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    """Run the commands side by side (each a few seconds of SAM or cfn-lint) and wait for all of them."""
    procs = {
        name: subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
        for name, cmd in commands.items()
    }
    done = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=180)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """The variant written to tmp, then linted, validated and transformed (the plain template too) in parallel."""
    assert (SAM_VENV / "bin" / "sam").exists(), (
        "SAM CLI's venv is missing: `make test` installs it ($(SAM_STAMP))"
    )
    folder = tmp_path_factory.mktemp("snapstart")
    variant = folder / "template.yaml"
    written = write_variant(template.TEMPLATE, variant)
    assert written.returncode == 0, written.stderr
    check = [str(SAM_VENV / "bin" / "python"), str(ROOT / "tests/static/sam_iam_check.py"), "--transformed"]
    commands = {
        "sam validate": [str(SAM_VENV / "bin" / "sam"), "validate", "--lint", "--template", str(variant),
                         "--region", "us-east-1"],
        "cfn-lint": [str(CFN_LINT), "-t", str(variant), "-a", "cfn_lint_serverless.rules"],
        "plain": [*check, str(template.TEMPLATE)],
        **{name: [*check, str(variant), f"ApiVersionStamp={stamp}"] for name, stamp in STAMPS.items()},
    }  # fmt: skip
    return _run_all(commands, folder)


def transformed(runs: dict[str, subprocess.CompletedProcess[str]], name: str) -> dict[str, Any]:
    result = runs[name]
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(json.loads(result.stdout))


@pytest.mark.parametrize("tool", ["sam validate", "cfn-lint"])
def test_the_variant_is_clean_under_sam_validate_and_cfn_lint(
    tool: str, runs: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    # Given the variant the script writes
    # When `sam validate --lint` and cfn-lint with the awslabs serverless rules run on it
    result = runs[tool]
    # Then both pass it
    assert result.returncode == 0, result.stdout + result.stderr


def _invoked(cfn: dict[str, Any]) -> list[tuple[str, str]]:
    """(route or permission, what it invokes) for everything of the stack's that invokes the api function."""
    found = []
    for path, ops in cfn["Resources"]["HttpApi"]["Properties"]["Body"]["paths"].items():
        for method, op in ops.items():
            uri = json.dumps(op["x-amazon-apigateway-integration"]["uri"])
            if "${ApiFunction" in uri:
                found.append((f"{method.upper()} {path}", re.findall(r"\$\{(ApiFunction[^}]*)\}", uri)[0]))
    for name, res in cfn["Resources"].items():
        target = (res.get("Properties") or {}).get("FunctionName")
        if res["Type"] == "AWS::Lambda::Permission" and json.dumps(target).startswith('{"Ref": "ApiFunction'):
            found.append((name, target["Ref"]))
    return found


def not_on_the_alias(cfn: dict[str, Any]) -> list[str]:
    """Routes and permissions of the api function that invoke something other than alias `live`."""
    return [f"{what} invokes {target}" for what, target in _invoked(cfn) if target != ALIAS]


def test_every_api_route_and_permission_invokes_alias_live(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    # Given the variant as SAM transforms it
    cfn = transformed(runs, "one")
    # When each HTTP API route's integration and each permission of the api function is read
    invoked = dict(_invoked(cfn))
    # Then every one invokes alias `live`, the JSON-RPC route's own permission included
    assert not_on_the_alias(cfn) == []
    assert invoked["POST /v1/a2a/agents/{agent+}"] == invoked["RpcRoutePermission"] == ALIAS
    assert cfn["Resources"][ALIAS]["Properties"]["Name"] == "live"


def test_the_plain_template_s_routes_still_invoke_the_function(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    # Given the plain template as SAM transforms it
    cfn = transformed(runs, "plain")
    # Then no alias exists, and every route and permission is reported as not on it: each invokes the function
    assert ALIAS not in cfn["Resources"]
    assert {target for _, target in _invoked(cfn)} == {"ApiFunction.Arn", "ApiFunction"}
    assert len(not_on_the_alias(cfn)) == len(_invoked(cfn)) > 1


def test_snapstart_is_on_for_published_versions_in_the_variant_only(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    # Given both templates as SAM transforms them
    variant, plain = transformed(runs, "one"), transformed(runs, "plain")
    # Then the variant's api function snapshots its published versions, and the plain one has no SnapStart
    assert variant["Resources"]["ApiFunction"]["Properties"]["SnapStart"] == {"ApplyOn": "PublishedVersions"}
    assert "SnapStart" not in plain["Resources"]["ApiFunction"]["Properties"]


def _versions(cfn: dict[str, Any]) -> list[str]:
    return sorted(name for name, res in cfn["Resources"].items() if res["Type"] == "AWS::Lambda::Version")


def test_a_new_stamp_publishes_a_new_version_and_the_same_stamp_does_not(
    runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    # Given the variant transformed for two deploys' stamps, and for the first stamp again
    one, two, again = (_versions(transformed(runs, name)) for name in ("one", "two", "one-again"))
    # Then each stamp names one version (a new logical id: CloudFormation publishes it), the same stamp the same
    assert len(one) == len(two) == 1
    assert one != two
    assert one == again
    # And the alias points at that version
    alias = transformed(runs, "two")["Resources"][ALIAS]["Properties"]
    assert alias["FunctionVersion"] == {"Fn::GetAtt": [two[0], "Version"]}


@pytest.mark.parametrize(
    ("stamp", "allowed"),
    [
        ("1767225600", True),
        ("v42", True),
        ("1.2", False),
        ("release-7", False),
        ("17672256001", False),
        ("", False),
    ],
)
def test_the_stamp_is_refused_where_it_would_not_name_a_version(
    stamp: str, allowed: bool, tmp_path: Path
) -> None:
    # Given the variant's ApiVersionStamp parameter (SAM names the version after its first 10 characters, and a
    # logical id is letters and digits only)
    assert write_variant(template.TEMPLATE, tmp_path / "template.yaml").returncode == 0
    parameter = template.load_template(tmp_path / "template.yaml")["Parameters"]["ApiVersionStamp"]
    # When CloudFormation checks a value against its AllowedPattern
    # Then a value that would be cut or make an invalid logical id is refused before anything changes
    assert "Default" not in parameter
    assert bool(re.fullmatch(parameter["AllowedPattern"], stamp)) is allowed


def test_the_script_fails_loudly_when_an_anchor_it_edits_is_gone(tmp_path: Path) -> None:
    # Given a template whose JSON-RPC route permission names the function some other way
    text = template.TEMPLATE.read_text()
    assert text.count("      FunctionName: !Ref ApiFunction\n") == 1
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        text.replace(
            "      FunctionName: !Ref ApiFunction\n", "      FunctionName: !GetAtt ApiFunction.Arn\n"
        )
    )
    # When the script runs on it
    result = write_variant(broken, tmp_path / "variant.yaml")
    # Then it fails, naming what it could not find, and writes no variant
    assert result.returncode != 0
    assert "RpcRoutePermission's FunctionName" in result.stderr
    assert not (tmp_path / "variant.yaml").exists()


def test_make_builds_the_variant_only_when_asked() -> None:
    # Given the Makefile
    # When `make build` and `make build SNAPSTART=1` are dry-run
    plain, snap = (
        subprocess.run(
            ["make", "-n", "build", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        for args in ([], ["SNAPSTART=1"])
    )
    # Then the plain build reads template.yaml, as before, and SNAPSTART=1 builds from the variant
    assert "sam build --template template.yaml;" in plain and "snapstart_template.py" not in plain
    assert "sam build --template template-snapstart.yaml;" in snap
