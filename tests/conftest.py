"""Shared fixtures: one local Runtime per test session (moto for AWS, the real handlers, uvicorn on loopback).

Two dev subjects call it: alice (`ALICE`) and bob (`BOB`). Tests that need other settings build their own
app over the same stack (see `make_app`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from nylorun_local.aws import free_port
from nylorun_local.runtime import LocalOptions, LocalRuntime

# Local Runtimes say how `nylorun admin --local PORT` reaches them in a state file: the tests' go to a folder of
# their own, not the user's ~/.cache/nylorun.
os.environ.setdefault("NYLORUN_STATE_DIR", tempfile.mkdtemp(prefix="nylorun-state-"))

T = TypeVar("T")

ALICE = "tok-alice"
BOB = "tok-bob"
A2A = {"A2A-Version": "1.0"}


@pytest.fixture(scope="session")
def local_runtime() -> Iterator[LocalRuntime]:
    runtime = LocalRuntime(
        LocalOptions(
            port=0,
            auth="dev",
            dev_tokens={ALICE: "alice", BOB: "bob"},
            push_secret="whsec_" + "dGVzdC1zZWNyZXQtZm9yLW55bG9ydW4tdGVzdHMtMzI=",
            a2a_wait_ms=20_000,
            # Push retries shrunk so tests see backoff, recovery and dead-lettering in seconds.
            extra_env={
                "NYLORUN_PUSH_RETRY_BASE_SECONDS": "1",
                "NYLORUN_PUSH_RETRY_MAX_SECONDS": "1",
                "NYLORUN_PUSH_MAX_AGE_SECONDS": "6",
                # Quotas far above the defaults: the whole session calls as two subjects, whose waiting tasks
                # add up across hundreds of tests, and one test sends 50 turns to one context. The quotas'
                # own tests (tests/reliability/test_quotas.py) build an api with the defaults.
                "NYLORUN_MAX_TURNS_PER_CONTEXT": "1000",
                "NYLORUN_MAX_TURNS_PER_SUBJECT": "100000",
                "NYLORUN_MAX_PUSH_CONFIGS_PER_TASK": "1000",
                "NYLORUN_MAX_PUSH_CONFIGS_PER_SUBJECT": "100000",
            },
        )
    )
    runtime.start_in_thread()
    from nylorun.observability import logger

    logger.setLevel("WARNING")
    yield runtime
    runtime.stop()


@pytest.fixture(scope="session")
def base_url(local_runtime: LocalRuntime) -> str:
    return local_runtime.base_url


@pytest.fixture()
def agent_url(local_runtime: LocalRuntime) -> Callable[[str], str]:
    return local_runtime.agent_url


def auth(token: str = ALICE, **extra: str) -> dict[str, str]:
    return {**A2A, "Authorization": f"Bearer {token}", **extra}


def rpc(
    url: str, method: str, params: Any = None, *, token: str = ALICE, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """One JSON-RPC call over real HTTP; returns the decoded body (asserts HTTP 200)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method}
    if params is not None:
        body["params"] = params
    response = httpx.post(url, json=body, headers=headers if headers is not None else auth(token), timeout=60)
    assert response.status_code == 200, response.text
    return dict(response.json())


def poll(read: Callable[[], T], done: Callable[[T], bool], timeout: float = 30.0, every: float = 0.05) -> T:
    """Read until `done(value)` or the deadline; returns the last value read (the caller asserts on it)."""
    deadline = time.monotonic() + timeout
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(every)
        value = read()
    return value


def watch_clients(
    local_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch, attach: Callable[[str, Any], None]
) -> None:
    """`attach(function, client)` for every boto3 client of the local Runtime's api ("api") and functions ("turn",
    "push", ...): those their adapters hold now (two levels down: adapter, then its own parts; wiring makes each on
    first use) and each one made later."""
    from botocore.client import BaseClient
    from nylorun.wiring import LazyClient, Runtime

    assert local_runtime.runtime is not None
    functions = {id(local_runtime.runtime): ("api", local_runtime.runtime)}
    for logical_id, module in local_runtime._functions.items():
        functions[id(module.runtime)] = (logical_id.removesuffix("Function").lower(), module.runtime)
    for name, runtime in functions.values():
        for adapter in list(vars(runtime).values()):
            for holder in [adapter, *getattr(adapter, "__dict__", {}).values()]:
                for value in list(getattr(holder, "__dict__", {}).values()):
                    if isinstance(value, LazyClient):
                        value = value.client
                    if isinstance(value, BaseClient):
                        attach(name, value)
    original = Runtime.client

    def client(self: Runtime, service: str) -> Any:  # a client made later (an adapter first used now)
        made = original(self, service)
        if id(self) in functions:
            attach(functions[id(self)][0], made)
        return made

    monkeypatch.setattr(Runtime, "client", client)


def held_agent(local_runtime: LocalRuntime, name: str, hold: threading.Event, artifact: str | None = None) -> None:
    """Serve an Agent whose turn waits for `hold` (up to 30 s), says "halfway", adds an artifact with the text
    `artifact` if given, then replies "done"."""
    from nylorun.engine import Agent, Turn

    agent = Agent(name=name, description="Holds its turn until told.", skills=[])

    @agent.turn
    def run(turn: Turn) -> None:
        hold.wait(30)
        turn.say("halfway")
        if artifact is not None:
            turn.artifact(artifact, name="report")
        turn.reply("done")

    local_runtime.add_agent(agent)


def user_message(text: str = "hello", message_id: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": message_id or f"m-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


@pytest.fixture()
def table_items(local_runtime: LocalRuntime) -> Callable[[], list[dict[str, Any]]]:
    """Every item in the tasks table (to prove bad input changed nothing)."""

    def scan() -> list[dict[str, Any]]:
        assert local_runtime.stack is not None
        items = local_runtime.aws.table_items(local_runtime.stack.table_name)
        return sorted(items, key=lambda i: (i["PK"]["S"], i["SK"]["S"]))

    return scan


UNIT = Path(__file__).parent / "unit"

# The test files that take longest (about a minute or more each on two cores), longest first. They run first, so
# under pytest-xdist (`make test`: --dist loadfile --no-loadscope-reorder) no worker is left running one of them
# alone at the end while the others have finished.
LONGEST_FIRST = (
    "test_own_agent.py",
    "test_cli.py",
    "test_extension_visibility.py",
    "test_busy_contexts.py",
    "test_installed.py",
    "test_text_roundtrip.py",
    "test_console.py",  # headless Chromium on one worker: about a minute
    "test_doc_commands.py",  # every command of the docs, its servers started as a reader starts them
    "test_doc_commands_operate.py",  # docs/operate.md's admin commands
    "test_doc_commands_contributing.py",  # docs/contributing.md runs the unit tests
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep pytest's order


@pytest.fixture(autouse=True)
def unit_tier_stays_off_aws(request: pytest.FixtureRequest) -> Iterator[None]:
    """The unit tier runs on plain objects and the in-memory adapters: when a run holds only tests/unit
    (`make unit`), every test checks that nothing imported moto (a test that needs AWS belongs in
    tests/integration)."""
    yield
    unit_only = all(UNIT in Path(item.path).parents for item in request.session.items)
    if unit_only and "moto" in sys.modules:
        pytest.fail("moto was imported by the unit tier: unit tests use the in-memory adapters only")


@contextmanager
def nylorun_serve(args: list[str], ready: str, **popen: Any) -> Iterator[str]:
    """`nylorun serve ARGS` in a subprocess on a free port, as a user starts it: yields the Agents' base URL once
    GET base/`ready` answers 200, and stops it with ^C (SIGINT) afterwards, failing if it does not stop."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nylorun_client.command", "serve", *args, "--port", str(port)],
        **({"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True} | popen),
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1/a2a/agents"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/{ready}", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"nylorun serve did not start: {process.communicate()[0][-2000:]}")
        time.sleep(0.2)
    yield base
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("nylorun serve did not stop on SIGINT")
