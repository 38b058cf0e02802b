"""Figure 3's api cold start: a fresh process's import of the handler PLUS its first invocation (a GetTask through
`handler`, against moto), paired with a baseline of the same dependencies and a bare Mangum app's first invocation.

Moving an import from module level into the first request then gains nothing: both halves count. Each side runs in a
fresh process, the two alternating (ours, baseline, ours, ...); each pair's ratio is ours / baseline wall time, the
figure their median. Each process also reports its own parts (import, first invocation) for the breakdown.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer
from nylorun.adapters.dynamodb import DynamoTaskStore
from nylorun.domain.ids import Owner, use_runtime_key
from nylorun.ports import NewTurn
from nylorun.protocol.models import Message, Part, Role
from nylorun_local.stack import create_table

from bench.summary import in_turns, pair_ratios, spread

REPO = Path(__file__).resolve().parents[1]
EVENT = REPO / "events" / "api-send-message.json"
SUBJECT = "user-sample-0001"  # the event's JWT subject: it owns the task the GetTask reads
RUNTIME_KEY = "bench-runtime-key-" + "k" * 32
TARGET = 1.2

# Both sides start alike: read the event, a Lambda-like context object, then time their own parts.
_PRELUDE = """
import json, sys, time
started = time.perf_counter()
class Context:
    function_name, function_version, memory_limit_in_mb = "bench-api", "$LATEST", 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench-api"
    aws_request_id, log_group_name, log_stream_name = "c0ffee00-0000-4000-8000-000000000001", "/aws/lambda/x", "x"
    def get_remaining_time_in_millis(self): return 30000
event = json.loads(sys.argv[1])
"""
_REPORT = """
called = time.perf_counter()
print(json.dumps({"import_ms": (imported - started) * 1000, "first_call_ms": (called - imported) * 1000,
                  "status": answer["statusCode"], "body": answer["body"][:300]}))
"""
OURS = (
    _PRELUDE
    + "import app\nimported = time.perf_counter()\nanswer = app.handler(event, Context())\n"
    + _REPORT
)
# What the api function cannot do without (its web stack, AWS SDK, Powertools' three utilities), and a FastAPI app
# of one route through Mangum answering the same event.
BASELINE_IMPORTS = (
    "import fastapi, mangum, boto3, pydantic; from aws_lambda_powertools import Logger, Metrics, Tracer"
)
BASELINE = (
    _PRELUDE
    + BASELINE_IMPORTS
    + """
app = fastapi.FastAPI()
@app.post("/v1/a2a/agents/{agent:path}")
async def rpc(request: fastapi.Request) -> dict:
    body = await request.json()
    return {"jsonrpc": "2.0", "id": body.get("id"), "result": {"id": body["params"]["id"]}}
handler = mangum.Mangum(app, lifespan="off")
imported = time.perf_counter()
answer = handler(event, Context())
"""
    + _REPORT
)


@contextlib.contextmanager
def aws_with_a_task(env: dict[str, str]) -> Iterator[tuple[str, str]]:
    """moto on loopback holding the api function's table, the Runtime key's secret and one echo task of the event's
    subject: the endpoint and that task's id."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        session = boto3.Session(
            region_name="us-east-1", aws_access_key_id="bench", aws_secret_access_key="bench"
        )
        dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        create_table(dynamodb, env["NYLORUN_TABLE"])
        secrets = session.client("secretsmanager", endpoint_url=endpoint)
        arn = secrets.create_secret(Name="bench-runtime-key", SecretString=RUNTIME_KEY)["ARN"]
        env["NYLORUN_RUNTIME_KEY_ARN"] = arn
        use_runtime_key(lambda: RUNTIME_KEY)  # the task's keys as the function will derive them
        message = Message(message_id=f"m-{uuid.uuid4()}", role=Role.USER, parts=[Part(text="hello")])
        new = NewTurn(
            owner=Owner(subject=SUBJECT, agent="echo"), context_id=str(uuid.uuid4()), message=message
        )
        task, _ = DynamoTaskStore(dynamodb, env["NYLORUN_TABLE"]).create_turn(new)
        yield endpoint, task.task_id
    finally:
        server.stop()


def get_task_event(task_id: str) -> str:
    event = json.loads(EVENT.read_text())
    event["body"] = json.dumps(
        {"jsonrpc": "2.0", "id": "req-1", "method": "GetTask", "params": {"id": task_id}}
    )
    return json.dumps(event)


def _run(script: str, event: str, cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script, event],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    wall_ms = (time.perf_counter() - started) * 1000
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "wall_ms": round(wall_ms, 1),
        **{k: round(v, 1) if isinstance(v, float) else v for k, v in found.items()},
    }


def _checked(sample: dict[str, Any], task_id: str) -> dict[str, Any]:
    """The GetTask answered with the task: an error answer (a failed AWS call) would time the wrong path."""
    if sample["status"] != 200 or task_id not in sample["body"] or '"error"' in sample["body"]:
        raise RuntimeError(f"the api handler's first GetTask answered {sample['status']}: {sample['body']}")
    return sample


def measure(folder: Path, env: dict[str, str], pairs: int) -> dict[str, Any]:
    """`pairs` pairs (ours, baseline), each in fresh processes, after one unmeasured pair that fills the bytecode
    cache."""
    env = dict(env)
    with aws_with_a_task(env) as (endpoint, task_id):
        env["AWS_ENDPOINT_URL"] = endpoint
        # The function serves one small Agent, as a deployment serves its own (both sides get the same path).
        env["NYLORUN_AGENTS"] = "bench.cold_agent:agent"
        env["PYTHONPATH"] = str(REPO)
        event = get_task_event(task_id)
        ours: list[dict[str, Any]] = []
        baseline: list[dict[str, Any]] = []
        sides = {
            "ours": lambda: _checked(_run(OURS, event, folder, env), task_id),
            "baseline": lambda: _run(BASELINE, event, folder, env),
        }
        for n in range(pairs + 1):
            got = {side: sides[side]() for side in in_turns(n, tuple(sides))}
            if n:
                ours.append(got["ours"])
                baseline.append(got["baseline"])
    ratios = pair_ratios([s["wall_ms"] for s in ours], [s["wall_ms"] for s in baseline])
    ratio = spread(ratios, 3)
    return {
        "what": "fresh process: import + first invocation (GetTask through the handler, moto on loopback)",
        "baseline_what": f"fresh process: `{BASELINE_IMPORTS}` + a one-route FastAPI app's first Mangum invocation",
        "ours_ms": {
            part: spread([s[part] for s in ours], 1) for part in ("wall_ms", "import_ms", "first_call_ms")
        },
        "baseline_ms": {
            part: spread([s[part] for s in baseline], 1) for part in ("wall_ms", "import_ms", "first_call_ms")
        },
        "pair_ratios": ratios,
        "ratio": ratio["median"],
        "spread": ratio,
        "target": TARGET,
        "met": ratio["median"] <= TARGET,
        "ours": ours,
        "baseline": baseline,
    }
