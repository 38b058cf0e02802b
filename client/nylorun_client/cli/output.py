"""What a client command shows, as one interface, and its --json form: JSON Lines out, answers as stdin lines."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from nylorun_client import safe
from nylorun_client.cli.notes import waiting_message
from nylorun_client.client import ClientError
from nylorun_client.prompts import cancellable
from nylorun_client.views import MessageView, TaskView

YES, NO = {"y", "yes", "true", "1", "approve", "approved"}, {"n", "no", "false", "0", "deny", "denied"}


def connect_note(task: TaskView) -> tuple[str, str]:
    """docs/writing/connections.md: a connection is made in a browser, never by a y/n here. What to do, and
    the URL (on a line of its own, never wrapped, so it can be copied whole)."""
    url = str(((task.interaction.detail if task.interaction else None) or {}).get("authorizationUrl", ""))
    note = (
        "Open this link in your browser to connect (its page names you and the Agent). Waiting for the Agent to go "
        f"on; ^C stops waiting, `nylorun approve --deny {task.id}` declines:"
    )
    return note, safe.clean(url)


class InvalidAnswer(ClientError):
    """A --json answer line that does not fit what the task asks."""


@dataclass(frozen=True)
class Reply:
    approved: bool | None = None  # an approval or a connection
    value: str | None = None  # a question (typed, or in text in the core tier)


class Output(Protocol):
    def update(self, task: TaskView) -> None: ...
    def live(self, task: TaskView) -> Any: ...  # a context manager around a stretch of updates
    def ask(self, task: TaskView) -> Reply | None: ...
    def connect(self, task: TaskView) -> None: ...  # a connection: where to open it, then the turn is awaited
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

    def connect(self, task: TaskView) -> None:
        print("\n".join(connect_note(task)), file=sys.stderr)  # stdout stays JSON: its task line has the URL too

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
