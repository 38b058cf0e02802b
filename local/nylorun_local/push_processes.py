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

import os
import subprocess
import sys

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


def main() -> None:
    import boto3
    from nylorun.observability import logger

    from nylorun_local.aws import LambdaContext
    from nylorun_local.pollers import sqs_records
    from nylorun_local.stack import load_handler

    parent = os.getppid()
    name, timeout_ms = os.environ[FUNCTION], int(os.environ[TIMEOUT_MS])
    handler = load_handler("PushFunction").handler
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
