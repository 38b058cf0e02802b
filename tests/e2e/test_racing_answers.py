"""Racing answers over real HTTP (Profile v2 interactions/v1): of many callers answering one open question at
once, exactly one answer is taken; every other one is refused with -32602 naming the interaction, and none
becomes a new turn in the context."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2a_caller import INTERACTIONS
from conftest import auth, rpc, user_message
from nylorun.ports import Owner
from nylorun_local.runtime import LocalRuntime

RACERS = 30


def test_thirty_racing_answers_to_one_question_one_is_taken_the_rest_refused(local_runtime: LocalRuntime) -> None:
    # Given the support Agent asking "Which order?" (INPUT_REQUIRED) in a fresh context
    url, context = local_runtime.agent_url("support"), str(uuid.uuid4())
    headers = auth(**{"A2A-Extensions": INTERACTIONS})
    asked = rpc(url, "SendMessage", {"message": user_message("I want a refund", contextId=context)}, headers=headers)
    task = asked["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task["status"]
    interaction_id = task["status"]["message"]["metadata"][INTERACTIONS]["interactionId"]
    start = threading.Barrier(RACERS)

    def answer(n: int) -> dict[str, Any]:
        message = user_message(
            f"A-100{n % 3 + 1}",
            taskId=task["id"],
            metadata={INTERACTIONS: {"interactionId": interaction_id, "value": f"A-100{n % 3 + 1}"}},
            extensions=[INTERACTIONS],
        )
        start.wait(30)
        return rpc(url, "SendMessage", {"message": message, "configuration": {"returnImmediately": True}},
                   headers=headers)

    # When 30 callers answer it at once, each with its own message
    with ThreadPoolExecutor(RACERS) as pool:
        answers = list(pool.map(answer, range(RACERS)))

    # Then exactly one answer was taken, on the asked task
    taken = [a["result"]["task"] for a in answers if "result" in a]
    assert [t["id"] for t in taken] == [task["id"]], taken
    # And the 29 others were refused with -32602 naming the interaction
    errors = [a["error"] for a in answers if "error" in a]
    assert len(errors) == RACERS - 1
    assert {e["code"] for e in errors} == {-32602}, errors
    assert all(f"interactionId {interaction_id}" in e["message"] for e in errors), errors
    # And no new turn was made: the context holds the one task, and nothing waits in its queue (the one turn
    # it ever had holds it, or has ended since: the answered turn goes on while this reads)
    listed = rpc(url, "ListTasks", {"contextId": context}, headers=headers)["result"]["tasks"]
    assert [t["id"] for t in listed] == [task["id"]]
    context_state = local_runtime.runtime.store.context_state(Owner("alice", "support"), context)
    assert context_state["turns"] == 1 and context_state["activeTask"] in (task["id"], None), context_state
