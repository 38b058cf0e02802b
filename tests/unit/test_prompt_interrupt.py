"""^C at a `nylorun` prompt ends it even when the SIGINT does not wake the read: the signal landed in another
thread, as it does when it comes just as the prompt appears (a loaded machine) and Python's handler has not
run yet. The prompt reads a real pseudo-terminal, as a person's shell gives it."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from nylorun.profile.extensions import Interaction
from nylorun_client.cli.human import HumanOutput
from nylorun_client.prompts import PromptCancelled
from nylorun_client.views import TaskView

GUARD_SECONDS = 60  # only against hanging forever: the old prompt read on until a line came, so one is typed then


@pytest.fixture()
def terminal_stdin(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """sys.stdin is a pseudo-terminal's slave; yields its master, where a person's typing arrives."""
    master, slave = os.openpty()
    stdin = open(slave, encoding="utf-8")  # noqa: SIM115 - closed below
    monkeypatch.setattr(sys, "stdin", stdin)
    yield master
    stdin.close()
    os.close(master)


def reading(thread: int) -> None:
    """Wait until `thread` sleeps in the kernel on something other than a lock (the GIL): the prompt's read."""
    for _ in range(GUARD_SECONDS * 100):
        with open(f"/proc/self/task/{thread}/stat") as stat, open(f"/proc/self/task/{thread}/wchan") as wchan:
            state, waits_on = stat.read().rsplit(")", 1)[1].split()[0], wchan.read()
        if state == "S" and "futex" not in waits_on:
            return
        time.sleep(0.01)


def approval() -> TaskView:
    return TaskView(
        id="task-1",
        context_id="ctx-1",
        state="TASK_STATE_AUTH_REQUIRED",
        text="Approve the refund?",
        timestamp="",
        status_message_id="m-1",
        interaction=Interaction(interaction_id="i-1", kind="approval", prompt="Approve the refund?"),
        plan=[],
        telemetry=None,
        uncertain=None,
        artifacts=[],
        raw=None,  # type: ignore[arg-type]
    )


def test_ctrl_c_that_lands_in_another_thread_ends_the_approval_prompt(terminal_stdin: int) -> None:
    # Given a prompt for an approval, and a thread that gets the ^C (the main thread holds SIGINT back, as the
    # kernel picks another thread when the main one cannot take it at once)
    pressed = threading.Event()
    main = threading.get_native_id()

    def press_ctrl_c() -> None:
        pressed.wait()
        reading(main)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        if not done.wait(GUARD_SECONDS):
            typed.append("y")
            os.write(terminal_stdin, b"y\n")

    done = threading.Event()
    typed: list[str] = []  # what had to be typed after the ^C for the prompt to end
    helper = threading.Thread(target=press_ctrl_c, daemon=True)
    helper.start()
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        # When the person presses ^C as the prompt appears
        pressed.set()
        # Then the prompt ends: no answer is given and the command learns it was cancelled
        with pytest.raises(PromptCancelled) as cancelled:
            HumanOutput().ask(approval())
    finally:
        done.set()
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        helper.join()
    assert typed == [] and cancelled.value.task.id == "task-1"
