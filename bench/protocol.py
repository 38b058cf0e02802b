"""Figure 1: protocol-layer throughput. Our api app on the in-memory store against the a2a-sdk 1.3.0
reference server, and a bare FastAPI route with a canned answer as the ceiling; same uvicorn settings, same
load generator, one server at a time. GetTask of a finished echo task, and blocking SendMessage (echo)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import servers
from bench.load import LoadResult, LoadSettings, ServerProcess, Target, measure

HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}
SEND_MESSAGE = (
    '{"jsonrpc":"2.0","id":"{{n}}","method":"SendMessage","params":{"message":'
    '{"messageId":"m-{{n}}","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'
)
OPERATIONS = ("get_task", "send_message")
# ours / reference requests/s to reach (issue 13, item 8).
TARGETS = {"get_task": 1.5, "send_message": 3.0}


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


def run(settings: LoadSettings, log_dir: Path) -> dict[str, Any]:
    results: dict[str, dict[str, LoadResult]] = {}
    for server in SERVERS:
        with ServerProcess(server.factory, log_dir / f"{server.name}.log") as process:
            url = process.base_url + server.path
            task_id = "00000000-0000-0000-0000-000000000000"
            if server.speaks_a2a:
                task_id = _completed_task(url)
                _check_get(url, task_id)
            results[server.name] = {
                "get_task": measure(Target(url, get_task_body(task_id), HEADERS), settings),
                "send_message": measure(Target(url, SEND_MESSAGE, HEADERS), settings),
            }
    return summarize(results, settings)


def summarize(results: dict[str, dict[str, LoadResult]], settings: LoadSettings) -> dict[str, Any]:
    def ratio(a: str, b: str, op: str) -> float:
        return round(results[a][op].requests_per_second / results[b][op].requests_per_second, 3)

    return {
        "load": {
            "generator": settings.generator,
            "connections": settings.connections,
            "seconds": settings.seconds,
            "warmup_seconds": settings.warmup,
            "server": "uvicorn, 1 worker, uvloop, httptools, log level warning, no access log",
        },
        "servers": {name: {op: r.as_dict() for op, r in ops.items()} for name, ops in results.items()},
        "get_task_ratio": ratio("ours", "reference", "get_task"),
        "send_message_ratio": ratio("ours", "reference", "send_message"),
        "targets": {
            op: {"ratio": ratio("ours", "reference", op), "target": target, "met": ratio("ours", "reference", op) >= target}
            for op, target in TARGETS.items()
        },
        "threadpool_of_reference": {op: ratio("ours_threadpool", "reference", op) for op in OPERATIONS},
        "ours_of_ceiling": {op: ratio("ours", "ceiling", op) for op in OPERATIONS},
        "reference_of_ceiling": {op: ratio("reference", "ceiling", op) for op in OPERATIONS},
    }
