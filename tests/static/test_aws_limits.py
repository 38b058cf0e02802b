"""AWS service limits for every value template.yaml sets, checked offline, by resource type.

moto accepts values AWS refuses (maxReceiveCount 20000 deployed locally and rolled back on AWS), so the limits are
written here, each with the page that states it. The check walks every resource by its type: a property another
change adds (a log group's retention, a stage's throttling) is checked because its type is, and a resource of a
type this file does not know is itself a finding. A value given by a parameter is checked at the parameter's
MinValue, MaxValue, Default and AllowedValues; a parameter without the bound a limit needs is a finding too.
Names are rendered with the longest stack name (128 characters) and region, so a name that fits a short stack but
not a long one fails here and not on the first deploy of a long-named stack.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from concurrency import (
    DEFAULT_ACCOUNT_CONCURRENCY,
    LAMBDA_QUOTAS,
    LAMBDA_RESERVED,
    UNRESERVED_MINIMUM,
    api_load_problems,
    api_peak,
    reservation_problems,
)
from nylorun_local import template

Problems = list[str]

# https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_CreateStack.html: StackName up to 128.
LONGEST = {
    "AWS::StackName": "s" * 128,
    "AWS::Region": "ap-southeast-5",  # 14, as long as any region name
    "AWS::AccountId": "1" * 12,
    "AWS::Partition": "aws-us-gov",
    "AWS::URLSuffix": "amazonaws.com.cn",
}
# The stack id's UUID (arn:…:stack/<name>/<uuid>), unique per stack: TurnStateMachine's name is built from it.
STACK_UUID = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}
# Names CloudFormation generates when a template gives none (a `${Function}` inside another name).
GENERATED_NAME_LENGTH = {
    "AWS::Serverless::Function": 64,
    "AWS::SQS::Queue": 80,
    "AWS::Serverless::StateMachine": 80,
}


def real_template() -> dict[str, Any]:
    return copy.deepcopy(template.load_template(template.TEMPLATE))


# ---------------------------------------------------------------- values and names as AWS would see them
def values_of(
    node: Any, tpl: dict[str, Any], where: str, problems: Problems, bound: str = "MinValue/MaxValue"
) -> list[Any]:
    """The concrete values a property can take: a literal, both branches of an If, a parameter's range and
    allowed values. Other intrinsics (a GetAtt) resolve at deploy time and give nothing to check here."""
    if isinstance(node, dict) and "Fn::If" in node:
        branches = node["Fn::If"][1:]
        return [
            v
            for b in branches
            if b != {"Ref": "AWS::NoValue"}
            for v in values_of(b, tpl, where, problems, bound)
        ]
    if isinstance(node, dict) and node.get("Ref") in tpl.get("Parameters", {}):
        name, param = node["Ref"], tpl["Parameters"][node["Ref"]]
        if "AllowedValues" in param:
            return list(param["AllowedValues"])
        if bound == "AllowedValues" or "MinValue" not in param or "MaxValue" not in param:
            # A value from a set (log retention days) needs the set; a range needs both ends.
            problems.append(f"{where}: parameter {name} has no {bound}, and AWS limits this value")
        return [param[k] for k in ("MinValue", "MaxValue", "Default") if k in param]
    return [] if isinstance(node, dict | list) else [node]


def extreme(node: Any, default: float, tpl: dict[str, Any], pick: Callable[..., float] = max) -> float:
    """The largest (or smallest) value a property can take, for limits between two properties (its own range is
    checked, and its unbounded parameter reported, where the property is)."""
    return float(pick([float(v) for v in values_of(node, tpl, "", [])] or [default]))


def in_range(
    props: dict[str, Any], key: str, low: float, high: float, url: str, tpl: dict[str, Any], where: str
) -> Problems:
    """props[key] (if set) lies in [low, high] for every value it can take."""
    problems: Problems = []
    if key not in props:
        return problems
    for value in values_of(props[key], tpl, f"{where}.{key}", problems):
        if not low <= float(value) <= high:
            problems.append(f"{where}.{key} {value} is outside {low:g}-{high:g} ({url})")
    return problems


def one_of(
    props: dict[str, Any], key: str, allowed: set[Any], url: str, tpl: dict[str, Any], where: str
) -> Problems:
    problems: Problems = []
    if key in props:
        for value in values_of(props[key], tpl, f"{where}.{key}", problems, "AllowedValues"):
            if value not in allowed and str(value) not in {str(a) for a in allowed}:
                problems.append(f"{where}.{key} {value!r} is not one of {sorted(allowed, key=str)} ({url})")
    return problems


def rendered(node: Any, tpl: dict[str, Any]) -> str | None:
    """The longest string a name can become (None: not known before deploy)."""
    resources, params = tpl["Resources"], tpl.get("Parameters", {})

    def ref(name: str) -> str | None:
        base = name.split(".", 1)[0]
        if name in LONGEST:
            return LONGEST[name]
        if base in resources:
            return "r" * GENERATED_NAME_LENGTH.get(resources[base]["Type"], 64)
        if name in params:
            choices = [
                str(v) for v in [*params[name].get("AllowedValues", []), params[name].get("Default", "")]
            ]
            return "p" * params[name].get("MaxLength", max(len(c) for c in choices))
        return None

    if isinstance(node, str):
        return node
    if node == STACK_UUID:
        return "u" * 36
    if isinstance(node, dict) and "Ref" in node:
        return ref(node["Ref"])
    if isinstance(node, dict) and "Fn::Sub" in node:
        text, local = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
        parts = {
            v: rendered(local[v], tpl) if v in local else ref(v) for v in re.findall(r"\$\{([^}!]+)\}", text)
        }
        if None in parts.values():
            return None
        return re.sub(r"\$\{([^}!]+)\}", lambda m: str(parts[m.group(1)]), text)
    if isinstance(node, dict) and "Fn::Join" in node:
        sep, items = node["Fn::Join"]
        pieces = [rendered(i, tpl) for i in items]
        return None if None in pieces else sep.join(str(p) for p in pieces)
    return None


def _inputs(node: Any) -> set[str]:
    """Everything a name is built from: Refs, GetAtts and Sub variables (with the stack id's UUID as AWS::StackId)."""
    if isinstance(node, list):
        return {i for n in node for i in _inputs(n)}
    if not isinstance(node, dict):
        return set()
    found: set[str] = set()
    for key, value in node.items():
        if key == "Ref":
            found.add(value)
        elif key == "Fn::GetAtt":
            found.add(value[0] if isinstance(value, list) else value.split(".", 1)[0])
        elif key == "Fn::Sub":
            text = value if isinstance(value, str) else value[0]
            found |= {v.split(".", 1)[0] for v in re.findall(r"\$\{([^}!]+)\}", text)}
            found |= _inputs(value[1]) if isinstance(value, list) else set()
        else:
            found |= _inputs(value)
    return found


def name_problems(
    where: str, node: Any, high: int, url: str, tpl: dict[str, Any], pattern: str = ""
) -> Problems:
    """A name fits its limit with the longest stack name, and is unique to the stack: built from the stack's name,
    its id or one of its resources (a fixed name makes the second stack in an account and region fail)."""
    problems: Problems = []
    if not ({"AWS::StackName", "AWS::StackId"} | set(tpl["Resources"])) & _inputs(node):
        problems.append(
            f"{where} {node!r} is the same in every stack (a second stack in the region collides)"
        )
    text = rendered(node, tpl)
    if text is not None and len(text) > high:
        problems.append(
            f"{where} is {len(text)} characters with a 128-character stack name, over {high} ({url})"
        )
    if text is not None and pattern and not re.fullmatch(pattern, text):
        problems.append(f"{where} {text!r} does not match {pattern} ({url})")
    return problems


# ---------------------------------------------------------------- the limits, by resource type
LAMBDA_CREATE = "https://docs.aws.amazon.com/lambda/latest/api/API_CreateFunction.html"
ESM_API = "https://docs.aws.amazon.com/lambda/latest/api/API_CreateEventSourceMapping.html"
# "You can reserve up to the Unreserved account concurrency value ... minus 100": of the default quota of 1,000
# concurrent executions (LAMBDA_QUOTAS), at most 900 may be reserved, by all functions together and only when asked
# (concurrency.py: none by default). An account with a raised quota may reserve more by editing the maxima.
SQS_API = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SetQueueAttributes.html"
SQS_QUOTAS = "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/quotas-queues.html"
SQS_DLQ = (
    "https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html"
)
LAMBDA_SQS = "https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html"
HTTP_API_QUOTAS = "https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html"
HTTP_API_LOGGING = "https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-logging.html"
SCHEDULER_RETRY = "https://docs.aws.amazon.com/scheduler/latest/APIReference/API_RetryPolicy.html"
SFN_CREATE = "https://docs.aws.amazon.com/step-functions/latest/apireference/API_CreateStateMachine.html"
SFN_LOGGING = "https://docs.aws.amazon.com/step-functions/latest/apireference/API_LoggingConfiguration.html"
SFN_QUOTAS = "https://docs.aws.amazon.com/step-functions/latest/dg/service-quotas.html"
SFN_WAIT = "https://docs.aws.amazon.com/step-functions/latest/dg/state-wait.html"
LOGS_RETENTION = (
    "https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html"
)
LOGS_GROUP = "https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_CreateLogGroup.html"
EVENTS_BUS = "https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_CreateEventBus.html"
EVENTS_RULE = "https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutRule.html"
EVENTS_TARGET = "https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_Target.html"
EVENTS_RETRY = "https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_RetryPolicy.html"
SECRET_PASSWORD = "https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetRandomPassword.html"
SECRET_CREATE = "https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html"
ALARM_API = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutMetricAlarm.html"
DASHBOARD_API = "https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_PutDashboard.html"
DYNAMODB_QUOTAS = "https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html"
S3_LIFECYCLE = "https://docs.aws.amazon.com/AmazonS3/latest/API/API_LifecycleRule.html"
S3_NAMES = "https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html"
SNS_TOPIC = "https://docs.aws.amazon.com/sns/latest/api/API_CreateTopic.html"
LAYER_API = "https://docs.aws.amazon.com/lambda/latest/api/API_PublishLayerVersion.html"
IAM_QUOTAS = "https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html"
RETENTION_DAYS = {1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}  # fmt: skip


def _queue(tpl: dict[str, Any], node: Any) -> tuple[str, dict[str, Any]] | None:
    """The queue a `!GetAtt Queue.Arn` names, with its properties."""
    if isinstance(node, dict) and "Fn::GetAtt" in node:
        name = node["Fn::GetAtt"][0]
        return name, tpl["Resources"][name].get("Properties", {})
    return None


def function_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = {**tpl.get("Globals", {}).get("Function", {}), **res.get("Properties", {})}
    problems = in_range(props, "Timeout", 1, 900, LAMBDA_QUOTAS, tpl, name)
    problems += in_range(props, "MemorySize", 128, 10240, LAMBDA_QUOTAS, tpl, name)
    problems += in_range(props.get("EphemeralStorage", {}), "Size", 512, 10240, LAMBDA_QUOTAS, tpl, name)
    # A conditional list (Globals: ExamplesLayer only when ExampleAgents is "true") counts by its longer branch.
    layers = props.get("Layers", [])
    branches = layers["Fn::If"][1:] if isinstance(layers, dict) and "Fn::If" in layers else [layers]
    most = max((len(b) for b in branches if isinstance(b, list)), default=0)
    if most > 5:
        problems.append(f"{name}: {most} layers, over 5 ({LAMBDA_QUOTAS})")
    if len(str(props.get("Description", ""))) > 256:
        problems.append(f"{name}: Description over 256 characters ({LAMBDA_CREATE})")
    if "FunctionName" in props:
        problems += name_problems(f"{name}.FunctionName", props["FunctionName"], 64, LAMBDA_QUOTAS, tpl)
    reservable = DEFAULT_ACCOUNT_CONCURRENCY - UNRESERVED_MINIMUM
    problems += in_range(props, "ReservedConcurrentExecutions", 0, reservable, LAMBDA_RESERVED, tpl, name)
    timeout = extreme(props.get("Timeout", 3), 3, tpl)
    for event_name, event in (props.get("Events") or {}).items():
        where, kind, ev = f"{name}.Events.{event_name}", event.get("Type"), event.get("Properties", {})
        if kind == "SQS":
            queue = _queue(tpl, ev.get("Queue"))
            fifo = bool(queue and queue[1].get("FifoQueue"))
            problems += in_range(ev, "BatchSize", 1, 10 if fifo else 10000, ESM_API, tpl, where)
            problems += in_range(ev, "MaximumBatchingWindowInSeconds", 0, 300, ESM_API, tpl, where)
            problems += in_range(
                ev.get("ScalingConfig", {}), "MaximumConcurrency", 2, 1000, ESM_API, tpl, where
            )
            if extreme(ev.get("BatchSize", 10), 10, tpl) > 10 and not ev.get(
                "MaximumBatchingWindowInSeconds"
            ):
                problems.append(
                    f"{where}: BatchSize over 10 needs MaximumBatchingWindowInSeconds >= 1 ({ESM_API})"
                )
            # Lambda: the queue's visibility timeout at least 6 x the function's timeout plus the batching window,
            # or a message still being processed becomes visible again and runs twice (the AWS recommendation).
            if queue:
                visibility = extreme(queue[1].get("VisibilityTimeout", 30), 30, tpl, min)
                needed = 6 * timeout + extreme(ev.get("MaximumBatchingWindowInSeconds", 0), 0, tpl)
                if visibility < needed:
                    problems.append(
                        f"{where}: {queue[0]} VisibilityTimeout {visibility:g} < 6 x Timeout {timeout:g} (+ window) = {needed:g} ({LAMBDA_SQS})"
                    )
        elif kind in ("DynamoDB", "Kinesis"):
            problems += in_range(ev, "BatchSize", 1, 10000, ESM_API, tpl, where)
            problems += in_range(ev, "MaximumRetryAttempts", -1, 10000, ESM_API, tpl, where)
            problems += in_range(ev, "MaximumBatchingWindowInSeconds", 0, 300, ESM_API, tpl, where)
            problems += in_range(ev, "ParallelizationFactor", 1, 10, ESM_API, tpl, where)
            problems += in_range(ev, "TumblingWindowInSeconds", 0, 900, ESM_API, tpl, where)
            for age in values_of(ev.get("MaximumRecordAgeInSeconds", -1), tpl, where, problems):
                if not (int(age) == -1 or 60 <= int(age) <= 604800):
                    problems.append(
                        f"{where}.MaximumRecordAgeInSeconds {age} is not -1 or 60-604800 ({ESM_API})"
                    )
            problems += one_of(
                ev, "StartingPosition", {"TRIM_HORIZON", "LATEST", "AT_TIMESTAMP"}, ESM_API, tpl, where
            )
        elif kind == "HttpApi":
            problems += in_range(ev, "TimeoutInMillis", 50, 30000, HTTP_API_QUOTAS, tpl, where)
            # A route's own throttling (SAM puts it in the stage's RouteSettings): within the account's, as the stage's.
            route = ev.get("RouteSettings", {})
            problems += in_range(route, "ThrottlingBurstLimit", 0, 5000, HTTP_API_QUOTAS, tpl, where)
            problems += in_range(route, "ThrottlingRateLimit", 0, 10000, HTTP_API_QUOTAS, tpl, where)
        elif kind == "ScheduleV2":
            # SAM names the schedule after the event ("SweepFunctionDaily") unless OmitName: the same in every stack.
            if ev.get("OmitName") is not True:
                problems += name_problems(
                    f"{where}.Name", ev.get("Name", f"{name}{event_name}"), 64, SCHEDULER_RETRY, tpl
                )
            retry = ev.get("RetryPolicy", {})
            problems += in_range(retry, "MaximumRetryAttempts", 0, 185, SCHEDULER_RETRY, tpl, where)
            problems += in_range(retry, "MaximumEventAgeInSeconds", 60, 86400, SCHEDULER_RETRY, tpl, where)
        else:
            problems.append(f"{where}: no limits known for event type {kind} (add them to {__name__})")
    return problems


def queue_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    problems = in_range(props, "MessageRetentionPeriod", 60, 1209600, SQS_API, tpl, name)
    problems += in_range(props, "VisibilityTimeout", 0, 43200, SQS_API, tpl, name)
    problems += in_range(props, "DelaySeconds", 0, 900, SQS_API, tpl, name)
    problems += in_range(props, "ReceiveMessageWaitTimeSeconds", 0, 20, SQS_API, tpl, name)
    problems += in_range(props, "MaximumMessageSize", 1024, 1048576, SQS_API, tpl, name)
    redrive = props.get("RedrivePolicy", {})
    problems += in_range(redrive, "maxReceiveCount", 1, 1000, SQS_API, tpl, f"{name}.RedrivePolicy")
    if "QueueName" in props:
        pattern = r"[A-Za-z0-9_-]{1,75}\.fifo" if props.get("FifoQueue") else r"[A-Za-z0-9_-]{1,80}"
        problems += name_problems(f"{name}.QueueName", props["QueueName"], 80, SQS_QUOTAS, tpl, pattern)
    dlq = _queue(tpl, redrive.get("deadLetterTargetArn"))
    if dlq:
        # A FIFO queue's dead-letter queue is FIFO, a standard one's standard; and the dead letter must outlive
        # the message it was (a standard queue's dead letter keeps its original enqueue time).
        if bool(dlq[1].get("FifoQueue")) != bool(props.get("FifoQueue")):
            problems.append(
                f"{name}: its dead-letter queue {dlq[0]} is not the same kind (FIFO / standard) ({SQS_DLQ})"
            )
        kept = extreme(dlq[1].get("MessageRetentionPeriod", 345600), 345600, tpl, min)
        if kept < extreme(props.get("MessageRetentionPeriod", 345600), 345600, tpl):
            problems.append(
                f"{name}: its dead-letter queue {dlq[0]} keeps messages for less time than it does ({SQS_DLQ})"
            )
    return problems


def state_machine_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    problems = one_of(props, "Type", {"STANDARD", "EXPRESS"}, SFN_CREATE, tpl, name)
    problems += one_of(
        props.get("Logging", {}),
        "Level",
        {"ALL", "ERROR", "FATAL", "OFF"},
        SFN_LOGGING,
        tpl,
        f"{name}.Logging",
    )
    for key in ("Name", "StateMachineName"):
        if key in props:
            problems += name_problems(f"{name}.{key}", props[key], 80, SFN_CREATE, tpl, r"[A-Za-z0-9_-]+")
    return problems


def log_group_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    problems = one_of(props, "RetentionInDays", RETENTION_DAYS, LOGS_RETENTION, tpl, name)
    if "LogGroupName" in props:
        problems += name_problems(
            f"{name}.LogGroupName", props["LogGroupName"], 512, LOGS_GROUP, tpl, r"[A-Za-z0-9_./#-]+"
        )
    return problems


def http_api_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = {**tpl.get("Globals", {}).get("HttpApi", {}), **res.get("Properties", {})}
    problems: Problems = []
    # Stage throttling cannot exceed the account's: 10,000 requests per second, bursts of 5,000 (per region).
    settings = [("DefaultRouteSettings", props.get("DefaultRouteSettings", {}))]
    settings += [(f"RouteSettings.{route}", s) for route, s in (props.get("RouteSettings") or {}).items()]
    for where, s in settings:
        problems += in_range(s, "ThrottlingBurstLimit", 0, 5000, HTTP_API_QUOTAS, tpl, f"{name}.{where}")
        problems += in_range(s, "ThrottlingRateLimit", 0, 10000, HTTP_API_QUOTAS, tpl, f"{name}.{where}")
    access = props.get("AccessLogSettings")
    if access is not None and not (access.get("DestinationArn") and access.get("Format")):
        problems.append(f"{name}.AccessLogSettings needs both DestinationArn and Format ({HTTP_API_LOGGING})")
    return problems


def bus_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    return (
        name_problems(f"{name}.Name", props["Name"], 256, EVENTS_BUS, tpl, r"[A-Za-z0-9/._-]+")
        if "Name" in props
        else []
    )


def rule_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    problems = name_problems(f"{name}.Name", props["Name"], 64, EVENTS_RULE, tpl) if "Name" in props else []
    targets = props.get("Targets", [])
    if len(targets) > 5:
        problems.append(f"{name}: {len(targets)} targets, over 5 ({EVENTS_RULE})")
    for target in targets:
        where = f"{name}.Targets.{target.get('Id')}"
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", str(target.get("Id"))):
            problems.append(f"{where}: Id is not 1-64 of [A-Za-z0-9._-] ({EVENTS_TARGET})")
        retry = target.get("RetryPolicy", {})
        problems += in_range(retry, "MaximumRetryAttempts", 0, 185, EVENTS_RETRY, tpl, where)
        problems += in_range(retry, "MaximumEventAgeInSeconds", 60, 86400, EVENTS_RETRY, tpl, where)
        queue = _queue(tpl, target.get("Arn"))
        if queue and queue[1].get("FifoQueue") and not target.get("SqsParameters", {}).get("MessageGroupId"):
            problems.append(
                f"{where}: a FIFO queue target needs SqsParameters.MessageGroupId ({EVENTS_TARGET})"
            )
    return problems


def secret_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    problems = in_range(
        props.get("GenerateSecretString", {}), "PasswordLength", 1, 4096, SECRET_PASSWORD, tpl, name
    )
    if "Name" in props:
        problems += name_problems(f"{name}.Name", props["Name"], 512, SECRET_CREATE, tpl)
    return problems


KMS_CREATE_KEY = "https://docs.aws.amazon.com/kms/latest/APIReference/API_CreateKey.html"


def kms_key_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    """CreateKey: a Description of at most 8,192 characters, a key policy of at most 32 KB."""
    props = res.get("Properties", {})
    problems: Problems = []
    if len(str(props.get("Description", ""))) > 8192:
        problems.append(f"{name}.Description: over 8,192 characters ({KMS_CREATE_KEY})")
    if len(json.dumps(props.get("KeyPolicy", {}))) > 32 * 1024:
        problems.append(f"{name}.KeyPolicy: over 32 KB ({KMS_CREATE_KEY})")
    return problems


def alarm_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    problems: Problems = []
    # Period: 10, 20 or 30 (high-resolution metrics) or any multiple of 60.
    for period in values_of(props.get("Period", 60), tpl, f"{name}.Period", problems):
        if int(period) not in (10, 20, 30) and (int(period) < 60 or int(period) % 60):
            problems.append(f"{name}.Period {period} is not 10, 20, 30 or a multiple of 60 ({ALARM_API})")
    problems += in_range(props, "EvaluationPeriods", 1, float("inf"), ALARM_API, tpl, name)
    # Period x EvaluationPeriods: at most 7 days, and 1 day for periods under an hour.
    period = extreme(props.get("Period", 60), 60, tpl)
    span = period * extreme(props.get("EvaluationPeriods", 1), 1, tpl)
    if span > (86400 if period < 3600 else 604800):
        problems.append(
            f"{name}: Period x EvaluationPeriods {span:g} s is over the evaluation range ({ALARM_API})"
        )
    if extreme(props.get("DatapointsToAlarm", 1), 1, tpl) > extreme(
        props.get("EvaluationPeriods", 1), 1, tpl, min
    ):
        problems.append(f"{name}: DatapointsToAlarm exceeds EvaluationPeriods ({ALARM_API})")
    if len(props.get("Dimensions", [])) > 30:
        problems.append(f"{name}: more than 30 dimensions ({ALARM_API})")
    if "AlarmName" in props:
        problems += name_problems(f"{name}.AlarmName", props["AlarmName"], 255, ALARM_API, tpl)
    return problems


def dashboard_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    if "DashboardName" not in props:
        return []
    return name_problems(
        f"{name}.DashboardName", props["DashboardName"], 255, DASHBOARD_API, tpl, r"[A-Za-z0-9_-]+"
    )


def table_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    problems = (
        [f"{name}: more than 20 global secondary indexes ({DYNAMODB_QUOTAS})"]
        if len(props.get("GlobalSecondaryIndexes", [])) > 20
        else []
    )
    if "TableName" in props:
        problems += name_problems(
            f"{name}.TableName", props["TableName"], 255, DYNAMODB_QUOTAS, tpl, r"[A-Za-z0-9_.-]{3,}"
        )
    return problems


def bucket_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    props = res.get("Properties", {})
    rules = props.get("LifecycleConfiguration", {}).get("Rules", [])
    problems = (
        [f"{name}: {len(rules)} lifecycle rules, over 1000 ({S3_LIFECYCLE})"] if len(rules) > 1000 else []
    )
    for rule in rules:
        where = f"{name}.LifecycleConfiguration.{rule.get('Id')}"
        for section, key in (
            ("NoncurrentVersionExpiration", "NoncurrentDays"),
            ("AbortIncompleteMultipartUpload", "DaysAfterInitiation"),
        ):
            problems += in_range(rule.get(section, {}), key, 1, float("inf"), S3_LIFECYCLE, tpl, where)
        problems += in_range(rule, "ExpirationInDays", 1, float("inf"), S3_LIFECYCLE, tpl, where)
    if "BucketName" in props:
        problems += name_problems(
            f"{name}.BucketName", props["BucketName"], 63, S3_NAMES, tpl, r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]"
        )
    return problems


def role_problems(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    """IAM: a role name up to 64 characters, at most 10 managed policies (the default quota; 20 on request), inline
    policies up to 10,240 characters together. AgentPolicyArns adds the user's own ARNs to the managed ones: their
    number is the user's to keep within the quota (docs/deploy.md#deploy-your-own-agents: at most 8)."""
    props, problems = res.get("Properties", {}), []
    if "RoleName" in props:
        problems += name_problems(f"{name}.RoleName", props["RoleName"], 64, IAM_QUOTAS, tpl)
    arns = props.get("ManagedPolicyArns", [])
    fixed = arns["Fn::If"][2] if isinstance(arns, dict) and "Fn::If" in arns else arns
    if isinstance(fixed, list) and len(fixed) > 10:
        problems.append(f"{name}: {len(fixed)} managed policies, over 10 ({IAM_QUOTAS})")
    inline = len(json.dumps([p.get("PolicyDocument") for p in props.get("Policies", [])], separators=(",", ":")))
    if inline > 10240:
        problems.append(f"{name}: inline policies of {inline} characters, over 10240 ({IAM_QUOTAS})")
    return problems


def _named(key: str, high: int, url: str) -> Callable[[str, dict[str, Any], dict[str, Any]], Problems]:
    def check(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
        props = res.get("Properties", {})
        return name_problems(f"{name}.{key}", props[key], high, url, tpl) if key in props else []

    return check


def _nothing(name: str, res: dict[str, Any], tpl: dict[str, Any]) -> Problems:
    return []


CHECKS: dict[str, Callable[[str, dict[str, Any], dict[str, Any]], Problems]] = {
    "AWS::Serverless::Function": function_problems,
    "AWS::SQS::Queue": queue_problems,
    "AWS::Serverless::StateMachine": state_machine_problems,
    "AWS::StepFunctions::StateMachine": state_machine_problems,
    "AWS::Logs::LogGroup": log_group_problems,
    "AWS::Serverless::HttpApi": http_api_problems,
    "AWS::Events::EventBus": bus_problems,
    "AWS::Events::Rule": rule_problems,
    "AWS::SecretsManager::Secret": secret_problems,
    "AWS::KMS::Key": kms_key_problems,
    "AWS::CloudWatch::Alarm": alarm_problems,
    "AWS::CloudWatch::Dashboard": dashboard_problems,
    "AWS::DynamoDB::Table": table_problems,
    "AWS::S3::Bucket": bucket_problems,
    "AWS::SNS::Topic": _named("TopicName", 256, SNS_TOPIC),
    "AWS::Serverless::LayerVersion": _named("LayerName", 140, LAYER_API),
    "AWS::IAM::Role": role_problems,
    # Policies set no value AWS bounds here (their statements are checked by test_least_privilege.py).
    "AWS::SQS::QueuePolicy": _nothing,
    "AWS::S3::BucketPolicy": _nothing,
    # One statement of the function's resource-based policy, whose 20 KB (LAMBDA_QUOTAS) holds dozens of them.
    "AWS::Lambda::Permission": _nothing,
}


def limit_problems(tpl: dict[str, Any]) -> Problems:
    """Every resource checked by its type; a type without known limits is reported, not skipped."""
    problems: Problems = []
    for name, res in tpl["Resources"].items():
        check = CHECKS.get(res.get("Type", ""))
        if check is None:
            problems.append(f"{name}: no limits known for type {res.get('Type')} (add them to {__name__})")
        else:
            problems += check(name, res, tpl)
    return problems + parameter_problems(tpl)


def parameter_problems(tpl: dict[str, Any]) -> Problems:
    """The parameters' ranges against the limits the values they feed meet elsewhere."""
    params, resources = tpl["Parameters"], tpl["Resources"]
    problems = [
        f"{p} has no MaxValue, and AWS limits what it feeds"
        for p in ("A2aWaitMs", "InteractionTimeoutSeconds", "UncertaintyTimeoutSeconds", "DelegationPollSeconds")
        if "MaxValue" not in params[p]
    ]
    # A2aWaitMs: the blocking wait ends before the HTTP API's integration timeout (30 s at most) and the api
    # function's Timeout, so the caller gets the WORKING answer rather than a 503 (template, A2aWaitMs).
    wait = params["A2aWaitMs"].get("MaxValue", float("inf"))
    api = resources["ApiFunction"]["Properties"]
    for event_name, event in api.get("Events", {}).items():
        route_timeout = event.get("Properties", {}).get("TimeoutInMillis", 30000)
        if (
            event.get("Type") == "HttpApi"
            and event["Properties"].get("Method") == "POST"
            and wait >= route_timeout
        ):
            problems.append(
                f"A2aWaitMs MaxValue {wait} does not end before {event_name}'s TimeoutInMillis {route_timeout} ({HTTP_API_QUOTAS})"
            )
    if wait >= 1000 * extreme(api.get("Timeout", tpl["Globals"]["Function"].get("Timeout", 3)), 3, tpl, min):
        problems.append(
            f"A2aWaitMs MaxValue {wait} does not end before ApiFunction's Timeout ({LAMBDA_QUOTAS})"
        )
    # A first deploy works in any account: nothing reserved by default, and the api function's peak at the defaults
    # (stage throttling x blocking wait) within a default account (concurrency.py).
    problems += reservation_problems(tpl) + api_load_problems(tpl)
    # DelegationPollSeconds is WaitForDelegate's TimeoutSecondsPath: a Task state's timeout is a positive
    # whole number of seconds, at most an execution's year (SFN_QUOTAS).
    poll = params["DelegationPollSeconds"]
    if poll.get("MinValue", 0) < 1 or poll.get("MaxValue", float("inf")) > 365 * 86400:
        problems.append(f"DelegationPollSeconds must stay within 1 s and a year ({SFN_QUOTAS})")
    # PushSubjectShare (fair delivery workers, docs/architecture.md#fair-push-delivery): the percent of the
    # push function's delivery time one caller's attempts may hold in any minute; the 1/10 bound by default,
    # and a percent (1-100).
    share = params["PushSubjectShare"]
    if share["Default"] > 10:
        problems.append(f"PushSubjectShare {share['Default']} % is over the 1/10 bound by default")
    if share.get("MinValue", 0) < 1 or share.get("MaxValue", float("inf")) > 100:
        problems.append("PushSubjectShare must stay within 1 and 100 %")
    # InteractionTimeoutSeconds, UncertaintyTimeoutSeconds: a turn queued behind a waiting one (for a
    # person, or for an operator) stays in the context queue for the whole wait, looked at every
    # NYLORUN_DISPATCH_RETRY_SECONDS, so the receives and the retention must outlast it; and the waiting turn is one
    # Step Functions execution, at most a year (STANDARD), whose Wait state takes at most 99,999,999 s (SFN_WAIT).
    queue = resources["ContextQueue"]["Properties"]
    interval = int(
        resources["DispatchFunction"]["Properties"]["Environment"]["Variables"][
            "NYLORUN_DISPATCH_RETRY_SECONDS"
        ]
    )
    receives = extreme(queue["RedrivePolicy"]["maxReceiveCount"], 1, tpl, min)
    for wait_parameter in ("InteractionTimeoutSeconds", "UncertaintyTimeoutSeconds"):
        longest = params[wait_parameter].get("MaxValue", float("inf"))
        if longest >= receives * interval:
            problems.append(
                f"{wait_parameter} MaxValue {longest} >= ContextQueue's {receives:g} receives x {interval} s ({SQS_API})"
            )
        if longest >= extreme(queue.get("MessageRetentionPeriod", 345600), 345600, tpl, min):
            problems.append(
                f"{wait_parameter} MaxValue {longest} >= ContextQueue's MessageRetentionPeriod ({SQS_API})"
            )
        if longest > 365 * 86400:
            problems.append(
                f"{wait_parameter} MaxValue {longest} is over a Step Functions execution's year ({SFN_QUOTAS})"
            )
        if longest > 99_999_999:
            problems.append(f"{wait_parameter} MaxValue {longest} is over a Wait state's Seconds ({SFN_WAIT})")
    return problems


# ================================================================ the real template is within every limit
def test_every_value_the_template_sets_is_within_aws_limits() -> None:
    # Given the template, with the longest stack name AWS allows
    # When every resource is checked by its type, and the parameters against what they feed
    problems = limit_problems(real_template())
    # Then nothing is outside a limit, and no name is fixed across stacks
    assert problems == []


def test_a_first_deploy_reserves_no_concurrency_and_may_reserve_within_a_default_account() -> None:
    # Given the template's reservations as a first deploy makes them (the parameters' defaults) and at their most
    tpl = real_template()
    # When the Lambda arithmetic is checked (reservations + 100 unreserved <= the account's quota)
    problems = reservation_problems(tpl)
    # Then no function reserves anything by default, so an account with any quota (10, say) can create them all
    assert problems == []
    assert tpl["Parameters"]["TurnReservedConcurrency"]["Default"] == 0


def test_the_api_function_s_peak_at_the_defaults_fits_a_default_account() -> None:
    # Given the stage's throttling, the unauthenticated routes' own limits and the blocking wait, at their defaults
    tpl = real_template()
    # When the api function's most instances at once are added up, route by route (burst + rate x time held)
    # Then they fit its share of a default account's 1,000, with room left for turns, pushes and dispatch
    assert api_load_problems(tpl) == []
    assert api_peak(tpl) + UNRESERVED_MINIMUM <= DEFAULT_ACCOUNT_CONCURRENCY


def test_the_turn_state_machine_name_fits_any_stack_name() -> None:
    # Given the state machine's name as AWS would see it under a 128-character stack name
    tpl = real_template()
    name = rendered(tpl["Resources"]["TurnStateMachine"]["Properties"]["Name"], tpl)
    # Then it is the stack id's UUID after a fixed prefix: 49 characters, within 80
    assert name == "nylorun-turn-" + "u" * 36


# ================================================================ and each limit fails on a broken copy
R = "Resources."
# One value AWS refuses (or a name that collides across stacks) per case: where it goes, what the check must say.
BROKEN_VALUES = [
    # SQS
    pytest.param(R + "ContextQueue.Properties.RedrivePolicy.maxReceiveCount", 20000, "ContextQueue.RedrivePolicy.maxReceiveCount 20000 is outside 1-1000", id="maxReceiveCount 20000"),
    pytest.param(R + "PushQueue.Properties.RedrivePolicy.maxReceiveCount", 0, "maxReceiveCount 0 is outside 1-1000", id="maxReceiveCount 0"),
    pytest.param(R + "PushDLQ.Properties.MessageRetentionPeriod", 1296000, "PushDLQ.MessageRetentionPeriod 1296000 is outside 60-1.2096e+06", id="retention 15 days"),
    pytest.param(R + "PublishDLQ.Properties.MessageRetentionPeriod", 59, "MessageRetentionPeriod 59 is outside", id="retention 59 s"),
    pytest.param(R + "PushQueue.Properties.VisibilityTimeout", 46800, "PushQueue.VisibilityTimeout 46800 is outside 0-43200", id="visibility 13 h"),
    pytest.param(R + "PushQueue.Properties.QueueName", {"Fn::Sub": "${AWS::StackName}-push"}, "does not match", id="FIFO name without .fifo"),
    pytest.param(R + "PushQueue.Properties.QueueName", {"Fn::Sub": "${AWS::StackName}-push.fifo"}, "PushQueue.QueueName is 138 characters", id="queue name over 80"),
    pytest.param(R + "PushQueue.Properties.QueueName", "push.fifo", "is the same in every stack", id="fixed queue name"),
    pytest.param(R + "PushDLQ.Properties.FifoQueue", False, "PushQueue: its dead-letter queue PushDLQ is not the same kind", id="standard DLQ of a FIFO queue"),
    pytest.param(R + "ContextDLQ.Properties.MessageRetentionPeriod", 86400, "ContextQueue: its dead-letter queue ContextDLQ keeps messages for less time", id="DLQ keeps less than its queue"),
    # Lambda
    pytest.param(R + "TurnFunction.Properties.Timeout", 901, "TurnFunction.Timeout 901 is outside 1-900", id="timeout 901"),
    pytest.param("Globals.Function.MemorySize", 64, "ApiFunction.MemorySize 64 is outside 128-10240", id="memory 64"),
    pytest.param("Globals.Function.Layers", [{"Ref": f"Layer{i}"} for i in range(6)], "ApiFunction: 6 layers, over 5", id="six layers"),
    pytest.param("Globals.Function.Layers", {"Fn::If": ["ServeExamples", [{"Ref": f"Layer{i}"} for i in range(6)], []]}, "ApiFunction: 6 layers, over 5", id="six layers when examples are on"),
    pytest.param(R + "TurnFunctionRole.Properties.ManagedPolicyArns", [f"arn:aws:iam::aws:policy/P{i}" for i in range(11)], "TurnFunctionRole: 11 managed policies, over 10", id="eleven managed policies"),
    pytest.param(R + "TurnFunctionRole.Properties.Policies", [{"PolicyName": "big", "PolicyDocument": {"Statement": [{"Sid": "x" * 10240}]}}], "TurnFunctionRole: inline policies of", id="inline policies over 10240 characters"),
    pytest.param(R + "TurnFunctionRole.Properties.RoleName", "turn-role", "is the same in every stack", id="fixed role name"),
    pytest.param(R + "FilesBucket.Properties.LifecycleConfiguration.Rules.0.NoncurrentVersionExpiration.NoncurrentDays", 0, "NoncurrentDays 0 is outside", id="noncurrent days 0"),
    pytest.param(R + "TurnFunction.Properties.MemorySize", 20480, "TurnFunction.MemorySize 20480 is outside", id="memory 20480"),
    pytest.param(R + "TurnFunction.Properties.ReservedConcurrentExecutions", 950, "TurnFunction.ReservedConcurrentExecutions 950 is outside 0-900", id="reservation leaving under 100 unreserved"),
    pytest.param(R + "PushFunction.Properties.Events.Queued.Properties.ScalingConfig.MaximumConcurrency", 1, "Queued.MaximumConcurrency 1 is outside 2-1000", id="maximum concurrency 1"),
    pytest.param(R + "PushFunction.Properties.Timeout", 61, "PushQueue VisibilityTimeout 360 < 6 x Timeout 61", id="visibility under 6 x timeout"),
    pytest.param(R + "DispatchFunction.Properties.Events.Queued.Properties.BatchSize", 11, "Queued.BatchSize 11 is outside 1-10", id="FIFO batch 11"),
    pytest.param(R + "PushFunction.Properties.Events.Queued.Properties.MaximumBatchingWindowInSeconds", 301, "MaximumBatchingWindowInSeconds 301 is outside 0-300", id="batching window 301"),
    pytest.param(R + "PublishFunction.Properties.Events.Changes.Properties.MaximumRetryAttempts", 10001, "MaximumRetryAttempts 10001 is outside -1-10000", id="stream retries 10001"),
    pytest.param(R + "PublishFunction.Properties.Events.Changes.Properties.BatchSize", 10001, "Changes.BatchSize 10001 is outside 1-10000", id="stream batch 10001"),
    pytest.param(R + "PublishFunction.Properties.Events.Changes.Properties.MaximumRecordAgeInSeconds", 30, "MaximumRecordAgeInSeconds 30 is not -1 or 60-604800", id="stream record age 30"),
    pytest.param(R + "ApiFunction.Properties.Events.Card.Properties.RouteSettings.ThrottlingBurstLimit", 6000, "Card.ThrottlingBurstLimit 6000 is outside 0-5000", id="route burst 6000"),
    pytest.param(R + "TurnFunction.Properties.ReservedConcurrentExecutions", 100, "TurnFunction reserves 100 by default", id="a reservation by default"),
    pytest.param(R + "PushFunction.Properties.ReservedConcurrentExecutions", {"Ref": "TurnReservedConcurrency"}, "reservations may reach 1800", id="reservations over a default account"),
    pytest.param("Parameters.A2aWaitMs.Default", 25000, "the api function may run 1582 instances at once", id="blocking wait of 25 s at the default rate"),
    pytest.param(R + "ApiFunction.Properties.Events.Card.Properties.RouteSettings", {}, "Card 50 + 50 x 1 s", id="card route on the stage's limits"),
    pytest.param(R + "ApiFunction.Properties.Events.Rpc.Properties.TimeoutInMillis", 31000, "Rpc.TimeoutInMillis 31000 is outside 50-30000", id="integration timeout 31000"),
    pytest.param(R + "SweepFunction.Properties.Events.Daily.Properties.OmitName", False, "Daily.Name 'SweepFunctionDaily' is the same in every stack", id="schedule without OmitName"),
    pytest.param(R + "SweepFunction.Properties.Events.Daily.Type", "Schedule", "no limits known for event type Schedule", id="unknown event type"),
    # Step Functions
    pytest.param(R + "TurnStateMachine.Properties.Name", {"Fn::Sub": "${AWS::StackName}-turn"}, "TurnStateMachine.Name is 133 characters", id="state machine named after the stack"),
    pytest.param(R + "TurnStateMachine.Properties.Name", "turn", "is the same in every stack", id="fixed state machine name"),
    pytest.param(R + "TurnStateMachine.Properties.Logging.Level", "INFO", "Logging.Level 'INFO' is not one of", id="log level INFO"),
    # Logs
    pytest.param(R + "TurnStateMachineLogs.Properties.RetentionInDays", 10, "RetentionInDays 10 is not one of", id="retention 10 days"),
    pytest.param(R + "TurnStateMachineLogs.Properties.LogGroupName", {"Fn::Sub": "/aws/vendedlogs/states/" + "x" * 380 + "${AWS::StackName}"}, "LogGroupName is 531 characters", id="log group name over 512"),
    # EventBridge
    pytest.param(R + "RuntimeBus.Properties.Name", "nylorun-events", "RuntimeBus.Name 'nylorun-events' is the same in every stack", id="bus name fixed"),
    pytest.param(R + "RuntimeBus.Properties.Name", {"Fn::Sub": "${AWS::StackName}-" + "e" * 128}, "RuntimeBus.Name is 257 characters", id="bus name over 256"),
    # The template has no rule (the publish function queues pushed events itself); a deployer who adds one, say to
    # route usage events to the push queue or another FIFO queue, gets the same checks.
    pytest.param(R + "UsageRule", {"Type": "AWS::Events::Rule", "Properties": {"EventBusName": {"Ref": "RuntimeBus"}, "Targets": [{"Id": "usage", "Arn": {"Fn::GetAtt": ["PushQueue", "Arn"]}}]}}, "UsageRule.Targets.usage: a FIFO queue target needs SqsParameters.MessageGroupId", id="rule to a FIFO queue without a group"),
    pytest.param(R + "UsageRule", {"Type": "AWS::Events::Rule", "Properties": {"Targets": [{"Id": "usage", "Arn": "arn:aws:sqs:us-east-1:1:q", "RetryPolicy": {"MaximumEventAgeInSeconds": 30}}]}}, "MaximumEventAgeInSeconds 30 is outside 60-86400", id="rule target event age 30"),
    pytest.param(R + "UsageRule", {"Type": "AWS::Events::Rule", "Properties": {"Targets": [{"Id": f"t{n}", "Arn": "arn:aws:sqs:us-east-1:1:q"} for n in range(6)]}}, "6 targets, over 5", id="rule with 6 targets"),
    # API Gateway (the operations change's settings, checked by type)
    pytest.param(R + "HttpApi.Properties.DefaultRouteSettings", {"ThrottlingBurstLimit": 6000, "ThrottlingRateLimit": 100}, "ThrottlingBurstLimit 6000 is outside 0-5000", id="throttling burst 6000"),
    pytest.param(R + "HttpApi.Properties.AccessLogSettings", {"DestinationArn": {"Fn::GetAtt": ["TurnStateMachineLogs", "Arn"]}}, "needs both DestinationArn and Format", id="access log without a format"),
    # Secrets Manager, CloudWatch
    pytest.param(R + "PushSecret.Properties.GenerateSecretString.PasswordLength", 5000, "PasswordLength 5000 is outside 1-4096", id="password 5000"),
    pytest.param(R + "PushDLQDepthAlarm.Properties.Period", 90, "Period 90 is not 10, 20, 30 or a multiple of 60", id="alarm period 90"),
    pytest.param(R + "PushDLQDepthAlarm.Properties.EvaluationPeriods", 289, "Period x EvaluationPeriods 86700 s is over the evaluation range", id="alarm range over a day"),
    pytest.param(R + "PushDLQDepthAlarm.Properties.AlarmName", "push-dlq", "is the same in every stack", id="alarm name fixed"),
    pytest.param(R + "Dashboard", {"Type": "AWS::CloudWatch::Dashboard", "Properties": {"DashboardName": {"Fn::Sub": "${AWS::StackName} ops"}}}, "does not match", id="dashboard name with a space"),
    pytest.param(R + "Topic", {"Type": "AWS::SNS::Subscription", "Properties": {}}, "no limits known for type AWS::SNS::Subscription", id="a type without limits"),
    # Parameters against what they feed
    pytest.param("Parameters.A2aWaitMs.MaxValue", 30000, "A2aWaitMs MaxValue 30000 does not end before Rpc's TimeoutInMillis", id="A2aWaitMs up to 30 s"),
    pytest.param("Parameters.InteractionTimeoutSeconds.MaxValue", 950400, "InteractionTimeoutSeconds MaxValue 950400 >= ContextQueue's 1000 receives x 900 s", id="interaction wait of 11 days"),
    pytest.param("Parameters.DelegationPollSeconds.MinValue", 0, "DelegationPollSeconds must stay within 1 s and a year", id="delegation poll of 0 s"),
    pytest.param("Parameters.PushSubjectShare.Default", 20, "PushSubjectShare 20 % is over the 1/10 bound by default", id="a caller's push share over a tenth"),
    pytest.param("Parameters.PushSubjectShare.MaxValue", 1000, "PushSubjectShare must stay within 1 and 100 %", id="push share over 100 %"),
    pytest.param("Parameters.UncertaintyTimeoutSeconds.MaxValue", 1209600, "UncertaintyTimeoutSeconds MaxValue 1209600 >= ContextQueue's MessageRetentionPeriod", id="uncertainty wait of 14 days"),
]  # fmt: skip
# A value from a parameter: the parameter as another change might add it, and where it goes.
BROKEN_PARAMETERS = [
    pytest.param({"Type": "Number", "Default": 30, "AllowedValues": [7, 30, 45]}, R + "TurnStateMachineLogs.Properties.RetentionInDays", "RetentionInDays 45 is not one of", id="retention parameter with a bad value"),
    pytest.param({"Type": "Number", "Default": 30, "MinValue": 1, "MaxValue": 3653}, R + "TurnStateMachineLogs.Properties.RetentionInDays", "parameter Extra has no AllowedValues", id="retention parameter as a range"),
    pytest.param({"Type": "Number", "Default": 100, "MinValue": 1}, R + "HttpApi.Properties.DefaultRouteSettings.ThrottlingRateLimit", "parameter Extra has no MinValue/MaxValue", id="throttling rate parameter without a bound"),
    pytest.param({"Type": "Number", "Default": 100, "MinValue": 0}, R + "TurnFunction.Properties.ReservedConcurrentExecutions", "parameter Extra has no MinValue/MaxValue", id="reservation parameter without a bound"),
]  # fmt: skip


def _set(tpl: dict[str, Any], path: str, value: Any) -> None:
    """Set the value at a dotted path (list items by index), creating mappings as needed."""
    *parents, last = path.split(".")
    node: Any = tpl
    for key in parents:
        node = node.setdefault(key, {}) if isinstance(node, dict) else node[int(key)]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


@pytest.mark.parametrize(("path", "value", "expected"), BROKEN_VALUES)
def test_the_limits_check_fails_on_a_broken_copy(path: str, value: Any, expected: str) -> None:
    # Given a copy of the template with one value AWS refuses (or a name that collides across stacks)
    tpl = real_template()
    _set(tpl, path, value)
    # When the same check the real template passes runs on it
    problems = limit_problems(tpl)
    # Then it names that value
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(("parameter", "path", "expected"), BROKEN_PARAMETERS)
def test_the_limits_check_fails_on_a_parameter_outside_a_limit(
    parameter: dict[str, Any], path: str, expected: str
) -> None:
    # Given a copy of the template where a limited value comes from a parameter that allows too much
    tpl = real_template()
    tpl["Parameters"]["Extra"] = parameter
    _set(tpl, path, {"Ref": "Extra"})
    # When checked
    problems = limit_problems(tpl)
    # Then the parameter's range or values are reported
    assert any(expected in p for p in problems), problems


def test_the_limits_check_fails_when_the_interaction_wait_has_no_bound() -> None:
    # Given a copy of the template whose InteractionTimeoutSeconds has no MaxValue
    tpl = real_template()
    del tpl["Parameters"]["InteractionTimeoutSeconds"]["MaxValue"]
    # When checked
    # Then the missing bound is reported (the queue and Step Functions limit what it feeds)
    assert "InteractionTimeoutSeconds has no MaxValue, and AWS limits what it feeds" in limit_problems(tpl)
