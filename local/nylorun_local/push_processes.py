"""The push function's execution environments as processes of their own (`NYLORUN_LOCAL_PUSH_PROCESSES`, or
`nylorun serve --push-processes N`), as Lambda runs them: each its own interpreter, polling the push queue the way
Lambda's event source mapping does (batches of up to ten, the records named in `batchItemFailures` and those of a
failed invocation left on the queue, the rest deleted) and reaching the local Runtime's moto over HTTP.

Threads in the Runtime's one process (the default, `PUSH_ENVIRONMENTS`) share one interpreter lock with everything
else it runs: one task's 1,000 deliveries then slow another subject's whole task (its turn included) about as much
as any busy thread would (bench/README, figure 6). In processes, they do not take that lock from it. Tests keep the
threads: they swap parts of the push function's Runtime in-process.

Run as `python -m nylorun_local.push_processes` by `PushProcesses`; it ends when its parent does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

from nylorun_local.turns import FLOW_HEADER

FUNCTION = "NYLORUN_LOCAL_PUSH_FUNCTION"  # the push function's name: the child's Lambda context
TIMEOUT_MS = "NYLORUN_LOCAL_PUSH_TIMEOUT_MS"  # the function's Timeout, for the batch's time check
# A receive waits up to this long for a message (SQS long polling; moto's, as the local stack patches it, looks
# again every 50 ms), then the child checks that its parent is still there.
WAIT_SECONDS = 1


class PushProcesses:
    """`count` child processes, each one execution environment of the push function."""

    def __init__(self, function_name: str, timeout_ms: int, count: int) -> None:
        self._env = {**os.environ, FUNCTION: function_name, TIMEOUT_MS: str(timeout_ms)}
        self._count = count
        self._children: list[subprocess.Popen[bytes]] = []

    def start(self) -> PushProcesses:
        self._children = [
            subprocess.Popen([sys.executable, "-m", "nylorun_local.push_processes"], env=self._env)
            for _ in range(self._count)
        ]
        return self

    def stop(self) -> None:
        for child in self._children:
            child.terminate()
        for child in self._children:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        self._children = []


def task_of(body: str) -> str:
    """The task a push queue message is for (a fan-out step's or a delivery's), or "" (an older version's event)."""
    message = json.loads(body)
    task = message.get("fanOut", {}).get("detail", {}).get("taskId") or message.get("delivery", {}).get("task_id")
    return str(task or "")


def calls_by_task(module: Any) -> None:
    """Each AWS call the push function makes while it handles a message names that message's task as its flow
    (turns.py): moto, shared by every environment, then serves one task's calls in turn with another's. A batch's
    groups run in threads of their own (functions/push/app.py), so the task is kept per thread; the record handler
    is looked up in the module's globals on each call (Powertools' processor is handed it by name)."""
    import boto3

    current = threading.local()
    handle = module.record_handler

    def record_handler(record: Any) -> None:
        current.task = task_of(record.body)
        try:
            handle(record)
        finally:
            current.task = ""

    def name_the_flow(request: Any, **_: Any) -> None:
        if getattr(current, "task", ""):
            request.headers[FLOW_HEADER] = current.task

    module.record_handler = record_handler
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    assert boto3.DEFAULT_SESSION is not None
    # The Runtime's clients are made on first use from boto3's default session, which hands them its handlers.
    boto3.DEFAULT_SESSION.events.register("before-send", name_the_flow)


def main() -> None:
    import boto3
    from nylorun.observability import logger

    from nylorun_local.lambda_shim import LambdaContext
    from nylorun_local.pollers import sqs_records
    from nylorun_local.stack import load_handler

    parent = os.getppid()
    name, timeout_ms = os.environ[FUNCTION], int(os.environ[TIMEOUT_MS])
    module = load_handler("PushFunction")
    calls_by_task(module)
    handler = module.handler
    sqs = boto3.client("sqs")
    url = os.environ["NYLORUN_PUSH_QUEUE_URL"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    while os.getppid() == parent:  # the local Runtime is gone: so is its moto
        messages = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"],
            WaitTimeSeconds=WAIT_SECONDS,
        ).get("Messages", [])  # fmt: skip
        if not messages:
            continue
        records = sqs_records(messages, arn)
        try:
            result = handler({"Records": records}, LambdaContext(name, timeout_ms))
        except Exception as exc:  # noqa: BLE001 - as Lambda: a failed invocation deletes nothing, the batch comes back
            logger.error("push invocation failed", extra={"error": type(exc).__name__, "records": len(records)})
            continue
        failed = {f["itemIdentifier"] for f in (result or {}).get("batchItemFailures") or []}
        done = [r for r in records if r["messageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=url, Entries=[{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(done)]
            )


if __name__ == "__main__":
    main()
