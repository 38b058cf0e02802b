"""The long-running commands of the docs (`make run`, `nylorun serve|webhooks|console`, `make docs-serve`) started in
the background on free ports, checked to come up, and shared by the pages that start the same one."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from doc_blocks import ROOT, one_line
from nylorun_local.aws import free_port

SERVER = re.compile(
    r"^(?:\w+=\S+ )*(make run|make docs-serve|nylorun serve|nylorun webhooks|nylorun console)\b"
)
DEFAULT_PORT = {"make run": 8080, "nylorun serve": 8080, "nylorun webhooks": 8090, "nylorun console": 8090,
                "make docs-serve": 8000}  # fmt: skip
PORT_ARG = re.compile(r"\s--port[ =](\d+)")
BANNER_TOKEN = re.compile(r"bearer token for subject '[^']+': (\S+)")


def is_server(command: str) -> bool:
    return SERVER.match(one_line(command)) is not None


def doc_port(command: str) -> int:
    line = one_line(command)
    given = PORT_ARG.search(line)
    match = SERVER.match(line)
    assert match is not None
    return int(given[1]) if given else DEFAULT_PORT[match[1]]


def on_port(command: str, port: int) -> str:
    """The command made to listen on `port` (the docs' own ports may be taken on this machine)."""
    line = PORT_ARG.sub("", one_line(command)).removesuffix("&").rstrip()
    kind = SERVER.match(line)
    assert kind is not None
    if kind[1] == "make run":
        # The checkout's .venv is installed already: `-o` keeps make from reinstalling it when pyproject.toml is
        # newer than its stamp.
        line = line.replace("make run", "make -o .venv/.installed run", 1)
        if 'ARGS="' in line:
            return line.replace('ARGS="', f'ARGS="--port {port} ', 1)
        return f'{line} ARGS="--port {port}"'
    if kind[1] == "make docs-serve":
        return f"{line.replace('make docs-serve', 'make -o .venv/.installed docs-serve', 1)} DOCS_ADDR=127.0.0.1:{port}"
    return f"{line} --port {port}"


@dataclass
class Server:
    command: str  # as run (on its own port)
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    @property
    def token(self) -> str | None:
        found = BANNER_TOKEN.search(self.output)
        return found[1] if found else None


class Servers:
    """Each distinct server command started once (for every page that starts it) and stopped at the end."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.folder = Path(tempfile.mkdtemp(prefix="doc-servers-"))
        self.state = (
            self.folder / "state"
        )  # the servers' state files: `nylorun admin --local` finds them there
        self.running: dict[str, Server] = {}

    def start(self, command: str, env: dict[str, str], where: str) -> Server:
        """`command` in the background, on a free port (`on_port`); returns once it answers there. The same command
        started before is the same server."""
        port = free_port()
        if command in self.running and self.running[command].process.poll() is None:
            return self.running[command]
        key, command = command, on_port(command, port)
        log = self.folder / f"server-{port}.log"
        process = subprocess.Popen(
            ["bash", "-c", command],
            cwd=ROOT, env={**env, "NYLORUN_STATE_DIR": str(self.state)}, stdin=subprocess.DEVNULL,
            stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        server = Server(command, port, process, log)
        deadline = time.monotonic() + 90
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                self.stop(server)
                raise AssertionError(
                    f"{where}: the server did not come up on port {port}:\n{server.output[-3000:]}"
                )
            time.sleep(0.2)
        if "nylorun serve" in command or "make -o .venv/.installed run" in command:
            _wait_for_agents(server, where)
        self.running[key] = server
        return server

    def stop(self, server: Server) -> None:
        if server.process.poll() is None:
            os.killpg(server.process.pid, signal.SIGINT)  # ^C, as the reader stops it
            try:
                server.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait()

    def stop_all(self) -> None:
        for server in self.running.values():
            self.stop(server)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _wait_for_agents(server: Server, where: str) -> None:
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{server.port}/v1/a2a/agents", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{where}: no Agents listed on port {server.port}:\n{server.output[-3000:]}")


def quoted(path: Path) -> str:
    return shlex.quote(str(path))


__all__ = ["Server", "Servers", "doc_port", "free_port", "is_server", "on_port", "quoted"]
