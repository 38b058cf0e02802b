"""The api function's cold start loads only what it serves with: importing functions/api/app.py, as Lambda does
with the deploy environment (template Globals and the api function's variables, X-Ray tracing active), leaves
no terminal, CLI, local-Runtime or client package in the process.

Run in a fresh interpreter: this test session has imported most of them already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
API = ROOT / "functions" / "api"

# rich, pygments, click: a terminal UI and a CLI; a2a: the a2a-sdk (the client); moto, uvicorn: the local Runtime.
FORBIDDEN = ("rich", "pygments", "click", "a2a", "moto", "uvicorn")

_PROBE = """
import json, sys
import app
assert callable(app.handler)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def deploy_env() -> dict[str, str]:
    """What the api function sees on Lambda (template.yaml), with values that reach nothing."""
    env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG", "TMPDIR") if k in os.environ}
    env.update(
        {
            "PYTHONPATH": str(API),
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "static",
            "AWS_SECRET_ACCESS_KEY": "static",
            "AWS_ENDPOINT_URL": "http://127.0.0.1:9",  # a closed loopback port
            "AWS_LAMBDA_FUNCTION_NAME": "static-api",
            "AWS_XRAY_CONTEXT_MISSING": "IGNORE_ERROR",
            "LAMBDA_TASK_ROOT": str(API),
            "POWERTOOLS_SERVICE_NAME": "nylorun",
            "POWERTOOLS_METRICS_NAMESPACE": "Nylorun",
            "POWERTOOLS_LOG_LEVEL": "INFO",
            "NYLORUN_TABLE": "static-tasks",
            "NYLORUN_EVENT_BUS": "static-bus",
            "NYLORUN_CONTEXT_QUEUE_URL": "http://127.0.0.1:9/123456789012/static-context.fifo",
            "NYLORUN_PUSH_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:static",
            "NYLORUN_RUNTIME_KEY_ARN": "arn:aws:secretsmanager:us-east-1:123456789012:secret:static-key",
            "NYLORUN_FILES_BUCKET": "static-files",
            "NYLORUN_AUTH": "jwt",
            "NYLORUN_INTERACTION_TIMEOUT_SECONDS": "3600",
            "NYLORUN_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:static-turn",
            "NYLORUN_A2A_WAIT_MS": "25000",
        }
    )
    return env


def test_api_function_import_loads_no_terminal_cli_client_or_local_package() -> None:
    # Given a fresh interpreter with the api function's deploy environment
    # When it imports functions/api/app.py as Lambda does
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=API, env=deploy_env(), capture_output=True, text=True, timeout=120, check=False
    )
    assert probe.returncode == 0, probe.stderr[-2000:]
    loaded = set(json.loads(probe.stdout.strip().splitlines()[-1]))
    # Then none of the packages it has no use for is loaded
    assert sorted(loaded & set(FORBIDDEN)) == []
