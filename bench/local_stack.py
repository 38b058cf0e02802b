"""Figures 4 and 5, on the local Runtime (moto for AWS, the real handlers in-process, the api under uvicorn).

4. AWS calls per operation: every boto3 call the Runtime's own clients make (a botocore `before-call` hook on
   each client `nylorun.wiring.Runtime.client` makes: the api's and every function's), by service, plus the
   Lambda invocations of our functions (the api function once per request, the others as Step Functions and
   the event source mappings invoke them), and the Step Functions state transitions (`*StateEntered` events
   in the execution's history). Calls by the local stand-ins for AWS itself (the pollers, moto) are not ours
   and are not counted. Each operation is measured from a quiet Runtime until it is quiet again.
5. Queue handoff: several messages sent at once to one context queue behind its first turn; the gaps from
   one turn's end to the next turn's start (timestamps taken in the agent's code).
"""

from __future__ import annotations

import functools
import itertools
import os
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import nylorun_local.pollers as local_pollers
from nylorun.engine import Agent, Skill, Turn
from nylorun.profile.extensions import INTERACTIONS
from nylorun.wiring import Runtime
from nylorun_local import lambda_shim
from nylorun_local.runtime import LocalOptions, LocalRuntime

TOKEN = "bench-token"
OTHER_TOKEN = "bench-other-token"  # a second subject (figure 6: fair push)
# Figure 6: the push function's environments as processes (local/nylorun_local/push_processes.py), as Lambda runs
# them; the other figures keep the threads, whose AWS calls the bench counts in-process.
BENCH_PUSH_PROCESSES = int(os.environ.get("NYLORUN_LOCAL_PUSH_PROCESSES") or 8)
SKILLS = [Skill(id="bench", name="Bench", description="Benchmark agent.", tags=["bench"])]
SERVICES = ("dynamodb", "stepfunctions", "sqs", "events", "lambda")
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}


# ---------------------------------------------------------------- counting
@dataclass
class CallCounter:
    """AWS calls made by the Runtime's clients, and invocations of its functions, by (function, service, op)."""

    labels: dict[int, str] = field(default_factory=dict)  # id(Runtime) -> function
    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    log: list[tuple[float, str, str]] = field(default_factory=list)  # (perf_counter, function, service)
    changes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def on_call(self, runtime: Runtime, *, model: Any, **_: Any) -> None:
        self._add(self.labels.get(id(runtime), "unknown"), model.service_model.service_name, model.name)

    def on_invoke(self, function: str) -> None:
        self._add(function, "lambda", "Invoke")

    def _add(self, function: str, service: str, operation: str) -> None:
        with self._lock:
            self.calls[(function, service, operation)] += 1
            self.log.append((time.perf_counter(), function, service))
            self.changes += 1

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.log.clear()

    def snapshot(self) -> Counter[tuple[str, str, str]]:
        with self._lock:
            return Counter(self.calls)


@contextmanager
def counting(counter: CallCounter, function_names: Callable[[], dict[str, str]]) -> Iterator[None]:
    """Hook every client the Runtime makes, and count our functions' in-process Lambda invocations."""
    make_client, invoke = Runtime.client, lambda_shim.invoke_registered

    def client(runtime: Runtime, name: str) -> Any:
        made = make_client(runtime, name)
        made.meta.events.register("before-call", functools.partial(counter.on_call, runtime))
        return made

    def invoke_counted(function_name: str, event: dict[str, Any], environment: int = 0) -> tuple[Any, str | None]:
        counter.on_invoke(function_names().get(function_name, function_name))
        return invoke(function_name, event, environment)

    Runtime.client = client  # type: ignore[method-assign, assignment]
    lambda_shim.invoke_registered = invoke_counted
    local_pollers.invoke_registered = invoke_counted  # type: ignore[attr-defined]
    try:
        yield
    finally:
        Runtime.client = make_client  # type: ignore[method-assign]
        lambda_shim.invoke_registered = invoke
        local_pollers.invoke_registered = invoke  # type: ignore[attr-defined]


def _short(logical_id: str) -> str:
    return logical_id.removesuffix("Function").lower()


# ---------------------------------------------------------------- the local Runtime
class Bench:
    """The local Runtime with counting on, and the calls the measurements make."""

    def __init__(self) -> None:
        self.counter = CallCounter()
        self.local = LocalRuntime(
            LocalOptions(
                port=0,
                auth="dev",
                dev_tokens={TOKEN: "bench", OTHER_TOKEN: "bench-other"},
                a2a_wait_ms=20_000,
                # The push function's environments in processes of their own, as on Lambda (figure 6).
                # The figures measure throughput, not quotas: room for the fair-push figure's 1,000 configs.
                extra_env={"NYLORUN_MAX_PUSH_CONFIGS_PER_TASK": "1000", "NYLORUN_MAX_PUSH_CONFIGS_PER_SUBJECT": "2000"},
            )
        )
        self._names: dict[str, str] = {}  # Lambda function name -> short name
        self._http = httpx.Client(timeout=60)

    def function_names(self) -> dict[str, str]:
        return self._names

    @contextmanager
    def running(self) -> Iterator[Bench]:
        with counting(self.counter, self.function_names):
            try:
                self.local.start_in_thread()
                assert self.local.stack is not None and self.local.runtime is not None
                self._names = {name: _short(lid) for lid, name in self.local.stack.function_names.items()}
                self.counter.labels[id(self.local.runtime)] = "api"
                # Each function module built its own Runtime at import (as each Lambda function does).
                for logical_id, module in self.local._functions.items():
                    self.counter.labels[id(getattr(module, "runtime", None))] = _short(logical_id)
                yield self
            finally:
                self._http.close()
                self.local.stop()

    def add_agent(self, agent: Agent) -> None:
        self.local.add_agent(agent)

    # ------------------------------------------------------------ calls
    def rpc(
        self, agent: str, method: str, params: dict[str, Any], extensions: bool = False, token: str = TOKEN
    ) -> dict[str, Any]:
        headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}"}
        if extensions:
            headers["A2A-Extensions"] = INTERACTIONS
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params}
        response = self._http.post(self.local.agent_url(agent), json=body, headers=headers)
        response.raise_for_status()
        answer = dict(response.json())
        if "error" in answer:
            raise RuntimeError(f"{method} failed: {answer['error']}")
        return dict(answer["result"])

    def send(self, agent: str, text: str, **message: Any) -> dict[str, Any]:
        """SendMessage with returnImmediately: the task as created (no polling calls while it runs)."""
        params = {
            "message": {
                "messageId": f"m-{uuid.uuid4()}",
                "role": "ROLE_USER",
                "parts": [{"text": text}],
                **message,
            },
            "configuration": {"returnImmediately": True},
        }
        return dict(self.rpc(agent, "SendMessage", params, extensions="extensions" in message)["task"])

    def get_task(self, agent: str, task_id: str) -> dict[str, Any]:
        return self.rpc(agent, "GetTask", {"id": task_id}, extensions=True)

    def wait_state(self, agent: str, task_id: str, states: set[str], timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            task = self.get_task(agent, task_id)
            if task["status"]["state"] in states or time.monotonic() > deadline:
                return task
            time.sleep(0.05)

    # ------------------------------------------------------------ quiet, executions
    def settle(self, quiet: float = 0.8, timeout: float = 30) -> None:
        """Until neither the Runtime's clients nor our functions were called for `quiet` seconds."""
        deadline = time.monotonic() + timeout
        seen, since = self.counter.changes, time.monotonic()
        while time.monotonic() - since < quiet and time.monotonic() < deadline:
            time.sleep(0.05)
            if self.counter.changes != seen:
                seen, since = self.counter.changes, time.monotonic()

    def execution(self, task_id: str) -> tuple[str, int]:
        """The turn execution's status and its state transitions (`*StateEntered` events)."""
        assert self.local.stack is not None
        sfn = self.local.aws.client("stepfunctions")
        arn = self.local.stack.state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{task_id}"
        status = sfn.describe_execution(executionArn=arn)["status"]
        entered = 0
        for page in sfn.get_paginator("get_execution_history").paginate(executionArn=arn):
            entered += sum(1 for e in page["events"] if e["type"].endswith("StateEntered"))
        return str(status), entered

    def finished_execution(self, task_id: str, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        status, entered = self.execution(task_id)
        while status == "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.05)
            status, entered = self.execution(task_id)
        return entered


# ---------------------------------------------------------------- figure 4
def _approval_agent() -> Agent:
    agent = Agent(name="bench-approve", description="Asks one approval, then replies.", skills=SKILLS)

    @agent.turn
    def run(turn: Turn) -> None:
        turn.reply("approved" if turn.approval("Proceed?") else "declined")

    return agent


@dataclass
class Measured:
    calls: Counter[tuple[str, str, str]]
    requests: int  # api function invocations (one per JSON-RPC request)
    transitions: int | None = None

    def report(self, functions: set[str] | None = None) -> dict[str, Any]:
        calls = Counter({k: n for k, n in self.calls.items() if functions is None or k[0] in functions})
        calls[("api", "lambda", "Invoke")] += self.requests
        by_service = {s: sum(n for (_, svc, _), n in calls.items() if svc == s) for s in SERVICES}
        return {
            "by_service": by_service,
            "total": sum(by_service.values()),
            "by_function": {
                f: dict(
                    sorted(Counter({f"{s}.{op}": n for (fn, s, op), n in calls.items() if fn == f}).items())
                )
                for f in sorted({fn for fn, _, _ in calls})
            },
            "sfn_state_transitions": self.transitions if functions is None else None,
        }


def aws_calls(bench: Bench) -> dict[str, Any]:
    bench.add_agent(_approval_agent())
    done = bench.send("echo", "hello")
    bench.wait_state("echo", done["id"], TERMINAL)

    def measure(action: Callable[[], tuple[int, str | None]]) -> Measured:
        bench.settle()
        bench.counter.reset()
        requests, task_id = action()
        transitions = bench.finished_execution(task_id) if task_id else None
        bench.settle()
        return Measured(bench.counter.snapshot(), requests, transitions)

    def one_request(method: str, params: dict[str, Any]) -> Callable[[], tuple[int, str | None]]:
        def action() -> tuple[int, str | None]:
            bench.rpc("echo", method, params)
            return 1, None

        return action

    get_task = measure(one_request("GetTask", {"id": done["id"]}))
    list_tasks = measure(one_request("ListTasks", {}))
    plain = measure(lambda: (1, str(bench.send("echo", "hello")["id"])))

    def approval_round_trip() -> tuple[int, str | None]:
        task = bench.send("bench-approve", "refund please")
        bench.settle()
        with paused(bench.counter):
            waiting = bench.wait_state("bench-approve", task["id"], {"TASK_STATE_AUTH_REQUIRED"})
        interaction = waiting["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
        bench.send(
            "bench-approve",
            "approve",
            taskId=task["id"],
            extensions=[INTERACTIONS],
            metadata={INTERACTIONS: {"interactionId": interaction, "approved": True}},
        )
        return 2, str(task["id"])

    approval = measure(approval_round_trip)
    return {
        "get_task": get_task.report(),
        "list_tasks": list_tasks.report(),
        "send_message_new_turn": plain.report({"api"}),
        "plain_turn": plain.report(),
        "approval_round_trip": approval.report(),
        "note": (
            "SendMessage with returnImmediately; a blocking SendMessage adds one DynamoDB Query per poll while "
            "it waits. lambda = invocations of our functions; the api function's is one per request."
        ),
    }


@contextmanager
def paused(counter: CallCounter) -> Iterator[None]:
    """Calls made inside the block (the bench's own reads) are not counted."""
    before = counter.snapshot()
    try:
        yield
    finally:
        with counter._lock:
            counter.calls = before


# ---------------------------------------------------------------- figure 5
def queue_handoff(bench: Bench, turns: int = 5) -> dict[str, Any]:
    """`turns` messages to one context, sent while its first turn holds it; gaps end → next start, and the
    AWS calls and invocations the turn function made in each gap (the handoff's critical path)."""
    hold = threading.Event()
    marks: dict[str, tuple[float, float]] = {}
    agent = Agent(name="bench-serial", description="Records when its turns start and end.", skills=SKILLS)

    @agent.turn
    def run(turn: Turn) -> None:
        started = time.perf_counter()
        if turn.text == "first":
            hold.wait(30)  # keeps the context busy until every message is queued
        turn.reply(turn.text)
        marks[turn.task_id] = (started, time.perf_counter())

    bench.add_agent(agent)
    bench.settle()
    bench.counter.reset()
    context_id = f"ctx-{uuid.uuid4()}"
    first = bench.send("bench-serial", "first", contextId=context_id)
    queued = [bench.send("bench-serial", f"turn {i}", contextId=context_id) for i in range(2, turns + 1)]
    hold.set()
    for task in [first, *queued]:
        bench.wait_state("bench-serial", task["id"], TERMINAL)
    spans = sorted(marks[t["id"]] for t in [first, *queued])
    gaps = [(nxt[0] - prev[1]) * 1000 for prev, nxt in itertools.pairwise(spans)]
    log = list(bench.counter.log)
    calls = [
        sum(1 for at, function, _ in log if prev[1] < at < nxt[0] and function == "turn")
        for prev, nxt in itertools.pairwise(spans)
    ]
    return {
        "median_ms": round(statistics.median(gaps), 1),
        "gaps_ms": [round(g, 1) for g in gaps],
        "turn_function_calls_per_gap": calls,
        "turns": turns,
        "queued_when_sent": sum(1 for t in queued if t["status"]["state"] == "TASK_STATE_SUBMITTED"),
    }
