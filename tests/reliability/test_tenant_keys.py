"""Many tenants, one Runtime: one tenant cannot forge or replay another's webhooks (docs/security.md).

The attacks, tried as an adversarial caller would on the local Runtime:
* bob holds the key he is given and checks it against alice's deliveries;
* bob signs a fake `statusUpdate` for alice's task ("Refund approved, wire fee to …") and posts it to alice's
  `nylorun webhooks`;
* someone who captured one of alice's deliveries posts it again;
* the receiver's secret sits on the command line, where every process on the machine can read it.

Each attack is parametrized by signing mode where that decides it: `shared` (the Runtime secret signs every
delivery, the behaviour before per-subject keys, kept for single-tenant deployments) is the broken copy, on which the
attack succeeds; `per-subject` refuses it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from nylorun.adapters.webhooks import WebhookSender
from nylorun.domain.signing import PushSigning
from nylorun.service.push import Delivery, Outcome, PushService, sign
from nylorun.service.signing import PushSigningKeys
from nylorun_local.runtime import LocalRuntime
from reliability_kit import ALICE, BOB, Receiver, own_secrets, poll, rpc, user_message

pytestmark = pytest.mark.e2e

FORGED = "Refund approved, wire fee to IBAN XX00 ATTACKER"


class _Queue:
    def send_deliveries(self, deliveries: Sequence[Delivery]) -> None:
        raise AssertionError("deliver() sends nothing")

    def send_fan_out(self, task_id: str, event_id: str, event: dict[str, Any]) -> None:
        raise AssertionError("deliver() sends nothing")

    def dead_letter(self, delivery: Delivery, reason: str) -> None:
        raise AssertionError(reason)


def runtime_secrets(local_runtime: LocalRuntime) -> list[str]:
    return str(local_runtime.options.push_secret).split()


def keys(local_runtime: LocalRuntime, mode: PushSigning, subject: str) -> list[str]:
    """What a subject's receiver is given in this mode (what GET /v1/a2a/push-signing-secrets answers)."""
    return PushSigningKeys(lambda: runtime_secrets(local_runtime), mode).for_subject(subject)


def alice_task_with_config(local_runtime: LocalRuntime, hook: str) -> dict[str, Any]:
    echo = local_runtime.agent_url("echo")
    task = dict(rpc(echo, "SendMessage", {"message": user_message("mine")}, token=ALICE)["result"]["task"])
    created = rpc(echo, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "id": "hook", "url": hook})
    assert "result" in created, created
    return task


def webhooks_receiver(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """`nylorun webhooks --json --port 0 ARGS` as a user runs it; returns it and the URL it listens on."""
    clean = {k: v for k, v in os.environ.items() if k not in ("NYLORUN_TOKEN", "NYLORUN_PUSH_SECRET")}
    process = subprocess.Popen(
        [sys.executable, "-m", "nylorun_client.command", "webhooks", "--json", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env={**clean, "PYTHONIOENCODING": "utf-8", **(env or {})},
    )
    assert process.stdout is not None
    listening = json.loads(process.stdout.readline() or "{}")
    assert listening.get("type") == "listening", process.stderr.read() if process.stderr else listening
    return process, f"{listening['url']}hook"


def stop(process: subprocess.Popen[str]) -> list[dict[str, Any]]:
    process.terminate()
    out, err = process.communicate(timeout=10)
    assert "Traceback" not in err, err
    return [json.loads(line) for line in out.splitlines()]


def post_signed(url: str, secrets: list[str], body: str, webhook_id: str) -> httpx.Response:
    now = datetime.now(UTC)
    headers = {
        "content-type": "application/json",
        "webhook-id": webhook_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": sign(secrets, webhook_id, now, body),
    }
    return httpx.post(url, content=body, headers=headers, timeout=10)


def forged_status(task: dict[str, Any]) -> str:
    status = {
        "state": "TASK_STATE_COMPLETED",
        "message": {"messageId": "forged", "role": "ROLE_AGENT", "parts": [{"text": FORGED}]},
    }
    return json.dumps({"statusUpdate": {"taskId": task["id"], "contextId": task["contextId"], "status": status}})


# ---------------------------------------------------------------------------------------------- keys per subject
@pytest.mark.parametrize(("mode", "isolated"), [("per-subject", True), ("shared", False)])
def test_bobs_key_does_not_verify_alices_deliveries(
    local_runtime: LocalRuntime, mode: PushSigning, isolated: bool
) -> None:
    # Given alice's task with two push configs: one to a receiver holding alice's keys, one to a receiver
    # holding bob's (what bob is given in this mode)
    mine, bobs = Receiver(keys(local_runtime, mode, "alice")), Receiver(keys(local_runtime, mode, "bob"))
    try:
        task = alice_task_with_config(local_runtime, mine.url)
        rpc(local_runtime.agent_url("echo"), "CreateTaskPushNotificationConfig",
            {"taskId": task["id"], "id": "other", "url": bobs.url})
        # When the Runtime (signing in this mode) delivers one of alice's status updates to each
        store = local_runtime.runtime.store  # type: ignore[union-attr]
        push = PushService(store, WebhookSender(timeout_seconds=5, allow_loopback=True), _Queue(),
                           local_runtime.runtime.settings.model_copy(update={"push_signing": mode}),  # type: ignore[union-attr]
                           lambda: runtime_secrets(local_runtime))
        payload = {"taskId": task["id"], "contextId": task["contextId"], "status": {"state": "TASK_STATE_WORKING"}}
        for config in ("hook", "other"):
            delivery = Delivery(event_id=f"e-{uuid.uuid4()}", task_id=task["id"], config_id=config,
                                kind="statusUpdate", payload=payload, first_attempt_at=time.time())
            assert push.deliver(delivery, 1).outcome is Outcome.DELIVERED
        # Then alice's key verifies it; bob's verifies it only when one secret signs for everyone (shared). The
        # Runtime's own push function may deliver the task's real updates to these configs too: same verdicts.
        assert mine.requests and all(r["verified"] for r in mine.requests)
        assert bobs.requests and all(r["verified"] is (not isolated) for r in bobs.requests)
    finally:
        mine.close()
        bobs.close()


def test_each_caller_gets_its_own_keys_and_the_runtimes_deliveries_verify_with_the_owners_only(
    local_runtime: LocalRuntime,
) -> None:
    # Given alice's and bob's keys, as the Runtime hands them out
    alice, bob = own_secrets(local_runtime.base_url, ALICE), own_secrets(local_runtime.base_url, BOB)
    assert alice and bob and set(alice).isdisjoint(bob)
    assert set(alice).isdisjoint(runtime_secrets(local_runtime))  # never the Runtime secret itself
    # And without a token there are none
    anonymous = httpx.get(f"{local_runtime.base_url}/v1/a2a/push-signing-secrets", timeout=10)
    assert anonymous.status_code == 401 and "secrets" not in anonymous.text
    mine, bobs = Receiver(alice), Receiver(bob)
    try:
        # When alice's two tasks run with a push config each, one to a receiver holding her keys, one to a
        # receiver holding bob's (the whole pipeline: stream, bus, queue, push function)
        for hook in (mine.url, bobs.url):
            params = {"message": user_message("mine"), "configuration": {"taskPushNotificationConfig": {"url": hook}}}
            assert "result" in rpc(local_runtime.agent_url("echo"), "SendMessage", params, token=ALICE)
        # (generous: the one local push poller may first work off other tests' deliveries to slow receivers)
        poll(lambda: (len(mine.requests), len(bobs.requests)), lambda n: min(n) >= 1, timeout=120)
        # Then her keys verify her deliveries, and bob's verify none of them
        assert mine.requests and all(r["verified"] for r in mine.requests)
        assert bobs.requests and not any(r["verified"] for r in bobs.requests)
    finally:
        mine.close()
        bobs.close()


# ---------------------------------------------------------------------------------------------- the forged delivery
@pytest.mark.parametrize(("mode", "refused"), [("per-subject", True), ("shared", False)])
def test_a_status_update_forged_by_another_caller_is_refused_by_nylorun_webhooks(
    local_runtime: LocalRuntime, mode: PushSigning, refused: bool
) -> None:
    # Given alice's `nylorun webhooks` with her keys: per subject she fetches her own (--from, her token);
    # shared, she holds the one Runtime secret every receiver was told to verify with
    if mode == "per-subject":
        args = ("--from", local_runtime.agent_url("echo"), "--token", ALICE)
        receiver, hook = webhooks_receiver(*args)
    else:
        receiver, hook = webhooks_receiver(env={"NYLORUN_PUSH_SECRET": " ".join(keys(local_runtime, mode, "alice"))})
    try:
        task = alice_task_with_config(local_runtime, hook)
        # And a delivery really signed for alice is accepted (the receiver refuses not everything)
        mine = own_secrets(local_runtime.base_url, ALICE) if mode == "per-subject" else keys(local_runtime, mode, "alice")
        genuine = post_signed(hook, mine, json.dumps({"statusUpdate": {"taskId": task["id"]}}), "msg_genuine")
        # When bob, who knows the key(s) he is given, signs a fake statusUpdate for alice's task
        bobs_keys = own_secrets(local_runtime.base_url, BOB) if mode == "per-subject" else keys(local_runtime, mode, "bob")
        forged = post_signed(hook, bobs_keys, forged_status(task), f"msg_forged_{uuid.uuid4().hex}")
    finally:
        lines = stop(receiver)
    assert genuine.status_code == 204
    # Then per subject it is refused (401, reported as a failed signature) and never shown as alice's task's news
    forged_lines = [line for line in lines if FORGED in json.dumps(line)]
    if refused:
        assert forged.status_code == 401
        assert forged_lines == []
        assert any(line.get("verified") is False for line in lines)
    else:  # the broken copy: one shared secret lets any holder sign for everyone
        assert forged.status_code == 204 and forged_lines and forged_lines[0]["verified"] is True


# ---------------------------------------------------------------------------------------------- replay
def test_a_replayed_delivery_is_not_accepted_twice_by_nylorun_webhooks(local_runtime: LocalRuntime) -> None:
    # Given alice's `nylorun webhooks` with her own keys
    receiver, hook = webhooks_receiver("--from", local_runtime.agent_url("echo"), "--token", ALICE)
    alice = own_secrets(local_runtime.base_url, ALICE)
    body = json.dumps({"statusUpdate": {"taskId": "t-replay", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}})
    try:
        # When one signed delivery arrives, then exactly the same request again (captured and replayed)
        now = datetime.now(UTC)
        headers = {"content-type": "application/json", "webhook-id": "msg_replay_1",
                   "webhook-timestamp": str(int(now.timestamp())),
                   "webhook-signature": sign(alice, "msg_replay_1", now, body)}
        first = httpx.post(hook, content=body, headers=headers, timeout=10)
        again = httpx.post(hook, content=body, headers=headers, timeout=10)
    finally:
        lines = stop(receiver)
    # Then the first is a delivery, the replay is reported as a duplicate and never passed on as a new one
    assert first.status_code == 204 and again.status_code == 204  # a retry of a delivery that arrived stops
    deliveries = [line for line in lines if line.get("type") == "delivery"]
    assert len(deliveries) == 1 and deliveries[0]["verified"] is True
    assert [line["type"] for line in lines if line.get("webhookId") == "msg_replay_1"] == ["delivery", "duplicate"]


# ---------------------------------------------------------------------------------------------- secret on the command line
def test_nylorun_webhooks_takes_no_secret_on_the_command_line(local_runtime: LocalRuntime, tmp_path: Any) -> None:
    secret = keys(local_runtime, "per-subject", "alice")[0]
    # When a user gives the secret as an argument (visible in ps and /proc to every process)
    process = subprocess.Popen(
        [sys.executable, "-m", "nylorun_client.command", "webhooks", "--port", "0", "--secret", secret],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
    )
    try:
        code = process.wait(timeout=20)
    except subprocess.TimeoutExpired:  # it started listening with the secret on its command line
        stop(process)
        code = None
    err = process.stderr.read() if process.stderr else ""
    # Then it refuses to start, says where a secret goes instead, and does not echo the secret
    assert code == 2, "nylorun webhooks ran with its secret on the command line"
    assert "--secret is refused" in err and "--secret-file" in err and "NYLORUN_PUSH_SECRET" in err
    assert secret not in err
    # And a secret file works (a file only its owner reads keeps it out of every process list)
    path = tmp_path / "secret"
    path.write_text(secret + "\n")
    path.chmod(0o600)
    receiver, hook = webhooks_receiver("--secret-file", str(path))
    try:
        ok = post_signed(hook, [secret], '{"statusUpdate":{}}', "msg_file_1")
    finally:
        stop(receiver)
    assert ok.status_code == 204
    assert not re.search(re.escape(secret), " ".join(receiver.args))
