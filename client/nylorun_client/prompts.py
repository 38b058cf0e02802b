"""Prompts that ^C cancels: no answer is sent, the task keeps waiting, the command says how to answer later."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nylorun_client.interrupt_wakeup import WakeupStdin, wakeup_stdin


class PromptCancelled(Exception):
    """^C at a prompt: `task` (a TaskView) still waits for the answer that was not given."""

    def __init__(self, task: Any) -> None:
        super().__init__(task.id)
        self.task = task


@contextmanager
def cancellable(task: Any) -> Iterator[WakeupStdin | None]:
    """While a person is asked, ^C ends the prompt: asyncio.run's own SIGINT handler only cancels the main task,
    which a blocking input() never sees, so the ^C was swallowed and the next line went into a dead prompt.
    Yields the terminal's stdin to read the answer from, so a ^C typed as the prompt appears ends it too
    (None: not a terminal, read as usual)."""
    if threading.current_thread() is not threading.main_thread():  # signal handlers live in the main thread
        yield None
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with wakeup_stdin() as stdin:
            yield stdin
    except KeyboardInterrupt:
        raise PromptCancelled(task) from None
    finally:
        signal.signal(signal.SIGINT, previous)


def cancelled_message(task: Any, url: str) -> str:
    """What ^C at a prompt leaves: the task, still waiting, and the commands that answer it later."""
    kind = task.interaction.kind if task.interaction is not None else "question"
    later = (
        f"`nylorun answer {url} {task.id} VALUE`"
        if kind == "question"
        else f"`nylorun approve {url} {task.id}` (or with --deny)"
    )
    return f"Cancelled: no answer sent. Task {task.id} still waits ({task.short_state}) for your answer: give it with {later}."
