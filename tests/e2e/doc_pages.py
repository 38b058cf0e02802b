"""One page's commands run in order in ONE bash process (exports carry from block to block), against the servers
the page starts (or the reader's `make run`), with each command's output kept for the checks."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
from consent import connect
from doc_blocks import ROOT, Block, Command, one_line
from doc_servers import Server, Servers, doc_port, is_server, quoted

PLACEHOLDER_TOKEN = (
    "dev-paste-the-token-from-the-banner"  # "paste the token from the banner" (docs/get-started.md)
)
CONSENT = re.compile(r"http://127\.0\.0\.1:\d+/v1/a2a/connections/start\?[^\s\"'<>\\]+")
WORD = re.compile(r"\b[A-Za-z][A-Za-z_]{2,}\b")
TIMEOUT = 240


@dataclass
class Step:
    """A command or a whole Python program, as the page has it, and what it printed here."""

    source: Command | Block
    script: str = ""
    output: str = ""
    server: Server | None = None
    ended: bool = False
    token: str | None = None  # the bearer token the page's commands use at this step

    @property
    def where(self) -> str:
        return self.source.where

    @property
    def block(self) -> Block:
        return self.source.block if isinstance(self.source, Command) else self.source


@dataclass
class PageRun:
    steps: list[Step]
    exit_code: int
    consents: list[str] = field(default_factory=list)

    def servers_output(self) -> str:
        return "\n".join(step.server.output for step in self.steps if step.server is not None)


def words(lines: list[str]) -> list[str]:
    """The words of what a page shows that any run prints too: whole words of letters (ids, numbers, hashes and
    times differ from run to run and are left out)."""
    return [word for line in lines for word in WORD.findall(line)]


def missing_words(shown: list[str], printed: str) -> list[str]:
    return [word for word in dict.fromkeys(words(shown)) if word not in printed]


def rewrite(text: str, ports: dict[int, int], token: str | None) -> str:
    """The docs' addresses made this run's (the docs' ports may be taken here), the banner's token pasted."""
    for doc, actual in ports.items():
        text = re.sub(rf"\b(127\.0\.0\.1|localhost):{doc}\b", rf"\g<1>:{actual}", text)
    return text.replace(PLACEHOLDER_TOKEN, token) if token else text


def run_page(steps: list[Step], servers: Servers, reader: Server, env: dict[str, str],
             answers: dict[int, str]) -> PageRun:  # fmt: skip
    """Run the steps in order; `reader` is the Runtime the reader started with `make run` (docs/get-started.md),
    on the docs' port 8080 until the page starts its own; `answers[i]` is what the reader types to step i."""
    folder = Path(tempfile.mkdtemp(prefix="doc-page-"))
    state, acks = folder / "state", folder / "acks"
    state.mkdir()
    acks.mkdir()
    ports, token = {8080: reader.port}, reader.token
    # Each marker on a line of its own: curl's output ends without a newline.
    lines = ["set -euo pipefail", "exec 2>&1",
             f'__ack() {{ printf "\\n@@END %s\\n" "$1"; while [ ! -e {quoted(acks)}/$1 ]; do sleep 0.02; done; }}',
             f"ln -sf {quoted(servers.state)}/local-{reader.port}.json {quoted(state)}/local-8080.json"]  # fmt: skip
    for index, step in enumerate(steps):
        lines.append(f'echo "@@CMD {index}"')
        step.token = token
        if isinstance(step.source, Block):  # a whole Python program
            program = folder / f"block-{step.source.line}.py"
            program.write_text(rewrite(step.source.text, ports, token))
            step.script = f"python {quoted(program)}"
        elif is_server(step.source.text):
            doc = doc_port(step.source.text)
            command = rewrite(one_line(step.source.text).split(" # ")[0].strip(), ports, token)
            step.server = servers.start(command, {**env, "NYLORUN_TOKEN": token or ""}, step.where)
            ports[doc], token = step.server.port, step.server.token or token
            step.script = f"ln -sf {quoted(servers.state)}/local-{step.server.port}.json {quoted(state)}/local-{doc}.json"
        else:
            step.script = rewrite(step.source.text, ports, token)
            if index in answers:
                typed = folder / f"typed-{index}"
                typed.write_text(answers[index])
                step.script += f" < {quoted(typed)}"
        lines += [step.script, f"__ack {index}"]
    script = folder / "page.sh"
    script.write_text("\n".join(lines) + "\n")
    page_env = {**env, "NYLORUN_TOKEN": reader.token or "", "NYLORUN_STATE_DIR": str(state),
                "HOME": str(folder / "home"), "TMPDIR": str(folder), "COLUMNS": "500",
                "PYTHONUNBUFFERED": "1"}  # fmt: skip
    (folder / "home").mkdir()
    return _follow(script, page_env, steps, acks)


def _follow(script: Path, env: dict[str, str], steps: list[Step], acks: Path) -> PageRun:
    """Run the script, keeping each step's output; a connection's link is opened and allowed as the reader does
    (tests/e2e/consent.py) before the next command runs."""
    process = subprocess.Popen(["bash", str(script)], cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    timer = threading.Timer(TIMEOUT, lambda: os.killpg(process.pid, 9))
    timer.start()
    run = PageRun(steps, 0)
    current: Step | None = None
    assert process.stdout is not None
    try:
        for raw in process.stdout:
            line = raw.decode(errors="replace")
            if line.startswith("@@CMD "):
                current = steps[int(line.split()[1])]
                continue
            if line.startswith("@@END "):
                index = int(line.split()[1])
                steps[index].ended = True
                (acks / str(index)).touch()
                continue
            if current is not None:
                current.output += line
            for url in CONSENT.findall(line):
                if url not in run.consents:
                    run.consents.append(url)
                    connect(url)
                    _until_resumed(url, current.token if current else None)
    finally:
        timer.cancel()
        run.exit_code = process.wait()
    return run


INTERACTIONS = "https://docs.nylorun.com/a2a/interactions/v1"


def _until_resumed(authorization_url: str, token: str | None) -> None:
    """Wait (bounded) until the turn that asked for the connection has gone on: its task no longer shows the
    connection's interaction (the page's next command reads the task after "the turn goes on by itself")."""
    query = parse_qs(urlsplit(authorization_url).query)
    task, asked = query["task"][0], query["interaction"][0]
    base = authorization_url.split("/v1/a2a/", 1)[0]
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0", "A2A-Extensions": INTERACTIONS}
    agents = [
        a["url"] for a in httpx.get(f"{base}/v1/a2a/agents", headers=headers, timeout=30).json()["agents"]
    ]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for url in agents:
            body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task}}
            status = (
                httpx.post(url, json=body, headers=headers, timeout=30).json().get("result", {}).get("status")
            )
            if status is None:
                continue  # another Agent's URL: not its task
            shown = (status.get("message") or {}).get("metadata", {}).get(INTERACTIONS, {})
            if shown.get("interactionId") != asked:
                return
        time.sleep(0.1)
    raise AssertionError(f"the turn of task {task} did not go on within 60 s of its connection being allowed")
