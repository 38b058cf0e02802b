"""The local AWS still works with the pinned moto: the in-process Lambda shim, and Step Functions really
running statemachines/turn.asl.json (a plain turn, and a turn that waits for an answer on a task token).

If moto changes under the shim these fail loudly: without it, moto's Lambda echoes the payload back.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from nylorun.protocol import jsonrpc
from nylorun.protocol.models import SendMessageRequest, TaskState
from nylorun.service.a2a import Caller
from nylorun_local.runtime import LocalRuntime

REPO_ROOT = Path(__file__).resolve().parents[2]

EVENTS = REPO_ROOT / "events"


def load_event(name: str) -> dict[str, Any]:
    return dict(json.loads((EVENTS / name).read_text()))


@pytest.fixture(scope="module")
def turn_function(local_runtime: LocalRuntime) -> str:
    assert local_runtime.stack is not None
    return local_runtime.stack.function_names["TurnFunction"]


def invoke(local_runtime: LocalRuntime, name: str, event: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    out = local_runtime.aws.client("lambda").invoke(FunctionName=name, Payload=json.dumps(event).encode())
    return json.loads(out["Payload"].read()), out


# ---------------------------------------------------------------- the Lambda shim
def test_lambda_invoke_runs_the_turn_handler_in_process(
    local_runtime: LocalRuntime, turn_function: str
) -> None:
    # Given the sample turn-run event for a task nobody created
    event = load_event("turn-run.json")
    assert local_runtime.runtime is not None and local_runtime.runtime.store.get(event["taskId"]) is None
    # When the turn function is invoked by name through the Lambda API
    payload, out = invoke(local_runtime, turn_function, event)
    # Then our handler ran (moto alone would echo the event back) and ended the turn without an error
    assert out["StatusCode"] == 200
    assert "FunctionError" not in out
    assert payload == {"outcome": "ended", "interactionId": None}


def test_lambda_invoke_of_a_raising_handler_is_an_unhandled_function_error(
    local_runtime: LocalRuntime, turn_function: str
) -> None:
    # Given an event the turn handler refuses (an action it does not know)
    event = {**load_event("turn-run.json"), "action": "explode"}
    # When it is invoked
    payload, out = invoke(local_runtime, turn_function, event)
    # Then Lambda reports an unhandled error with its type and message, as AWS does
    assert out["FunctionError"] == "Unhandled"
    assert payload["errorType"] == "ValueError"
    assert "explode" in payload["errorMessage"]


def test_park_for_a_task_that_is_gone_ends_the_wait_and_succeeds(
    local_runtime: LocalRuntime, turn_function: str
) -> None:
    # Given the sample park event: a token for a task that does not exist (the wait must not hang)
    event = {**load_event("turn-park.json"), "taskId": str(uuid.uuid4())}
    # When the turn function parks it (its SendTaskFailure finds no such token: someone finished it)
    payload, out = invoke(local_runtime, turn_function, event)
    # Then the park succeeds and the token is kept beside the interaction
    assert "FunctionError" not in out, payload
    assert payload == {"outcome": "parked", "interactionId": event["interactionId"]}
    assert local_runtime.runtime is not None
    assert (
        local_runtime.runtime.store.get_wait_token(event["taskId"], event["interactionId"]) == event["token"]
    )


# ---------------------------------------------------------------- Step Functions runs turn.asl.json
def send(local_runtime: LocalRuntime, caller: Caller, message: dict[str, Any]) -> dict[str, Any]:
    assert local_runtime.runtime is not None
    request = jsonrpc.parse_params(
        SendMessageRequest, {"message": message, "configuration": {"returnImmediately": True}}
    )
    return dict(local_runtime.runtime.service.send_message(caller, request)["task"])


def execution(local_runtime: LocalRuntime, task_id: str) -> dict[str, Any]:
    """The task's execution, found by its name among the state machine's executions."""
    assert local_runtime.stack is not None
    sfn = local_runtime.aws.client("stepfunctions")
    listed = sfn.list_executions(stateMachineArn=local_runtime.stack.state_machine_arn)["executions"]
    matches = [e for e in listed if e["name"] == task_id]
    assert len(matches) == 1, f"one execution named {task_id}, got {len(matches)}"
    return dict(matches[0])


def wait_for(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def finished(local_runtime: LocalRuntime, task_id: str) -> dict[str, Any]:
    sfn = local_runtime.aws.client("stepfunctions")
    arn = execution(local_runtime, task_id)["executionArn"]
    return dict(
        wait_for(lambda: (d := sfn.describe_execution(executionArn=arn))["status"] != "RUNNING" and d, arn)
    )


def history(local_runtime: LocalRuntime, task_id: str) -> list[dict[str, Any]]:
    sfn = local_runtime.aws.client("stepfunctions")
    arn = execution(local_runtime, task_id)["executionArn"]
    return list(sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"])


def states_entered(events: list[dict[str, Any]]) -> list[str]:
    return [e["stateEnteredEventDetails"]["name"] for e in events if e["type"].endswith("StateEntered")]


def test_a_plain_turn_runs_the_state_machine_in_three_transitions(local_runtime: LocalRuntime) -> None:
    # Given a message to echo
    caller = Caller(subject=f"sfn-{uuid.uuid4()}", agent="echo")
    task = send(
        local_runtime,
        caller,
        {"messageId": f"m-{uuid.uuid4()}", "role": "ROLE_USER", "parts": [{"text": "ping"}]},
    )
    # When its execution (named by the task id) finishes
    done = finished(local_runtime, task["id"])
    # Then it SUCCEEDED through RunTurn → Interrupted? → Done: three state transitions, as documented
    assert done["status"] == "SUCCEEDED"
    entered = states_entered(history(local_runtime, task["id"]))
    assert entered == ["RunTurn", "Interrupted?", "Done"]
    assert len(entered) == 3
    assert json.loads(done["input"])["taskId"] == task["id"]
    # And the turn really ran: the task is COMPLETED with the echo
    assert local_runtime.runtime is not None
    record = local_runtime.runtime.store.get(task["id"])
    assert record is not None and record.state == TaskState.COMPLETED
    assert record.history[-1].text() == "ping"


def test_an_input_required_turn_parks_on_a_token_and_resumes_when_answered(
    local_runtime: LocalRuntime,
) -> None:
    # Given the tck agent's input-required scenario
    assert local_runtime.runtime is not None
    store = local_runtime.runtime.store
    caller = Caller(subject=f"sfn-{uuid.uuid4()}", agent="tck")
    message = {
        "messageId": f"tck-input-required-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "parts": [{"text": "go"}],
    }
    task_id = send(local_runtime, caller, message)["id"]
    # When the turn asks its question
    record = wait_for(
        lambda: (r := store.get(task_id)) is not None and r.state == TaskState.INPUT_REQUIRED and r,
        "INPUT_REQUIRED",
    )
    interaction_id = record.interaction.interaction_id
    token = wait_for(lambda: store.get_wait_token(task_id, interaction_id), "the parked token")
    # Then the execution waits in WaitForAnswer on a submitted task token, still RUNNING
    events = history(local_runtime, task_id)
    assert states_entered(events) == ["RunTurn", "Interrupted?", "WaitForAnswer"]
    assert any(e["type"] == "TaskSubmitted" for e in events)
    assert execution(local_runtime, task_id)["status"] == "RUNNING"
    assert len(token) >= 32

    # When the caller answers the question
    answer = {
        "messageId": f"m-{uuid.uuid4()}",
        "role": "ROLE_USER",
        "taskId": task_id,
        "parts": [{"text": "blue"}],
    }
    send(local_runtime, caller, answer)
    # Then the token resumes the execution, the turn runs again and the execution SUCCEEDS
    done = finished(local_runtime, task_id)
    assert done["status"] == "SUCCEEDED"
    assert states_entered(history(local_runtime, task_id)) == [
        "RunTurn", "Interrupted?", "WaitForAnswer", "RunTurn", "Interrupted?", "Done",
    ]  # fmt: skip
    final = store.get(task_id)
    assert final is not None and final.state == TaskState.COMPLETED
    assert final.history[-1].text() == "Input received: blue"


def test_the_state_machine_moto_runs_is_the_repository_file(local_runtime: LocalRuntime) -> None:
    # Given the state machine the local stack created
    assert local_runtime.stack is not None
    sfn = local_runtime.aws.client("stepfunctions")
    described = sfn.describe_state_machine(stateMachineArn=local_runtime.stack.state_machine_arn)
    # When its definition is compared with statemachines/turn.asl.json
    deployed = json.loads(described["definition"])
    source = json.loads(Path(REPO_ROOT / "statemachines/turn.asl.json").read_text())
    # Then they are the same machine, with the placeholders replaced by the local turn function's ARN and partition
    arn = deployed["States"]["RunTurn"]["Parameters"]["FunctionName"]
    assert arn.endswith(":function:" + local_runtime.stack.function_names["TurnFunction"])
    text = json.dumps(source).replace("${TurnFunctionArn}", arn).replace("${Partition}", "aws")
    assert json.loads(text) == deployed


def test_a_long_poll_on_one_queue_does_not_hold_up_receives_on_another(local_runtime: LocalRuntime) -> None:
    # Given a long poll (WaitTimeSeconds 1, as `nylorun admin dlq` makes) on an empty queue, again and again
    sqs = local_runtime.aws.client("sqs")
    empty, other = (sqs.create_queue(QueueName=f"poll-{n}-{uuid.uuid4().hex[:8]}")["QueueUrl"] for n in (1, 2))
    stop = threading.Event()

    def long_polls() -> None:
        client = local_runtime.aws.client("sqs")
        while not stop.is_set():
            client.receive_message(QueueUrl=empty, WaitTimeSeconds=1)

    poller = threading.Thread(target=long_polls)
    poller.start()
    try:
        time.sleep(0.3)
        # When another queue is received from meanwhile (as the local pollers do, without waiting)
        took = []
        for _ in range(10):
            start = time.monotonic()
            sqs.receive_message(QueueUrl=other)
            took.append(time.monotonic() - start)
    finally:
        stop.set()
        poller.join()
    # Then those receives answer at once: the long poll waits without holding the local receive lock (held, they
    # took ~1 s each)
    assert statistics.median(took) < 0.3, took


def test_the_local_pollers_peek_at_a_fifo_queue_agrees_with_what_a_receive_hands_out(local_runtime: LocalRuntime) -> None:
    # The local event source mappings look at moto's queue before they call ReceiveMessage (LocalAws.receivable)
    sqs = local_runtime.aws.client("sqs")
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"}
    url = sqs.create_queue(QueueName=f"peek-{uuid.uuid4().hex[:8]}.fifo", Attributes=attributes)["QueueUrl"]
    peek = local_runtime.aws.receivable
    # Given an empty queue: nothing to hand out
    assert not peek(url) and "Messages" not in sqs.receive_message(QueueUrl=url)
    # When one group gets two messages and its first is received (in flight)
    for body in ("1", "2"):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="g1")
    assert peek(url)
    (first,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=30)["Messages"]
    # Then the rest of that group waits: the peek says so, and so does a receive
    assert first["Body"] == "1" and not peek(url) and "Messages" not in sqs.receive_message(QueueUrl=url)
    # (and the queue's counts, which the local stack counts once per queue operation, are today's)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    counts = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"]
    assert [counts[name] for name in names] == ["1", "1"]
    # When another group's message arrives, it can be handed out (and only it)
    sqs.send_message(QueueUrl=url, MessageBody="3", MessageGroupId="g2")
    assert peek(url)
    (other,) = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)["Messages"]
    assert other["Body"] == "3" and not peek(url)
    # And the first group's message, visible again (handed back at once), frees its group
    sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first["ReceiptHandle"], VisibilityTimeout=0)
    assert peek(url)
    again = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=30)["Messages"]
    assert [m["Body"] for m in again] == ["1", "2"]


@pytest.mark.parametrize("kind", ["S", "N"])
def test_a_query_of_one_partition_pages_as_dynamodb_does(local_runtime: LocalRuntime, kind: str) -> None:
    # The local stack reads a Query's first page from the partition alone (moto/dynamodb_query_partition.py); paged to the
    # end, every condition, order, limit and filter gives the partition's items in key order, each once
    db = local_runtime.aws.client("dynamodb")
    table = f"pages-{uuid.uuid4().hex[:8]}"
    db.create_table(
        TableName=table, BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
        AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": kind}],
    )  # fmt: skip
    keys = [f"k{n:02}" for n in range(25)] if kind == "S" else [str(n) for n in range(25)]  # "10" after "9"
    for n, key in enumerate(sorted(keys, key=lambda k: (hash(k) % 7, k))):  # not written in key order
        db.put_item(TableName=table, Item={"PK": {"S": "p"}, "SK": {kind: key}, "even": {"BOOL": n % 2 == 0}})
        db.put_item(TableName=table, Item={"PK": {"S": "other"}, "SK": {kind: key}, "even": {"BOOL": True}})
    order = sorted(keys, key=(lambda k: k) if kind == "S" else int)
    mid, late = order[7], order[18]
    cases: list[tuple[str, dict[str, Any], list[str]]] = [
        ("PK = :p", {}, order),
        ("PK = :p AND SK > :a", {":a": mid}, order[8:]),
        ("PK = :p AND SK >= :a", {":a": mid}, order[7:]),
        ("PK = :p AND SK < :a", {":a": late}, order[:18]),
        ("PK = :p AND SK BETWEEN :a AND :b", {":a": mid, ":b": late}, order[7:19]),
    ]
    if kind == "S":
        cases.append(("PK = :p AND begins_with(SK, :a)", {":a": "k1"}, [k for k in order if k.startswith("k1")]))
    for condition, values, expected in cases:
        for forward in (True, False):
            for limit in (None, 1, 4, 25):
                for only_even in (False, True):
                    params: dict[str, Any] = {
                        "TableName": table, "KeyConditionExpression": condition, "ScanIndexForward": forward,
                        "ExpressionAttributeValues": {":p": {"S": "p"}} | {k: {kind: v} for k, v in values.items()},
                    }  # fmt: skip
                    if limit:
                        params["Limit"] = limit
                    if only_even:
                        params["FilterExpression"] = "even = :t"
                        params["ExpressionAttributeValues"][":t"] = {"BOOL": True}
                    got, even = [], set()
                    while True:
                        page = db.query(**params)
                        assert limit is None or page["ScannedCount"] <= limit
                        got += [item["SK"][kind] for item in page["Items"]]
                        if "LastEvaluatedKey" not in page:
                            break
                        params["ExclusiveStartKey"] = page["LastEvaluatedKey"]
                    want = expected if forward else expected[::-1]
                    if only_even:
                        scan = db.scan(TableName=table, FilterExpression="PK = :p AND even = :t",
                                       ExpressionAttributeValues={":p": {"S": "p"}, ":t": {"BOOL": True}})  # fmt: skip
                        even = {item["SK"][kind] for item in scan["Items"]}
                        want = [k for k in want if k in even]
                    assert got == want, (condition, forward, limit, only_even)


def test_item_answers_written_as_plain_json_are_what_moto_s_serializer_writes(local_runtime: LocalRuntime) -> None:
    # The local stack writes the answers of DynamoDB's item operations as plain JSON (aws.py
    # PLAIN_JSON_OPERATIONS) instead of walking their output shape. Each operation, on two tables holding the same
    # items (one answered each way), gives the same JSON, every kind of attribute value included (binary ones too)
    from nylorun_local.moto.plain_json import PLAIN_JSON_OPERATIONS, plain_json

    db = local_runtime.aws.client("dynamodb")
    bodies: list[bytes] = []
    db.meta.events.register("before-parse.dynamodb", lambda response_dict, **_: bodies.append(response_dict["body"]))
    tables = [f"plain-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    for table in tables:
        db.create_table(
            TableName=table, BillingMode="PAY_PER_REQUEST",
            KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": "S"}],
        )  # fmt: skip
    item = {
        "PK": {"S": "p"}, "SK": {"S": "a"}, "n": {"N": "12.50"}, "b": {"B": b"\x00\xffbin"}, "t": {"BOOL": True},
        "z": {"NULL": True}, "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["1", "2"]}, "bs": {"BS": [b"\x01", b"\x02"]},
        "m": {"M": {"inner": {"B": b"\x03"}, "l": {"L": [{"S": "deep"}, {"N": "7"}, {"M": {}}]}}}, "empty": {"S": ""},
    }  # fmt: skip
    capacity = {"ReturnConsumedCapacity": "TOTAL"}

    def key(sk: str) -> dict[str, Any]:
        return {"PK": {"S": "p"}, "SK": {"S": sk}}

    calls: list[tuple[str, Any]] = [
        ("put_item", lambda t: {"TableName": t, "Item": item, **capacity}),
        ("put_item", lambda t: {"TableName": t, "Item": item | {"SK": {"S": "b"}}}),
        ("put_item", lambda t: {"TableName": t, "Item": item | {"n": {"N": "-3"}}, "ReturnValues": "ALL_OLD"}),
        ("get_item", lambda t: {"TableName": t, "Key": key("a"), "ConsistentRead": True, **capacity}),
        ("get_item", lambda t: {"TableName": t, "Key": key("missing")}),
        ("get_item", lambda t: {"TableName": t, "Key": key("a"), "ProjectionExpression": "m.l, bs, #n",
                                "ExpressionAttributeNames": {"#n": "n"}}),
        ("update_item", lambda t: {"TableName": t, "Key": key("a"), "UpdateExpression": "SET n = n + :one, nb = :b",
                                   "ExpressionAttributeValues": {":one": {"N": "1"}, ":b": {"B": b"new"}},
                                   "ReturnValues": "ALL_NEW", **capacity}),
        ("update_item", lambda t: {"TableName": t, "Key": key("a"), "UpdateExpression": "REMOVE t",
                                   "ReturnValues": "UPDATED_OLD"}),
        ("update_item", lambda t: {"TableName": t, "Key": key("c"), "UpdateExpression": "SET v = :v",
                                   "ExpressionAttributeValues": {":v": {"S": "c"}}}),
        ("query", lambda t: {"TableName": t, "KeyConditionExpression": "PK = :p",
                             "ExpressionAttributeValues": {":p": {"S": "p"}}, **capacity}),
        ("query", lambda t: {"TableName": t, "KeyConditionExpression": "PK = :p", "Limit": 1, "ScanIndexForward": False,
                             "ExpressionAttributeValues": {":p": {"S": "p"}}}),
        ("query", lambda t: {"TableName": t, "KeyConditionExpression": "PK = :p", "Select": "COUNT",
                             "ExpressionAttributeValues": {":p": {"S": "p"}}}),
        ("scan", lambda t: {"TableName": t, "FilterExpression": "attribute_exists(b)"}),
        ("batch_get_item", lambda t: {"RequestItems": {t: {"Keys": [key("a"), key("b"), key("missing")]}}, **capacity}),
        ("batch_write_item", lambda t: {"RequestItems": {t: [{"PutRequest": {"Item": item | {"SK": {"S": "d"}}}},
                                                             {"DeleteRequest": {"Key": key("c")}}]}}),
        ("transact_get_items", lambda t: {"TransactItems": [{"Get": {"TableName": t, "Key": key("a")}},
                                                            {"Get": {"TableName": t, "Key": key("missing")}}]}),
        ("transact_write_items", lambda t: {"TransactItems": [
            {"Update": {"TableName": t, "Key": key("b"), "UpdateExpression": "SET x = :x",
                        "ExpressionAttributeValues": {":x": {"BS": [b"\x09"]}}}},
            {"Put": {"TableName": t, "Item": item | {"SK": {"S": "e"}}}}], **capacity}),
        ("delete_item", lambda t: {"TableName": t, "Key": key("b"), "ReturnValues": "ALL_OLD", **capacity}),
    ]  # fmt: skip
    operations = set()
    for method, params in calls:
        answers = []
        for table, moto_s in zip(tables, (False, True), strict=True):
            plain_json.off = moto_s
            try:
                parsed = getattr(db, method)(**params(table))
            finally:
                plain_json.off = False
            body = json.loads(bodies[-1].decode().replace(table, "TABLE"))
            parsed.pop("ResponseMetadata")
            answers.append((body, json.loads(json.dumps(parsed, default=repr).replace(table, "TABLE"))))
        operations.add(db.meta.method_to_api_mapping[method])
        assert answers[0] == answers[1], method
    assert operations == PLAIN_JSON_OPERATIONS  # each operation answered as plain JSON was compared


def test_the_local_ttl_deletes_expired_items_as_dynamodb_s_ttl_does(local_runtime: LocalRuntime) -> None:
    from nylorun_local.activity import Activity
    from nylorun_local.pollers import StreamPoller
    from nylorun_local.stack import stream_filters
    from nylorun_local.ttl import TTL_IDENTITY, TtlSweeper

    assert local_runtime.stack is not None
    table, db = local_runtime.stack.table_name, local_runtime.aws.client("dynamodb")
    pk = f"TASK#ttl-{uuid.uuid4()}"
    now = int(time.time())
    # Given an expired task item, one that expires later, and one without a TTL
    for sk, expires in (("TASK", now - 1), ("ART#later", now + 3600), ("MSG#00000001", None)):
        item = {"PK": {"S": pk}, "SK": {"S": sk}, **({"expiresAt": {"N": str(expires)}} if expires else {})}
        db.put_item(TableName=table, Item=item)
    woken = Activity()
    seen = woken.generation
    # When the local TTL sweeps (its own sweeper, now rather than on its timer)
    removed = TtlSweeper(local_runtime.aws, table, 3600, woken).sweep()
    # Then only the expired item is gone, and the retention poller was woken
    left = {i["SK"]["S"] for i in db.query(TableName=table, KeyConditionExpression="PK = :pk",
                                          ExpressionAttributeValues={":pk": {"S": pk}})["Items"]}
    assert removed >= 1 and left == {"ART#later", "MSG#00000001"} and woken.generation != seen
    # And its REMOVE on the stream carries TTL's identity, which the sweep's filter (the template's) takes
    poller = StreamPoller(local_runtime.aws, local_runtime.stack.table_stream_arn, "unused",
                          filters=stream_filters("SweepFunction"))
    # (read as the poller reads the stream)
    records, position = [], 0
    while fresh := local_runtime.aws.stream_records(local_runtime.stack.table_stream_arn, position, 1000):
        records += fresh
        position += len(fresh)
    (remove,) = [r for r in records if r["eventName"] == "REMOVE" and r["dynamodb"]["Keys"]["PK"]["S"] == pk]
    assert poller._wanted(remove) and remove["userIdentity"] == TTL_IDENTITY


_JSON_TARGETS = {"dynamodb": "DynamoDB_20120810", "sqs": "AmazonSQS"}


def _json_call(service: str, target: str) -> dict[str, str]:
    """The headers of a JSON call as botocore sends it (moto checks no signature, only the service in the credential)."""
    return {
        "X-Amz-Target": f"{_JSON_TARGETS[service]}.{target}",
        "Content-Type": "application/x-amz-json-1.0",
        "Authorization": f"AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/{service}/aws4_request, "
        "SignedHeaders=host, Signature=0",
    }


def test_moto_s_server_keeps_a_client_s_connection_for_its_next_call(local_runtime: LocalRuntime) -> None:
    """Other processes (the push function's environments, the CLI) reach moto over HTTP: one connection serves a
    client's calls one after another, as AWS's endpoints do, instead of one connection (and one thread of the
    Runtime's process) per call; a chunked body is read whole and its connection closed."""
    import http.client
    from urllib.parse import urlsplit

    endpoint = urlsplit(local_runtime.aws.endpoint)
    connection = http.client.HTTPConnection(endpoint.hostname or "127.0.0.1", endpoint.port, timeout=10)
    try:
        answers, sockets = [], []
        for _ in range(3):
            connection.request("POST", "/", body="{}", headers=_json_call("dynamodb", "ListTables"))
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read()), response.getheader("Connection")))
            sockets.append(connection.sock)
        assert all(status == 200 and "TableNames" in listed and close is None for status, listed, close in answers)
        assert sockets[0] is not None and all(sock is sockets[0] for sock in sockets)  # not reconnected

        listing = _json_call("dynamodb", "ListTables")
        connection.request("POST", "/", body=iter([b"{}"]), headers=listing, encode_chunked=True)
        response = connection.getresponse()
        assert response.status == 200 and "TableNames" in json.loads(response.read())
        assert response.getheader("Connection") == "close"
    finally:
        connection.close()


def test_a_long_poll_over_http_lets_other_callers_in_while_it_waits(local_runtime: LocalRuntime) -> None:
    """moto's server answers one request at a time, callers in turns (local/nylorun_local/turns.py); a long poll
    over HTTP (each push environment's, the CLI's) gives up its turn between its looks at the queue, or every other
    caller would wait for it to end."""
    import http.client
    from urllib.parse import urlsplit

    endpoint = urlsplit(local_runtime.aws.endpoint)
    url = local_runtime.aws.client("sqs").create_queue(QueueName=f"poll-{uuid.uuid4().hex[:8]}")["QueueUrl"]

    def call(target: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        connection = http.client.HTTPConnection(endpoint.hostname or "127.0.0.1", endpoint.port, timeout=10)
        try:
            connection.request("POST", "/", body=json.dumps(body), headers=_json_call("sqs", target))
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        finally:
            connection.close()

    polling = threading.Thread(target=call, args=("ReceiveMessage", {"QueueUrl": url, "WaitTimeSeconds": 3}))
    polling.start()
    time.sleep(0.3)  # the poll is waiting on its empty queue
    try:
        status, listed = call("ListQueues", {})
        assert status == 200 and url in listed["QueueUrls"]
        assert polling.is_alive()  # answered while the poll still waits
    finally:
        polling.join(10)


def test_each_execution_builds_its_own_states_from_a_definition_parsed_once(local_runtime: LocalRuntime) -> None:
    """moto parsed the state machine for every execution (47 ms of a local turn): the parse is kept per
    definition, but each execution's states are its own, and a definition that does not parse still fails."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser, ASLParserException

    definition = (REPO_ROOT / "statemachines" / "turn.asl.json").read_text()
    first, tree = AmazonStateLanguageParser.parse(definition)
    second, same_tree = AmazonStateLanguageParser.parse(definition)
    assert same_tree is tree
    assert second is not first and type(second) is type(first)
    with pytest.raises(ASLParserException):
        AmazonStateLanguageParser.parse('{"StartAt": "A", "States": {"A": {"Type": "Nope"}}')
