"""A task holding stored items that no longer validate (a hand edit, an older version) still answers over HTTP:
GetTask, ListTasks and CancelTask through the real client (`NylorunClient`), and `nylorun admin show`, with the
bad items left out (adapters/dynamodb/salvage.py). The items are written straight into the local Runtime's table."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid

import pytest
from conftest import ALICE, held_agent, poll
from nylorun.adapters.dynamodb import codec, layout
from nylorun_client.client import NylorunClient
from nylorun_client.command import main
from nylorun_client.views import TaskView
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

AGENT = "poisoned"


def test_a_poisoned_task_still_reads_lists_cancels_and_shows(
    local_runtime: LocalRuntime, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a WORKING task (its turn held) whose plan, status message and history hold items no model reads
    hold = threading.Event()
    held_agent(local_runtime, AGENT, hold)
    url = local_runtime.agent_url(AGENT)
    assert local_runtime.runtime is not None
    db, table = local_runtime.runtime.client("dynamodb"), local_runtime.stack.table_name
    context_id = f"ctx-{uuid.uuid4()}"

    async def body() -> str:
        async with NylorunClient(url, token=ALICE) as client:
            task = await client.send("go", context_id=context_id, wait=False)
            assert isinstance(task, TaskView)
            await asyncio.to_thread(
                poll, lambda: db.get_item(TableName=table, Key=codec.to_item(layout.task(task.id)))["Item"],
                lambda item: item["state"]["S"] == "TASK_STATE_WORKING",
            )
            bad_status = {"state": "TASK_STATE_WORKING", "message": {"messageId": "s", "role": "ROLE_AGENT",
                                                                       "parts": [{"text": "a", "url": "b"}]}}
            db.update_item(
                TableName=table, Key=codec.to_item(layout.task(task.id)), UpdateExpression="SET #p = :p, #s = :s",
                ExpressionAttributeNames={"#p": "plan", "#s": "status"},
                ExpressionAttributeValues=codec.to_item({
                    ":p": json.dumps([{"label": "Fetch", "state": "done"}, {"label": "Pay", "state": "completed"}]),
                    ":s": json.dumps(bad_status),
                }),
            )
            bad_message = {"messageId": "m-bad", "role": "ROLE_AGENT", "parts": [{}]}
            db.put_item(TableName=table, Item=codec.to_item({**layout.message(task.id, 9), "body": json.dumps(bad_message)}))

            # When the caller gets, lists and cancels it
            got = await client.get(task.id)
            listed = await client.list_tasks(context_id=context_id)
            canceled = await client.cancel(task.id)

            # Then each answers: the task WORKING (its bad status message left out, and the plan it carried), then
            # CANCELED
            assert got.state == "TASK_STATE_WORKING" and got.text == "" and got.plan == []
            assert [t.id for t in listed] == [task.id]
            assert canceled.state == "TASK_STATE_CANCELED"
            return task.id

    try:
        task_id = asyncio.run(body())
    finally:
        hold.set()
    # And the operator's `nylorun admin show` prints it and exits 0, no traceback
    capsys.readouterr()
    code = main(["admin", "--local", str(local_runtime.options.port), "show", task_id])
    seen = capsys.readouterr()
    assert code == 0 and "Traceback" not in seen.err + seen.out, seen.err
