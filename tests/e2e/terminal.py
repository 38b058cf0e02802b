"""Run a command under a pseudo-terminal, as a person's shell runs it: what it writes is what a terminal shows."""

from __future__ import annotations

import os
import pty
import select
import signal
import time
from collections.abc import Sequence


def run_in_pty(
    argv: Sequence[str], env: dict[str, str], *, typed: Sequence[tuple[str, bytes]] = (), timeout: float = 90
) -> tuple[int, str]:
    """(exit code, all the terminal received). `typed`: when the output so far holds the text, type the bytes
    (a line, or b"\\x03" for ^C: the terminal turns it into SIGINT). A bounded read loop: past `timeout` the
    command is killed and the code is -9."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        os.execvpe(argv[0], list(argv), env)
    seen, pending = b"", list(typed)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the child is gone and the pty closed
                    break
                if not chunk:
                    break
                seen += chunk
            if pending and pending[0][0].encode() in seen:
                os.write(fd, pending.pop(0)[1])
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), seen.decode("utf-8", "replace")
