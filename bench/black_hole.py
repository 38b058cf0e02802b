"""Figure 7: fair delivery workers (docs/architecture.md#fair-push-delivery), on the local Runtime: another
subject's delivery latency while one subject's 10 tasks × 10 push configs aim at a receiver that never
answers.

A black hole: a loopback TCP server that accepts every connection and never sends a byte, so each attempt at it
holds its delivery for its whole deadline. Pairs, interleaved A B A B (the machine's load drifts between them): A,
the other subject's delivery alone (3 runs); B, the same while the 100 deliveries to the black hole start (the
held tasks end together, then runs one after another for `LOADED_SECONDS`). Each pair's ratio is the median of B
over the median of A. Between pairs the 100 configs are removed (their retries are then dropped) and the next pair
gets a new black hole (a new origin: a breaker of its own, closed), so each B starts from the same state. The
machinery (the receivers, the other subject's run, configs written to the table and released together) is figure
6's (bench/fairness.py). Target: the median ratio at most 1.5.
"""

from __future__ import annotations

import socket
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nylorun.ports import StoredPushConfig
from nylorun.protocol.models import TaskPushNotificationConfig, now_timestamp

from bench.fairness import _held_agent, _other_delivery_ms, _Receiver
from bench.local_stack import BENCH_PUSH_PROCESSES, TERMINAL, Bench
from bench.summary import spread

TARGET = 1.5
TASKS, CONFIGS = 10, 10
# A first attempt's deadline (5 s) and a little: the black hole's first attempts all run in it.
LOADED_SECONDS = 6.0
QUIET_SECONDS = 5.5  # after the configs are removed: attempts in flight end within their 5 s deadline


@contextmanager
def black_hole() -> Iterator[str]:
    """A receiver URL whose server accepts and never answers (the connections are kept open, never read)."""
    server = socket.create_server(("127.0.0.1", 0), backlog=512)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, name="bench-black-hole", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/hook"
    finally:
        stop.set()
        thread.join(2)
        for connection in [*held, server]:
            connection.close()


def push_black_hole(bench: Bench, pairs: int = 5, alone_runs: int = 5) -> dict[str, Any]:
    hold = _held_agent(bench, "bench-held-10")
    other, fast = _Receiver(), _Receiver()
    assert bench.local.runtime is not None
    store = bench.local.runtime.store
    bench.local.push_in_processes(BENCH_PUSH_PROCESSES)
    baseline: list[list[float]] = []
    loaded: list[list[float]] = []
    control: list[list[float]] = []  # the same 100 deliveries to a receiver that answers at once

    def under(url: str) -> list[float]:
        """The other subject's runs while the 10 held tasks, each with 10 configs aimed at `url`, end together."""
        hold.clear()
        tasks = [bench.send("bench-held-10", "hold")["id"] for _ in range(TASKS)]
        for task_id in tasks:
            bench.wait_state("bench-held-10", task_id, {"TASK_STATE_WORKING"})
            for n in range(CONFIGS):
                config = TaskPushNotificationConfig(id=f"hole-{n}", task_id=task_id, url=url)
                store.put_push_config(
                    task_id, StoredPushConfig(config=config, created_at=now_timestamp(), subject="bench")
                )
        hold.set()  # the 10 tasks end together: their COMPLETED statuses fan out to the 100 configs
        runs, until = [], time.monotonic() + LOADED_SECONDS
        while time.monotonic() < until:
            runs.append(_other_delivery_ms(bench, other)[0])
        for task_id in tasks:
            bench.wait_state("bench-held-10", task_id, TERMINAL)
            for n in range(CONFIGS):
                store.delete_push_config(task_id, f"hole-{n}")  # their retries are dropped
        time.sleep(QUIET_SECONDS)
        return runs

    try:
        _other_delivery_ms(bench, other)  # warm-up
        for _ in range(pairs):
            baseline.append([_other_delivery_ms(bench, other)[0] for _ in range(alone_runs)])  # A
            with black_hole() as url:
                loaded.append(under(url))  # B
            control.append(under(fast.url))
    finally:
        hold.set()
        other.close()
        fast.close()
    ratios = [statistics.median(b) / statistics.median(a) for a, b in zip(baseline, loaded, strict=True)]
    ratio = statistics.median(ratios)
    controls = [statistics.median(c) / statistics.median(a) for a, c in zip(baseline, control, strict=True)]
    return {
        "tasks": TASKS,
        "configs_per_task": CONFIGS,
        "pairs": pairs,
        "baseline_ms": [[round(ms, 1) for ms in runs] for runs in baseline],
        "under_load_ms": [[round(ms, 1) for ms in runs] for runs in loaded],
        "ratios": [round(r, 2) for r in ratios],
        "ratio": round(ratio, 2),
        "spread": spread(ratios, 3),
        # The control: the same 100 deliveries answered at once (204). Near the black hole's ratio, the other
        # subject waits for the local stand-in's work on 100 deliveries (moto, the pollers: one interpreter), not
        # for the black hole holding the push function's capacity.
        "control_ms": [[round(ms, 1) for ms in runs] for runs in control],
        "control_ratios": [round(r, 2) for r in controls],
        "control_ratio": round(statistics.median(controls), 2),
        "min_ratio": round(min(ratios), 2),
        "max_ratio": round(max(ratios), 2),
        "baseline_median_ms": round(statistics.median(ms for runs in baseline for ms in runs), 1),
        "under_load_median_ms": round(statistics.median(ms for runs in loaded for ms in runs), 1),
        "target": TARGET,
        "met": ratio <= TARGET,
        "note": (
            "another subject's send → COMPLETED delivery, alone (A) and while one subject's 10 tasks × 10 configs aim "
            f"at a receiver that never answers (B), {pairs} pairs A B"
        ),
    }
