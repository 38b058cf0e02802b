"""Figure 3: cold start. For each function, the wall time of a fresh `python -c "import app"` in its folder (the
handler module: it builds the runtime, app and boto3 clients at import) against a fresh process importing only
the third-party modules that handler import loaded, the two taking turns; each pair's ratio = handler / deps, the
figure their median with min and max. The api function's target is import plus first invocation against a bare
stack's (bench/first_call.py).

Both use the same compiled bytecode (a private PYTHONPYCACHEPREFIX, filled by the run that lists the
dependencies, which is not timed), and a
Lambda-like environment (the template's variables, X-Ray tracing on as `Tracing: Active` deploys it) whose
AWS endpoint is a closed loopback port, so nothing can leave the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import first_call
from bench.summary import in_turns, pair_ratios, spread

REPO = Path(__file__).resolve().parents[1]
FUNCTIONS = REPO / "functions"
NAMED = ("api", "turn", "dispatch", "publish")  # the four; any other function is measured too

# The third-party modules (with a file under site-packages) that importing `app` loaded, beyond a bare start.
_LIST_DEPS = """
import json, sys, sysconfig
roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
def third_party():
    return {n for n, m in list(sys.modules.items())
            if any(str(getattr(m, "__file__", None) or "").startswith(r) for r in roots)}
before = third_party()
import app
print(json.dumps(sorted(third_party() - before)))
"""
# Packages of a terminal UI and a CLI: the api function must not load them (httpx's CLI brings all three).
API_FORBIDDEN = ("rich", "pygments", "click")
_IMPORT_ALL = """
import importlib, json, sys
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception:
        pass
"""


def lambda_env(function: str, cache: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update(
        {
            "PYTHONPYCACHEPREFIX": str(cache),
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
            "AWS_LAMBDA_FUNCTION_NAME": f"bench-{function}",
            "LAMBDA_TASK_ROOT": str(FUNCTIONS / function),
            "POWERTOOLS_SERVICE_NAME": "nylorun",
            "POWERTOOLS_METRICS_NAMESPACE": "Nylorun",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "NYLORUN_TABLE": "bench-tasks",
            "NYLORUN_EVENT_BUS": "bench-bus",
            "NYLORUN_CONTEXT_QUEUE_URL": "http://127.0.0.1:9/123456789012/bench-context.fifo",
            "NYLORUN_PUSH_QUEUE_URL": "http://127.0.0.1:9/123456789012/bench-push.fifo",
            "NYLORUN_PUSH_DLQ_URL": "http://127.0.0.1:9/123456789012/bench-push-dlq.fifo",
            "NYLORUN_PUSH_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:bench",
            "NYLORUN_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:bench-turn",
            "NYLORUN_AUTH": "jwt",
            "NYLORUN_FILES_BUCKET": "bench-files",  # template Globals: files are on where deployed
            "NYLORUN_INTERACTION_TIMEOUT_SECONDS": "3600",
            # A Lambda function without the Runtime key's ARN refuses to start (template Globals set it).
            "NYLORUN_RUNTIME_KEY_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:bench-runtime-key",
            "NYLORUN_KMS_KEY": "arn:aws:kms:us-east-1:123456789012:key/bench",
            "NYLORUN_DELEGATION_POLL_SECONDS": "300",
        }
    )
    return env


def _timed(args: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True, timeout=120)
    return round((time.perf_counter() - started) * 1000, 1)


def _turns_ms(commands: list[list[str]], cwd: Path, env: dict[str, str], pairs: int) -> list[list[float]]:
    """Each command's wall times (ms), the commands taking turns, so a busy moment hits all of them alike."""
    times: list[list[float]] = [[] for _ in commands]
    for pair in range(pairs):
        for i in in_turns(pair, range(len(commands))):
            times[i].append(_timed(commands[i], cwd, env))
    return times


def measure(function: str, cache: Path, pairs: int) -> dict[str, Any]:
    folder = FUNCTIONS / function
    env = lambda_env(function, cache)
    listed = subprocess.run(
        [sys.executable, "-c", _LIST_DEPS],
        cwd=folder,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    deps: list[str] = json.loads(listed.stdout.strip().splitlines()[-1])
    commands = [[sys.executable, "-c", "import app"], [sys.executable, "-c", _IMPORT_ALL, json.dumps(deps)]]
    # Listing the dependencies imported (and so compiled) all of them.
    handler, deps_times = _turns_ms(commands, folder, env, pairs)
    ratios = pair_ratios(handler, deps_times)
    packages = sorted({name.split(".")[0] for name in deps})
    result: dict[str, Any] = {
        "handler_ms": spread(handler, 1),
        "deps_ms": spread(deps_times, 1),
        "pair_ratios": ratios,
        "ratio": spread(ratios, 3),
        "samples": {"handler_ms": handler, "deps_ms": deps_times},
        "third_party_packages": packages,
    }
    if function == "api":
        forbidden = sorted(set(packages) & set(API_FORBIDDEN))
        # The target: import plus the first invocation, against the bare stack's (bench/first_call.py).
        result["baseline"] = first_call.measure(folder, env, pairs)
        result["forbidden_packages"] = {
            "checked": list(API_FORBIDDEN),
            "loaded": forbidden,
            "ok": not forbidden,
        }
    return result


def functions() -> list[str]:
    found = sorted(p.parent.name for p in FUNCTIONS.glob("*/app.py"))
    return [f for f in NAMED if f in found] + [f for f in found if f not in NAMED]


def run(pairs: int = 5) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="nylorun-bench-pyc-") as cache:
        bare_env = lambda_env("api", Path(cache))
        results["python_startup_ms"] = spread(
            _turns_ms([[sys.executable, "-c", "pass"]], REPO, bare_env, pairs)[0], 1
        )
        for function in functions():
            try:
                results[function] = measure(function, Path(cache), pairs)
            except (
                subprocess.CalledProcessError
            ) as exc:  # a function that cannot import is reported, not fatal
                results[function] = {"error": (exc.stderr or "").strip().splitlines()[-1:]}
    results["pairs"] = pairs
    return results
