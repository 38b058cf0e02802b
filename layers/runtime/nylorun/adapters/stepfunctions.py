"""The turn orchestrator on Step Functions (Standard): one execution per turn, named by the task id."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from nylorun.observability import logger

# A token that is already completed, timed out or unknown means someone else finished the wait first.
_FINISHED_WAIT = {"InvalidToken", "TaskTimedOut", "TaskDoesNotExist"}


class StepFunctionsOrchestrator:
    def __init__(self, client: Any, state_machine_arn: str, interaction_timeout_seconds: int) -> None:
        self._sfn = client
        self._arn = state_machine_arn
        self._timeout = interaction_timeout_seconds

    def start(self, task_id: str) -> None:
        try:
            self._sfn.start_execution(
                stateMachineArn=self._arn,
                name=task_id,  # a retried start is a no-op: execution names are unique per state machine
                input=json.dumps({"taskId": task_id, "interactionTimeoutSeconds": self._timeout}),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ExecutionAlreadyExists":
                raise

    def resume(self, token: str) -> None:
        self._finish_wait(lambda: self._sfn.send_task_success(taskToken=token, output="{}"))

    def abandon(self, token: str, reason: str) -> None:
        self._finish_wait(lambda: self._sfn.send_task_failure(taskToken=token, error="Canceled", cause=reason))

    def stop(self, task_id: str) -> None:
        execution_arn = self._arn.replace(":stateMachine:", ":execution:", 1) + f":{task_id}"
        try:
            self._sfn.stop_execution(executionArn=execution_arn, error="Canceled", cause="CancelTask")
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in {"ExecutionDoesNotExist", "InvalidArn"}:
                raise

    @staticmethod
    def _finish_wait(call: Any) -> None:
        try:
            call()
        except ClientError as exc:
            if exc.response["Error"]["Code"] not in _FINISHED_WAIT:
                raise
            logger.info("wait already finished", extra={"code": exc.response["Error"]["Code"]})
