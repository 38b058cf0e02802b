"""What the reliability suite shares: the end-to-end helpers it reuses (imported, not copied), a bounded
poll, and calls that see a task the way a caller with every profile extension activated sees it.

The end-to-end helpers live in tests/e2e, which pytest puts on `sys.path` only while it collects that
folder; this module puts it there too, so `pytest tests/reliability` works on its own.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any, TypeVar

import httpx

_E2E = str(Path(__file__).resolve().parents[1] / "e2e")
if _E2E not in sys.path:
    sys.path.insert(0, _E2E)

import test_push as e2e_push
from a2a_caller import EFFECTS, INTERACTIONS, PROFILE, PROGRESS, TELEMETRY, state, status_ext
from conftest import ALICE, BOB, auth, poll, user_message
from table_scope import TableScan, settled, snapshot
from test_isolation import all_tasks, error_code
from test_turns import Probe, SimulatedCrash, _agent
from webhook_receiver import Receiver, own_secrets

T = TypeVar("T")

__all__ = [
    "ALICE",
    "BOB",
    "EFFECTS",
    "INTERACTIONS",
    "PROFILE",
    "PROGRESS",
    "TELEMETRY",
    "Probe",
    "Receiver",
    "SimulatedCrash",
    "TableScan",
    "all_tasks",
    "auth",
    "e2e_push",
    "error_code",
    "get_task",
    "make_agent",
    "own_secrets",
    "poll",
    "profile_headers",
    "rpc",
    "settled",
    "snapshot",
    "state",
    "status_ext",
    "user_message",
]

make_agent = _agent
# One pooled client for the whole suite: conftest's `rpc` makes a new httpx client per call, whose TLS setup
# costs ~0.1 s of CPU each time, and this suite makes hundreds of calls (many while polling).
_http = httpx.Client(timeout=60)


def rpc(
    url: str, method: str, params: Any = None, *, token: str = ALICE, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """conftest's `rpc` over the pooled client: one JSON-RPC call over real HTTP, the decoded body (HTTP 200)."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method}
    if params is not None:
        body["params"] = params
    response = _http.post(url, json=body, headers=headers if headers is not None else auth(token))
    assert response.status_code == 200, response.text
    return dict(response.json())


def profile_headers(token: str = ALICE) -> dict[str, str]:
    """A caller that activated every profile extension (so it sees interactions/v1, effects/v1, …)."""
    return auth(token, **{"A2A-Extensions": ", ".join(PROFILE)})


def get_task(url: str, task_id: str, token: str = ALICE) -> dict[str, Any]:
    answer = rpc(url, "GetTask", {"id": task_id}, headers=profile_headers(token))
    assert "result" in answer, answer
    return dict(answer["result"])
