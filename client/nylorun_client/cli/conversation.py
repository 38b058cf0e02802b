"""`nylorun send`, `approve` and `answer`: send or answer, then follow the task and ask whenever it waits."""

from __future__ import annotations

import argparse
import sys

from nylorun_client import safe
from nylorun_client.cli.notes import push_note
from nylorun_client.cli.output import Output, Reply
from nylorun_client.cli.running import EXIT_ERROR, EXIT_OK, EXIT_WAITING, with_client
from nylorun_client.client import ClientError, NylorunClient
from nylorun_client.views import MessageView, TaskView


# ---------------------------------------------------------------------------------------------- commands
def send(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        first = await client.send(
            args.text, context_id=args.context, task_id=args.task, wait=False, push_url=args.push
        )
        if args.push and isinstance(first, TaskView):
            print(safe.clean(push_note(first, args.push, client.url)), file=sys.stderr)
        if isinstance(first, MessageView):
            out.message(first)
            return EXIT_OK
        out.update(first)
        if args.no_wait:
            out.sent(first)
            return EXIT_OK
        return await _converse(client, out, first)

    return with_client(args, body)


def approve(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        task, interaction = await client.open_interaction(args.task)
        if interaction.kind == "question":
            raise ClientError(f"Task {args.task} asks a question, not for consent: use `nylorun answer`")
        result = await client.approve(
            args.task, not args.deny, interaction_id=interaction.interaction_id, wait=False
        )
        return await _after_answer(client, out, result, task.waiting_key, args.no_wait)

    return with_client(args, body)


def answer(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        task = await client.get(args.task, history_length=0)
        result = await client.answer(args.task, args.value, wait=False)
        return await _after_answer(client, out, result, task.waiting_key, args.no_wait)

    return with_client(args, body)


# ---------------------------------------------------------------------------------------------- the conversation
async def _converse(client: NylorunClient, out: Output, task: TaskView) -> int:
    """Follow the task; whenever it waits for a person, ask, answer the typed way, and follow again."""
    answered: set[str] = set()
    while True:
        task = await _follow(client, out, task, answered)
        if task.terminal:
            out.final(task)
            return EXIT_OK if task.state == "TASK_STATE_COMPLETED" else EXIT_ERROR
        if not task.interrupted:  # WORKING with an uncertain effect: an operator's turn, not this caller's
            out.left_waiting(task)
            return EXIT_WAITING
        if task.interaction is not None and task.interaction.kind == "connection":
            # docs/writing/connections.md: the person connects in a browser; the turn resumes by itself, so
            # wait for it.
            out.connect(task)
            answered.add(task.waiting_key)
            continue
        reply = out.ask(task)
        if reply is None:
            out.left_waiting(task)
            return EXIT_WAITING
        answered.add(task.waiting_key)
        result = await _reply(client, task, reply)
        if isinstance(result, MessageView):
            out.message(result)
            return EXIT_OK
        out.update(result)
        task = result


async def _follow(client: NylorunClient, out: Output, task: TaskView, answered: set[str]) -> TaskView:
    """Poll GetTask (the Runtime offers no streaming) until the task ends or waits for a person."""
    if task.terminal or (task.interrupted and task.waiting_key not in answered):
        return task
    with out.live(task):
        async for view in client.watch(task.id, answered=answered):
            out.update(view)
            task = view
    return task


async def _after_answer(
    client: NylorunClient, out: Output, result: TaskView | MessageView, answered: str, no_wait: bool
) -> int:
    if isinstance(result, MessageView):
        out.message(result)
        return EXIT_OK
    out.update(result)
    if no_wait:
        out.sent(result)
        return EXIT_OK
    task = await _follow(client, out, result, {answered})
    if task.terminal:
        out.final(task)
    else:
        out.show(task)
    return EXIT_OK


async def _reply(client: NylorunClient, task: TaskView, reply: Reply) -> TaskView | MessageView:
    interaction = task.interaction
    if interaction is None:  # core tier: a question answered with text
        return await client.send(reply.value or "", task_id=task.id, wait=False)
    if interaction.kind == "question":
        return await client.answer(
            task.id, reply.value, interaction_id=interaction.interaction_id, wait=False
        )
    return await client.approve(
        task.id, bool(reply.approved), interaction_id=interaction.interaction_id, wait=False
    )
