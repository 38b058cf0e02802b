"""docs/tutorial.md followed literally in a fresh folder: its files written from the blocks titled with their path,
its bash blocks run in order in one shell state (exports and `cd` carry over), `nylorun serve` started in the
background, `nylorun send` answered with what the page shows the reader typing, the reader's pytest run; each
command's output checked against the text block the page shows after it. Not run: the venv and pip steps (this
checkout's environment stands in; tests/e2e/test_installed.py installs the wheel) and the deploy steps (they need
AWS credentials): NOT_RUN lists them, and a bash line in neither list fails the test, so none goes unchecked."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from nylorun_local.aws import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TITLE = re.compile(r'title="([^"]+)"')
DOC_HOST = "127.0.0.1:8080"
# Lines the test does not run, each with why.
NOT_RUN = {
    "python3 -m venv .venv": "this checkout's .venv stands in for the reader's (its bin first on PATH)",
    "source .venv/bin/activate": "this checkout's .venv/bin is first on PATH",
    "pip install ": "the checkout's environment has the package; test_installed.py installs the wheel",
    "export NYLORUN_CHECKOUT=": "only the install and deploy steps use it",
    'cp agents/shop.py "$NYLORUN_CHECKOUT/agents/"': "deploy: copies into the reader's checkout",
    'cd "$NYLORUN_CHECKOUT"': "deploy",
    "make build": "deploy: tests/static/test_own_agent.py runs make build in a fresh folder",
    ".venv-sam/bin/sam deploy": "deploy: needs AWS credentials",
    "export BASE=$(aws cloudformation": "deploy: needs AWS credentials",
    "nylorun send $BASE/": "deploy: calls the deployed stack",
}
# Commands whose output the page shows only in part, as it says ("a few more lines", "adds the time").
PARTIAL = ("nylorun serve", "python -m pytest")
ANSWER = re.compile(r"^(?:Your answer|Approve\? \[y/n\]): (.*)$", re.MULTILINE)


def normalized(text: str, port: int) -> list[str]:
    """Lines with what differs from run to run (ids, the port, the bar's width, pytest's time) made the same."""
    text = text.replace(f"127.0.0.1:{port}", DOC_HOST)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>", text)
    text = re.sub(r"\b1-[0-9a-f]{8}-[0-9a-f]{24}\b", "<trace>", text)
    text = re.sub(r"\bia-[0-9a-f]{16}\b", "ia-<id>", text)
    text = re.sub(r"━+", "━", text)
    text = re.sub(r"(\d+ passed)(,.*| in .*)$", r"\1", text, flags=re.MULTILINE)
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def in_order(expected: list[str], actual: list[str]) -> bool:
    lines = iter(actual)
    return all(any(line == want for line in lines) for want in expected)


def commands(body: str) -> list[str]:
    return [line for line in body.replace("\\\n", " ").splitlines() if line.strip() and not line.startswith("#")]


class Shell:
    """One shell state across blocks: each block runs in bash from the last block's directory and exports."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.cwd, self.env, self.state = folder, env, folder / ".." / "tutorial-shell-state"
        self.state.write_text("")

    def script(self, lines: list[str]) -> str:
        state = shlex.quote(str(self.state.resolve()))
        return "\n".join(["set -e", f"cd {shlex.quote(str(self.cwd))}", f". {state}", *lines,
                          f"export -p > {state}.new", f"pwd > {state}.cwd"])  # fmt: skip

    def run(self, lines: list[str], stdin: str = "") -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["bash", "-c", self.script(lines)], input=stdin, env=self.env, capture_output=True,
                              text=True, timeout=120, check=False)  # fmt: skip
        if done.returncode == 0:
            self.state.write_text(Path(f"{self.state}.new").read_text())
            self.cwd = Path(Path(f"{self.state}.cwd").read_text().strip())
        return done


def test_the_tutorial_as_written(tmp_path: Path) -> None:
    # Given the page, and a fresh folder outside the repository, with this checkout's environment on PATH
    page = PAGE.read_text()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NYLORUN_", "PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONUNBUFFERED"] = "1"  # the banner arrives as it is printed, as on a terminal
    # The page shows lines whole, as the CLI prints them to a pipe; a COLUMNS inherited from the shell that started
    # pytest would make it wrap at that width instead (the telemetry line's trace id moved to a line of its own)
    env.pop("COLUMNS", None)
    shell = Shell(tmp_path, env)
    found = FENCE.findall(page)
    titled = [TITLE.search(attrs).group(1) for _, attrs, _ in found if TITLE.search(attrs)]  # type: ignore[union-attr]
    assert titled == ["agents/shop.py", "pytest.ini", "tests/test_shop.py"], titled
    served: subprocess.Popen[str] | None = None
    serve_log = tmp_path / "serve.log"
    serve_expected: list[str] = []
    problems: list[str] = []
    try:
        for index, (lang, attrs, body) in enumerate(found):
            title = TITLE.search(attrs)
            if title:  # When each file is written as shown, where the reader is
                (shell.cwd / title.group(1)).parent.mkdir(parents=True, exist_ok=True)
                (shell.cwd / title.group(1)).write_text(body)
                continue
            if lang != "bash":
                continue
            lines = [line.replace(DOC_HOST, f"127.0.0.1:{port}") for line in commands(body)]
            lines = [line for line in lines if not any(line.startswith(p) for p in NOT_RUN)]
            if not lines:
                continue
            after = found[index + 1] if index + 1 < len(found) else ("", "", "")
            expected = normalized(after[2], port) if after[0] == "text" else []
            if lines[0].startswith("nylorun serve"):  # And the Runtime is started as the page says, in the background
                assert len(lines) == 1, lines
                serve_expected = expected
                served = subprocess.Popen(["bash", "-c", shell.script([f"exec {lines[0]} --port {port}"])],
                                          env=env, stdout=serve_log.open("w"), stderr=subprocess.STDOUT, text=True)  # fmt: skip
                wait_until_served(f"http://127.0.0.1:{port}/v1/a2a/agents/shop/.well-known/agent-card.json", served)
                continue
            # And every other block runs, `nylorun send` answered as the page shows the reader answering
            done = shell.run(lines, "\n".join(ANSWER.findall(after[2])) + "\n")
            actual = normalized(done.stdout, port)
            partial = any(lines[0].startswith(p) for p in PARTIAL)
            if done.returncode != 0 or not (in_order(expected, actual) if partial else actual == expected):
                problems.append(f"{lines}\n  rc {done.returncode}\n  page: {expected}\n  got:  {actual}\n  {done.stderr[-1500:]}")
    finally:
        if served is not None:
            served.send_signal(signal.SIGINT)
            served.wait(timeout=30)
    # Then every command ran and printed what the page shows, and the Runtime's banner is the page's
    assert served is not None, "the page starts no `nylorun serve`"
    banner = normalized(serve_log.read_text(), port)
    assert in_order(serve_expected, banner), (serve_expected, banner)
    assert problems == [], "\n".join(problems)


def wait_until_served(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    pytest.fail(f"nylorun serve did not serve {url}")


def test_serve_names_the_missing_attribute_in_one_line(tmp_path: Path) -> None:
    # Given the tutorial's Agent module with its Agent under another attribute than `agent`
    agent = next(body for _, attrs, body in FENCE.findall(PAGE.read_text()) if 'title="agents/shop.py"' in attrs)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "shop.py").write_text(agent.replace("agent = Agent(", "refunds = Agent(").replace(
        "@agent.turn", "@refunds.turn"))  # fmt: skip
    # When `nylorun serve --agents shop` (no attribute) starts there
    env = {k: v for k, v in os.environ.items() if not k.startswith("NYLORUN_")}
    done = subprocess.run([sys.executable, "-m", "nylorun_client.command", "serve", "--no-examples", "--agents", "shop",
                           "--port", "0"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    # Then it stops with the page's message, naming the default attribute and the Agent the module has; no traceback
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == (
        "nylorun serve: NYLORUN_AGENTS names 'shop': module 'shop' has no attribute 'agent' (without ':attribute', "
        "the attribute is 'agent'); its Agents: shop:refunds"
    )
