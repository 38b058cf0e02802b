"""What a client command shows a person: a live display while the task works, prompts when it waits."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO, cast

from rich.console import Console
from rich.live import Live
from rich.prompt import Confirm, Prompt
from rich.table import Table
from rich.text import Text

from nylorun_client.cli.notes import waiting_message
from nylorun_client.cli.output import Reply, connect_note
from nylorun_client.cli.render import print_outcome, render_interaction, render_task, state_style
from nylorun_client.draw import render_components
from nylorun_client.prompts import PromptCancelled, cancellable
from nylorun_client.views import MessageView, TaskView


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
            with cancellable(task) as stdin:
                return self._ask(task, cast(TextIO | None, stdin))
        except PromptCancelled:
            self.console.print()  # the prompt's line stays as it was, ended
            raise
        except EOFError:
            self.console.print()
            return None

    def _ask(self, task: TaskView, stdin: TextIO | None) -> Reply | None:
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
            return Reply(value=self._echo(Prompt.ask(Text("Your answer"), console=self.console, stream=stdin)))
        self.console.print(render_interaction(task))
        if interaction.kind == "question":
            return Reply(value=self._echo(Prompt.ask(Text("Your answer"), console=self.console, stream=stdin)))
        approved = Confirm.ask(Text("Approve?"), console=self.console, stream=stdin)
        self._echo("y" if approved else "n")
        return Reply(approved=approved)

    def connect(self, task: TaskView) -> None:
        self.console.print(render_interaction(task))
        note, url = connect_note(task)
        self.console.print(Text(note, style="yellow"))
        self.console.print(Text(url), soft_wrap=True)

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
                Text(task.short_state, style=state_style(task)),
                task.timestamp,
                Text(task.text.replace("\n", " ")[:60]),
            )
        self.console.print(table)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
