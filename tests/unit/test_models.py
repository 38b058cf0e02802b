"""nylorun.models: the Converse tool loop, on a real `bedrock-runtime` client whose calls botocore's Stubber answers.

Every request the loop makes is checked against Bedrock's service model by botocore (parameter validation runs
before the stub answers) and against the request the test expects; every stubbed answer is checked against the
service model's output shape. A crash is a BaseException the runner does not catch (the run dies as a Lambda that
timed out would), and the next `run` is Step Functions' retry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber
from nylorun.adapters.dynamodb import decode_change
from nylorun.engine.turn import Turn
from nylorun.events import TURN_USAGE
from nylorun.models import Bedrock, Price, Tool, ask_connection, ask_person, converse, keep_plan, tool
from nylorun.models.loop import DENIED, MODEL_EFFECT
from nylorun.ports import NewTurn
from nylorun.profile.extensions import EFFECTS, PROGRESS, TELEMETRY
from nylorun.protocol.models import GetTaskRequest, TaskState, TaskStatus
from nylorun.service.publish import EventPublisher
from nylorun.settings import Settings
from pydantic_core import to_jsonable_python
from test_stream_events import Bus, stream_record
from unit_support import (
    CORE,
    OWNER,
    TYPED,
    Runtime,
    agent_of,
    answer,
    connect,
    message,
    open_interaction,
    runtime,
    state,
    status_text,
)

MODEL_ID = "amazon.nova-lite-v1:0"
SYSTEM = "You help with orders."
PRICES = {MODEL_ID: Price(input=0.06, output=0.24)}


class Crash(BaseException):
    """The run dies here: nothing after it is written."""


class Orders:
    """The outside world of the tools: what each was called with, and with which idempotency key."""

    def __init__(self) -> None:
        self.lookups: list[str] = []
        self.refunds: list[tuple[str, str]] = []
        self.crash_refund = False

    def tools(self) -> list[Any]:
        @tool
        def find_order(order_id: str) -> dict[str, Any]:
            """Look up an order by its id."""
            self.lookups.append(order_id)
            return {"orderId": order_id, "item": "zq-espresso-machine-77", "amount": 249.0}

        @tool(needs_approval=True, prompt="Refund order {order_id}?", detail=lambda order_id: {"order": order_id})
        def refund_order(order_id: str, idempotency_key: str) -> dict[str, Any]:
            """Refund an order in full."""
            if self.crash_refund:
                raise Crash()
            self.refunds.append((order_id, idempotency_key))
            return {"refundId": "zq-refund-4242"}

        return [find_order, refund_order]


@pytest.fixture
def bedrock() -> Iterator[tuple[Any, Stubber, list[dict[str, Any]]]]:
    """A real bedrock-runtime client, stubbed; `calls` records each request that reached the (stubbed) service."""
    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    calls: list[dict[str, Any]] = []
    client.meta.events.register("before-parameter-build.bedrock-runtime.Converse", lambda params, **_: calls.append(params))
    with Stubber(client) as stubber:
        yield client, stubber, calls


def tool_use(use_id: str, name: str, arguments: dict[str, Any], tokens: tuple[int, int] = (100, 20)) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [
            {"text": f"Let me call {name}."}, {"toolUse": {"toolUseId": use_id, "name": name, "input": arguments}},
        ]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": tokens[0], "outputTokens": tokens[1], "totalTokens": sum(tokens)},
        "metrics": {"latencyMs": 300},
    }


def final(text: str, tokens: tuple[int, int] = (200, 30)) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": tokens[0], "outputTokens": tokens[1], "totalTokens": sum(tokens)},
        "metrics": {"latencyMs": 300},
    }


def result_of(use_id: str, content: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"toolResult": {"toolUseId": use_id, "content": [content]}}]}


def expected(*messages: dict[str, Any]) -> dict[str, Any]:
    return {"modelId": MODEL_ID, "system": [{"text": SYSTEM}], "toolConfig": ANY, "messages": list(messages)}


def assistant_of(response: dict[str, Any]) -> dict[str, Any]:
    return dict(response["output"]["message"])


USER = {"role": "user", "content": [{"text": "Refund order A-1001"}]}


def model_agent(
    client: Any, orders: Orders, sleeps: list[float] | None = None, builtins: tuple[Tool, ...] = (), **options: Any
) -> Runtime:
    def run(turn: Turn) -> None:
        model = Bedrock(MODEL_ID, client=client, prices=PRICES, sleep=(sleeps if sleeps is not None else []).append)
        turn.reply(converse(turn, model, system=SYSTEM, tools=[*orders.tools(), *builtins], **options))

    return runtime(agent_of(run))


def new_task(rt: Runtime, text: str = "Refund order A-1001") -> str:
    record, _ = rt.store.create_turn(NewTurn(owner=OWNER, context_id="ctx", message=message(text)))
    return record.task_id


def run(rt: Runtime, task_id: str) -> str:
    return str(rt.runner.handle({"action": "run", "taskId": task_id})["outcome"])


def get(rt: Runtime, task_id: str, caller: Any = TYPED) -> dict[str, Any]:
    return rt.service.get_task(caller, GetTaskRequest(id=task_id, history_length=100))


def test_two_tool_uses_then_an_answer(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    orders = Orders()
    # Given a model that looks the order up twice (A-1001, then A-1002), then answers
    first, second = tool_use("t1", "find_order", {"order_id": "A-1001"}), tool_use("t2", "find_order", {"order_id": "A-1002"})
    looked_up = {"json": {"orderId": "A-1001", "item": "zq-espresso-machine-77", "amount": 249.0}}
    stubber.add_response("converse", first, expected(USER))
    stubber.add_response("converse", second, expected(USER, assistant_of(first), result_of("t1", looked_up)))
    stubber.add_response("converse", final("Both orders are on their way."), None)
    rt = model_agent(client, orders)
    # When the caller sends a message
    task = rt.send("Refund order A-1001")
    # Then each tool ran once, the model's answer is the reply, and each model call carried the tool specs
    assert state(task) == TaskState.COMPLETED and status_text(task) == "Both orders are on their way."
    assert orders.lookups == ["A-1001", "A-1002"]
    stubber.assert_no_pending_responses()
    specs = [t["toolSpec"] for t in calls[0]["toolConfig"]["tools"]]
    assert [s["name"] for s in specs] == ["find_order", "refund_order"]
    assert specs[1]["inputSchema"]["json"]["required"] == ["order_id"]  # the key is never offered to the model
    assert calls[2]["messages"][-1] == result_of("t2", {"json": {**looked_up["json"], "orderId": "A-1002"}})


def test_usage_totals_reach_telemetry(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    # Given two model calls: 100+20 then 200+30 tokens
    stubber.add_response("converse", tool_use("t1", "find_order", {"order_id": "A-1001"}, (100, 20)), None)
    stubber.add_response("converse", final("It ships today.", (200, 30)), None)
    rt = model_agent(client, Orders())
    # When the turn completes
    task = rt.send("Where is A-1001?")
    # Then telemetry/v1 counts both calls' tokens and their cost at the table's prices
    telemetry = task["status"]["message"]["metadata"][TELEMETRY]
    assert telemetry["tokens"] == 350
    assert telemetry["costUsd"] == pytest.approx((300 * 0.06 + 50 * 0.24) / 1e6)


def test_an_approved_tool_runs_once_and_the_model_is_not_called_again_for_what_it_said(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    orders = Orders()
    # Given a model that asks to refund A-1001 (a tool that needs approval)
    ask = tool_use("t1", "refund_order", {"order_id": "A-1001"})
    stubber.add_response("converse", ask, expected(USER))
    rt = model_agent(client, orders)
    task = rt.send("Refund order A-1001")
    # Then the task asks a person with the author's prompt and detail, and nothing was refunded yet
    assert state(task) == TaskState.AUTH_REQUIRED
    asked = open_interaction(task)
    assert (asked["prompt"], asked["detail"]) == ("Refund order A-1001?", {"order": "A-1001"})
    assert orders.refunds == []
    # When the person approves (the turn runs again from the top)
    done_result = {"json": {"refundId": "zq-refund-4242"}}
    stubber.add_response("converse", final("Refunded."), expected(USER, assistant_of(ask), result_of("t1", done_result)))
    done = rt.send(**answer(task, approved=True))
    # Then the refund ran once with its effect's key, and the first model call was replayed, not made again
    assert state(done) == TaskState.COMPLETED and status_text(done) == "Refunded."
    assert [order for order, _ in orders.refunds] == ["A-1001"] and orders.refunds[0][1].startswith("eff-")
    assert len(calls) == 2
    stubber.assert_no_pending_responses()


def test_a_denied_tool_does_not_run_and_the_model_reads_that_it_was_denied(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    orders = Orders()
    ask = tool_use("t1", "refund_order", {"order_id": "A-1001"})
    stubber.add_response("converse", ask, None)
    rt = model_agent(client, orders)
    task = rt.send("Refund order A-1001")
    # When the person denies
    stubber.add_response("converse", final("I did not refund it."), expected(USER, assistant_of(ask), result_of("t1", {"text": DENIED})))
    done = rt.send(**answer(task, approved=False))
    # Then nothing was refunded, and the model's next request carried the denial as the tool's result
    assert orders.refunds == []
    assert state(done) == TaskState.COMPLETED and status_text(done) == "I did not refund it."
    stubber.assert_no_pending_responses()


def test_a_crash_after_a_model_call_replays_its_answer_without_calling_the_model_again(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    orders = Orders()
    first = tool_use("t1", "find_order", {"order_id": "A-1001"})
    looked_up = {"json": {"orderId": "A-1001", "item": "zq-espresso-machine-77", "amount": 249.0}}
    stubber.add_response("converse", first, expected(USER))
    stubber.add_response("converse", final("It ships today."), expected(USER, assistant_of(first), result_of("t1", looked_up)))
    rt = model_agent(client, orders)
    task_id = new_task(rt)
    # Given a run that dies right after the first model call's answer was journaled
    finish = rt.store.journal_finish
    died: list[int] = []

    def dies_once(task: str, seq: int, result: Any) -> None:
        finish(task, seq, result)
        if not died and rt.store.journal(task)[seq].name == MODEL_EFFECT:
            died.append(seq)
            raise Crash()

    rt.store.journal_finish = dies_once  # type: ignore[method-assign]
    with pytest.raises(Crash):
        run(rt, task_id)
    assert len(calls) == 1
    # When Step Functions runs the turn again
    run(rt, task_id)
    # Then the model was called once more only (for the step after the tool), never for the journaled answer
    assert len(calls) == 2 and orders.lookups == ["A-1001"]
    assert status_text(get(rt, task_id)) == "It ships today."


def test_a_crash_mid_tool_leaves_the_outcome_uncertain_and_calls_nothing_again(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    orders = Orders()
    stubber.add_response("converse", tool_use("t1", "refund_order", {"order_id": "A-1001"}), None)
    rt = model_agent(client, orders)
    task = rt.send("Refund order A-1001")
    # Given a run that dies inside the approved refund
    orders.crash_refund = True
    with pytest.raises(Crash):
        rt.send(**answer(task, approved=True))
    orders.crash_refund = False
    # When the turn runs again
    outcome = run(rt, task["id"])
    # Then the refund is not repeated and the model is not called: the task reports the outcome uncertain
    assert outcome == "uncertain" and orders.refunds == [] and len(calls) == 1
    seen = get(rt, task["id"])
    assert state(seen) == TaskState.WORKING and "uncertain" in seen["status"]["message"]["metadata"][EFFECTS]


def shown(rt: Runtime) -> list[str]:
    """Every status, history message, plan and artifact the Runtime writes for callers to read (what GetTask,
    a stream and a push can ever show), as JSON."""
    writes: list[str] = []
    set_status, put_artifact = rt.store.set_status, rt.store.put_artifact

    def recording_status(task_id: str, status: Any, **kwargs: Any) -> Any:
        writes.append(status.model_dump_json() + json.dumps(to_jsonable_python(kwargs)))
        return set_status(task_id, status, **kwargs)

    def recording_artifact(task_id: str, artifact: Any) -> None:
        writes.append(artifact.model_dump_json())
        put_artifact(task_id, artifact)

    rt.store.set_status = recording_status  # type: ignore[method-assign]
    rt.store.put_artifact = recording_artifact  # type: ignore[method-assign]
    return writes


def test_tool_names_arguments_results_and_tool_use_blocks_never_reach_a_caller(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    # Given a loop whose tool-use ids, arguments and results carry markers (zq-...), and an approval whose prompt
    # (the author's words, which name the order on purpose) is the one thing a person must read
    stubber.add_response("converse", tool_use("zq-use-1", "find_order", {"order_id": "zq-order-arg-9"}), None)
    stubber.add_response("converse", tool_use("zq-use-2", "refund_order", {"order_id": "A-1001"}), None)
    rt = model_agent(client, Orders())
    writes = shown(rt)
    task = rt.send("Refund my order")
    stubber.add_response("converse", final("Your refund is done."), None)
    rt.send(**answer(task, approved=True))
    # When any caller reads the task (a typed client, a core one), or anything the Runtime wrote for callers
    seen = [json.dumps(get(rt, task["id"], caller)) for caller in (TYPED, CORE)] + writes
    # Then none of the markers, tool names or Converse blocks is in it; the model's answer is
    assert all("Your refund is done." in view for view in seen[:2])
    for view in seen:
        for secret in ("zq-", "find_order", "refund_order", "toolUse", "toolResult", "Let me call"):
            assert secret not in view, (secret, view)


def test_the_step_cap_ends_the_turn_failed_saying_so(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    # Given a model that only ever asks for tools, and a cap of 2 model calls
    stubber.add_response("converse", tool_use("t1", "find_order", {"order_id": "A-1"}), None)
    stubber.add_response("converse", tool_use("t2", "find_order", {"order_id": "A-2"}), None)
    rt = model_agent(client, Orders(), max_model_calls=2)
    # When the turn runs
    task = rt.send("Where is my order?")
    # Then it failed with a status that says why (and names no tool), after exactly 2 calls
    assert state(task) == TaskState.FAILED and len(calls) == 2
    assert status_text(task) == "The model gave no answer within 2 steps, so this turn stopped there."
    assert task["status"]["message"]["metadata"][TELEMETRY]["tokens"] == 240


def test_throttling_is_retried_with_backoff_inside_the_model_call(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    sleeps: list[float] = []
    # Given Bedrock throttles twice, then answers
    for _ in range(2):
        stubber.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    stubber.add_response("converse", final("Here you are."), None)
    rt = model_agent(client, Orders(), sleeps)
    task = rt.send("hello")
    # Then the turn completed after two waits, each within its capped exponential bound
    assert state(task) == TaskState.COMPLETED and status_text(task) == "Here you are."
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.5 and 0 <= sleeps[1] <= 1.0
    # And one model-call effect was journaled, however many attempts it took
    assert [e.name for e in rt.store.journal(task["id"]).values()].count("nylorun.models.converse") == 1


def test_an_error_that_is_not_throttling_is_not_retried_and_fails_the_turn(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    sleeps: list[float] = []
    stubber.add_client_error("converse", service_error_code="AccessDeniedException", http_status_code=403)
    rt = model_agent(client, Orders(), sleeps)
    task = rt.send("hello")
    # Then no wait, and the caller reads the generic failure (never the AWS error)
    assert sleeps == [] and state(task) == TaskState.FAILED
    assert status_text(task) == "The agent could not complete this turn."


def test_the_contexts_earlier_turns_are_the_conversation(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    # Given a context whose first turn the model answered "Hello, Alice."
    stubber.add_response("converse", final("Hello, Alice."), expected({"role": "user", "content": [{"text": "I am Alice"}]}))
    rt = model_agent(client, Orders())
    first = rt.send("I am Alice")
    # When the caller sends the next message in the same context
    stubber.add_response("converse", final("You are Alice."), expected(
        {"role": "user", "content": [{"text": "I am Alice"}]},
        {"role": "assistant", "content": [{"text": "Hello, Alice."}]},
        {"role": "user", "content": [{"text": "Who am I?"}]},
    ))
    second = rt.send("Who am I?", contextId=first["contextId"])
    # Then the model got the earlier turn as conversation (the stub checked the request)
    assert status_text(second) == "You are Alice."
    stubber.assert_no_pending_responses()


def test_a_tool_that_raises_or_gets_bad_arguments_tells_the_model_not_the_caller(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    # Given a model that calls a tool with an argument missing, then a tool that raises
    @tool
    def broken(order_id: str) -> str:
        """Always fails."""
        raise RuntimeError("zq-database-down")

    stubber.add_response("converse", tool_use("t1", "broken", {}), None)
    stubber.add_response("converse", tool_use("t2", "broken", {"order_id": "A-1"}), None)
    stubber.add_response("converse", final("Sorry, I cannot look that up now."), None)

    def run_turn(turn: Turn) -> None:
        turn.reply(converse(turn, Bedrock(MODEL_ID, client=client, prices=PRICES), system=SYSTEM, tools=[broken]))

    rt = runtime(agent_of(run_turn))
    task = rt.send("Where is A-1?")
    # Then the model read both errors as the tools' results, and the caller only the model's answer
    assert "Invalid arguments" in calls[1]["messages"][-1]["content"][0]["toolResult"]["content"][0]["text"]
    assert calls[2]["messages"][-1]["content"][0]["toolResult"]["content"][0]["json"] == {
        "error": "RuntimeError: zq-database-down"
    }
    assert state(task) == TaskState.COMPLETED and "zq-" not in json.dumps(task)


def test_the_scripted_stand_in_is_refused_on_lambda() -> None:
    # Given a deployed function's settings naming the scripted model
    # When they are read, Then they are refused (a deployed Agent never answers from a script)
    with pytest.raises(ValueError, match="NYLORUN_MODEL=scripted is refused"):
        Settings(lambda_function_name="turn", runtime_key="k", model="scripted")
    assert Settings(lambda_function_name="turn", runtime_key="k", model=MODEL_ID).model == MODEL_ID


# ---------------------------------------------------------------- built-in tools (docs/writing/model-agents.md)
BUILTIN_NAMES = ("ask_person", "ask_connection", "set_plan", "mark_step", "toolUse", "toolResult", "Let me call")


def hidden_from_callers(rt: Runtime, task_id: str, writes: list[str]) -> None:
    """Profile v2: no built-in's name, nor any Converse block, in what a caller reads or the Runtime wrote for one."""
    for view in [json.dumps(get(rt, task_id, caller)) for caller in (TYPED, CORE)] + writes:
        for secret in BUILTIN_NAMES:
            assert secret not in view, (secret, view)


def test_the_model_asks_the_person_and_reads_the_answer_as_the_tools_result(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    # Given a model that asks the person which order they mean (the built-in enabled by the author)
    ask = tool_use("t1", "ask_person", {"question": "Which order: A-1001 or A-1002?"})
    stubber.add_response("converse", ask, expected(USER))
    rt = model_agent(client, Orders(), builtins=(ask_person,))
    writes = shown(rt)
    task = rt.send("Refund order A-1001")
    # Then the turn waits for the person, who reads the model's question as it wrote it
    assert state(task) == TaskState.INPUT_REQUIRED
    assert open_interaction(task)["kind"] == "question" and status_text(task) == "Which order: A-1001 or A-1002?"
    # When the person answers
    stubber.add_response("converse", final("A-1002 it is."),
                         expected(USER, assistant_of(ask), result_of("t1", {"json": {"answer": "A-1002"}})))
    done = rt.send(**answer(task, value="A-1002"))
    # Then the model read the answer as the tool's result and answered; its first call was replayed, not made again
    assert state(done) == TaskState.COMPLETED and status_text(done) == "A-1002 it is."
    assert len(calls) == 2
    stubber.assert_no_pending_responses()
    hidden_from_callers(rt, task["id"], writes)


def test_the_model_keeps_a_plan_the_caller_sees_as_progress_steps(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    # Given a model that sets a plan, marks its first step done, then answers
    stubber.add_response("converse", tool_use("t1", "set_plan", {"steps": ["Find the order", "Refund it"]}), None)
    stubber.add_response("converse", tool_use("t2", "mark_step", {"step": "Find the order", "state": "done"}), None)
    stubber.add_response("converse", tool_use("t3", "mark_step", {"step": "Nope", "state": "done"}), None)
    stubber.add_response("converse", final("Found it."), None)
    rt = model_agent(client, Orders(), builtins=keep_plan)
    statuses: list[TaskStatus] = []
    set_status = rt.store.set_status
    rt.store.set_status = lambda task_id, status, **kw: statuses.append(status) or set_status(task_id, status, **kw)  # type: ignore[method-assign]
    writes = shown(rt)
    # When the turn runs
    task = rt.send("Where is A-1001?")
    # Then callers saw the plan, then its first step done (kept on the final status), under progress/v1; the
    # unknown label changed nothing
    plans = [s.message.metadata[PROGRESS]["steps"] for s in statuses if s.message and PROGRESS in (s.message.metadata or {})]
    marked = [{"label": "Find the order", "state": "done"}, {"label": "Refund it", "state": "pending"}]
    assert plans == [[{"label": "Find the order", "state": "pending"}, {"label": "Refund it", "state": "pending"}], marked, marked]
    assert state(task) == TaskState.COMPLETED and status_text(task) == "Found it."
    hidden_from_callers(rt, task["id"], writes)


def test_the_model_asks_for_a_connection_the_author_named(bedrock: Any) -> None:
    client, stubber, calls = bedrock
    # Given a model that first asks for an account the author did not name, then for the one it did
    stubber.add_response("converse", tool_use("t1", "ask_connection", {"connection": "bank", "reason": "x"}), None)
    ask = tool_use("t2", "ask_connection", {"connection": "payments", "reason": "I need your payments account to refund."})
    stubber.add_response("converse", ask, None)
    rt = model_agent(client, Orders(), builtins=(ask_connection("payments"),))
    writes = shown(rt)
    task = rt.send("Refund order A-1001")
    # Then the first was refused to the model (not asked), the second asked: AUTH_REQUIRED, kind connection
    assert "Invalid arguments" in calls[1]["messages"][-1]["content"][0]["toolResult"]["content"][0]["text"]
    asked = open_interaction(task)
    assert state(task) == TaskState.AUTH_REQUIRED and asked["kind"] == "connection"
    assert asked["prompt"] == "I need your payments account to refund."
    assert asked["detail"]["connection"] == "payments" and "authorizationUrl" in asked["detail"]
    # When the person connects, Then the model reads that it is connected
    stubber.add_response("converse", final("Connected, refunding now."), None)
    connect(rt, task)
    done = get(rt, task["id"])
    assert calls[2]["messages"][-1] == result_of("t2", {"json": {"connected": True}})
    assert status_text(done) == "Connected, refunding now." and len(calls) == 3
    hidden_from_callers(rt, task["id"], writes)


@pytest.mark.parametrize(
    ("builtin", "use", "reply"),
    [
        (ask_person, {"question": "Which order?"}, {"value": "A-1001"}),
        (ask_connection("payments"), {"connection": "payments", "reason": "To refund."}, {"approved": False}),
        (keep_plan[0], {"steps": ["Refund it"]}, None),
    ],
    ids=["question", "connection", "plan"],
)
def test_a_crash_after_a_builtin_replays_it_without_calling_the_model_again(
    bedrock: Any, builtin: Tool, use: dict[str, Any], reply: dict[str, Any] | None
) -> None:
    client, stubber, calls = bedrock
    stubber.add_response("converse", tool_use("t1", builtin.name, use), None)
    stubber.add_response("converse", final("Done."), None)
    rt = model_agent(client, Orders(), builtins=(builtin,))
    # Given a run that dies right after the model's answer to the built-in's result was journaled
    finish, models = rt.store.journal_finish, []

    def dies_once(task: str, seq: int, result: Any) -> None:
        finish(task, seq, result)
        if rt.store.journal(task)[seq].name == MODEL_EFFECT:
            models.append(seq)
            if len(models) == 2:
                raise Crash()

    rt.store.journal_finish = dies_once  # type: ignore[method-assign]
    with pytest.raises(Crash):
        if reply is None:
            run(rt, task_id := new_task(rt))
        else:  # the built-in asked: the person's answer runs the turn on
            asked = rt.send("Refund order A-1001")
            task_id = asked["id"]
            rt.send(**answer(asked, **reply))
    assert len(calls) == 2
    # When Step Functions runs the turn again
    run(rt, task_id)
    # Then the built-in's answer and both model calls were replayed: no model call, no new question
    assert len(calls) == 2 and status_text(get(rt, task_id)) == "Done."


def test_the_turn_usage_event_carries_the_loops_totals(bedrock: Any) -> None:
    client, stubber, _ = bedrock
    # Given a loop of two model calls (100+20, then 200+30 tokens) on a store whose writes a table stream shows
    stubber.add_response("converse", tool_use("t1", "find_order", {"order_id": "A-1001"}, (100, 20)), None)
    stubber.add_response("converse", final("It ships today.", (200, 30)), None)
    rt = model_agent(client, Orders())
    records: list[dict[str, Any]] = []
    set_status = rt.store.set_status

    def streamed(task_id: str, status: Any, **kwargs: Any) -> Any:
        before = rt.store.head(task_id)
        written = set_status(task_id, status, **kwargs)
        records.append(stream_record({**(rt.store.head(task_id) or {}), "PK": f"TASK#{task_id}", "SK": "TASK"},
                                     {**(before or {}), "PK": f"TASK#{task_id}", "SK": "TASK"}))
        return written

    rt.store.set_status = streamed  # type: ignore[method-assign]
    rt.send("Where is A-1001?")
    # When the publish function reads the table's stream
    bus = Bus()
    publisher = EventPublisher(rt.store, bus, decode_change)
    for record in records:
        publisher.publish_record(record)
    # Then one Turn Usage event carries both calls' tokens and their cost at the table's prices
    [usage] = [e.detail for e in bus.events if e.detail_type == TURN_USAGE]
    assert usage["tokens"] == 350 and usage["costUsd"] == pytest.approx((300 * 0.06 + 50 * 0.24) / 1e6)
    assert usage["state"] == "TASK_STATE_COMPLETED"
