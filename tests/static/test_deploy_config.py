"""Deploy-readiness of template.yaml and samconfig.toml, offline: alarms on every dead-letter queue and every
function, the runtime and tracing settings, the section layout, and samconfig's environments. Each check is a
function returning problems, shown clean on the real files and dirty on a broken copy. Parameter values are checked
as CloudFormation checks them before it creates anything: AllowedPattern, MinLength, AllowedValues, ranges, Rules.
"""

from __future__ import annotations

import copy
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from nylorun_local import template

ROOT = Path(__file__).resolve().parents[2]
SECTIONS = ["Parameters", "Globals", "API", "Data", "Workflow", "Queues", "Events", "Push", "Files", "Logs", "Alarms", "Dashboard", "Outputs"]
# Parameters whose values only the user has (an issuer, an app client, an SNS topic of their account).
USER_PARAMETERS = {"JwtIssuer", "JwtAudience", "AlarmTopicArn"}
ALARM_ACTIONS = {"Fn::If": ["HasAlarmTopic", [{"Ref": "AlarmTopicArn"}], {"Ref": "AWS::NoValue"}]}


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


def of_type(tpl: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in tpl["Resources"].items() if v.get("Type") == kind}


def _target(value: Any) -> str | None:
    """The logical id a Ref / GetAtt names."""
    if isinstance(value, dict) and "Ref" in value:
        return str(value["Ref"])
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return str(value["Fn::GetAtt"][0])
    return None


def dead_letter_queues(tpl: dict[str, Any]) -> set[str]:
    """Queues named as a redrive target, as an event source's on-failure destination or as an EventBridge
    target's dead-letter queue."""
    found = set()
    for res in tpl["Resources"].values():
        props = res.get("Properties") or {}
        if "RedrivePolicy" in props:
            found.add(_target(props["RedrivePolicy"]["deadLetterTargetArn"]))
        if res.get("Type") == "AWS::Events::Rule":
            found |= {_target(t["DeadLetterConfig"]["Arn"]) for t in props.get("Targets", []) if "DeadLetterConfig" in t}
        for event in (props.get("Events") or {}).values():
            on_failure = (event.get("Properties") or {}).get("DestinationConfig", {}).get("OnFailure", {})
            if on_failure.get("Type") == "SQS":
                found.add(_target(on_failure["Destination"]))
    return {q for q in found if q}


# Metrics of how long something has waited (the oldest task waiting for an operator): their alarms fire
# past an age, not on the first one (the count's own alarm does that).
AGE_METRICS = {"UncertainOldestAgeSeconds"}


def alarm_problems(tpl: dict[str, Any]) -> list[str]:
    alarms = of_type(tpl, "AWS::CloudWatch::Alarm")
    watched: dict[tuple[str, str], dict[str, Any]] = {}
    problems = []
    for name, res in alarms.items():
        props = res["Properties"]
        dims = {d["Name"]: _target(d["Value"]) for d in props.get("Dimensions", [])}
        key = (f"{props.get('Namespace')}/{props.get('MetricName')}", str(dims.get("QueueName") or dims.get("FunctionName")))
        watched[key] = props
        if props.get("MetricName") in AGE_METRICS:
            if props.get("ComparisonOperator") != "GreaterThanThreshold" or not props.get("Threshold", 0) > 0:
                problems.append(f"{name}: does not fire past an age (> a positive threshold)")
        elif props.get("ComparisonOperator") != "GreaterThanThreshold" or props.get("Threshold") != 0:
            problems.append(f"{name}: does not fire on the first one (> 0)")
        for actions in ("AlarmActions", "OKActions"):
            if props.get(actions) != ALARM_ACTIONS:
                problems.append(f"{name}: {actions} is not the optional AlarmTopicArn")
    # Tasks waiting for an operator, and how long the oldest has waited (docs/operate.md, "Alarms").
    for metric in ("UncertainTasks", "UncertainOldestAgeSeconds"):
        if not any(k[0] == f"Nylorun/{metric}" for k in watched):
            problems.append(f"no alarm on Nylorun {metric}")
    for queue in sorted(dead_letter_queues(tpl)):
        props = watched.get(("AWS/SQS/ApproximateNumberOfMessagesVisible", queue))
        if props is None:
            problems.append(f"dead-letter queue {queue} has no depth alarm")
        elif props["Dimensions"][0]["Value"] != {"Fn::GetAtt": [queue, "QueueName"]}:
            problems.append(f"{queue}'s alarm does not watch its QueueName")
    for function in sorted(of_type(tpl, "AWS::Serverless::Function")):
        if ("AWS/Lambda/Errors", function) not in watched:
            problems.append(f"function {function} has no Errors alarm")
    topic = tpl["Parameters"].get("AlarmTopicArn", {})
    if topic.get("Default") != "":
        problems.append("AlarmTopicArn is not optional (Default \"\")")
    if tpl.get("Conditions", {}).get("HasAlarmTopic") != {"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]}:
        problems.append("HasAlarmTopic is not 'AlarmTopicArn is set'")
    return problems


def runtime_problems(tpl: dict[str, Any]) -> list[str]:
    """python3.12 or newer on arm64, active tracing, Powertools' environment; the layer built for the same."""
    fn = tpl["Globals"]["Function"]
    problems = []
    match = re.fullmatch(r"python3\.(\d+)", str(fn.get("Runtime")))
    if not match or int(match.group(1)) < 12:
        problems.append(f"Globals Runtime {fn.get('Runtime')!r} is not python3.12 or newer")
    if fn.get("Architectures") != ["arm64"]:
        problems.append(f"Globals Architectures {fn.get('Architectures')} is not [arm64]")
    if fn.get("Tracing") != "Active":
        problems.append("Globals Tracing is not Active")
    env = fn.get("Environment", {}).get("Variables", {})
    for var in ("POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE", "POWERTOOLS_LOG_LEVEL"):
        if var not in env:
            problems.append(f"Globals environment lacks {var}")
    for name, res in of_type(tpl, "AWS::Serverless::Function").items():
        props = res["Properties"]
        for key in ("Runtime", "Architectures", "Tracing"):
            if key in props and props[key] != fn.get(key):
                problems.append(f"{name} overrides {key}")
    layer = tpl["Resources"]["RuntimeLayer"]
    if fn.get("Runtime") not in layer["Properties"].get("CompatibleRuntimes", []):
        problems.append("RuntimeLayer is not compatible with the functions' runtime")
    if layer.get("Metadata", {}).get("BuildMethod") != fn.get("Runtime"):
        problems.append("RuntimeLayer is not built with the functions' runtime")
    if layer.get("Metadata", {}).get("BuildArchitecture") not in fn.get("Architectures", []):
        problems.append("RuntimeLayer is not built for the functions' architecture")
    machines = of_type(tpl, "AWS::Serverless::StateMachine")
    problems += [f"{m} has no tracing" for m, r in machines.items() if not r["Properties"].get("Tracing", {}).get("Enabled")]
    return problems


def section_problems(text: str) -> list[str]:
    found = re.findall(r"^ *# -{10,} (\w+)\s*$", text, flags=re.MULTILINE)
    return [] if found == SECTIONS else [f"section banners {found} are not {SECTIONS}"]


def _rule_value(node: Any, values: dict[str, str]) -> Any:
    """A Rules assertion's value (the functions this template's Rules use; Ref reads the parameter's value)."""
    if isinstance(node, dict) and len(node) == 1:
        (fn, arg), = node.items()
        if fn == "Ref":
            return values.get(arg)
        args = [_rule_value(a, values) for a in arg]
        if fn == "Fn::Not":
            return not args[0]
        if fn == "Fn::Equals":
            return args[0] == args[1]
        if fn == "Fn::Contains":
            return args[1] in args[0]
        if fn in ("Fn::And", "Fn::Or"):
            return (all if fn == "Fn::And" else any)(args)
        raise ValueError(f"Rules function {fn} is not evaluated here")
    return [_rule_value(a, values) for a in node] if isinstance(node, list) else node


def parameter_problems(values: dict[str, str], tpl: dict[str, Any]) -> list[str]:
    """What CloudFormation refuses in these parameter values: constraints, then the Rules whose parameters are given
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/rules-section-structure.html)."""
    params, problems = tpl["Parameters"], []
    for name, value in values.items():
        p = params.get(name, {})
        if "AllowedValues" in p and value not in p["AllowedValues"]:
            problems.append(f"{name}={value} is not one of {p['AllowedValues']}")
        if "AllowedPattern" in p and not re.fullmatch(p["AllowedPattern"], value):
            problems.append(f"{name}={value} does not match {p['AllowedPattern']}")
        if len(value) < p.get("MinLength", 0):
            problems.append(f"{name}={value!r} is shorter than {p['MinLength']}")
        if p.get("Type") == "Number" and not p.get("MinValue", 0) <= float(value) <= p.get("MaxValue", float("inf")):
            problems.append(f"{name}={value} is out of range")
    for rule, body in tpl.get("Rules", {}).items():
        for assertion in body["Assertions"]:
            if _refs(assertion["Assert"]) <= set(values) and not _rule_value(assertion["Assert"], values):
                problems.append(f"rule {rule} refuses it: {assertion['AssertDescription']}")
    return problems


def _refs(node: Any) -> set[str]:
    """The parameters a Rules assertion names."""
    if isinstance(node, dict):
        return ({node["Ref"]} if "Ref" in node else set()) | {r for v in node.values() for r in _refs(v)}
    return {r for v in node for r in _refs(v)} if isinstance(node, list) else set()


def samconfig_problems(config: dict[str, Any], tpl: dict[str, Any]) -> list[str]:
    params = tpl["Parameters"]
    problems = []
    for env in ("default", "prod"):
        if env not in config:
            problems.append(f"samconfig has no [{env}] environment")
            continue
        glob = config[env].get("global", {}).get("parameters", {})
        deploy = {**glob, **config[env].get("deploy", {}).get("parameters", {})}
        for key in ("stack_name", "region"):
            if not deploy.get(key):
                problems.append(f"[{env}] has no {key}")
        caps = set(str(deploy.get("capabilities", "")).split())
        if caps != {"CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"}:
            problems.append(f"[{env}] capabilities {sorted(caps)}")
        for key in ("resolve_s3", "confirm_changeset"):
            if deploy.get(key) is not True:
                problems.append(f"[{env}] {key} is not true")
        raw = deploy.get("parameter_overrides", [])
        pairs = dict(item.split("=", 1) for item in (raw if isinstance(raw, list) else str(raw).split()))
        if unknown := set(pairs) - set(params):
            problems.append(f"[{env}] overrides parameters the template lacks: {sorted(unknown)}")
        # Only the user knows these: a value here is a placeholder that deploys a stack answering 401 to everyone.
        if placeholders := set(pairs) & USER_PARAMETERS:
            problems.append(f"[{env}] sets {sorted(placeholders)}, which only the user knows")
        problems += [f"[{env}] {p}" for p in parameter_problems(pairs, tpl)]
    if "prod" in config:
        prod = config["prod"].get("deploy", {}).get("parameters", {}).get("parameter_overrides", [])
        if "LogLevel=WARNING" not in prod:
            problems.append("[prod] does not log at WARNING")
        dev, prod_env = ({**c.get("global", {}).get("parameters", {}), **c.get("deploy", {}).get("parameters", {})}
                         for c in (config.get("default", {}), config["prod"]))
        if (dev.get("stack_name"), dev.get("region")) == (prod_env.get("stack_name"), prod_env.get("region")):
            problems.append("[default] and [prod] deploy the same stack")
        if dev.get("s3_prefix") == prod_env.get("s3_prefix"):
            problems.append("[default] and [prod] share an s3_prefix")
    return problems


def samconfig() -> dict[str, Any]:
    return tomllib.loads((ROOT / "samconfig.toml").read_text())


# ================================================================ the real files are clean
def test_every_dead_letter_queue_and_every_function_has_an_alarm() -> None:
    tpl = real_template()
    assert alarm_problems(tpl) == []
    assert dead_letter_queues(tpl) == {"ContextDLQ", "PushDLQ", "PublishDLQ"}
    # one per dead-letter queue, one per function, and two on tasks waiting for an operator
    assert len(of_type(tpl, "AWS::CloudWatch::Alarm")) == 3 + len(of_type(tpl, "AWS::Serverless::Function")) + 2


def test_functions_run_python_3_12_on_arm64_traced_with_powertools() -> None:
    assert runtime_problems(real_template()) == []


def test_the_template_keeps_its_sections_in_order() -> None:
    assert section_problems(template.TEMPLATE.read_text()) == []


def test_samconfig_has_a_default_and_a_prod_environment_for_this_template() -> None:
    assert samconfig_problems(samconfig(), real_template()) == []


# ================================================================ and dirty on broken copies
def _drop(tpl: dict[str, Any], logical_id: str) -> dict[str, Any]:
    del tpl["Resources"][logical_id]
    return tpl


def _new_function(tpl: dict[str, Any]) -> dict[str, Any]:
    tpl["Resources"]["ExtraFunction"] = {"Type": "AWS::Serverless::Function", "Properties": {"CodeUri": "x/", "Handler": "a.b"}}
    return tpl


def _new_dlq(tpl: dict[str, Any]) -> dict[str, Any]:
    tpl["Resources"]["ExtraQueue"] = {
        "Type": "AWS::SQS::Queue",
        "Properties": {"RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["ExtraDLQ", "Arn"]}, "maxReceiveCount": 5}},
    }
    return tpl


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(lambda t: _drop(t, "PushDLQDepthAlarm"), "dead-letter queue PushDLQ has no depth alarm", id="no-dlq-alarm"),
        pytest.param(lambda t: _drop(t, "PublishDLQDepthAlarm"), "dead-letter queue PublishDLQ has no depth alarm", id="no-publish-dlq-alarm"),
        pytest.param(lambda t: _drop(t, "TurnFunctionErrorsAlarm"), "function TurnFunction has no Errors alarm", id="no-errors-alarm"),
        pytest.param(_new_function, "function ExtraFunction has no Errors alarm", id="new-function"),
        pytest.param(_new_dlq, "dead-letter queue ExtraDLQ has no depth alarm", id="new-dlq"),
        pytest.param(
            lambda t: t["Resources"]["ContextDLQDepthAlarm"]["Properties"].update(Threshold=10) or t,
            "ContextDLQDepthAlarm: does not fire on the first one", id="threshold",
        ),
        pytest.param(lambda t: _drop(t, "UncertainTasksAlarm"), "no alarm on Nylorun UncertainTasks", id="no-uncertain-alarm"),
        pytest.param(lambda t: _drop(t, "UncertainAgeAlarm"), "no alarm on Nylorun UncertainOldestAgeSeconds", id="no-age-alarm"),
        pytest.param(
            lambda t: t["Resources"]["UncertainAgeAlarm"]["Properties"].update(Threshold=0) or t,
            "UncertainAgeAlarm: does not fire past an age", id="age-threshold",
        ),
        pytest.param(
            lambda t: t["Resources"]["ApiFunctionErrorsAlarm"]["Properties"].update(AlarmActions=[{"Ref": "AlarmTopicArn"}]) or t,
            "ApiFunctionErrorsAlarm: AlarmActions is not the optional AlarmTopicArn", id="unconditional-action",
        ),
    ],
)
def test_alarm_check_fails_on_a_broken_copy(edit: Any, expected: str) -> None:
    problems = alarm_problems(edit(real_template()))
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(lambda f: f.update(Runtime="python3.11"), "is not python3.12 or newer", id="py311"),
        pytest.param(lambda f: f.update(Architectures=["x86_64"]), "is not [arm64]", id="x86"),
        pytest.param(lambda f: f.pop("Tracing"), "Tracing is not Active", id="no-tracing"),
        pytest.param(lambda f: f["Environment"]["Variables"].pop("POWERTOOLS_SERVICE_NAME"), "lacks POWERTOOLS_SERVICE_NAME", id="no-powertools"),
        pytest.param(lambda f: f.update(Runtime="python3.13"), "RuntimeLayer is not compatible", id="layer-mismatch"),
    ],
)
def test_runtime_check_fails_on_a_broken_copy(edit: Any, expected: str) -> None:
    tpl = real_template()
    edit(tpl["Globals"]["Function"])
    problems = runtime_problems(tpl)
    assert any(expected in p for p in problems), problems


def test_section_check_fails_when_a_banner_is_missing() -> None:
    text = template.TEMPLATE.read_text().replace("# ---------------------------------------------------------------- Alarms\n", "")
    assert section_problems(text) != []


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(lambda c: c.pop("prod"), "no [prod] environment", id="no-prod"),
        pytest.param(lambda c: c["default"]["deploy"]["parameters"].update(capabilities="CAPABILITY_IAM"), "capabilities", id="caps"),
        pytest.param(lambda c: c["prod"]["deploy"]["parameters"].update(resolve_s3=False), "resolve_s3 is not true", id="no-resolve-s3"),
        pytest.param(
            lambda c: c["default"]["deploy"]["parameters"]["parameter_overrides"].append("JwtAudience=example-app-client-id"),
            "sets ['JwtAudience'], which only the user knows", id="placeholder-audience",
        ),
        pytest.param(
            lambda c: c["prod"]["deploy"]["parameters"]["parameter_overrides"].append("JwtIssuer=" + OLD_ISSUER),
            "rule NoPlaceholderIssuer refuses it", id="placeholder-issuer",
        ),
        pytest.param(
            lambda c: c["prod"]["global"]["parameters"].update(stack_name="nylorun-runtime-dev"),
            "[default] and [prod] deploy the same stack", id="same-stack",
        ),
        pytest.param(
            lambda c: c["prod"]["deploy"]["parameters"].update(s3_prefix="nylorun-runtime-dev"),
            "share an s3_prefix", id="same-prefix",
        ),
        pytest.param(
            lambda c: c["prod"]["deploy"]["parameters"]["parameter_overrides"].append("A2aWaitMs=300000"),
            "A2aWaitMs=300000 is out of range", id="wait-over-cap",
        ),
        pytest.param(
            lambda c: c["prod"]["deploy"]["parameters"]["parameter_overrides"].append("JwtIssuers=https://x"),
            "lacks: ['JwtIssuers']", id="typo",
        ),
    ],
)
def test_samconfig_check_fails_on_a_broken_copy(edit: Any, expected: str) -> None:
    config = samconfig()
    edit(config)
    problems = samconfig_problems(config, real_template())
    assert any(expected in p for p in problems), problems


# ================================================================ placeholders cannot deploy
OLD_ISSUER = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE"  # the samconfig.toml placeholder until now
GOOD = {"JwtIssuer": "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbCdEf123", "JwtAudience": "3n4b5urk1ft4fl3mg5e62d9ado"}


def test_real_looking_parameters_pass_what_cloudformation_checks() -> None:
    # Given an issuer and audience of a real pool's shape, and a topic in a real-looking account
    values = {**GOOD, "AlarmTopicArn": "arn:aws:sns:eu-west-1:210987654321:alarms"}
    # When checked as CloudFormation checks parameters
    # Then nothing is refused
    assert parameter_problems(values, real_template()) == []


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        pytest.param("JwtIssuer", OLD_ISSUER, "rule NoPlaceholderIssuer refuses it", id="samconfig-issuer"),
        pytest.param("JwtIssuer", "https://cognito-idp.<region>.amazonaws.com/<pool id>", "does not match", id="readme-issuer"),
        pytest.param("JwtIssuer", "http://issuer.example.org", "does not match", id="http-issuer"),
        pytest.param("JwtIssuer", "", "does not match", id="empty-issuer"),
        pytest.param("JwtAudience", "example-app-client-id", "rule NoPlaceholderAudience refuses it", id="samconfig-audience"),
        pytest.param("JwtAudience", "", "shorter than 1", id="empty-audience"),
        pytest.param("AlarmTopicArn", "arn:aws:sns:us-east-1:123456789012:nylorun-alarms", "does not match", id="example-account"),
        pytest.param("InteractionTimeoutSeconds", "1209600", "is out of range", id="wait-beyond-queue"),
    ],
)
def test_placeholder_parameters_are_refused_before_anything_deploys(name: str, value: str, expected: str) -> None:
    # Given otherwise good parameters with one placeholder (or empty) value
    values = {**GOOD, name: value}
    # When checked as CloudFormation checks parameters
    problems = parameter_problems(values, real_template())
    # Then that value is refused
    assert any(expected in p for p in problems), problems
