"""Create the stack's resources on moto from template.yaml (not from a second description of them).

moto cannot deploy the SAM template itself, so this reads each resource's
properties from the template and makes the same calls CloudFormation would, with local names.
"""

from __future__ import annotations

import importlib.util
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from nylorun_local import template
from nylorun_local.account import ACCOUNT, REGION
from nylorun_local.aws import LocalAws
from nylorun_local.lambda_shim import add_environment, register_handler

# Template resources the local Runtime creates, and the Lambda functions it runs in-process.
FUNCTIONS = ("TurnFunction", "PublishFunction", "DispatchFunction", "PushFunction", "SweepFunction")


@dataclass(frozen=True)
class LocalStack:
    prefix: str
    table_name: str
    table_stream_arn: str
    state_machine_arn: str
    event_bus_name: str
    context_queue_url: str
    context_dlq_url: str
    push_queue_url: str
    push_dlq_url: str
    publish_dlq_url: str
    files_bucket: str
    kms_key_arn: str
    function_names: dict[str, str]


def _function_name(prefix: str, logical_id: str) -> str:
    return f"{prefix}-{logical_id}"


def _function_arn(name: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"


def create_table(client: Any, name: str) -> None:
    props = template.properties("TasksTable")
    client.create_table(
        TableName=name,
        BillingMode=props["BillingMode"],
        AttributeDefinitions=props["AttributeDefinitions"],
        KeySchema=props["KeySchema"],
        GlobalSecondaryIndexes=props["GlobalSecondaryIndexes"],
        StreamSpecification={"StreamEnabled": True, **props["StreamSpecification"]},
    )
    ttl = props["TimeToLiveSpecification"]
    client.update_time_to_live(TableName=name, TimeToLiveSpecification={**ttl, "Enabled": True})


def create_fifo_queue(client: Any, logical_id: str, dlq_logical_id: str, prefix: str) -> str:
    """A FIFO queue and its dead-letter queue with the template's attributes."""
    dlq_props = template.properties(dlq_logical_id)
    dlq_url = client.create_queue(
        QueueName=f"{prefix}-{dlq_logical_id}.fifo",
        Attributes={"FifoQueue": "true", "MessageRetentionPeriod": str(dlq_props["MessageRetentionPeriod"])},
    )["QueueUrl"]
    dlq_arn = client.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    props = template.properties(logical_id)
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": props["RedrivePolicy"]["maxReceiveCount"]}
    # High-throughput FIFO, where the template asks for it (moto keeps the attributes).
    throughput: dict[str, str] = {
        name: str(props[name]) for name in ("DeduplicationScope", "FifoThroughputLimit") if name in props
    }
    return str(
        client.create_queue(
            QueueName=f"{prefix}-{logical_id}.fifo",
            Attributes={
                "FifoQueue": "true",
                "ContentBasedDeduplication": str(props["ContentBasedDeduplication"]).lower(),
                "VisibilityTimeout": str(props["VisibilityTimeout"]),
                "RedrivePolicy": json.dumps(redrive),
                **throughput,
            },
        )["QueueUrl"]
    )


def create_standard_queue(client: Any, logical_id: str, prefix: str) -> str:
    """A standard queue with the template's retention."""
    retention = str(template.properties(logical_id)["MessageRetentionPeriod"])
    return str(
        client.create_queue(QueueName=f"{prefix}-{logical_id}", Attributes={"MessageRetentionPeriod": retention})[
            "QueueUrl"
        ]
    )


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    raise RuntimeError('run in-process')\n")
    return buffer.getvalue()


def load_handler(logical_id: str, environment: int = 0) -> ModuleType:
    """Import functions/<name>/app.py under a unique module name (every function's module is `app`); one import
    per execution environment."""
    code_uri = template.properties(logical_id)["CodeUri"]
    module_file, attribute = template.properties(logical_id)["Handler"].split(".")
    path = template.STACK_ROOT / code_uri / f"{module_file}.py"
    spec = importlib.util.spec_from_file_location(f"nylorun_function_{logical_id}{f'_{environment}' if environment else ''}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not callable(getattr(module, attribute, None)):
        raise RuntimeError(f"{path}: {attribute} is not a callable handler")  # noqa: TRY004 - a broken template
    return module


def definition(logical_id: str, substitutions: dict[str, str]) -> str:
    props = template.properties(logical_id)
    text = str((template.STACK_ROOT / props["DefinitionUri"]).read_text())
    for key, value in substitutions.items():
        text = text.replace("${" + key + "}", value)
    return text


def create_stack(aws: LocalAws, prefix: str = "nylorun-local") -> LocalStack:
    iam = aws.client("iam")
    role = iam.create_role(
        RoleName=f"{prefix}-role",
        AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []}),
    )["Role"]["Arn"]

    table_name = f"{prefix}-tasks"
    create_table(aws.client("dynamodb"), table_name)
    stream_arn = aws.client("dynamodb").describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
    event_bus_name = f"{prefix}-events"
    template.properties("RuntimeBus")  # declared there; the local name follows the stack's pattern
    aws.client("events").create_event_bus(Name=event_bus_name)
    context_queue_url = create_fifo_queue(aws.client("sqs"), "ContextQueue", "ContextDLQ", prefix)
    push_queue_url = create_fifo_queue(aws.client("sqs"), "PushQueue", "PushDLQ", prefix)
    push_dlq_url = aws.client("sqs").get_queue_url(QueueName=f"{prefix}-PushDLQ.fifo")["QueueUrl"]
    context_dlq_url = aws.client("sqs").get_queue_url(QueueName=f"{prefix}-ContextDLQ.fifo")["QueueUrl"]
    # The publish function's standard dead-letter queue, as deployed. Nothing puts messages on it locally (the local
    # stream poller retries instead of giving up), but `nylorun admin dlq` reads it as it does on a stack.
    publish_dlq_url = create_standard_queue(aws.client("sqs"), "PublishDLQ", prefix)
    files_bucket = f"{prefix}-files".lower()
    s3 = aws.client("s3")
    s3.create_bucket(Bucket=files_bucket)
    versioning = template.properties("FilesBucket")["VersioningConfiguration"]
    s3.put_bucket_versioning(Bucket=files_bucket, VersioningConfiguration=versioning)

    # StackKey: push credentials and callback tokens are sealed with it, as deployed.
    kms_key_arn = aws.client("kms").create_key(Description=template.properties("StackKey")["Description"])["KeyMetadata"]["Arn"]

    lambdas = aws.client("lambda")
    names: dict[str, str] = {}
    for logical_id in FUNCTIONS:
        props = template.properties(logical_id)
        name = _function_name(prefix, logical_id)
        lambdas.create_function(
            FunctionName=name,
            Runtime="python3.12",
            Role=role,
            Handler=props["Handler"],
            Code={"ZipFile": _zip()},
            Timeout=template.timeout_seconds(logical_id),
        )
        names[logical_id] = name

    # DefinitionSubstitutions: each `!GetAtt X.Arn` becomes the local ARN of X, `!Ref AWS::Partition` moto's "aws".
    subs: dict[str, str] = {}
    for key, value in template.properties("TurnStateMachine")["DefinitionSubstitutions"].items():
        subs[key] = "aws" if value == {"Ref": "AWS::Partition"} else _function_arn(names[value["Fn::GetAtt"][0]])
    machine = aws.client("stepfunctions").create_state_machine(
        name=f"{prefix}-turn", definition=definition("TurnStateMachine", subs), roleArn=role, type="STANDARD"
    )
    return LocalStack(
        prefix=prefix,
        table_name=table_name,
        table_stream_arn=stream_arn,
        state_machine_arn=machine["stateMachineArn"],
        event_bus_name=event_bus_name,
        context_queue_url=context_queue_url,
        context_dlq_url=context_dlq_url,
        push_queue_url=push_queue_url,
        push_dlq_url=push_dlq_url,
        publish_dlq_url=publish_dlq_url,
        files_bucket=files_bucket,
        kms_key_arn=kms_key_arn,
        function_names=names,
    )


def stream_filters(logical_id: str) -> list[str]:
    """The filter patterns (FilterCriteria) of the function's DynamoDB stream event in the template."""
    events = template.properties(logical_id).get("Events", {}).values()
    return [
        f["Pattern"]
        for event in events
        if event["Type"] == "DynamoDB"
        for f in event["Properties"].get("FilterCriteria", {}).get("Filters", [])
    ]


def start_functions(stack: LocalStack) -> dict[str, ModuleType]:
    """Load each function's real handler module and let moto's Lambda invoke call it in-process.

    Call after the environment holds the stack's names: handler modules build their runtime at import.
    """
    modules = {}
    for logical_id, name in stack.function_names.items():
        module = load_handler(logical_id)
        attribute = template.properties(logical_id)["Handler"].split(".")[1]
        register_handler(name, getattr(module, attribute), template.timeout_seconds(logical_id))
        modules[logical_id] = module
    return modules


def add_environments(stack: LocalStack, logical_id: str, first: ModuleType, count: int) -> list[ModuleType]:
    """`count` more execution environments of a function, each its own import of the handler module (which keeps
    per-invocation state at module level: the batch processor, the invocation's context, its retry delays).
    They share the first environment's Runtime (clients and settings, safe across threads), so a test that swaps
    a part of it swaps it for every environment."""
    attribute = template.properties(logical_id)["Handler"].split(".")[1]
    modules = []
    for n in range(1, count + 1):
        module = load_handler(logical_id, n)
        setattr(module, "runtime", first.runtime)  # noqa: B010 - a module attribute made at import
        add_environment(stack.function_names[logical_id], getattr(module, attribute))
        modules.append(module)
    return modules


__all__ = ["LocalStack", "Path", "add_environments", "create_stack", "create_table", "start_functions", "stream_filters"]
