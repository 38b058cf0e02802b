"""Figure 1: protocol-layer throughput. Our api app on the in-memory store against the a2a-sdk 1.3.0
reference server, and a bare FastAPI route with a canned answer as the ceiling; same uvicorn settings, same
load generator, one load at a time. Ours and the reference are measured in interleaved pairs (A B A B ...), each
figure the median of the pairs' ratios with its min and max. GetTask of a finished echo task, and blocking
SendMessage (echo)."""

from __future__ import annotations

import contextlib
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import servers
from bench.load import LoadResult, LoadSettings, ServerProcess, Target, measure
from bench.summary import in_turns, pair_ratios, spread

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
SEND_MESSAGE = (
    '{"jsonrpc":"2.0","id":"{{n}}","method":"SendMessage","params":{"message":'
    '{"messageId":"m-{{n}}","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
)
OPERATIONS = ("get_task", "send_message")
# ours / reference requests/s to reach (bench/README.md, docs/performance.md).
TARGETS = {"get_task": 1.5, "send_message": 3.0}
# Our blocking SendMessage's p99 / the reference's, in the same pair: at most 1.
P99_TARGET = 1.0
# Measured in turns, pair by pair; the others once each.
PAIRED = ("ours", "reference")


@dataclass(frozen=True)
class Server:
    name: str
    factory: str
    path: str
    speaks_a2a: bool  # the ceiling answers anything with the same canned result


SERVERS = (
    Server("ours", "bench.servers:ours", servers.OURS_PATH, True),
    Server("ours_threadpool", "bench.servers:ours_threadpool", servers.OURS_PATH, True),
    Server("reference", "bench.servers:reference", servers.REFERENCE_PATH, True),
    Server("ceiling", "bench.servers:ceiling", servers.CEILING_PATH, False),
)


def get_task_body(task_id: str) -> str:
    return '{"jsonrpc":"2.0","id":"{{n}}","method":"GetTask","params":{"id":"' + task_id + '"}}'


def _call(url: str, body: str) -> dict[str, Any]:
    response = httpx.post(url, content=body.replace("{{n}}", "check"), headers=HEADERS, timeout=30)
    response.raise_for_status()
    return dict(response.json())


def _completed_task(url: str) -> str:
    """One blocking SendMessage, checked: the task id a GetTask run reads."""
    answer = _call(url, SEND_MESSAGE)
    task = answer.get("result", {}).get("task", {})
    if task.get("status", {}).get("state") != "TASK_STATE_COMPLETED":
        raise RuntimeError(f"SendMessage to {url} did not complete: {json.dumps(answer)[:500]}")
    return str(task["id"])


def _check_get(url: str, task_id: str) -> None:
    answer = _call(url, get_task_body(task_id))
    if answer.get("result", {}).get("id") != task_id:
        raise RuntimeError(f"GetTask on {url} failed: {json.dumps(answer)[:500]}")


def _served(servers: tuple[Server, ...], log_dir: Path, stack: contextlib.ExitStack) -> dict[str, Target]:
    """Start each server and check it answers; the GetTask and SendMessage targets of each, by name."""
    targets: dict[str, Target] = {}
    for server in servers:
        process = stack.enter_context(ServerProcess(server.factory, log_dir / f"{server.name}.log"))
        url = process.base_url + server.path
        task_id = "00000000-0000-0000-0000-000000000000"
        if server.speaks_a2a:
            task_id = _completed_task(url)
            _check_get(url, task_id)
        targets[f"{server.name}.get_task"] = Target(url, get_task_body(task_id), HEADERS)
        targets[f"{server.name}.send_message"] = Target(url, SEND_MESSAGE, HEADERS)
    return targets


def run(settings: LoadSettings, log_dir: Path, pairs: int = 5) -> dict[str, Any]:
    """Ours and the reference both up, measured in turns (A B, B A, ...) so a busy minute hits both sides of a pair;
    the ceiling and the threadpool variant once each (reported, not judged)."""
    samples: dict[str, dict[str, list[LoadResult]]] = {s.name: {op: [] for op in OPERATIONS} for s in SERVERS}
    with contextlib.ExitStack() as stack:
        targets = _served(SERVERS, log_dir, stack)
        for pair in range(pairs):
            for op in OPERATIONS:
                for name in in_turns(pair, PAIRED):
                    samples[name][op].append(measure(targets[f"{name}.{op}"], settings))
        for name in (s.name for s in SERVERS if s.name not in PAIRED):
            for op in OPERATIONS:
                samples[name][op].append(measure(targets[f"{name}.{op}"], settings))
    return summarize(samples, settings, pairs)


def _side(runs: list[LoadResult]) -> dict[str, Any]:
    """One server's runs of one operation: every run kept, and the spread of each number."""
    return {
        "requests_per_second": spread([r.requests_per_second for r in runs], 1),
        "p50_ms": spread([r.p50_ms for r in runs]),
        "p99_ms": spread([r.p99_ms for r in runs]),
        "errors": sum(r.errors for r in runs),
        "runs": [r.as_dict() for r in runs],
    }


def summarize(
    samples: dict[str, dict[str, list[LoadResult]]], settings: LoadSettings, pairs: int
) -> dict[str, Any]:
    def rps(name: str, op: str) -> list[float]:
        return [r.requests_per_second for r in samples[name][op]]

    def median_ratio(a: str, b: str, op: str) -> float:
        return round(statistics.median(rps(a, op)) / statistics.median(rps(b, op)), 3)

    ratios = {op: spread(pair_ratios(rps("ours", op), rps("reference", op)), 3) for op in OPERATIONS}
    # Our blocking SendMessage's tail against the reference's in the same pair (at most 1: no slower tail).
    p99 = pair_ratios([r.p99_ms for r in samples["ours"]["send_message"]],
                      [r.p99_ms for r in samples["reference"]["send_message"]])  # fmt: skip
    targets = {
        op: {
            "ratio": ratios[op]["median"],
            "spread": ratios[op],
            "target": target,
            "met": ratios[op]["median"] >= target,
        }
        for op, target in TARGETS.items()
    }
    p99_ratio = spread(p99, 3)
    targets["send_message_p99"] = {
        "ratio": p99_ratio["median"], "spread": p99_ratio, "target": P99_TARGET, "met": p99_ratio["median"] <= P99_TARGET,
    }  # fmt: skip
    return {
        "load": {
            "generator": settings.generator,
            "connections": settings.connections,
            "seconds": settings.seconds,
            "warmup_seconds": settings.warmup,
            "pairs": pairs,
            "server": "uvicorn, 1 worker, uvloop, httptools, log level warning, no access log",
        },
        "servers": {name: {op: _side(runs) for op, runs in ops.items()} for name, ops in samples.items()},
        "pair_ratios": {op: pair_ratios(rps("ours", op), rps("reference", op)) for op in OPERATIONS},
        "send_message_p99_pair_ratios": p99,
        "get_task_ratio": ratios["get_task"]["median"],
        "send_message_ratio": ratios["send_message"]["median"],
        "targets": targets,
        "threadpool_of_reference": {
            op: median_ratio("ours_threadpool", "reference", op) for op in OPERATIONS
        },
        "ours_of_ceiling": {op: median_ratio("ours", "ceiling", op) for op in OPERATIONS},
        "reference_of_ceiling": {op: median_ratio("reference", "ceiling", op) for op in OPERATIONS},
    }
