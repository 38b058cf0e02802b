"""The client commands of `nylorun`: send, tasks, get, cancel, approve, answer, webhooks.

People get a live display (rich) and prompts; scripts pass `--json` and get JSON Lines on stdout (one
object per task update) and give their answers as stdin lines. The protocol is in README.md, "CLI".
Expected errors are one line on stderr, "ErrorName: message", and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol, cast

from a2a.types import TaskState
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.prompt import Confirm, Prompt
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from nylorun_client import safe
from nylorun_client.client import PROFILE_V2, ClientError, NylorunClient
from nylorun_client.draw import render_components
from nylorun_client.errors import error_line
from nylorun_client.prompts import PromptCancelled, cancellable, cancelled_message
from nylorun_client.views import MessageView, TaskView

# Exit codes: 0 done (a task that ended COMPLETED), 1 an error or a task that ended otherwise,
# 3 the task still waits for a person: an answer this run did not give (stdin closed, or consent asked in
# text only), or an operator (an effect whose outcome was lost).
EXIT_OK, EXIT_ERROR, EXIT_WAITING, EXIT_INTERRUPTED = 0, 1, 3, 130
YES, NO = {"y", "yes", "true", "1", "approve", "approved"}, {"n", "no", "false", "0", "deny", "denied"}
STEP_ICONS = {
    "done": ("✓", "green"),
    "active": ("▶", "cyan"),
    "pending": ("·", "dim"),
    "failed": ("✗", "red"),
    "skipped": ("–", "dim"),
}
STATE_STYLES = {
    "COMPLETED": "bold green",
    "FAILED": "bold red",
    "REJECTED": "bold red",
    "CANCELED": "yellow",
    "INPUT_REQUIRED": "bold magenta",
    "AUTH_REQUIRED": "bold magenta",
}


# ---------------------------------------------------------------------------------------------- parser
def add_commands(commands: Any) -> None:
    """Add the client commands to `nylorun`'s subparsers (`serve` comes from nylorun_local.serve)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--token", default=os.environ.get("NYLORUN_TOKEN"), help="bearer token (default: $NYLORUN_TOKEN)"
    )
    common.add_argument("--json", action="store_true", help="JSON Lines on stdout; answers from stdin lines")
    common.add_argument(
        "--core",
        action="store_true",
        help="activate no profile extension (the core tier, as a plain A2A client)",
    )
    url = {"help": "the Agent's URL, e.g. http://127.0.0.1:8080/v1/a2a/agents/support"}

    send = commands.add_parser("send", parents=[common], help="send a message and follow the task live")
    send.add_argument("url", **url)
    send.add_argument("text")
    send.add_argument("--context", help="continue this context (contextId)")
    send.add_argument("--task", help="send into this task (a follow-up or a text reply)")
    send.add_argument("--no-wait", action="store_true", help="print the task as created and return")
    send.add_argument(
        "--push", metavar="URL", help="register this webhook for the task's push deliveries (see `nylorun webhooks`)"
    )
    send.set_defaults(run=_send)

    tasks = commands.add_parser("tasks", parents=[common], help="list your tasks, latest status change first")
    tasks.add_argument("url", **url)
    tasks.add_argument("--context", help="only this contextId")
    tasks.add_argument("--state", type=_state_name, help="only this state, e.g. completed or input-required")
    tasks.set_defaults(run=_tasks)

    for name, helptext, run in (("get", "show a task", _get), ("cancel", "cancel a task", _cancel)):
        sub = commands.add_parser(name, parents=[common], help=helptext)
        sub.add_argument("url", **url)
        sub.add_argument("task")
        sub.set_defaults(run=run)

    approve = commands.add_parser(
        "approve", parents=[common], help="approve the open approval, or confirm the open connection"
    )
    approve.add_argument("url", **url)
    approve.add_argument("task")
    approve.add_argument("--deny", action="store_true", help="deny the approval (or decline the connection)")
    approve.add_argument("--no-wait", action="store_true", help="do not follow the task after answering")
    approve.set_defaults(run=_approve)

    answer = commands.add_parser("answer", parents=[common], help="answer the open question")
    answer.add_argument("url", **url)
    answer.add_argument("task")
    answer.add_argument("value")
    answer.add_argument("--no-wait", action="store_true", help="do not follow the task after answering")
    answer.set_defaults(run=_answer)

    hooks = commands.add_parser("webhooks", help="receive and verify push deliveries (Standard Webhooks)")
    hooks.add_argument("--port", type=int, default=8090, help="0 picks a free port (default 8090)")
    hooks.add_argument("--host", default="127.0.0.1")
    hooks.add_argument(
        "--from",
        dest="agent_url",
        metavar="AGENT_URL",
        help="fetch your own signing keys from this Agent's Runtime (with --token / $NYLORUN_TOKEN)",
    )
    hooks.add_argument(
        "--token", default=os.environ.get("NYLORUN_TOKEN"), help="bearer token for --from (default: $NYLORUN_TOKEN)"
    )
    hooks.add_argument("--secret-file", help="a file holding the whsec_… secret(s), whitespace-separated")
    # Issue 15: a secret on the command line is readable by every process (ps, /proc) and kept in shell history.
    hooks.add_argument("--secret", action=_RefuseSecretArgument, help=argparse.SUPPRESS)
    hooks.add_argument("--json", action="store_true", help="one JSON object per delivery on stdout")
    hooks.set_defaults(run=_webhooks)


class _RefuseSecretArgument(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        parser.error(
            "--secret is refused: a secret on the command line is visible to other processes and kept in shell "
            "history. Use --from AGENT_URL (your own keys), --secret-file PATH or $NYLORUN_PUSH_SECRET"
        )


def _state_name(value: str) -> str:
    name = value.strip().upper().replace("-", "_").replace(" ", "_")
    name = name if name.startswith("TASK_STATE_") else f"TASK_STATE_{name}"
    known = [state for state in TaskState.keys() if state != "TASK_STATE_UNSPECIFIED"]  # noqa: SIM118 (protobuf enum)
    if name not in known:
        raise argparse.ArgumentTypeError(f"unknown state {value!r}; one of {', '.join(known)}")
    return name


# ---------------------------------------------------------------------------------------------- commands
def _send(args: argparse.Namespace) -> int:
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

    return _with_client(args, body)


def _tasks(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        out.tasks(await client.list_tasks(context_id=args.context, state=args.state))
        return EXIT_OK

    return _with_client(args, body)


def _get(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        out.show(await client.get(args.task))
        return EXIT_OK

    return _with_client(args, body)


def _cancel(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        out.show(await client.cancel(args.task))
        return EXIT_OK

    return _with_client(args, body)


def _approve(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        task, interaction = await client.open_interaction(args.task)
        if interaction.kind == "question":
            raise ClientError(f"Task {args.task} asks a question, not for consent: use `nylorun answer`")
        result = await client.approve(
            args.task, not args.deny, interaction_id=interaction.interaction_id, wait=False
        )
        return await _after_answer(client, out, result, task.waiting_key, args.no_wait)

    return _with_client(args, body)


def _answer(args: argparse.Namespace) -> int:
    async def body(client: NylorunClient, out: Output) -> int:
        task = await client.get(args.task, history_length=0)
        result = await client.answer(args.task, args.value, wait=False)
        return await _after_answer(client, out, result, task.waiting_key, args.no_wait)

    return _with_client(args, body)


def _webhooks(args: argparse.Namespace) -> int:
    from nylorun_client import webhooks

    try:
        if args.agent_url:
            url, token = args.agent_url, args.token
            verifier = webhooks.Verifier(
                webhooks.fetch_signing_secrets(url, token), lambda: webhooks.fetch_signing_secrets(url, token)
            )
        elif args.secret_file:
            verifier = webhooks.Verifier(webhooks.read_secret_file(args.secret_file))
        elif os.environ.get("NYLORUN_PUSH_SECRET", "").split():
            verifier = webhooks.Verifier(os.environ["NYLORUN_PUSH_SECRET"].split())
        else:
            raise webhooks.SecretsUnavailable(
                "give the secrets with --from AGENT_URL (your own keys), --secret-file PATH or $NYLORUN_PUSH_SECRET"
            )
    except webhooks.SecretsUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return webhooks.serve_webhooks(args.host, args.port, verifier, json_lines=args.json)


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


def waiting_message(task: TaskView) -> str:
    if task.uncertain and not task.interrupted:
        return (
            f"Task {task.id} stays WORKING: the outcome of effect {task.uncertain} was lost. Check it in the "
            "system it changed, then cancel the task (`nylorun cancel`) or rerun the turn."
        )
    return (
        f"Task {task.id} still waits ({task.short_state}): see it with `nylorun get`, answer it with "
        "`nylorun approve` or `nylorun answer`."
    )


def push_note(task: TaskView, push_url: str, agent_url: str) -> str:
    return (
        f"Push: task {task.id}'s updates are POSTed to {push_url}; receive and verify them there with "
        f"`nylorun webhooks --from {agent_url}`."
    )


class InvalidAnswer(ClientError):
    """A --json answer line that does not fit what the task asks."""


@dataclass(frozen=True)
class Reply:
    approved: bool | None = None  # an approval or a connection
    value: str | None = None  # a question (typed, or in text in the core tier)


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


# ---------------------------------------------------------------------------------------------- running
def _with_client(args: argparse.Namespace, body: Callable[[NylorunClient, Output], Awaitable[int]]) -> int:
    # What a person reads passes safe.scrub (no Agent's or caller's control sequence reaches the terminal);
    # --json keeps the data exact and escapes the controls (safe.dumps).
    out: Output = JsonOutput() if args.json else cast(Output, safe.Scrubbing(HumanOutput()))
    extensions = () if args.core else PROFILE_V2
    client = NylorunClient(args.url, token=args.token, extensions=extensions)

    async def main() -> int:
        async with client:
            return await body(client, out)

    try:
        return asyncio.run(main())
    except PromptCancelled as cancelled:
        out.close()
        print(safe.clean(cancelled_message(cancelled.task, client.url)), file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        out.close()
        print("Stopped. The task goes on; see it with `nylorun get`.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        line = error_line(exc, client.url, server_error=client.last_error, token_given=bool(args.token))
        if line is None:
            raise  # a bug, not an expected error: the traceback helps
        out.close()
        print(safe.clean(line), file=sys.stderr)
        return EXIT_ERROR


# ---------------------------------------------------------------------------------------------- output
class Output(Protocol):
    def update(self, task: TaskView) -> None: ...
    def live(self, task: TaskView) -> Any: ...  # a context manager around a stretch of updates
    def ask(self, task: TaskView) -> Reply | None: ...
    def final(self, task: TaskView) -> None: ...
    def show(self, task: TaskView) -> None: ...
    def sent(self, task: TaskView) -> None: ...
    def left_waiting(self, task: TaskView) -> None: ...
    def message(self, message: MessageView) -> None: ...
    def tasks(self, tasks: list[TaskView]) -> None: ...
    def close(self) -> None: ...


class JsonOutput:
    """--json: every stdout line is one JSON object; answers are read as stdin lines."""

    def __init__(self) -> None:
        self._last: dict[str, Any] | None = None

    def _emit(self, obj: dict[str, Any]) -> None:
        sys.stdout.write(safe.dumps(obj) + "\n")
        sys.stdout.flush()

    def update(self, task: TaskView) -> None:
        data = task.to_json()
        if data != self._last:  # the answer to SendMessage and the next GetTask often agree
            self._last = data
            self._emit(data)

    @contextmanager
    def live(self, task: TaskView) -> Iterator[None]:
        yield

    def ask(self, task: TaskView) -> Reply | None:
        if task.interaction is None and task.state != "TASK_STATE_INPUT_REQUIRED":
            # Consent asked in text only: no line could answer it, since a text reply never approves.
            return None
        with cancellable(task):
            line = sys.stdin.readline()
        if not line:
            return None
        text = line.rstrip("\r\n")
        if task.interaction is None or task.interaction.kind == "question":
            return Reply(value=text)
        word = text.strip().lower()
        if word not in YES | NO:
            raise InvalidAnswer(f"expected y or n for the {task.interaction.kind} on stdin, got {text!r}")
        return Reply(approved=word in YES)

    def final(self, task: TaskView) -> None:
        self.update(task)

    def show(self, task: TaskView) -> None:
        self._last = None
        self.update(task)

    sent = final

    def left_waiting(self, task: TaskView) -> None:
        print(waiting_message(task), file=sys.stderr)

    def message(self, message: MessageView) -> None:
        self._emit(message.to_json())

    def tasks(self, tasks: list[TaskView]) -> None:
        for task in tasks:
            self._emit(task.to_json())

    def close(self) -> None:
        pass


class HumanOutput:
    """A live display of state, step text and plan while the task works; prompts when it waits."""

    def __init__(self) -> None:
        # A pipe or a log file has no width: keep lines whole there rather than wrap at 80 columns.
        wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
        self.console = Console(highlight=False, width=160 if wide else None)
        self._live: Live | None = None
        self._framed: TaskView | None = None  # the task the last live frame showed

    def update(self, task: TaskView) -> None:
        previous = self._framed
        if not task.plan and previous is not None and previous.id == task.id and not task.terminal:
            # Right after an answer the status carries no plan for a moment: keep showing the last one
            # rather than let the checklist flicker away.
            task = dataclasses.replace(task, plan=previous.plan)
        if self._live is not None:
            self._live.update(render_task(task, working=True))
        self._framed = task

    @contextmanager
    def live(self, task: TaskView) -> Iterator[None]:
        self._framed = task
        if not self.console.is_terminal:
            # A pipe or a log cannot be redrawn: it gets the last frame of each stretch, once.
            yield
            self.console.print(render_task(self._framed, working=True))
            return
        self._live = Live(render_task(task, working=True), console=self.console, refresh_per_second=8)
        try:
            with self._live:
                yield
        finally:
            self._live = None

    def ask(self, task: TaskView) -> Reply | None:
        try:
            with cancellable(task):
                return self._ask(task)
        except PromptCancelled:
            self.console.print()  # the prompt's line stays as it was, ended
            raise
        except EOFError:
            self.console.print()
            return None

    def _ask(self, task: TaskView) -> Reply | None:
        interaction = task.interaction
        if interaction is None:
            self.console.print(render_interaction(task))
            if task.state != "TASK_STATE_INPUT_REQUIRED":
                self.console.print(
                    Text(
                        "The agent asks for consent in text only (no interactions/v1 data): a text reply never "
                        "approves, so there is nothing to answer here.",
                        style="yellow",
                    )
                )
                return None
            return Reply(value=self._echo(Prompt.ask(Text("Your answer"), console=self.console)))
        self.console.print(render_interaction(task))
        if interaction.kind == "question":
            return Reply(value=self._echo(Prompt.ask(Text("Your answer"), console=self.console)))
        if interaction.kind == "connection":
            name = str((interaction.detail or {}).get("connection", "it"))
            question = Text(f"Is {name} connected?")
        else:
            question = Text("Approve?")
        approved = Confirm.ask(question, console=self.console)
        self._echo("y" if approved else "n")
        return Reply(approved=approved)

    def _echo(self, answer: str) -> str:
        if not sys.stdin.isatty():  # the terminal echoes what a person types; a pipe does not
            self.console.print(Text(answer))
        return answer

    def final(self, task: TaskView) -> None:
        if task != self._framed:  # the live display's last frame already shows this very task
            self.console.print(render_task(task))
        print_outcome(self.console, task)

    def show(self, task: TaskView) -> None:
        if task != self._framed:
            self.console.print(render_task(task))
        if task.interrupted:
            self.console.print(render_interaction(task))
        print_outcome(self.console, task)

    def sent(self, task: TaskView) -> None:
        self.console.print(
            Text.assemble(
                "Sent: task ", (task.id, "bold"), f" ({task.short_state}) in context ", task.context_id
            )
        )

    def left_waiting(self, task: TaskView) -> None:
        self.console.print(Text(waiting_message(task), style="yellow"))

    def message(self, message: MessageView) -> None:
        self.console.print(Text.assemble(("Reply: ", "bold"), message.text))
        if message.components:
            self.console.print(render_components(message.components))

    def tasks(self, tasks: list[TaskView]) -> None:
        if not tasks:
            self.console.print("No tasks.")
            return
        table = Table("Task", "State", "Updated", "Text", box=None, header_style="bold")
        for task in tasks:
            table.add_row(
                Text(task.id),
                Text(task.short_state, style=_state_style(task)),
                task.timestamp,
                Text(task.text.replace("\n", " ")[:60]),
            )
        self.console.print(table)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None


# ---------------------------------------------------------------------------------------------- rendering
def render_task(task: TaskView, *, working: bool = False) -> RenderableType:
    """State, step text and the plan (progress/v1) as a bar and a checklist."""
    header = Text.assemble(("Task ", "dim"), task.id, "  ", (task.short_state, _state_style(task)))
    rows: list[RenderableType] = []
    if working and not task.terminal and not task.interrupted:
        grid = Table.grid(padding=(0, 1))
        grid.add_row(Spinner("dots", style="cyan"), header)
        rows.append(grid)
    else:
        rows.append(header)
    if task.text and not task.terminal and not task.interrupted:
        rows.append(Text(f"  {task.text}", style="italic"))
    if task.plan:
        finished = sum(step.state in ("done", "skipped") for step in task.plan)
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            Text("  Plan"),
            ProgressBar(total=len(task.plan), completed=finished, width=30),
            Text(f"{finished}/{len(task.plan)} steps"),
        )
        rows.append(bar)
        for step in task.plan:
            icon, style = STEP_ICONS.get(step.state, ("?", ""))
            line = Text.assemble(
                "    ", (icon, style), " ", (step.label, style if step.state != "pending" else "")
            )
            if step.note:
                line.append(f"  ({step.note})", style="dim")
            rows.append(line)
    if task.components and not task.terminal:
        rows.append(render_components(task.components))  # the view the turn shows (the reply's come at the end)
    if task.uncertain:
        rows.append(
            Text(
                f"  ⚠ The outcome of effect {task.uncertain} was lost: the task stays WORKING until an operator "
                "resolves it (the turn then goes on) or fails it, or the Runtime's deadline fails it.",
                style="yellow",
            )
        )
    return Group(*rows)


def render_interaction(task: TaskView) -> RenderableType:
    interaction = task.interaction
    if interaction is None:
        return Text(f"  {task.text}")
    titles = {"approval": "Approval needed", "question": "Question", "connection": "Connection needed"}
    title = titles.get(interaction.kind, interaction.kind)
    detail = interaction.detail or {}
    if interaction.kind == "connection" and "connection" in detail:
        title = f"{title}: {detail['connection']}"
    rows: list[RenderableType] = [Text.assemble((f"{title}: ", "bold magenta"), interaction.prompt)]
    for key, value in detail.items():
        if not (interaction.kind == "connection" and key == "connection"):
            rows.append(Text(f"  {key}: {value if isinstance(value, str) else json.dumps(value)}"))
    return Group(*rows)


def print_outcome(console: Console, task: TaskView) -> None:
    """What a finished (or shown) task leaves: the reply, the artifacts, the telemetry."""
    if task.text and (task.terminal or not task.interrupted):
        console.print(Text.assemble(("Reply: ", "bold"), task.text))
    if task.components and task.terminal:
        console.print(render_components(task.components))
    if task.artifacts:
        console.print(Text("Artifacts:", style="bold"))
    for artifact in task.artifacts:
        line = Text.assemble("  ", (artifact.name or artifact.artifact_id, "bold"))
        if artifact.file is not None:
            f = artifact.file
            line.append(
                f"  {f.kind} v{f.version} · {f.size} bytes · sha256 {f.sha256} · {f.path}", style="cyan"
            )
        console.print(line)
        for text_line in artifact.text.splitlines():
            console.print(Text(f"    {text_line}"))
        if artifact.components:
            console.print(render_components(artifact.components, indent=4))
        for url in artifact.urls:
            # Neither wrapped nor cropped: a download link must survive copy and paste.
            console.print(Text(f"    download: {url}"), soft_wrap=True)
    if task.telemetry is not None:
        t = task.telemetry
        totals = f"{_plural(t.steps, 'step')} · {_plural(t.tokens, 'token')} · ${t.cost_usd:.4f} · trace {t.trace_id}"
        console.print(Text.assemble(("Telemetry: ", "bold"), totals))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _state_style(task: TaskView) -> str:
    return STATE_STYLES.get(task.short_state, "bold cyan")
