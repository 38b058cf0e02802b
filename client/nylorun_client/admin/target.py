"""What every `nylorun admin` command acts on: the stack or local Runtime, the operator, the exit codes.

`connect` finds the Runtime (a deployed stack's resources and parameters, or a local Runtime's state file) and
who the operator is (the IAM principal's ARN, or `local:<user>`); `run_admin` runs one command against it, and
`Target.record` records each action that changes something beside the task's journal.
"""

from __future__ import annotations

import argparse
import getpass
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nylorun.engine.agent import AgentRegistry
from nylorun.observability import logger
from nylorun.ports import OperatorAction
from nylorun.settings import Settings
from nylorun.wiring import Runtime

from nylorun_client import safe

DEFAULT_LOCAL_PORT = 8080
# The stack's resources the admin commands use: setting → the template's logical id (its physical id is the
# value: a table's name, a state machine's ARN, a queue's URL, a key's id).
STACK_RESOURCES = {
    "NYLORUN_TABLE": "TasksTable",
    "NYLORUN_STATE_MACHINE_ARN": "TurnStateMachine",
    "NYLORUN_EVENT_BUS": "RuntimeBus",
    "NYLORUN_CONTEXT_QUEUE_URL": "ContextQueue",
    "NYLORUN_CONTEXT_DLQ_URL": "ContextDLQ",
    "NYLORUN_PUSH_QUEUE_URL": "PushQueue",
    "NYLORUN_PUSH_DLQ_URL": "PushDLQ",
    "NYLORUN_PUBLISH_DLQ_URL": "PublishDLQ",
    "NYLORUN_FILES_BUCKET": "FilesBucket",
    "NYLORUN_KMS_KEY": "StackKey",
    "NYLORUN_RUNTIME_KEY_ARN": "RuntimeKey",
}
# The stack's parameters a resumed turn's execution carries as its first did (`admin resolve` starts it,
# docs/operate.md#lost-outcomes): setting → the template's parameter.
STACK_PARAMETERS = {
    "NYLORUN_INTERACTION_TIMEOUT_SECONDS": "InteractionTimeoutSeconds",
    "NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS": "UncertaintyTimeoutSeconds",
}
# Exit codes: 0 done, 1 an error (one line on stderr), 2 bad usage (argparse's).
EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class AdminError(Exception):
    """An expected failure: printed as one line, exit 1."""


@dataclass
class Target:
    """The Runtime an operator acts on, and who the operator is."""

    runtime: Runtime
    operator: str
    where: str  # "stack NAME" or "local port N", for messages
    json: bool = False

    def record(self, task_id: str, action: str, **detail: Any) -> None:
        """Record (before acting) that this operator does `action` to the task, and log it on stderr."""
        at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        entry = OperatorAction(at=at, operator=self.operator, action=action, detail=detail)
        self.runtime.store.record_operator_action(task_id, entry)
        line = {"level": "INFO", "message": "operator action", "operator": self.operator, "action": action,
                "task_id": task_id, "at": at, **({"detail": detail} if detail else {})}
        print(json.dumps(line), file=sys.stderr)

    def out(self, value: Any, text: Callable[[], str]) -> None:
        """One result: JSON on stdout with --json, else the text `text()` makes; either terminal-safe, since a
        task's fields (a contextId, a dead letter's reason) are what its caller chose."""
        print(safe.dumps(value, default=str) if self.json else safe.clean(text()))


def run_admin(args: argparse.Namespace, action: Callable[[Target, argparse.Namespace], int]) -> int:
    """Connect, then run one admin command; expected failures are one line on stderr and exit 1."""
    if args.stack and args.local:  # one before the command, one after it: argparse's group sees only one side
        print("nylorun admin: choose --stack or --local, not both", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = connect(args)
        return action(target, args)
    except AdminError as error:
        print(safe.clean(f"nylorun admin: {error}"), file=sys.stderr)
        return EXIT_ERROR


class _Stderr:
    """sys.stderr as it is at each write (a caller may replace it, as pytest's capture does)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def connect(args: argparse.Namespace) -> Target:
    if args.stack:
        env, operator = _stack_env(args.stack, args.region)
        where = f"stack {args.stack}"
    else:
        port = args.local or DEFAULT_LOCAL_PORT
        env, operator = _local_env(port), f"local:{getpass.getuser()}"
        where = f"local port {port}"
    os.environ.update(env)
    # The Runtime's own log lines (Powertools, stdout by default) go to stderr beside the operator's log: stdout
    # holds only the command's answer (`--json` is read by scripts).
    handler = logger.registered_handler
    if isinstance(handler, logging.StreamHandler):
        handler.setStream(_Stderr())
    runtime = Runtime(settings=Settings.from_env(), registry=AgentRegistry())
    return Target(runtime=runtime, operator=operator, where=where, json=bool(getattr(args, "json", False)))


def _local_env(port: int) -> dict[str, str]:
    # Imported here: `nylorun admin --stack` works without the `local` extra.
    try:
        from nylorun_local.runtime import state_file
    except ImportError as missing:
        raise AdminError("--local needs the local stack: pip install 'nylorun-runtime-aws[local]'") from missing
    path: Path = state_file(port)
    if not path.exists():
        raise AdminError(f"no local Runtime on port {port} (start one with `nylorun serve --port {port}`)")
    state = json.loads(path.read_text())
    return {
        **state["env"],
        "AWS_ENDPOINT_URL": state["awsEndpoint"],
        # moto takes any credentials; these keep boto3 from looking for real ones.
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }


def _stack_env(stack: str, region: str | None) -> tuple[dict[str, str], str]:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    session = boto3.Session(region_name=region)
    try:
        operator = str(session.client("sts").get_caller_identity()["Arn"])
        pages = session.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack)
        physical = {
            r["LogicalResourceId"]: r["PhysicalResourceId"] for page in pages for r in page["StackResourceSummaries"]
        }
        (described,) = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
        parameters = {p["ParameterKey"]: p.get("ParameterValue", "") for p in described.get("Parameters", [])}
    except (BotoCoreError, ClientError) as error:
        raise AdminError(f"cannot read stack {stack}: {error}") from None
    missing = [logical for logical in STACK_RESOURCES.values() if logical not in physical]
    if missing:
        raise AdminError(f"stack {stack} is not a Nylorun Runtime (no {', '.join(missing)})")
    env = {setting: physical[logical] for setting, logical in STACK_RESOURCES.items()}
    env |= {setting: parameters[name] for setting, name in STACK_PARAMETERS.items() if parameters.get(name)}
    if session.region_name:
        env["AWS_DEFAULT_REGION"] = session.region_name
    return env, operator
