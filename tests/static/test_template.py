"""Static checks of template.yaml and statemachines/*.asl.json, each run on the real files and on a broken copy.

Every check is a function over a template dict / ASL text that returns a list of problems, so the same code
proves the real files clean and the deliberately broken copies dirty (a check that cannot fail proves nothing).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nylorun_local import template
from nylorun_local.runtime import LocalRuntime

ROOT = Path(__file__).resolve().parents[2]
DUMMY_ARN = "arn:aws:lambda:us-east-1:123456789012:function:static-check-dummy"
PLACEHOLDER = re.compile(r"\$\{([^}]+)\}")
FIXED_PARTITION = re.compile(r"arn:aws:[^\"]*")
ASL_SUBSTITUTIONS = {"TurnFunctionArn", "Partition"}
PSEUDO = {
    "AWS::AccountId", "AWS::NoValue", "AWS::NotificationARNs", "AWS::Partition",
    "AWS::Region", "AWS::StackId", "AWS::StackName", "AWS::URLSuffix",
}  # fmt: skip


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


def resources_of(tpl: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: res for name, res in tpl["Resources"].items() if res.get("Type") == kind}


# ---------------------------------------------------------------- (a) the table moto has == the template's
def table_problems(described: dict[str, Any], props: dict[str, Any]) -> list[str]:
    """Compare describe_table's Table with TasksTable's Properties: keys, attributes, GSIs (names, keys, projection)."""
    problems = []
    if described["KeySchema"] != props["KeySchema"]:
        problems.append(f"KeySchema {described['KeySchema']} != template {props['KeySchema']}")
    have = {(a["AttributeName"], a["AttributeType"]) for a in described["AttributeDefinitions"]}
    want = {(a["AttributeName"], a["AttributeType"]) for a in props["AttributeDefinitions"]}
    if have != want:
        problems.append(
            f"AttributeDefinitions differ: only in table {have - want}, only in template {want - have}"
        )
    have_gsi = {
        g["IndexName"]: (g["KeySchema"], g["Projection"].get("ProjectionType"))
        for g in described.get("GlobalSecondaryIndexes", [])
    }
    want_gsi = {
        g["IndexName"]: (g["KeySchema"], g["Projection"].get("ProjectionType"))
        for g in props.get("GlobalSecondaryIndexes", [])
    }
    if have_gsi != want_gsi:
        problems.append(f"GlobalSecondaryIndexes differ: table {have_gsi}, template {want_gsi}")
    return problems


# ---------------------------------------------------------------- (b) every function's handler imports
def handler_problems(tpl: dict[str, Any], root: Path) -> list[str]:
    """Each AWS::Serverless::Function's CodeUri/Handler names a module file whose attribute is callable."""
    problems = []
    globals_ = tpl.get("Globals", {}).get("Function", {})
    functions = resources_of(tpl, "AWS::Serverless::Function")
    if not functions:
        problems.append("no AWS::Serverless::Function in the template")
    for logical_id, res in functions.items():
        props = {**globals_, **res.get("Properties", {})}
        code_uri, handler = props.get("CodeUri"), props.get("Handler")
        if not isinstance(code_uri, str) or not isinstance(handler, str) or "." not in handler:
            problems.append(
                f"{logical_id}: CodeUri {code_uri!r} / Handler {handler!r} is not a local module.function"
            )
            continue
        module_path, attribute = handler.rsplit(".", 1)
        path = root / code_uri / (module_path.replace(".", "/") + ".py")
        if not path.is_file():
            problems.append(f"{logical_id}: {path} does not exist")
            continue
        # A unique module name: every function's module is `app`, and importing must not clobber another.
        spec = importlib.util.spec_from_file_location(f"static_check_{logical_id}_{uuid.uuid4().hex}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the finding
            problems.append(f"{logical_id}: importing {path} failed: {exc!r}")
            continue
        if not callable(getattr(module, attribute, None)):
            problems.append(f"{logical_id}: {path} has no callable {attribute!r}")
    return problems


# ---------------------------------------------------------------- (c) state machines
def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _targets(state: dict[str, Any]) -> list[str]:
    out = [state[k] for k in ("Next", "Default") if k in state]
    out += [c["Next"] for c in state.get("Choices", []) if "Next" in c]
    out += [c["Next"] for c in state.get("Catch", []) if "Next" in c]
    return out


def graph_problems(machine: dict[str, Any], where: str = "") -> list[str]:
    """StartAt exists, every transition target exists, every state is reachable (nested machines too)."""
    states: dict[str, Any] = machine.get("States", {})
    start = machine.get("StartAt")
    if start not in states:
        return [f"{where}StartAt {start!r} is not a state"]
    problems = []
    for name, state in states.items():
        for target in _targets(state):
            if target not in states:
                problems.append(f"{where}{name}: transition to missing state {target!r}")
        if (
            state.get("Type") not in ("Choice", "Succeed", "Fail")
            and "Next" not in state
            and not state.get("End")
        ):
            problems.append(f"{where}{name}: neither Next nor End")
        for i, branch in enumerate(state.get("Branches", [])):
            problems += graph_problems(branch, f"{where}{name}.Branches[{i}].")
        for key in ("ItemProcessor", "Iterator"):
            if key in state:
                problems += graph_problems(state[key], f"{where}{name}.{key}.")
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in states:
            continue
        seen.add(name)
        todo += _targets(states[name])
    problems += [f"{where}{name}: unreachable from StartAt" for name in states if name not in seen]
    return problems


def asl_problems(text: str, substitutions: set[str]) -> list[str]:
    """Placeholders == DefinitionSubstitutions keys; no ARN names a partition itself; moto's ASL parser accepts it;
    JSONPath only; sound graph."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    problems = []
    placeholders = set(PLACEHOLDER.findall(text))
    if placeholders - substitutions:
        problems.append(
            f"placeholders without a DefinitionSubstitution: {sorted(placeholders - substitutions)}"
        )
    if substitutions - placeholders:
        problems.append(
            f"DefinitionSubstitutions the file never uses: {sorted(substitutions - placeholders)}"
        )
    # A service integration's ARN takes the stack's partition (aws-cn, aws-us-gov: "arn:aws:" fails there), so the
    # file writes `arn:${Partition}:` and the template substitutes AWS::Partition
    # (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference-arns.html).
    problems += [f"{arn!r} names the partition aws itself" for arn in sorted(set(FIXED_PARTITION.findall(text)))]
    concrete = PLACEHOLDER.sub(lambda m: "aws" if m.group(1) == "Partition" else DUMMY_ARN, text)
    # moto 5.2.5 keeps the parser's query-language scope stack on the Preprocessor *class*, and a parse that
    # fails mid-way never pops its scope: one rejected JSONata machine would make every later execution in
    # this process (the session's moto server) fail to parse. Put the stack back as it was.
    scopes = Preprocessor._query_language_per_scope
    depth = len(scopes)
    try:
        AmazonStateLanguageParser.parse(concrete)
    except Exception as exc:  # noqa: BLE001 - the parser's rejection is the finding
        problems.append(f"moto's ASL parser rejects it: {exc}")
    finally:
        del scopes[depth:]
    try:
        machine = json.loads(concrete)
    except json.JSONDecodeError as exc:
        return [*problems, f"not JSON: {exc}"]
    for key, value in _walk(machine):
        if key == "QueryLanguage" and value == "JSONata":
            problems.append("QueryLanguage JSONata (moto cannot execute it)")
        if key == "Assign":
            problems.append("Assign / variables (moto cannot execute them)")
    return problems + graph_problems(machine)


def state_machine_problems(tpl: dict[str, Any], root: Path) -> list[str]:
    """Every statemachines/*.asl.json is some state machine's DefinitionUri, and each one is sound."""
    problems = []
    used = set()
    for logical_id, res in resources_of(tpl, "AWS::Serverless::StateMachine").items():
        props = res.get("Properties", {})
        uri = props.get("DefinitionUri")
        if not isinstance(uri, str) or not (root / uri).is_file():
            problems.append(f"{logical_id}: DefinitionUri {uri!r} is not a file in the repo")
            continue
        used.add((root / uri).resolve())
        subs = set((props.get("DefinitionSubstitutions") or {}).keys())
        problems += [f"{logical_id} ({uri}): {p}" for p in asl_problems((root / uri).read_text(), subs)]
    for path in sorted((root / "statemachines").glob("*.asl.json")):
        if path.resolve() not in used:
            problems.append(f"{path.name}: no state machine in the template uses it")
    return problems


# ---------------------------------------------------------------- references (cfn-lint 1.58 misses some)
def reference_problems(tpl: dict[str, Any]) -> list[str]:
    """Every Ref / GetAtt / ${X} in Sub names a parameter, a resource or a pseudo parameter.

    cfn-lint 1.58 validates SAM templates without transforming them and does not flag a Ref to a missing
    resource inside Globals or a SAM function's Environment or policy templates; this closes that gap.
    """
    params, resources = set(tpl.get("Parameters", {})), set(tpl["Resources"])
    problems = []

    def check(name: str, how: str) -> None:
        base = name.split(".", 1)[0]
        if name not in PSEUDO and base not in resources and name not in params:
            problems.append(f"{how} to missing {name!r}")

    for key, value in _walk({k: v for k, v in tpl.items() if k != "Parameters"}):
        if key == "Ref" and isinstance(value, str):
            check(value, "Ref")
        elif key == "Fn::GetAtt" and isinstance(value, list) and value:
            if value[0] not in resources:
                problems.append(f"GetAtt to missing {value[0]!r}")
        elif key == "Fn::Sub":
            text, local = (value, {}) if isinstance(value, str) else (value[0], value[1])
            for name in PLACEHOLDER.findall(text):
                if not name.startswith("!") and name not in local:
                    check(name, "Sub")
    return problems


# ================================================================ the real files are clean
@pytest.fixture(scope="module")
def table_description(local_runtime: LocalRuntime) -> dict[str, Any]:
    assert local_runtime.stack is not None
    client = local_runtime.aws.client("dynamodb")
    return dict(client.describe_table(TableName=local_runtime.stack.table_name)["Table"])


def test_the_table_moto_has_is_the_one_the_template_declares(table_description: dict[str, Any]) -> None:
    # Given the table the local stack created and TasksTable in template.yaml
    props = real_template()["Resources"]["TasksTable"]["Properties"]
    # When they are compared
    problems = table_problems(table_description, props)
    # Then keys, attributes and the four indexes agree
    assert problems == []
    assert {g["IndexName"] for g in table_description["GlobalSecondaryIndexes"]} == {
        "BySubject",
        "ByContext",
        "PushConfigs",
        "Uncertain",
    }


def test_every_function_handler_resolves_to_a_callable(local_runtime: LocalRuntime) -> None:
    # Given the template's functions (the local Runtime has set the env their modules read at import)
    tpl = real_template()
    # When each CodeUri/Handler is imported
    problems = handler_problems(tpl, ROOT)
    # Then each is a callable handler
    assert problems == []
    assert set(resources_of(tpl, "AWS::Serverless::Function")) >= {"ApiFunction", "TurnFunction"}


def test_state_machines_parse_are_jsonpath_and_have_a_sound_graph() -> None:
    # Given every state machine of the template and every statemachines/*.asl.json
    # When each is substituted, parsed by moto's ASL parser and its graph walked
    problems = state_machine_problems(real_template(), ROOT)
    # Then nothing is wrong
    assert problems == []


def test_every_reference_in_the_template_resolves() -> None:
    # Given the template
    # When every Ref, GetAtt and Sub variable is resolved against its parameters and resources
    # Then each names something that exists
    assert reference_problems(real_template()) == []


# ================================================================ the same checks fail on broken copies
def _asl_text() -> str:
    return (ROOT / "statemachines/turn.asl.json").read_text()


def _asl_edit(edit: Any) -> str:
    machine = json.loads(_asl_text())
    edit(machine)
    return json.dumps(machine)


BROKEN_ASL = {
    "dangling Next": (
        lambda m: m["States"]["WaitForAnswer"].update(Next="RunTurnn"),
        "transition to missing state 'RunTurnn'",
    ),
    "dangling Catch": (
        lambda m: m["States"]["RunTurn"]["Catch"][0].update(Next="Nowhere"),
        "transition to missing state 'Nowhere'",
    ),
    "unreachable state": (
        lambda m: m["States"].update(Orphan={"Type": "Pass", "End": True}),
        "Orphan: unreachable from StartAt",
    ),
    "missing StartAt": (lambda m: m.update(StartAt="Begin"), "StartAt 'Begin' is not a state"),
    "JSONata": (lambda m: m.update(QueryLanguage="JSONata"), "QueryLanguage JSONata"),
    "Assign": (lambda m: m["States"]["RunTurn"].update(Assign={"x": 1}), "Assign / variables"),
    "grammar error": (lambda m: m["States"]["Done"].update(Type="Succed"), "moto's ASL parser rejects it"),
    "fixed partition": (
        lambda m: m["States"]["RunTurn"].update(Resource="arn:aws:states:::lambda:invoke"),
        "'arn:aws:states:::lambda:invoke' names the partition aws itself",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN_ASL))
def test_asl_checks_fail_on_a_broken_state_machine(case: str) -> None:
    # Given a copy of turn.asl.json with one deliberate fault
    edit, expected = BROKEN_ASL[case]
    text = _asl_edit(edit)
    # When the same check the real file passes runs on it
    problems = asl_problems(text, ASL_SUBSTITUTIONS)
    # Then it reports that fault
    assert any(expected in p for p in problems), problems


def test_a_rejected_state_machine_leaves_moto_able_to_parse_the_next(local_runtime: LocalRuntime) -> None:
    # Given the check has just rejected a JSONata machine (moto's parser raised mid-way)
    assert any(
        "moto's ASL parser rejects it" in p for p in asl_problems(_asl_edit(BROKEN_ASL["JSONata"][0]), set())
    )
    # When the real machine is checked, and moto's Step Functions starts a turn of it
    problems = asl_problems(_asl_text(), ASL_SUBSTITUTIONS)
    assert local_runtime.stack is not None
    sfn = local_runtime.aws.client("stepfunctions")
    arn = sfn.start_execution(
        stateMachineArn=local_runtime.stack.state_machine_arn,
        name=f"static-{uuid.uuid4()}",
        input=json.dumps({"taskId": str(uuid.uuid4()), "interactionTimeoutSeconds": 60}),
    )["executionArn"]
    deadline = time.monotonic() + 30
    while (
        status := sfn.describe_execution(executionArn=arn)["status"]
    ) == "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.05)
    # Then both still parse: the check left no JSONata scope behind in the process
    assert problems == []
    assert status == "SUCCEEDED"


def test_asl_check_fails_when_placeholders_and_substitutions_disagree() -> None:
    # Given the real ASL, checked against substitutions that miss its placeholder and add an unused one
    # When checked
    problems = asl_problems(_asl_text(), {"PushFunctionArn", "Partition"})
    # Then both directions are reported
    assert any("without a DefinitionSubstitution: ['TurnFunctionArn']" in p for p in problems), problems
    assert any("never uses: ['PushFunctionArn']" in p for p in problems), problems


def test_state_machine_check_fails_on_a_template_with_a_wrong_definition_uri() -> None:
    # Given a template copy whose state machine points at a file that does not exist
    tpl = real_template()
    tpl["Resources"]["TurnStateMachine"]["Properties"]["DefinitionUri"] = "statemachines/turn.asl.jsn"
    # When checked
    problems = state_machine_problems(tpl, ROOT)
    # Then the missing file and the now unused turn.asl.json are both reported
    assert any("is not a file" in p for p in problems), problems
    assert any("turn.asl.json: no state machine" in p for p in problems), problems


def test_table_check_fails_on_a_template_with_a_renamed_index(table_description: dict[str, Any]) -> None:
    # Given a template copy whose BySubject index is renamed, and one with another projection
    renamed = real_template()["Resources"]["TasksTable"]["Properties"]
    renamed["GlobalSecondaryIndexes"][0]["IndexName"] = "BySubjectV2"
    projected = real_template()["Resources"]["TasksTable"]["Properties"]
    projected["GlobalSecondaryIndexes"][1]["Projection"] = {"ProjectionType": "KEYS_ONLY"}
    rekeyed = real_template()["Resources"]["TasksTable"]["Properties"]
    rekeyed["KeySchema"][1]["AttributeName"] = "SortKey"
    # When each is compared with the table moto has
    # Then each difference is reported
    assert any(
        "GlobalSecondaryIndexes" in p and "BySubjectV2" in p
        for p in table_problems(table_description, renamed)
    )
    assert any("KEYS_ONLY" in p for p in table_problems(table_description, projected))
    assert any("KeySchema" in p for p in table_problems(table_description, rekeyed))


def test_handler_check_fails_on_a_template_with_a_bad_handler(local_runtime: LocalRuntime) -> None:
    # Given template copies: a handler attribute that does not exist, and a CodeUri folder that does not exist
    bad_attribute = real_template()
    bad_attribute["Resources"]["TurnFunction"]["Properties"]["Handler"] = "app.handle"
    bad_folder = real_template()
    bad_folder["Resources"]["ApiFunction"]["Properties"]["CodeUri"] = "functions/apii/"
    # When checked
    # Then each is reported for its function
    assert any("TurnFunction" in p and "'handle'" in p for p in handler_problems(bad_attribute, ROOT))
    assert any("ApiFunction" in p and "does not exist" in p for p in handler_problems(bad_folder, ROOT))


def test_reference_check_fails_on_a_ref_cfn_lint_misses() -> None:
    # Given a template copy whose Globals name a table that does not exist (cfn-lint 1.58 passes this one)
    tpl = real_template()
    tpl["Globals"]["Function"]["Environment"]["Variables"]["NYLORUN_TABLE"] = {"Ref": "TasksTabel"}
    tpl["Outputs"]["Broken"] = {
        "Value": {
            "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:${TurnMachine.Name}"
        }
    }
    # When checked
    problems = reference_problems(tpl)
    # Then both are reported
    assert "Ref to missing 'TasksTabel'" in problems
    assert "Sub to missing 'TurnMachine.Name'" in problems


# ================================================================ cfn-lint (as `make test` runs it)
CFN_LINT = Path(sys.executable).parent / "cfn-lint"


# `make test` runs the awslabs serverless rules on top of cfn-lint's own (Makefile, CFN_LINT_SERVERLESS).
SERVERLESS = ["-a", "cfn_lint_serverless.rules"]


@pytest.fixture(scope="module")
def cfn_lint_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """cfn-lint on the real template and on a copy whose output names a missing resource, and the serverless rules
    on the real template and on a copy with a queue that has no dead-letter queue, run side by side."""
    text = template.TEMPLATE.read_text()
    assert "Value: !Ref TasksTable" in text
    broken = tmp_path_factory.mktemp("cfn") / "template.yaml"
    broken.write_text(text.replace("Value: !Ref TasksTable", "Value: !Ref TasksTabel"))
    no_dlq = tmp_path_factory.mktemp("serverless") / "template.yaml"
    no_dlq.write_text(text.replace("\nResources:\n", "\nResources:\n  Orphan:\n    Type: AWS::SQS::Queue\n", 1))
    runs_of = (
        ("real", template.TEMPLATE, []),
        ("broken", broken, []),
        ("serverless-real", template.TEMPLATE, SERVERLESS),
        ("serverless-broken", no_dlq, SERVERLESS),
    )
    procs = {
        name: subprocess.Popen(
            [str(CFN_LINT), "-t", str(path), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=path.parent,
        )
        for name, path, args in runs_of
    }
    runs = {}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        runs[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return runs


@pytest.mark.parametrize("run", ["real", "serverless-real"])
def test_cfn_lint_passes_the_real_template(run: str, cfn_lint_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    # Given the real template
    # When cfn-lint runs on it, alone and with the awslabs serverless rules as `make test` runs them
    result = cfn_lint_runs[run]
    # Then it is clean (the dead-letter queues' ES6000 is suppressed per resource, with the reason)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        pytest.param("broken", "TasksTabel", id="ref-to-a-missing-resource"),
        pytest.param("serverless-broken", "ES6000 SQS Queue Orphan should have a RedrivePolicy", id="queue-without-dlq"),
    ],
)
def test_cfn_lint_fails_a_broken_copy(run: str, expected: str, cfn_lint_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    # Given a copy of the template whose output names a resource that does not exist, and one with a queue that
    # has no dead-letter queue (written to tmp dirs)
    # When cfn-lint runs on each (the second with the serverless rules)
    result = cfn_lint_runs[run]
    # Then it fails and names the fault
    assert result.returncode != 0
    assert expected in result.stdout


# ---------------------------------------------------------------- a throttled turn waits (docs/operate.md)
THROTTLED = "Lambda.TooManyRequestsException"
# Past the account's Lambda concurrency (or the turn function's opt-in reservation, TurnReservedConcurrency), Lambda
# throttles, and a burst of turns must wait for room rather than fail. Five minutes is long enough for 300-second turns to end.
THROTTLE_WAIT_SECONDS = 300
LAMBDA_INVOKE = re.compile(r"arn:[^:]+:states:::lambda:invoke")


def throttle_problems(machine: dict[str, Any]) -> list[str]:
    """Every Lambda invoke retries a throttle (the first retrier that matches it, as Step Functions picks) for at least
    THROTTLE_WAIT_SECONDS in all."""
    problems = []
    for name, state in machine["States"].items():
        if not LAMBDA_INVOKE.match(str(state.get("Resource", ""))):
            continue
        retrier = next(
            (r for r in state.get("Retry", []) if {THROTTLED, "States.ALL"} & set(r["ErrorEquals"])), None
        )
        if retrier is None:
            problems.append(f"{name}: a throttled invoke is not retried")
            continue
        interval, rate = retrier.get("IntervalSeconds", 1), retrier.get("BackoffRate", 2.0)
        waited = sum(interval * rate**i for i in range(retrier.get("MaxAttempts", 3)))
        if waited < THROTTLE_WAIT_SECONDS:
            problems.append(f"{name}: a throttled invoke is retried for {waited:g} s in all, under {THROTTLE_WAIT_SECONDS}")
    return problems


def test_a_throttled_turn_waits_for_room_rather_than_failing() -> None:
    assert throttle_problems(json.loads(_asl_text())) == []


def _throttle_in_the_service_errors(machine: dict[str, Any]) -> None:
    # As before throttles had a retry of their own: a throttle retried with the service errors, 3 attempts (7 s).
    machine["States"]["RunTurn"]["Retry"].pop(0)
    machine["States"]["RunTurn"]["Retry"][0]["ErrorEquals"].append(THROTTLED)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(_throttle_in_the_service_errors, "RunTurn: a throttled invoke is retried for 7 s", id="3 attempts"),
        pytest.param(lambda m: m["States"]["WaitForAnswer"]["Retry"].pop(0), "WaitForAnswer: a throttled invoke is not retried", id="not retried"),
    ],
)  # fmt: skip
def test_the_throttle_check_fails_on_a_broken_copy(edit: Any, expected: str) -> None:
    # Given a copy of turn.asl.json whose throttled invoke gives up early
    machine = json.loads(_asl_text())
    edit(machine)
    # Then the check says which state
    assert any(expected in p for p in throttle_problems(machine)), throttle_problems(machine)
