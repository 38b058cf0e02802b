"""Figure 2: the api Lambda handler in-process. functions/api/app.py is loaded as Lambda loads it (dummy AWS
settings, no call is made), then its Mangum adapter is pointed at the same app built on the in-memory store,
so `handler` — Powertools decorators, Mangum, FastAPI, the service — runs for real on API Gateway HTTP API
v2 events (events/api-get-card.json, and events/api-send-message.json with a GetTask body)."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

from mangum import Mangum
from nylorun.settings import Settings
from nylorun_local.lambda_shim import LambdaContext

from bench.stack import memory_stack

REPO = Path(__file__).resolve().parents[1]
EVENTS = REPO / "events"
# What the api function reads at import (template Globals), with values that reach nothing.
LAMBDA_ENV = {
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # a closed loopback port: a stray call fails here, at once
    "NYLORUN_TABLE": "bench-tasks",
    "NYLORUN_AUTH": "jwt",
    "POWERTOOLS_SERVICE_NAME": "nylorun",
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
}
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def load_api_handler() -> Handler:
    """functions/api/app.py's `handler`, its Mangum adapter serving the app on the in-memory store."""
    with mock.patch.dict(os.environ, LAMBDA_ENV):
        spec = importlib.util.spec_from_file_location(
            "bench_api_function", REPO / "functions" / "api" / "app.py"
        )
        assert spec is not None and spec.loader is not None
        module: Any = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        settings = Settings.from_env()
    if not hasattr(module, "_asgi"):
        raise RuntimeError(
            "functions/api/app.py no longer keeps its Mangum adapter in `_asgi`: update the bench"
        )
    module._asgi = Mangum(memory_stack(settings).app(), lifespan="off")
    return module.handler  # type: ignore[no-any-return]


def _event(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / name).read_text()))


def _rpc_event(body: dict[str, Any]) -> dict[str, Any]:
    event = _event("api-send-message.json")
    event["body"] = json.dumps(body)
    return event


def _invoke(handler: Handler, event: dict[str, Any]) -> dict[str, Any]:
    answer = handler(copy.deepcopy(event), LambdaContext("bench-api"))
    if answer.get("statusCode") != 200 or '"error"' in answer.get("body", ""):
        raise RuntimeError(f"the api handler answered {json.dumps(answer)[:500]}")
    return answer


def _rate(handler: Handler, event: dict[str, Any], seconds: float, warmup: float) -> dict[str, float | int]:
    """Invocations per second, one after another, for `seconds` after `warmup`."""
    for phase in (warmup, seconds):
        latencies: list[float] = []
        started = time.perf_counter()
        while time.perf_counter() - started < phase:
            began = time.perf_counter()
            _invoke(handler, event)
            latencies.append(time.perf_counter() - began)
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "invocations_per_second": round(len(latencies) / elapsed, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 3),
        "invocations": len(latencies),
    }


def run(seconds: float = 3.0, warmup: float = 0.5) -> dict[str, Any]:
    handler = load_api_handler()
    # A finished echo task owned by the event's JWT subject, for GetTask.
    sent = json.loads(_invoke(handler, _event("api-send-message.json"))["body"])
    task_id = sent["result"]["task"]["id"]
    get_task = _rpc_event({"jsonrpc": "2.0", "id": "req-2", "method": "GetTask", "params": {"id": task_id}})
    return {
        "get_task": _rate(handler, get_task, seconds, warmup),
        "card": _rate(handler, _event("api-get-card.json"), seconds, warmup),
        "note": "one process, one invocation at a time; Powertools tracing and metrics output off",
    }
