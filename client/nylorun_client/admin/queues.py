"""`nylorun admin` commands on dead letters: dlq, redrive (docs/operate.md#dead-letters).

    nylorun admin dlq [--queue context|push|publish]
    nylorun admin redrive [--queue context|push] (--all | --task ID … | --message ID …)

`dlq` looks at the Runtime's dead-letter queues without consuming anything (each message is visible again as soon
as the look ends) and ties each dead letter to its task as it is now. `redrive`
records an operator action on each task, then moves its dead letter back to the queue it came from: a queued turn
to the context queue (the dispatch function starts it once its context is free), a push delivery to the push queue
with a new retry window and the same webhook-id. Running it twice, or again after it was interrupted, starts no
turn twice and delivers nothing under another webhook-id (docs/operate.md#dead-letters).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from nylorun.ports import (
    DEAD_LETTER_QUEUES,
    REDRIVEN_QUEUES,
    DeadLetter,
    DeadLetterLook,
    DeadLetterQueueRefused,
)

from nylorun_client.admin.target import EXIT_OK, AdminError, Target, run_admin

# The template's name for each dead-letter queue, and what it holds.
QUEUE_NAMES = {
    "context": ("ContextDLQ", "queued turns"),
    "push": ("PushDLQ", "push deliveries"),
    "publish": ("PublishDLQ", "table changes the publish function could not send"),
}
# What to do with the dead letters `redrive` does not move (docs/operate.md#dead-letters).
NOT_REDRIVEN = {
    "publish": "the stream keeps changes 24 hours: its tasks' statuses are in the table, their events were not sent",
}
SOURCE_NAMES = {"context": "ContextQueue", "push": "PushQueue"}
# A FIFO queue hands out at most 10 messages of one message group until they are deleted or visible again
# (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/FIFO-queues-understanding-logic.html).
GROUP_SHOWN = 10


def add_commands(sub: Any) -> None:
    """Add this module's commands to `nylorun admin`'s subparsers."""
    dlq = sub.add_parser("dlq", help="list the dead letters of the context and push queues, with their tasks")
    dlq.add_argument("--queue", choices=DEAD_LETTER_QUEUES, action="append", help="only this queue (repeatable)")
    dlq.set_defaults(run=lambda args: run_admin(args, _refusing(_dlq)))

    redrive = sub.add_parser("redrive", help="move dead letters back to their queue (each action recorded)")
    redrive.add_argument("--queue", choices=DEAD_LETTER_QUEUES, action="append", help="only this queue (repeatable)")
    which = redrive.add_argument_group("which dead letters (at least one)")
    which.add_argument("--all", action="store_true", help="every dead letter (of --queue, if given)")
    which.add_argument("--task", action="append", default=[], metavar="TASK", help="the dead letters of this task")
    which.add_argument(
        "--message", action="append", default=[], metavar="ID", help="this dead letter (its message id, from dlq)"
    )
    redrive.set_defaults(run=lambda args: run_admin(args, _refusing(_redrive)))


def _refusing(command: Callable[[Target, argparse.Namespace], int]) -> Callable[[Target, argparse.Namespace], int]:
    """A queue the commands will not touch is an operator's error (one line, exit 1), not a crash."""

    def run(target: Target, args: argparse.Namespace) -> int:
        try:
            return command(target, args)
        except DeadLetterQueueRefused as refused:
            raise AdminError(str(refused)) from None

    return run


def _queues(target: Target, args: argparse.Namespace, among: tuple[str, ...] = DEAD_LETTER_QUEUES) -> list[Any]:
    have = target.runtime.dead_letters.queues()
    return [q for q in have if q in among and (not args.queue or q in args.queue)]


def _dlq(target: Target, args: argparse.Namespace) -> int:
    looks = [target.runtime.dead_letters.look(queue) for queue in _queues(target, args)]
    letters = [[_with_task(target, letter) for letter in look.letters] for look in looks]
    shown = [{"queue": look.queue, "approximateTotal": look.approximate_total, "letters": of}
             for look, of in zip(looks, letters, strict=True)]  # fmt: skip
    target.out({"queues": shown}, lambda: "\n".join(map(_look_text, looks, letters)))
    return EXIT_OK


def _redrive(target: Target, args: argparse.Namespace) -> int:
    if not (args.all or args.task or args.message):
        raise AdminError("say which dead letters: --all, --task TASK or --message ID")
    refused = [q for q in args.queue or () if q not in REDRIVEN_QUEUES]
    if refused:
        raise AdminError(f"{refused[0]} dead letters are not redriven by this command: {NOT_REDRIVEN[refused[0]]}")
    tasks, messages = set(args.task), set(args.message)

    def wanted(letter: DeadLetter) -> bool:
        return bool(args.all) or letter.task_id in tasks or letter.message_id in messages

    def record(letter: DeadLetter) -> None:
        # Before the move: a redrive that fails half-way is still on the task's record.
        detail = {"queue": letter.queue, "messageId": letter.message_id, "reason": letter.reason,
                  "configId": letter.config_id, "eventId": letter.event_id, "webhookId": letter.webhook_id}  # fmt: skip
        target.record(letter.task_id, "redrive", **{k: v for k, v in detail.items() if v})

    moved = [
        letter
        for queue in _queues(target, args, among=REDRIVEN_QUEUES)
        for letter in target.runtime.dead_letters.redrive(queue, wanted, before=record)
    ]
    lines = [f"redriven: {_name(letter)} -> {SOURCE_NAMES[letter.queue]}" for letter in moved]
    count = f"{len(moved)} dead letter{'' if len(moved) == 1 else 's'} redriven"
    target.out({"redriven": [_letter(letter) for letter in moved]}, lambda: "\n".join([*lines, count]))
    return EXIT_OK


def _letter(letter: DeadLetter) -> dict[str, str]:
    fields = {"queue": letter.queue, "messageId": letter.message_id, "taskId": letter.task_id,
              "reason": letter.reason, "since": letter.since, "configId": letter.config_id,
              "eventId": letter.event_id, "event": letter.event, "webhookId": letter.webhook_id}  # fmt: skip
    return {k: v for k, v in fields.items() if v}


def _with_task(target: Target, letter: DeadLetter) -> dict[str, Any]:
    """The dead letter and its task as the table has it now (None: the task is gone)."""
    head = target.runtime.store.head(letter.task_id) if letter.task_id else None
    task = {"state": head["state"], "agent": head["agent"], "contextId": head["contextId"]} if head else None
    return {**_letter(letter), "task": task}


def _name(letter: DeadLetter) -> str:
    what = f"config {letter.config_id}, {letter.event}" if letter.queue == "push" else "queued turn"
    return f"{letter.queue} dead letter {letter.message_id} of task {letter.task_id} ({what})"


def _look_text(look: DeadLetterLook, letters: list[dict[str, Any]]) -> str:
    name, holds = QUEUE_NAMES[look.queue]
    lines = [f"{name} ({holds}): {len(letters)} dead letter{'' if len(letters) == 1 else 's'}"]
    if look.approximate_total > len(letters):
        lines.append(f"  (about {look.approximate_total} in the queue: a look sees at most {GROUP_SHOWN} per message group)")
    for shown in letters:
        task = shown["task"]
        state = str(task["state"]).removeprefix("TASK_STATE_") if task else "gone"
        where = f"  agent {task['agent']}  context {task['contextId']}" if task else ""
        lines.append(f"  {shown['messageId']}  task {shown['taskId']}  {state}{where}" if "taskId" in shown else f"  {shown['messageId']}")
        if look.queue == "push":
            lines.append(f"    config {shown.get('configId')}  {shown.get('event')}  webhook-id {shown.get('webhookId')}")
        elif "event" in shown:
            lines.append(f"    {shown['event']}")
        lines.append(f"    since {shown['since']}: {shown['reason']}")
        if look.queue in REDRIVEN_QUEUES and (task is None or (look.queue == "context" and state != "SUBMITTED")):
            lines.append(f"    (the task is {state}: a redrive changes nothing, the {SOURCE_NAMES[look.queue]} consumer drops it)")
    if letters and look.queue in NOT_REDRIVEN:
        lines.append(f"  not redriven by `nylorun admin redrive`: {NOT_REDRIVEN[look.queue]}")
    return "\n".join(lines)
