"""A terminal's stdin for prompts that ^C ends at once, however soon after the prompt it comes."""

from __future__ import annotations

import os
import select
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class WakeupStdin:
    """`readline` waits on the terminal and on the signal wakeup pipe together.

    A blocking read of the terminal (input(), readline) misses a SIGINT that lands just before the read begins,
    or in another thread: Python runs its handler only when the main thread's next bytecode comes, and a read
    of the terminal sleeps until a line is typed. The wakeup pipe (signal.set_wakeup_fd) holds every signal
    the moment it lands, so select() sees it whenever it came.
    """

    def __init__(self, stdin: TextIO, wakeup: int) -> None:
        self._stdin, self._wakeup = stdin, wakeup

    def readline(self) -> str:
        while True:
            ready, _, _ = select.select([self._stdin.fileno(), self._wakeup], [], [])
            if self._wakeup in ready:
                # A signal landed: its Python handler (default_int_handler for ^C) runs at the loop's next
                # bytecode and raises KeyboardInterrupt there; raising here too would raise it twice.
                os.read(self._wakeup, 512)
                continue
            if self._stdin.fileno() in ready:
                break
        line = self._stdin.readline()
        if not line:
            raise EOFError  # what input() raises at the end of stdin; rich would otherwise ask again forever
        return line


@contextmanager
def wakeup_stdin() -> Iterator[WakeupStdin | None]:
    """A WakeupStdin for a terminal's stdin in the main thread; None elsewhere (a pipe's buffered lines would
    hide from select, and only the main thread may set the wakeup fd): there input() does."""
    stdin = sys.stdin
    if not _is_terminal(stdin):
        yield None
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # set_wakeup_fd refuses a blocking fd
    try:
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(read_end)
        os.close(write_end)
        yield None
        return
    try:
        yield WakeupStdin(stdin, read_end)
    finally:
        signal.set_wakeup_fd(previous)
        os.close(read_end)
        os.close(write_end)


def _is_terminal(stdin: TextIO | None) -> bool:
    try:
        return stdin is not None and stdin.isatty() and stdin.fileno() >= 0
    except (AttributeError, ValueError, OSError):  # replaced by an object without a file, or closed
        return False
