"""Figure 6: fair push, on the local Runtime, its push function's environments processes of their own as
on Lambda (bench/local_stack.py BENCH_PUSH_PROCESSES).

One subject has a task with 1,000 push configs; when that task ends, its status fans out to all of them.
Meanwhile another subject runs an ordinary task with one push config. Measured: that other subject's delivery
latency (SendMessage sent → its COMPLETED status received by its receiver), in interleaved pairs: A, alone (5
runs); B, while the 1,000-config fan-out and its deliveries run (one run after another from the moment the big task
ends until half of the 1,000 have arrived, each counted only if it ended before the last arrived). Each pair's ratio
is B's median over A's; the figure is the median of the pairs' ratios, with min and max. Target: at most 2x.
Both receivers are on 127.0.0.1, each in a process of its own, and answer 204 at once. The configs are written to the table directly (the
figure is about delivery, not about making configs; a cap on configs per task would refuse the 1,000 over the
API).
"""

from __future__ import annotations

import http.server
import json
import multiprocessing
import statistics
import threading
import time
import uuid
from datetime import datetime
from multiprocessing.connection import Connection
from multiprocessing.queues import SimpleQueue
from multiprocessing.sharedctypes import Synchronized
from typing import Any

from nylorun.engine import Agent, Turn
from nylorun.ports import StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig, now_timestamp

from bench.local_stack import BENCH_PUSH_PROCESSES, OTHER_TOKEN, SKILLS, TERMINAL, Bench
from bench.summary import spread

TARGET = 2.0


class _Receiver:
    """A subject's webhook receiver, in a process of its own: receivers are the subjects' servers, never in the
    Runtime's process (locally, `nylorun webhooks` runs apart too), so the 1,000 POSTs (a thread, a parse and a
    JSON body each) cost the interpreter that runs moto and the other subject's turn nothing, as on AWS. It answers
    every POST with 204, counts them, and notes when each task's first COMPLETED status arrived
    (`time.monotonic()`: one clock for every process of the machine)."""

    def __init__(self) -> None:
        # Spawned, not forked: the parent runs threads (moto's server among them).
        context = multiprocessing.get_context("spawn")
        self._received = context.Value("i", 0)
        self._arrivals: SimpleQueue[tuple[str, float]] = context.SimpleQueue()
        ours, theirs = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(theirs, self._received, self._arrivals), name="bench-receiver", daemon=True
        )
        self._process.start()
        self.url = f"http://127.0.0.1:{ours.recv()}/hook"
        self._completed: dict[str, float] = {}

    @property
    def received(self) -> int:
        return int(self._received.value)

    def completed_at(self, task_id: str) -> float | None:
        while not self._arrivals.empty():
            arrived, at = self._arrivals.get()
            self._completed[arrived] = at
        return self._completed.get(task_id)

    def close(self) -> None:
        self._process.terminate()
        self._process.join(5)


def _serve(port: Connection, received: Synchronized[int], arrivals: SimpleQueue[tuple[str, float]]) -> None:
    completed: set[str] = set()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            update = body.get("statusUpdate") or {}
            task_id, state = update.get("taskId"), update.get("status", {}).get("state")
            with received.get_lock():  # the handler's threads share the count and the set
                received.value += 1
                if state == "TASK_STATE_COMPLETED" and task_id not in completed:
                    completed.add(task_id)
                    arrivals.put((task_id, time.monotonic()))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port.send(server.server_address[1])
    server.serve_forever()


def _other_delivery_ms(bench: Bench, receiver: _Receiver, timeout: float = 600) -> tuple[float, float]:
    """The other subject's echo task with one push config: ms from sending to its COMPLETED delivery, and of those
    the ms its turn took (sending to the COMPLETED status's timestamp): the rest is the push path."""
    config = {"id": f"cfg-{uuid.uuid4()}", "url": receiver.url}
    params = {
        "message": {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"returnImmediately": True, "taskPushNotificationConfig": config},
    }
    started, wall = time.monotonic(), time.time()
    task_id = bench.rpc("echo", "SendMessage", params, token=OTHER_TOKEN)["task"]["id"]
    deadline = started + timeout
    while (arrived := receiver.completed_at(task_id)) is None:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no COMPLETED delivery for {task_id} within {timeout} s")
        time.sleep(0.01)
    total = (arrived - started) * 1000
    stamp = bench.rpc("echo", "GetTask", {"id": task_id}, token=OTHER_TOKEN)["status"]["timestamp"]
    ended = datetime.fromisoformat(stamp).timestamp()  # Python 3.11 reads the "Z"
    return total, (ended - wall) * 1000


def _next_to_a_busy_thread(bench: Bench, receiver: _Receiver, runs: int) -> list[float]:
    """The control: the same path of the other subject next to one thread that only computes in Python (no push, no
    AWS), for what sharing the one interpreter costs that path by itself."""
    stop = threading.Event()

    def spin() -> None:
        total = 0
        while not stop.is_set():
            for n in range(1000):
                total += n

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        return [_other_delivery_ms(bench, receiver)[0] for _ in range(runs)]
    finally:
        stop.set()
        thread.join()


def _held_agent(bench: Bench, name: str) -> threading.Event:
    """Serve an Agent whose turns wait until the event is set, then reply: its tasks end together when told."""
    hold = threading.Event()
    agent = Agent(name=name, description="Holds its turn until told, then replies.", skills=SKILLS)

    @agent.turn
    def run(turn: Turn) -> None:
        # Until the configs are written (minutes on a loaded machine): a turn that ended sooner would start its
        # fan-out before the measurement does.
        hold.wait(3600)
        turn.reply("done")

    bench.add_agent(agent)
    return hold


def _loaded_round(
    bench: Bench, hold: threading.Event, crowd: _Receiver, other: _Receiver, configs: int
) -> dict[str, Any]:
    """One B: the held task gets `configs` push configs and ends; the other subject's runs one after another from
    then until half of them have arrived (each kept only if it ended before the last arrived); then the rest."""
    assert bench.local.runtime is not None
    store = bench.local.runtime.store
    hold.clear()
    task = bench.send("bench-held", "hold")
    bench.wait_state("bench-held", task["id"], {"TASK_STATE_WORKING"})
    for n in range(configs):
        config = TaskPushNotificationConfig(id=f"c{n:04}", task_id=task["id"], url=crowd.url)
        stored = StoredPushConfig(
            config=config, created_at=now_timestamp(), subject="bench"
        )  # as the API stores it
        store.put_push_config(task["id"], stored)
    before = crowd.received
    started = time.perf_counter()
    hold.set()  # the task ends: its COMPLETED status fans out to all of them
    bench.wait_state("bench-held", task["id"], TERMINAL)
    # Runs from the push's start (the first meets the fan-out's first steps) to half way, some 30: five in the
    # push's first two seconds of fifteen moved 1.3x-2.1x from one run of the figure to the next.
    runs: list[tuple[float, float]] = []
    started_at: list[float] = []  # how far the deliveries had got when each run started
    meanwhile: list[int] = []  # how many of them arrived during each run
    until = time.monotonic() + 900
    while (at := (crowd.received - before) / configs) < 0.5 and time.monotonic() < until:
        delivered = crowd.received
        sample = _other_delivery_ms(bench, other)
        if crowd.received - before < configs:  # it ended while the push still ran
            runs.append(sample)
            started_at.append(at)
            meanwhile.append(crowd.received - delivered)
    deadline = time.monotonic() + 900
    while crowd.received - before < configs and time.monotonic() < deadline:
        time.sleep(0.05)
    if not runs:
        raise RuntimeError("no run of the other subject ended while the deliveries lasted")
    return {
        "runs": runs,
        "started_at": started_at,
        "meanwhile": meanwhile,
        "seconds": time.perf_counter() - started,
    }


def push_fairness(bench: Bench, configs: int = 1000, pairs: int = 5, alone_runs: int = 5) -> dict[str, Any]:
    """Pairs A B: A, the other subject's runs alone; B, a loaded round. Each pair's ratio is B's median over A's,
    in the same minute; the figure is the median of the pairs' ratios (five runs alone moved 0.19-0.29 s from one
    run of the figure to the next: a pooled baseline measured minutes apart from the loaded runs says little)."""
    hold = _held_agent(bench, "bench-held")
    crowd, other = _Receiver(), _Receiver()
    bench.local.push_in_processes(BENCH_PUSH_PROCESSES)  # before the warm-up run, which waits for them
    alone: list[list[tuple[float, float]]] = []
    loaded: list[dict[str, Any]] = []
    try:
        _other_delivery_ms(bench, other)  # warm-up
        for _ in range(pairs):
            alone.append([_other_delivery_ms(bench, other) for _ in range(alone_runs)])  # A
            loaded.append(_loaded_round(bench, hold, crowd, other, configs))  # B
        busy = _next_to_a_busy_thread(bench, other, 3)
    finally:
        hold.set()
        for r in (crowd, other):
            r.close()
    baselines = [statistics.median(total for total, _ in runs) for runs in alone]
    ratios = [
        statistics.median(total for total, _ in b["runs"]) / a for a, b in zip(baselines, loaded, strict=True)
    ]
    ratio = spread(ratios, 3)
    every_alone = [total for runs in alone for total, _ in runs]
    every_loaded = [total for b in loaded for total, _ in b["runs"]]
    return {
        "configs": configs,
        "pairs": pairs,
        "ratios": [round(r, 3) for r in ratios],
        "ratio": ratio["median"],
        "spread": ratio,
        "target": TARGET,
        "met": ratio["median"] <= TARGET,
        "baseline_ms": [[round(total, 1) for total, _ in runs] for runs in alone],
        "under_load_ms": [[round(total, 1) for total, _ in b["runs"]] for b in loaded],
        "baseline_median_ms": round(statistics.median(every_alone), 1),
        "under_load_median_ms": round(statistics.median(every_loaded), 1),
        "worst_ratio": round(max(every_loaded) / statistics.median(every_alone), 2),
        # Where the time goes: the other subject's turn (send → its COMPLETED status written); the rest is its push
        # path (hand-off, fan-out, delivery through the push queue).
        "baseline_turn_ms": [[round(turn, 1) for _, turn in runs] for runs in alone],
        "under_load_turn_ms": [[round(turn, 1) for _, turn in b["runs"]] for b in loaded],
        "under_load_started_at": [[round(at, 2) for at in b["started_at"]] for b in loaded],
        # Fairness without the clock: of the big task's deliveries, how many arrived while the other subject's one
        # was on its way (all 1,000 would mean it waited behind them; it shares the queue and the CPU with them).
        "delivered_meanwhile": [n for b in loaded for n in b["meanwhile"]],
        # The control: no push at all, one busy Python thread beside the same path.
        "busy_thread_ms": [round(ms, 1) for ms in busy],
        "busy_thread_ratio": round(statistics.median(busy) / statistics.median(every_alone), 2),
        "fan_out_delivered_seconds": [round(b["seconds"], 1) for b in loaded],
        "note": "another subject's send → COMPLETED delivery, alone (A) and while 1,000 configs of one task are pushed "
        f"(B), {pairs} pairs A B",
    }
