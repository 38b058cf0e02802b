"""`nylorun admin` commands on tasks that wait for an operator: uncertain, show, resolve, fail.

A task waits for an operator when a step's outcome was lost (Profile v2: WORKING with effects/v1 `uncertain`):
the effect started and the process died before its result was journaled, so the Runtime cannot know whether it
took effect. The operator looks the effect up in the outside system (`uncertain` and `show` give its name and its
idempotency key), then resolves it, or fails the task. The rules are the Runtime's (`nylorun.service.operator`);
this module parses, records who acts, and prints (docs/operate.md#lost-outcomes).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from nylorun.ports import Resolution
from nylorun.service.operator import Refused, parse_result

from nylorun_client.admin.target import EXIT_OK, AdminError, Target, run_admin


def add_commands(sub: Any) -> None:
    """Add this module's commands to `nylorun admin`'s subparsers."""
    listing = sub.add_parser("uncertain", help="tasks waiting for an operator (a step's outcome was lost), all subjects")
    listing.set_defaults(run=_runs(uncertain))

    show_cmd = sub.add_parser("show", help="a task with its journal and operator actions (operator eyes only)")
    show_cmd.add_argument("task", metavar="TASK")
    show_cmd.set_defaults(run=_runs(show))

    resolve_cmd = sub.add_parser(
        "resolve", help="record what became of the lost effect and resume the turn",
        description="Record what became of a task's lost effect, then resume its turn (a new execution). "
        "--result: the effect finished with this result (JSON), which the agent gets as if the effect had "
        "returned it. --not-done: it did not happen; it runs again, with the same idempotency key.",
    )
    resolve_cmd.add_argument("task", metavar="TASK")
    resolve_cmd.add_argument("effect", metavar="EFFECT", help="the lost effect's id (eff-…), as `uncertain` lists it")
    how = resolve_cmd.add_mutually_exclusive_group(required=True)
    how.add_argument("--result", metavar="JSON", help="the effect finished, with this result")
    how.add_argument("--not-done", action="store_true", help="the effect did not happen: run it again, same key")
    resolve_cmd.set_defaults(run=_runs(resolve))

    fail_cmd = sub.add_parser(
        "fail", help="end a task waiting for an operator: FAILED with your reason",
        description="End a task waiting for an operator: FAILED, with a status message its caller reads "
        "(\"An operator ended this task: REASON\"); the context's next queued turn starts.",
    )
    fail_cmd.add_argument("task", metavar="TASK")
    fail_cmd.add_argument("reason", metavar="REASON", help="what the caller reads")
    fail_cmd.set_defaults(run=_runs(fail))


def _runs(action: Callable[[Target, argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    return lambda args: run_admin(args, action)


# ---------------------------------------------------------------- commands
def uncertain(target: Target, args: argparse.Namespace) -> int:
    waiting = [w.view() for w in target.runtime.operators.waiting()]

    def text() -> str:
        if not waiting:
            return f"No task is waiting for an operator ({target.where})."
        rows = [["TASK", "AGENT", "SUBJECT", "CONTEXT", "AGE", "EFFECT", "KEY"]] + [
            [w["taskId"], w["agent"], w["subject"], w["contextId"], _age(w["ageSeconds"]), w["effect"]["name"],
             w["effect"]["id"]]
            for w in waiting
        ]
        widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                 for row in rows]
        return "\n".join(lines)

    target.out(waiting, text)
    return EXIT_OK


def show(target: Target, args: argparse.Namespace) -> int:
    try:
        view = target.runtime.operators.show(args.task)
    except Refused as refused:
        raise AdminError(str(refused)) from None
    target.out(view, lambda: _show_text(view))
    return EXIT_OK


def resolve(target: Target, args: argparse.Namespace) -> int:
    try:
        resolution = (
            Resolution(effect_id=args.effect, done=False)
            if args.not_done
            else Resolution(effect_id=args.effect, done=True, result=parse_result(args.result))
        )
        detail = {"effect": args.effect, "how": "not-done" if args.not_done else "result",
                  **({"result": resolution.result} if resolution.done else {})}
        resumed = target.runtime.operators.resolve(
            args.task, resolution, before=lambda: target.record(args.task, "resolve", **detail)
        )
    except Refused as refused:
        raise AdminError(str(refused)) from None
    value = {"taskId": resumed.task_id, "effect": resumed.effect_id, "attempt": resumed.attempt,
             "resumed": not resumed.again}

    def text() -> str:
        if resumed.again:
            return (f"{resumed.effect_id} was already resolved this way (attempt {resumed.attempt}): "
                    "nothing more done.")
        done = "did not happen: it runs again with the same key" if args.not_done else "finished with the result given"
        return f"Resolved {resumed.effect_id} ({done}); task {resumed.task_id} resumed as attempt {resumed.attempt}."

    target.out(value, text)
    return EXIT_OK


def fail(target: Target, args: argparse.Namespace) -> int:
    try:
        ended = target.runtime.operators.fail(
            args.task, args.reason, before=lambda: target.record(args.task, "fail", reason=args.reason)
        )
    except Refused as refused:
        raise AdminError(str(refused)) from None
    message = ended.status.message
    said = " ".join(p.text for p in (message.parts if message else []) if p.text)
    target.out({"taskId": ended.task_id, "state": ended.state.value, "message": said},
               lambda: f"Task {ended.task_id} is FAILED; its caller reads: {said}")
    return EXIT_OK


# ---------------------------------------------------------------- helpers
def _age(seconds: float) -> str:
    s = int(seconds)
    for unit, size, smaller, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            rest = (s % size) // small_size
            return f"{s // size}{unit}" + (f" {rest}{smaller}" if rest else "")
    return f"{s}s"


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _show_text(view: dict[str, Any]) -> str:
    task = view["task"]
    lines = [
        f"Task     {task['id']}",
        f"Agent    {task['agent']}    subject {task['subject']}    context {task['contextId']}    turn {task['turn']}",
        f"State    {task['state']} since {task['statusTimestamp']}    attempt {task['attempt']}",
        f"Status   {task['statusText']}",
    ]
    if task["uncertain"]:
        lost = task["uncertain"]
        lines.append(f"Waiting  for an operator: effect {lost['effect']} (journal #{lost['seq']}) lost its outcome")
    lines += ["", "Journal"]
    if not view["journal"]:
        lines.append("  (empty)")
    for step in view["journal"]:
        when = f"started {step['startedAt'] or '?'}"
        if step["finishedAt"]:
            when += f", finished {step['finishedAt']}"
        elif step["kind"] != "usage":
            when += ", NOT finished"
        if step["kind"] == "effect":
            outcome = f"result {_short(step['result'])}" if step["finished"] else "outcome lost"
            lines.append(f"  #{step['seq']} effect {step['name']}  key {step['key']}  {when}  {outcome}")
        elif step["kind"] == "interaction":
            answer = f"answer {_short(step['answer'])}" if step["answer"] is not None else "unanswered"
            lines.append(f"  #{step['seq']} {step['name']} {step['key']}  {when}  {answer}")
        else:
            lines.append(f"  #{step['seq']} usage {_short(step['usage'])}  at {step['startedAt'] or '?'}")
    usage = view["usage"]
    effects = f"{usage['steps']} effect" + ("" if usage["steps"] == 1 else "s")
    lines += ["", f"Usage    {effects} finished, {usage['tokens']} tokens, ${usage['costUsd']}", "",
              "Operator actions"]
    if not view["operatorActions"]:
        lines.append("  (none)")
    for action in view["operatorActions"]:
        lines.append(f"  {action['at']}  {action['operator']}  {action['action']}  {_short(action['detail'], 80)}")
    return "\n".join(lines)
