"""Connections end to end (docs/writing/connections.md): the support walk with a real consent on the example
OAuth provider, followed over HTTP as a browser does; the stored connection reused; other subjects kept out;
forged, replayed and cross-subject completions refused; tokens nowhere in plaintext; refresh; revoke."""

from __future__ import annotations

import json
import logging
import re
from typing import Any

import httpx
import pytest
from a2a_caller import INTERACTIONS
from conftest import ALICE, BOB, poll, rpc, user_message
from consent import connect, disconnect, submit
from nylorun_client.command import main
from nylorun_examples.support import REFUNDS
from nylorun_local.runtime import LocalRuntime
from webhook_receiver import Receiver, own_secrets

PROFILE_HEADERS = {"A2A-Extensions": INTERACTIONS}


def send(url: str, message: dict[str, Any], token: str = ALICE) -> dict[str, Any]:
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}", **PROFILE_HEADERS}
    return rpc(url, "SendMessage", {"message": message}, headers=headers)


def task_of(answer: dict[str, Any]) -> dict[str, Any]:
    assert "result" in answer, answer
    return dict(answer["result"]["task"])


def open_interaction(task: dict[str, Any]) -> dict[str, Any]:
    return dict(task["status"]["message"]["metadata"][INTERACTIONS])


def answer(task: dict[str, Any], approved: bool, token: str = ALICE, url: str = "") -> dict[str, Any]:
    asked = open_interaction(task)
    message = user_message("ok", taskId=task["id"], extensions=[INTERACTIONS],
                           metadata={INTERACTIONS: {"interactionId": asked["interactionId"], "approved": approved}})
    return send(url, message, token)


def get(url: str, task_id: str, token: str = ALICE) -> dict[str, Any]:
    headers = {"A2A-Version": "1.0", "Authorization": f"Bearer {token}", **PROFILE_HEADERS}
    found = rpc(url, "GetTask", {"id": task_id}, headers=headers)
    assert "result" in found, found
    return dict(found["result"])


def until_connection(url: str, token: str = ALICE) -> dict[str, Any]:
    """A support turn for order A-1001, waiting for its payments connection."""
    task = task_of(send(url, user_message("Please refund order A-1001"), token))
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED", task["status"]
    assert open_interaction(task)["kind"] == "connection", task["status"]
    return task


def resumed(url: str, task: dict[str, Any], token: str = ALICE) -> dict[str, Any]:
    """The task once its turn resumed and stopped again: at its next interaction, or ended."""
    asked = open_interaction(task)["interactionId"]

    def moved_on(t: dict[str, Any]) -> bool:
        if t["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_REJECTED"):
            return True
        metadata = t["status"].get("message", {}).get("metadata") or {}
        return INTERACTIONS in metadata and metadata[INTERACTIONS]["interactionId"] != asked

    return poll(lambda: get(url, task["id"], token), moved_on)


@pytest.fixture()
def support(local_runtime: LocalRuntime) -> str:
    disconnect(local_runtime.base_url, ALICE), disconnect(local_runtime.base_url, BOB)
    return local_runtime.agent_url("support")


def test_support_walk_with_a_real_consent_then_a_second_task_asks_nothing(
    local_runtime: LocalRuntime, support: str
) -> None:
    # Given a support turn waiting for the payments connection, its detail naming where to connect
    task = until_connection(support)
    url = open_interaction(task)["detail"]["authorizationUrl"]
    assert url.startswith(local_runtime.base_url + "/v1/a2a/connections/start?")
    # When the person opens it: a page naming the subject and the Agent, then the provider's consent page
    page = connect(url)
    # Then the browser shows "connected", and the turn resumed by itself to the approval
    assert page.status_code == 200 and "Connected" in page.text and "close this page" in page.text, page.text
    task = resumed(support, task)
    assert open_interaction(task)["kind"] == "approval", task["status"]
    refunds_before = len(REFUNDS)
    done = task_of(answer(task, True, url=support))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
    assert len(REFUNDS) == refunds_before + 1  # the payments API took the refund with the connection's token
    # And a second task of the same subject uses the stored connection without asking
    second = task_of(send(support, user_message("Please refund order A-1002")))
    assert open_interaction(second)["kind"] == "approval", second["status"]
    # And the caller lists it, without any token
    listed = httpx.get(f"{local_runtime.base_url}/v1/a2a/connections", headers={"Authorization": f"Bearer {ALICE}"})
    assert [(c["agent"], c["provider"]) for c in listed.json()["connections"]] == [("support", "payments")]
    assert "token" not in listed.text.lower()


def test_another_subject_cannot_use_list_or_revoke_it(local_runtime: LocalRuntime, support: str) -> None:
    base = local_runtime.base_url
    # Given alice's turn waiting for payments: bob cannot start her consent with his token
    task = until_connection(support)
    iid = open_interaction(task)["interactionId"]
    theirs = httpx.post(f"{base}/v1/a2a/connections/start", params={"task": task["id"], "interaction": iid},
                        headers={"Authorization": f"Bearer {BOB}"})
    assert theirs.status_code == 404, theirs.text
    # Given alice connected payments
    connect(open_interaction(task)["detail"]["authorizationUrl"])
    resumed(support, task)
    # When bob lists and revokes, and asks support for a refund
    listed = httpx.get(f"{base}/v1/a2a/connections", headers={"Authorization": f"Bearer {BOB}"})
    revoked = httpx.delete(f"{base}/v1/a2a/connections/support/payments", headers={"Authorization": f"Bearer {BOB}"})
    bobs = until_connection(support, BOB)
    # Then bob sees none, revokes none, and is asked to connect his own
    assert listed.json() == {"connections": []} and revoked.status_code == 404
    assert open_interaction(bobs)["kind"] == "connection"


def test_forged_replayed_and_other_browser_states_connect_nothing(local_runtime: LocalRuntime, support: str) -> None:
    base = local_runtime.base_url
    task = until_connection(support)
    url = open_interaction(task)["detail"]["authorizationUrl"]
    # A forged state
    forged = httpx.get(f"{base}/v1/a2a/connections/callback", params={"state": "forged", "code": "x"})
    assert forged.status_code == 400 and "Nothing was connected" in forged.text
    # A replayed state: the person's own completion, then the same redirect again
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        confirm = browser.get(url)
        to_provider = submit(browser, confirm)
        consent_page = browser.get(to_provider.headers["location"])
        back = submit(browser, consent_page, decision="allow")
        callback = back.headers["location"]
        first = browser.get(callback)
        again = browser.get(callback)
    assert "Connected" in first.text
    assert again.status_code == 400 and "already used" in again.text
    # A link completed in another browser than the one that started it (consent phishing)
    disconnect(base, ALICE)
    task = until_connection(support)
    with httpx.Client(follow_redirects=False, timeout=30) as asker, httpx.Client(timeout=30) as victim:
        to_provider = submit(asker, asker.get(open_interaction(task)["detail"]["authorizationUrl"]))
        back = submit(asker, asker.get(to_provider.headers["location"]), decision="allow")
        elsewhere = victim.get(back.headers["location"])
    assert elsewhere.status_code == 400 and "another browser" in elsewhere.text
    assert get(support, task["id"])["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


def test_a_code_issued_for_another_subject_does_not_connect(local_runtime: LocalRuntime, support: str) -> None:
    # Given alice's and bob's consents in flight, each in its own browser
    alices, bobs = until_connection(support), until_connection(support, BOB)
    with httpx.Client(follow_redirects=False, timeout=30) as alice, httpx.Client(follow_redirects=False, timeout=30) as bob:
        to_a = submit(alice, alice.get(open_interaction(alices)["detail"]["authorizationUrl"]))
        to_b = submit(bob, bob.get(open_interaction(bobs)["detail"]["authorizationUrl"]))
        back_b = submit(bob, bob.get(to_b.headers["location"]), decision="allow")
        bobs_code = httpx.URL(back_b.headers["location"]).params["code"]
        alices_state = httpx.URL(to_a.headers["location"]).params["state"]
        # When bob's code comes back with alice's state, in alice's browser
        swapped = alice.get(f"{local_runtime.base_url}/v1/a2a/connections/callback",
                            params={"state": alices_state, "code": bobs_code})
    # Then nothing connected: the code was bound to bob's PKCE challenge
    assert swapped.status_code == 400 and "Nothing was connected" in swapped.text
    assert get(support, alices["id"])["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"


def test_typed_approved_true_without_consent_is_refused_and_false_declines(support: str) -> None:
    task = until_connection(support)
    refused = answer(task, True, url=support)
    assert refused["error"]["code"] == -32602, refused
    assert "/v1/a2a/connections/start" in refused["error"]["message"]
    assert get(support, task["id"])["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    declined = task_of(answer(task, False, url=support))
    assert declined["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "Without a payments connection" in declined["status"]["message"]["parts"][0]["text"]


def test_provider_error_is_shown_as_text(local_runtime: LocalRuntime, support: str) -> None:
    task = until_connection(support)
    page = connect(open_interaction(task)["detail"]["authorizationUrl"], allow=False)
    assert page.status_code == 400 and "access_denied" in page.text
    hostile = httpx.get(f"{local_runtime.base_url}/v1/a2a/connections/callback",
                        params={"error": "<script>x</script>", "state": "s"})
    assert "<script>" not in hostile.text and "&lt;script&gt;" in hostile.text


def test_refresh_when_expired_and_revoke_then_asked_again(local_runtime: LocalRuntime, support: str) -> None:
    provider = local_runtime.payments
    provider.token_seconds = 1  # every access token is past the refresh margin when used
    try:
        task = until_connection(support)
        connect(open_interaction(task)["detail"]["authorizationUrl"])
        refreshes = provider.refreshes
        done = task_of(answer(resumed(support, task), True, url=support))
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
        assert provider.refreshes > refreshes
    finally:
        provider.token_seconds = 3600
    revoked_before = provider.revoked
    gone = httpx.delete(f"{local_runtime.base_url}/v1/a2a/connections/support/payments",
                        headers={"Authorization": f"Bearer {ALICE}"})
    assert gone.status_code == 204 and provider.revoked == revoked_before + 1
    assert open_interaction(until_connection(support))["kind"] == "connection"


def test_tokens_appear_in_no_item_stream_record_log_answer_or_push(
    local_runtime: LocalRuntime, support: str, caplog: pytest.LogCaptureFixture
) -> None:
    provider = local_runtime.payments
    caplog.set_level(logging.DEBUG)
    task = until_connection(support)
    # A webhook receiver on the task: every push body from here on is read too
    receiver = Receiver(own_secrets(local_runtime.base_url, ALICE))
    try:
        created = rpc(support, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": receiver.url, "id": "leak"}, token=ALICE)
        assert "result" in created, created
        connect(open_interaction(task)["detail"]["authorizationUrl"])
        answers = [json.dumps(resumed(support, task))]
        answers.append(json.dumps(answer(get(support, task["id"]), True, url=support)))
        poll(lambda: [r for r in receiver.requests if "TASK_STATE_COMPLETED" in json.dumps(r["body"])], bool, timeout=30)
        pushed = json.dumps([r["body"] for r in receiver.requests])
    finally:
        receiver.close()
    assert "TASK_STATE_AUTH_REQUIRED" in pushed and "TASK_STATE_WORKING" in pushed  # the approval and the refund pushed
    tokens = [*provider.access, *provider.refresh]
    assert tokens
    assert local_runtime.stack is not None
    items = json.dumps(local_runtime.aws.table_items(local_runtime.stack.table_name))
    stream = json.dumps(local_runtime.aws.stream_records(local_runtime.stack.table_stream_arn, 0, 1_000_000), default=str)
    logs = caplog.text
    for token in tokens:
        for where, text in (("push", pushed), ("item", items), ("stream", stream), ("log", logs), ("answer", " ".join(answers))):
            assert token not in text, f"a token in a {where}"


def test_an_operator_sees_counts_per_agent_and_provider_never_a_token(
    local_runtime: LocalRuntime, support: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def admin(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(["admin", "--local", str(local_runtime.options.port), *args, "connections"])
        return code, capsys.readouterr().out

    def counted() -> int:
        code, out = admin("--json")
        assert code == 0, out
        return sum(r["connections"] for r in json.loads(out)["connections"] if (r["agent"], r["provider"]) == ("support", "payments"))

    before = counted()
    # When alice connects payments for support
    task = until_connection(support)
    connect(open_interaction(task)["detail"]["authorizationUrl"])
    resumed(support, task)
    # Then the operator's count for support/payments is one more, in JSON and as text, and names no subject or token
    assert counted() == before + 1
    code, text = admin()
    assert code == 0 and re.search(rf"^support/payments +{before + 1}$", text, re.MULTILINE), text
    assert "alice" not in text and not [t for t in [*local_runtime.payments.access, *local_runtime.payments.refresh] if t in text]
