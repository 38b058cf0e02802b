"""`nylorun serve --push-processes N`: the push function's execution environments as processes of their own, as
Lambda runs them (local/nylorun_local/push_processes.py), started and stopped with the Runtime."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from conftest import A2A, nylorun_serve, user_message
from webhook_receiver import Receiver, own_secrets

pytestmark = pytest.mark.e2e

TOKEN = "push-processes-token"


def _push_processes() -> dict[int, int]:
    """pid -> parent pid of every push process running on this machine."""
    found = {}
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"nylorun_local.push_processes" in (proc / "cmdline").read_bytes():
                found[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue  # ended meanwhile
    return found


def test_push_processes_deliver_signed_statuses_and_stop_with_serve() -> None:
    before = set(_push_processes())
    with nylorun_serve(["--token", f"{TOKEN}=alice", "--push-processes", "2"], "echo/.well-known/agent-card.json") as base:
        # Given a Runtime whose push environments are two processes of its own (its threads push nothing)
        ours = {pid for pid in _push_processes() if pid not in before}
        assert len(ours) == 2
        receiver = Receiver(own_secrets(base.removesuffix("/v1/a2a/agents"), TOKEN))
        # When a task is sent with a push config
        config = {"id": "c1", "url": receiver.url}
        params = {"message": user_message("hi"), "configuration": {"returnImmediately": True, "taskPushNotificationConfig": config}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        answer = httpx.post(f"{base}/echo/", json=body, headers={**A2A, "Authorization": f"Bearer {TOKEN}"}, timeout=30)
        task_id = answer.json()["result"]["task"]["id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(
            r["body"].get("statusUpdate", {}).get("status", {}).get("state") == "TASK_STATE_COMPLETED" for r in receiver.requests
        ):
            time.sleep(0.1)
        receiver.close()
    # Then its statuses arrived, each signed with the caller's own key, up to COMPLETED
    states = [r["body"]["statusUpdate"]["status"]["state"] for r in receiver.requests if "statusUpdate" in r["body"]]
    assert states and states[-1] == "TASK_STATE_COMPLETED", states
    assert all(r["verified"] for r in receiver.requests)
    assert {r["body"].get("statusUpdate", r["body"].get("artifactUpdate", {})).get("taskId") for r in receiver.requests} == {task_id}
    # And the push processes ended with the Runtime (^C)
    deadline = time.monotonic() + 10
    while ours & set(_push_processes()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not ours & set(_push_processes())
