"""The turn orchestrator on Step Functions (Standard): one execution per turn, named by the task id."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from nylorun.observability import logger

# A token that is already completed, timed out or unknown means someone else finished the wait first.
_FINISHED_WAIT = {"InvalidToken", "TaskTimedOut", "TaskDoesNotExist"}


def execution_name(task_id: str, attempt: int = 0) -> str:
    """The execution of a turn's attempt: the task id, then (a turn an operator resumed after a lost
    outcome) "<task id>-<attempt>". A name is at most 80 characters of letters, digits, "-" and "_" where the
    execution is logged (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html):
    a task id is a UUID (36) and an attempt a few digits. A task id has a fixed length, so no attempt's name is
    another task's."""
    return task_id if attempt == 0 else f"{task_id}-{attempt}"


class StepFunctionsOrchestrator:
    def __init__(
        self,
        client: Any,
        state_machine_arn: str,
        interaction_timeout_seconds: int,
        uncertainty_timeout_seconds: int,
        delegation_poll_seconds: int = 300,
    ) -> None:
        self._sfn = client
        self._arn = state_machine_arn
        self._timeout = interaction_timeout_seconds
        self._uncertainty_timeout = uncertainty_timeout_seconds
        self._delegation_poll = delegation_poll_seconds

    def start(self, task_id: str, attempt: int = 0) -> None:
        execution = {
            "taskId": task_id,
            "attempt": attempt,
            "interactionTimeoutSeconds": self._timeout,
            # How long a lost outcome waits for an operator before the task fails (WaitForOperator).
            "uncertaintyTimeoutSeconds": self._uncertainty_timeout,
            # How long a turn waiting for a delegate waits for its callback before it looks (WaitForDelegate).
            "delegationPollSeconds": self._delegation_poll,
        }
        try:
            self._sfn.start_execution(
                stateMachineArn=self._arn,
                # A retried start is a no-op: execution names are unique per state machine (a repeated start of a
                # running one with the same input answers as the first; otherwise ExecutionAlreadyExists).
                name=execution_name(task_id, attempt),
                input=json.dumps(execution),
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ExecutionAlreadyExists":
                raise

    def resume(self, token: str) -> None:
        self._finish_wait(lambda: self._sfn.send_task_success(taskToken=token, output="{}"))

    def abandon(self, token: str, reason: str) -> None:
        self._finish_wait(lambda: self._sfn.send_task_failure(taskToken=token, error="Canceled", cause=reason))

    def stop(self, task_id: str, attempt: int = 0) -> None:
        execution_arn = self._arn.replace(":stateMachine:", ":execution:", 1) + f":{execution_name(task_id, attempt)}"
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
