"""Operations in template.yaml: the dashboard names only metrics that exist, every log group keeps its events for
LogRetentionDays, and the HTTP API logs who called what (never a body) and is throttled. Each check returns
problems: clean on the real template, dirty on a broken copy.

"Metrics that exist": a Nylorun metric is one the code emits (Powertools `add_metric` / `single_metric` calls, found
in the source; the dimensions of `single_metric` ones read from what `count_rpc` prints); an AWS metric is one the
service documents for the dimensions used (table below, with its source).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from nylorun import observability
from nylorun_local import template

ROOT = Path(__file__).resolve().parents[2]
CODE = [ROOT / "layers" / "runtime" / "nylorun", ROOT / "functions"]
EMITTED = re.compile(r"\b(add_metric|single_metric|_rpc_metric)\(\s*name=\"(\w+)\"")
SUB_REF = re.compile(r"\$\{([^}!][^}]*)\}")
SEARCH = re.compile(r"^SEARCH\('\{([^}]*)\}\s+MetricName=\"(\w+)\"'")

# AWS metric name -> the dimension names the dashboard may use, per namespace.
AWS_METRICS: dict[str, dict[str, frozenset[str]]] = {
    # https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-metrics.html (HTTP APIs: 4xx, not 4XXError)
    "AWS/ApiGateway": {m: frozenset({"ApiId"}) for m in ("4xx", "5xx", "Count", "IntegrationLatency", "Latency")},
    # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-available-cloudwatch-metrics.html
    "AWS/SQS": {m: frozenset({"QueueName"}) for m in ("ApproximateAgeOfOldestMessage", "ApproximateNumberOfMessagesVisible")},
    # https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html
    "AWS/Lambda": {m: frozenset({"FunctionName"}) for m in ("Errors", "Throttles", "Invocations", "Duration")},
}  # fmt: skip
# What an AWS dimension's value must be: a placeholder of this resource type (and attribute), never a literal.
DIMENSION_TARGETS = {
    "ApiId": ("AWS::Serverless::HttpApi", None),
    "QueueName": ("AWS::SQS::Queue", "QueueName"),
    "FunctionName": ("AWS::Serverless::Function", None),
}
LOG_GROUP_PREFIXES = {"TurnStateMachineLogs": "/aws/vendedlogs/states/"}
ACCESS_LOG_FIELDS = {
    "sub": "$context.authorizer.claims.sub",
    "requestId": "$context.requestId",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
}
# No variable that carries a request or response body, a header's value or a token.
FORBIDDEN_ACCESS_LOG = re.compile(
    r"\$(input|context\.(requestOverride|responseOverride|identity\.clientCert))"
)


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


def of_type(tpl: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in tpl["Resources"].items() if v.get("Type") == kind}


# ---------------------------------------------------------------- what the code emits
def emitted_metrics(roots: list[Path]) -> dict[str, frozenset[str]]:
    """Metric name -> its dimension names. `add_metric` goes through the shared Metrics object, whose only dimension
    is `service`; `single_metric` / `_rpc_metric` ones are the JSON-RPC counters, whose dimensions `count_rpc` prints."""
    found: dict[str, frozenset[str]] = {}
    single = _count_rpc_dimensions()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for call, name in EMITTED.findall(path.read_text()):
                found[name] = (
                    frozenset({"service"}) if call == "add_metric" else single.get(name, frozenset())
                )
    return found


def _count_rpc_dimensions() -> dict[str, frozenset[str]]:
    out = io.StringIO()
    enabled = {"POWERTOOLS_METRICS_DISABLED": "false", "POWERTOOLS_DEV": "false"}
    with mock.patch.dict(os.environ, enabled), contextlib.redirect_stdout(out):
        observability.count_rpc("GetTask", failed=True)
    dims: dict[str, frozenset[str]] = {}
    for line in out.getvalue().splitlines():
        emf = json.loads(line)["_aws"]["CloudWatchMetrics"][0]
        for metric in emf["Metrics"]:
            dims[metric["Name"]] = frozenset(emf["Dimensions"][0])
    return dims


# ---------------------------------------------------------------- what the dashboard names
def dashboard_metrics(tpl: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, str], str]]:
    """(namespace, metric, {dimension: value}, widget title) for every metric row and SEARCH of every dashboard."""
    for res in of_type(tpl, "AWS::CloudWatch::Dashboard").values():
        body = res["Properties"]["DashboardBody"]
        text = body["Fn::Sub"] if isinstance(body, dict) else body
        # ${!X} is Sub's escape for a literal ${X} (a dynamic label); the other placeholders stay as written.
        for widget in json.loads(text.replace("${!", "${"))["widgets"]:
            props = widget.get("properties", {})
            for row in props.get("metrics", []):
                if isinstance(row[0], dict):
                    match = SEARCH.match(row[0].get("expression", ""))
                    if match is None:
                        yield (
                            "",
                            f"unparsed expression {row[0].get('expression')!r}",
                            {},
                            props.get("title", ""),
                        )
                        continue
                    namespace, *dim_names = (part.strip() for part in match.group(1).split(","))
                    yield namespace, match.group(2), dict.fromkeys(dim_names, "*"), props.get("title", "")
                    continue
                fields = [f for f in row if not isinstance(f, dict)]
                namespace, metric, pairs = fields[0], fields[1], fields[2:]
                yield (
                    namespace,
                    metric,
                    dict(zip(pairs[::2], pairs[1::2], strict=True)),
                    props.get("title", ""),
                )


def dashboard_problems(tpl: dict[str, Any], emitted: dict[str, frozenset[str]]) -> list[str]:
    problems = []
    if not of_type(tpl, "AWS::CloudWatch::Dashboard"):
        return ["no AWS::CloudWatch::Dashboard"]
    resources = tpl["Resources"]
    for namespace, metric, dims, title in dashboard_metrics(tpl):
        where = f"{title!r}: {namespace}/{metric}"
        if namespace == observability.NAMESPACE:
            if metric not in emitted:
                problems.append(f"{where} is not a metric the code emits")
            elif set(dims) != emitted[metric]:
                problems.append(
                    f"{where} has dimensions {sorted(dims)}, the code emits {sorted(emitted[metric])}"
                )
            if dims.get("service", "*") not in (
                "*",
                observability.SERVICE,
            ):  # "*": a SEARCH matches any value
                problems.append(f"{where}: service {dims.get('service')!r} is not {observability.SERVICE!r}")
        elif namespace in AWS_METRICS:
            allowed = AWS_METRICS[namespace].get(metric)
            if allowed is None:
                problems.append(f"{where} is not a documented {namespace} metric")
            elif set(dims) != allowed:
                problems.append(f"{where} has dimensions {sorted(dims)}, documented: {sorted(allowed)}")
            for name, value in dims.items():
                kind, attribute = DIMENSION_TARGETS.get(name, ("", None))
                ref = SUB_REF.fullmatch(value)
                logical_id, _, attr = (ref.group(1) if ref else "").partition(".")
                if resources.get(logical_id, {}).get("Type") != kind or (attr or None) != attribute:
                    problems.append(f"{where}: {name} {value!r} is not the {attribute or 'Ref'} of a {kind}")
        else:
            problems.append(f"{where}: namespace not known to this check")
    return problems


# ---------------------------------------------------------------- logs, access logs, throttling, the rule's DLQ
def _getatt_target(value: Any) -> str:
    """The logical id an Fn::GetAtt names; "" for anything else (a literal ARN names nothing of this stack)."""
    return str(value["Fn::GetAtt"][0]) if isinstance(value, dict) and "Fn::GetAtt" in value else ""


def log_problems(tpl: dict[str, Any]) -> list[str]:
    """Every function has /aws/lambda/${Fn} with LogRetentionDays; every log group keeps LogRetentionDays."""
    problems = []
    groups = of_type(tpl, "AWS::Logs::LogGroup")
    param = tpl["Parameters"].get("LogRetentionDays", {})
    if param.get("Default") not in param.get("AllowedValues", []):
        problems.append("LogRetentionDays has no allowed Default")
    for name, res in groups.items():
        props = res["Properties"]
        if props.get("RetentionInDays") != {"Ref": "LogRetentionDays"}:
            problems.append(f"{name}: RetentionInDays is not LogRetentionDays")
        prefix = LOG_GROUP_PREFIXES.get(name)
        group_name = props.get("LogGroupName", {})
        if prefix and not str(group_name.get("Fn::Sub", "")).startswith(prefix):
            problems.append(f"{name}: LogGroupName {group_name} does not start with {prefix}")
    names = {str(g["Properties"].get("LogGroupName", {}).get("Fn::Sub")) for g in groups.values()}
    for function in of_type(tpl, "AWS::Serverless::Function"):
        if f"/aws/lambda/${{{function}}}" not in names:
            problems.append(f"{function} has no log group /aws/lambda/${{{function}}}")
    return problems


def api_problems(tpl: dict[str, Any]) -> list[str]:
    problems = []
    for name, res in of_type(tpl, "AWS::Serverless::HttpApi").items():
        props = res["Properties"]
        logs = props.get("AccessLogSettings", {})
        target = _getatt_target(logs.get("DestinationArn"))
        if tpl["Resources"].get(target, {}).get("Type") != "AWS::Logs::LogGroup":
            problems.append(f"{name}: access logs go to no log group of this stack")
        try:
            fields = json.loads(logs.get("Format", ""))
        except ValueError:
            problems.append(f"{name}: access log Format is not JSON")
            fields = {}
        for key, variable in ACCESS_LOG_FIELDS.items():
            if fields.get(key) != variable:
                problems.append(f"{name}: access log field {key!r} is not {variable}")
        if FORBIDDEN_ACCESS_LOG.search(logs.get("Format", "")):
            problems.append(f"{name}: access log carries a body or credential variable")
        route = props.get("DefaultRouteSettings", {})
        for key, param in (
            ("ThrottlingRateLimit", "ApiThrottlingRateLimit"),
            ("ThrottlingBurstLimit", "ApiThrottlingBurstLimit"),
        ):
            if route.get(key) != {"Ref": param}:
                problems.append(f"{name}: DefaultRouteSettings.{key} is not the {param} parameter")
    # The account-wide quotas a stage limit can never exceed (API Gateway quotas; see the parameters' comment).
    for param, most in (("ApiThrottlingRateLimit", 10_000), ("ApiThrottlingBurstLimit", 5_000)):
        p = tpl["Parameters"].get(param, {})
        if (
            not p.get("MinValue", 0) >= 1
            or p.get("MaxValue", float("inf")) > most
            or not p["MinValue"] <= p.get("Default", 0) <= most
        ):
            problems.append(f"{param} is not bounded by 1..{most} with a Default inside")
    return problems


# ================================================================ the real template is clean
def test_the_dashboard_names_only_metrics_that_exist() -> None:
    emitted = emitted_metrics(CODE)
    # The counters the dashboard is about are among them (the grep found the calls).
    assert {"TurnStarted", "PushDelivered", "RpcRequests", "RpcErrors", "InteractionAnswered"} <= set(emitted)
    assert emitted["RpcRequests"] == {"service", "Method"}
    assert dashboard_problems(real_template(), emitted) == []


def test_every_log_group_keeps_log_retention_days_and_every_function_has_one() -> None:
    assert log_problems(real_template()) == []


def test_the_http_api_logs_who_called_what_and_is_throttled() -> None:
    assert api_problems(real_template()) == []


# ================================================================ and dirty on broken copies
def _dashboard_text(tpl: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    body = tpl["Resources"]["Dashboard"]["Properties"]["DashboardBody"]
    assert old in body["Fn::Sub"]
    body["Fn::Sub"] = body["Fn::Sub"].replace(old, new, 1)
    return tpl


def _dashboard(tpl: dict[str, Any]) -> list[str]:
    return dashboard_problems(tpl, emitted_metrics(CODE))


def _access_format(tpl: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    logs = tpl["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"]
    assert old in logs["Format"]
    logs["Format"] = logs["Format"].replace(old, new)
    return tpl


@pytest.mark.parametrize(
    ("check", "edit", "expected"),
    [
        pytest.param(
            _dashboard,
            lambda t: _dashboard_text(t, '"TurnEnded"', '"TurnsEnded"'),
            "Nylorun/TurnsEnded is not a metric the code emits",
            id="misspelled-metric",
        ),
        pytest.param(
            _dashboard,
            lambda t: _dashboard_text(t, 'MetricName=\\"RpcErrors\\"', 'MetricName=\\"RpcError\\"'),
            "Nylorun/RpcError is not a metric",
            id="misspelled-search",
        ),
        pytest.param(
            _dashboard,
            lambda t: _dashboard_text(t, "{Nylorun,Method,service}", "{Nylorun,Method}"),
            "has dimensions ['Method'], the code emits",
            id="search-dimensions",
        ),
        pytest.param(
            _dashboard,
            lambda t: _dashboard_text(t, '"service", "nylorun"', '"service", "nylorun-dev"'),
            "service 'nylorun-dev' is not 'nylorun'",
            id="service",
        ),
        pytest.param(
            _dashboard,
            lambda t: _dashboard_text(t, '"4xx"', '"4XXError"'),
            "AWS/ApiGateway/4XXError is not a documented",
            id="rest-api-metric",
        ),
        pytest.param(
            _dashboard,
            lambda t: _dashboard_text(t, "${PushDLQ.QueueName}", "${PushDLQ.Arn}"),
            "QueueName '${PushDLQ.Arn}' is not the QueueName",
            id="queue-arn",
        ),
        pytest.param(
            _dashboard,
            lambda t: _dashboard_text(t, "${SweepFunction}", "${SweepFunctionLogs}"),
            "is not the Ref of a AWS::Serverless::Function",
            id="wrong-resource",
        ),
        pytest.param(
            _dashboard,
            lambda t: t["Resources"].pop("Dashboard") and t,
            "no AWS::CloudWatch::Dashboard",
            id="no-dashboard",
        ),
        pytest.param(
            log_problems,
            lambda t: t["Resources"].pop("PushFunctionLogs") and t,
            "PushFunction has no log group",
            id="no-group",
        ),
        pytest.param(
            log_problems,
            lambda t: t["Resources"]["SweepFunctionLogs"]["Properties"].update(RetentionInDays=30) or t,
            "SweepFunctionLogs: RetentionInDays is not LogRetentionDays",
            id="fixed-retention",
        ),
        pytest.param(
            log_problems,
            lambda t: (
                t["Resources"]["TurnStateMachineLogs"]["Properties"].update(
                    LogGroupName={"Fn::Sub": "/nylorun/${AWS::StackName}"}
                )
                or t
            ),
            "does not start with /aws/vendedlogs/states/",
            id="no-vendedlogs",
        ),
        pytest.param(
            log_problems,
            lambda t: t["Parameters"]["LogRetentionDays"].update(Default=31) or t,
            "no allowed Default",
            id="bad-default",
        ),
        pytest.param(
            api_problems,
            lambda t: _access_format(t, "$context.authorizer.claims.sub", "$context.authorizer.claims"),
            "field 'sub'",
            id="no-sub",
        ),
        pytest.param(
            api_problems,
            lambda t: _access_format(t, '"requestId"', "requestId"),
            "Format is not JSON",
            id="not-json",
        ),
        pytest.param(
            api_problems,
            lambda t: _access_format(t, '"path":"$context.path"', '"body":"$input.body"'),
            "carries a body",
            id="body",
        ),
        pytest.param(
            api_problems,
            lambda t: t["Resources"]["HttpApi"]["Properties"].pop("DefaultRouteSettings") and t,
            "ThrottlingRateLimit is not",
            id="no-throttling",
        ),
        pytest.param(
            api_problems,
            lambda t: t["Parameters"]["ApiThrottlingBurstLimit"].update(MaxValue=6000) or t,
            "ApiThrottlingBurstLimit is not bounded",
            id="over-quota",
        ),
        pytest.param(
            api_problems,
            lambda t: (
                t["Resources"]["HttpApi"]["Properties"]["AccessLogSettings"].update(
                    DestinationArn="arn:aws:logs:x"
                )
                or t
            ),
            "access logs go to no log group",
            id="foreign-destination",
        ),
    ],
)
def test_each_check_fails_on_a_broken_copy(check: Any, edit: Any, expected: str) -> None:
    problems = check(edit(real_template()))
    assert any(expected in p for p in problems), problems


def test_dashboard_check_fails_when_the_code_stops_emitting_a_metric(tmp_path: Path) -> None:
    # Given a copy of the Runtime's code in which the turn engine no longer emits TurnFailed
    runner = ROOT / "layers" / "runtime" / "nylorun" / "engine" / "runner.py"
    copied = tmp_path / "runner.py"
    copied.write_text(runner.read_text().replace('name="TurnFailed"', 'name="TurnFailure"'))
    others = [p for p in (ROOT / "layers" / "runtime" / "nylorun").rglob("*.py") if p != runner]
    for i, path in enumerate(others):
        (tmp_path / f"m{i}.py").write_text(path.read_text())
    # When the dashboard is checked against that code
    problems = dashboard_problems(real_template(), emitted_metrics([tmp_path, ROOT / "functions"]))
    # Then its "failed" line is reported
    assert any("Nylorun/TurnFailed is not a metric the code emits" in p for p in problems), problems
