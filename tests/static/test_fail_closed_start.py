"""Fail closed, as Lambda sees it: the api function imported in a fresh interpreter with the deploy
environment (test_api_cold_imports.deploy_env) but `NYLORUN_AUTH=none` or `dev` does not start. Its init
raises, so Lambda serves no request with it, and the log has one line saying why and what to set. Under
`sam local` (AWS_SAM_LOCAL=true) the dev mode starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from test_api_cold_imports import API, deploy_env

DEV_TOKEN = "tok-static-secret-never-logged"
_IMPORT = "import app; print('STARTED', app.runtime.settings.auth)"


def cold_start(**overrides: str) -> subprocess.CompletedProcess[str]:
    env = {**deploy_env(), "NYLORUN_DEV_TOKENS": f"{DEV_TOKEN}=alice", **overrides}
    return subprocess.run(
        [sys.executable, "-c", _IMPORT], cwd=API, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def log_lines(stdout: str) -> list[dict[str, Any]]:
    """Powertools Logger's JSON lines on stdout (what CloudWatch Logs gets)."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


@pytest.mark.parametrize("mode", ["none", "dev"])
def test_the_api_function_on_lambda_refuses_to_start_without_jwt(mode: str) -> None:
    # Given the api function's deploy environment with NYLORUN_AUTH set to a local mode by mistake
    # When Lambda imports functions/api/app.py (its init)
    started = cold_start(NYLORUN_AUTH=mode)
    # Then the init fails: no handler, so no request is served
    assert started.returncode != 0
    assert "STARTED" not in started.stdout
    assert f"NYLORUN_AUTH={mode} is refused on AWS Lambda" in started.stderr
    # And the log has one critical line with the reason and what to set
    refusals = [line for line in log_lines(started.stdout) if line["level"] == "CRITICAL"]
    assert len(refusals) == 1, started.stdout
    assert "set NYLORUN_AUTH=jwt" in json.dumps(refusals[0])
    # And the dev token (a secret) is neither logged nor in the error
    assert DEV_TOKEN not in started.stdout + started.stderr


def test_the_api_function_under_sam_local_starts_in_dev_mode() -> None:
    # Given sam local's container: AWS_SAM_LOCAL=true beside AWS_LAMBDA_FUNCTION_NAME, and the dev mode
    # When the api function is imported
    started = cold_start(NYLORUN_AUTH="dev", AWS_SAM_LOCAL="true")
    # Then it starts with the dev mode
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.splitlines()[-1] == "STARTED dev"
