"""What one plain turn costs on AWS, measured on the local stack: every AWS call the Runtime's code makes for one
blocking echo SendMessage, end to end (api, turn, publish, push), with DynamoDB capacity units computed from the
items' real sizes, plus Lambda invocations and Step Functions state transitions. The cost table of
docs/performance.md#cost-per-1-million-plain-turns is these numbers times list prices; `pytest
tests/e2e/test_turn_cost.py -s` prints them.

How it counts: a botocore before-call/after-call hook on every client of the api runtime and of each function
module's runtime (including clients made later, through `Runtime.client`); Lambda invocations through the local
handler registry; transitions from the execution's history. Calls made by the local stand-ins for AWS machinery
(the stream and queue pollers, moto's Step Functions) are AWS's side and are modelled, not metered: a message
that a function consumes from SQS costs its receive and its delete (what Lambda's event source mapping does at
low load), and stream reads by Lambda triggers are free.
"""

from __future__ import annotations

import functools
import math
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from botocore.client import BaseClient
from conftest import auth, user_message, watch_clients
from nylorun_local import lambda_shim
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

GSIS = {"BySubject": ("GSI1PK", "GSI1SK"), "ByContext": ("GSI2PK", "GSI2SK")}
WRITES = {"PutItem", "UpdateItem", "DeleteItem"}


# ---------------------------------------------------------------- DynamoDB item size and capacity units
def value_size(value: dict[str, Any]) -> int:
    (kind, v), = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return len(str(v).lstrip("-").replace(".", "")) // 2 + 1
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(value_size({kind[0]: x}) for x in v)
    if kind == "L":
        return 3 + sum(1 + value_size(x) for x in v)
    if kind == "M":
        return 3 + sum(len(k.encode()) + 1 + value_size(x) for k, x in v.items())
    raise ValueError(kind)


def item_size(item: dict[str, Any] | None) -> int:
    return sum(len(k.encode()) + value_size(v) for k, v in (item or {}).items())


def write_units(before: dict[str, Any] | None, after: dict[str, Any] | None, transactional: bool) -> float:
    """Base table: the larger of the item before and after, per KB (2x in a transaction). Each GSI the item is in:
    one write when a projected attribute changed, two (delete + put) when its index key changed."""
    units = max(1, math.ceil(max(item_size(before), item_size(after)) / 1024)) * (2 if transactional else 1)
    if before == after:
        return units
    for pk, sk in GSIS.values():
        key_b = (before or {}).get(pk), (before or {}).get(sk)
        key_a = (after or {}).get(pk), (after or {}).get(sk)
        in_b, in_a = None not in key_b, None not in key_a
        index_size = math.ceil((item_size(after if in_a else before) + 100) / 1024)
        if in_a and in_b:
            units += index_size * (2 if key_a != key_b else 1)
        elif in_a or in_b:
            units += index_size
    return units


def read_units(items: list[dict[str, Any]], consistent: bool, transactional: bool = False) -> float:
    units = max(1, math.ceil(sum(item_size(i) for i in items) / 4096))
    return units * (2 if transactional else 1 if consistent else 0.5)


# ---------------------------------------------------------------- the meter
@dataclass
class Meter:
    side: Any  # an unmetered DynamoDB client, to read items before and after a write
    table: str
    on: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)  # (component, service:Operation)
    rru: Counter[str] = field(default_factory=Counter)
    wru: Counter[str] = field(default_factory=Counter)
    events_put: int = 0
    event_types: Counter[str] = field(default_factory=Counter)
    sqs_sent: Counter[str] = field(default_factory=Counter)  # queue name → messages our code sent
    seen: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    activity: int = 0

    def _get(self, key: dict[str, Any]) -> dict[str, Any] | None:
        return self.side.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item")

    def _write_keys(self, op: str, params: dict[str, Any]) -> list[tuple[dict[str, Any], bool]]:
        if op in WRITES:
            item = params.get("Item")
            return [({"PK": item["PK"], "SK": item["SK"]} if item else params["Key"], False)]
        if op == "TransactWriteItems":
            out = []
            for entry in params["TransactItems"]:
                (_, body), = entry.items()
                key = {"PK": body["Item"]["PK"], "SK": body["Item"]["SK"]} if "Item" in body else body["Key"]
                out.append((key, True))
            return out
        if op == "BatchWriteItem":
            return [
                ({"PK": r["PutRequest"]["Item"]["PK"], "SK": r["PutRequest"]["Item"]["SK"]} if "PutRequest" in r else r["DeleteRequest"]["Key"], False)
                for requests in params["RequestItems"].values() for r in requests
            ]  # fmt: skip
        return []

    def attach(self, component: str, client: BaseClient) -> None:
        if id(client) in self.seen:
            return
        self.seen.add(id(client))
        service = client.meta.service_model.service_name

        def before(params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            self.activity += 1  # counted even when off: settle() waits for the whole Runtime to go quiet
            if self.on:
                self._guard(self._before, component, service, params, model, context)

        def after(parsed: dict[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
            if self.on and service == "dynamodb" and "nylorun_meter" in context:
                self._guard(self._after, component, parsed, model, context)

        # before-parameter-build sees the call's own parameters (before-call sees the serialized request)
        client.meta.events.register("before-parameter-build", before, unique_id=f"meter-before-{id(client)}")
        client.meta.events.register("after-call", after, unique_id=f"meter-after-{id(client)}")

    def _guard(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - a meter fault must not fail the Runtime's call; the test reports it
            self.errors.append(repr(exc))

    def _before(self, component: str, service: str, params: dict[str, Any], model: Any, context: dict[str, Any]) -> None:
        with self.lock:
            self.calls[(component, f"{service}:{model.name}")] += 1
        if service == "dynamodb":
            keys = self._write_keys(model.name, params)
            context["nylorun_meter"] = (params, [(k, t, self._get(k)) for k, t in keys])
        elif service == "events" and model.name == "PutEvents":
            with self.lock:
                self.events_put += len(params["Entries"])
                self.event_types.update(e["DetailType"] for e in params["Entries"])
        elif service == "sqs" and model.name == "SendMessage":
            with self.lock:
                self.sqs_sent[params["QueueUrl"].rsplit("/", 1)[-1]] += 1

    def _after(self, component: str, parsed: dict[str, Any], model: Any, context: dict[str, Any]) -> None:
        params, writes = context.pop("nylorun_meter")
        op, wru, rru = model.name, 0.0, 0.0
        for key, transactional, before_item in writes:
            wru += write_units(before_item, self._get(key), transactional)
        consistent = bool(params.get("ConsistentRead"))
        if op == "GetItem":
            rru = read_units([parsed["Item"]] if parsed.get("Item") else [], consistent)
        elif op in ("Query", "Scan"):
            rru = read_units(parsed.get("Items", []), consistent and "IndexName" not in params)
        elif op == "TransactGetItems":
            rru = sum(read_units([r["Item"]] if r.get("Item") else [], True, True) for r in parsed.get("Responses", []))
        elif op == "BatchGetItem":
            rru = sum(read_units([i], consistent) for items in parsed.get("Responses", {}).values() for i in items)
        with self.lock:
            self.wru[component] += wru
            self.rru[component] += rru


@pytest.fixture()
def meter(local_runtime: LocalRuntime, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Meter, Counter[str], dict[str, list[float]]]]:
    assert local_runtime.runtime is not None and local_runtime.stack is not None
    meter = Meter(side=local_runtime.aws.client("dynamodb"), table=local_runtime.stack.table_name)
    watch_clients(local_runtime, monkeypatch, meter.attach)

    invocations: Counter[str] = Counter()
    durations: dict[str, list[float]] = defaultdict(list)
    for name, environments in list(lambda_shim._handlers.items()):
        component = name.rsplit("-", 1)[-1].removesuffix("Function").lower()

        def counted(event: Any, context: Any, handler: Any, component: str = component) -> Any:
            start = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                if meter.on:
                    invocations[component] += 1
                    durations[component].append(time.perf_counter() - start)

        # One counted handler per execution environment (the push function has several).
        monkeypatch.setitem(
            lambda_shim._handlers, name, [functools.partial(counted, handler=handler) for handler in environments]
        )
    yield meter, invocations, durations


def settle(meter: Meter, quiet: float = 2.0, timeout: float = 30.0) -> None:
    """Until the Runtime made no AWS call for `quiet` seconds (earlier work, or this turn's, has drained)."""
    deadline, last, count = time.monotonic() + timeout, time.monotonic(), -1
    while time.monotonic() < deadline:
        now = meter.activity
        if now != count:
            count, last = now, time.monotonic()
        elif time.monotonic() - last >= quiet:
            return
        time.sleep(0.1)


# ---------------------------------------------------------------- list prices, us-east-1 (docs/performance.md)
LAMBDA_GB_S = 0.0000133334  # arm64, per GB-second
LAMBDA_REQUEST = 0.20 / 1e6
SFN_TRANSITION = 0.025 / 1000  # Standard workflows
DDB_WRU = 0.625 / 1e6  # on-demand
DDB_RRU = 0.125 / 1e6
SQS_FIFO_REQUEST = 0.50 / 1e6
EVENTBRIDGE_EVENT = 1.00 / 1e6  # custom events
MEMORY_GB = 0.5


def test_one_plain_echo_turn_end_to_end(
    local_runtime: LocalRuntime, meter: tuple[Meter, Counter[str], dict[str, list[float]]]
) -> None:
    counter, invocations, durations = meter
    settle(counter)
    # When one blocking echo SendMessage runs end to end, and everything it set off has settled
    counter.on = True
    started = time.perf_counter()
    response = httpx.post(
        local_runtime.agent_url("echo"),
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": user_message("cost")}},
        headers=auth(),
        timeout=60,
    )
    api_seconds = time.perf_counter() - started
    assert "result" in response.json(), response.text
    task = response.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    settle(counter)
    counter.on = False

    # Then: Lambda invocations (the api once, the turn once: one RunTurn), and Step Functions transitions
    invocations["api"] += 1
    durations["api"].append(api_seconds)
    assert local_runtime.stack is not None
    sfn = local_runtime.aws.client("stepfunctions")
    arn = local_runtime.stack.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{task['id']}"
    history = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
    transitions = sum(1 for e in history if e["type"].endswith("StateEntered"))
    assert transitions == 3  # RunTurn, Interrupted?, Done
    assert invocations["turn"] == 1

    # SQS: what our code sent (context queue: only for busy contexts; push queue: the status / artifact events after
    # SUBMITTED of a task with push configs), each then received and deleted by an event source mapping.
    push_messages = invocations["push"]  # one push invocation per queued event at this load (batches of 1)
    sqs_requests = sum(counter.calls[(c, op)] for c, op in counter.calls if op.startswith("sqs:")) + push_messages * 3
    dynamo_calls = {k: v for k, v in counter.calls.items() if k[1].startswith("dynamodb:")}
    wru, rru = sum(counter.wru.values()), sum(counter.rru.values())
    gb_s = sum(math.ceil(d * 1000) / 1000 * MEMORY_GB for ds in durations.values() for d in ds)
    n_invocations = sum(invocations.values())
    cost = {
        "Lambda requests": n_invocations * LAMBDA_REQUEST,
        "Lambda GB-s": gb_s * LAMBDA_GB_S,
        "Step Functions": transitions * SFN_TRANSITION,
        "DynamoDB writes": wru * DDB_WRU,
        "DynamoDB reads": rru * DDB_RRU,
        "SQS FIFO": sqs_requests * SQS_FIFO_REQUEST,
        "EventBridge": counter.events_put * EVENTBRIDGE_EVENT,
    }
    put_calls = sum(n for (_, op), n in counter.calls.items() if op == "events:PutEvents")
    by_call = {f"{c} {op.split(':', 1)[1]}": n for (c, op), n in sorted(dynamo_calls.items())}
    others = {f"{c} {op}": n for (c, op), n in counter.calls.items() if not op.startswith(("dynamodb:", "sqs:", "events:"))}
    lines = [
        "",
        "one plain echo turn, end to end (local stack):",
        f"  Lambda invocations: {dict(invocations)}  (local wall seconds: "
        + ", ".join(f"{c} {sum(d):.3f}" for c, d in durations.items()) + ")",
        f"  Step Functions transitions: {transitions}",
        f"  DynamoDB calls: {sum(dynamo_calls.values())} {by_call}",
        f"  DynamoDB units: {wru:g} WRU {dict(counter.wru)}, {rru:g} RRU {dict(counter.rru)}",
        f"  EventBridge events put: {counter.events_put} {dict(counter.event_types)} in {put_calls} PutEvents calls",
        f"  SQS requests: {sqs_requests} (code sends {dict(counter.sqs_sent)}, push invocations {push_messages})",
        f"  other calls: {others}",
        "  per 1 M turns, USD: " + ", ".join(f"{k} {v * 1e6:.2f}" for k, v in cost.items()) + f"; total {sum(cost.values()) * 1e6:.2f}",
    ]
    print("\n".join(lines))
    assert counter.errors == []
    # Sanity: the turn's writes and reads were seen, one status event at least was published
    assert counter.events_put >= 2
    # And a task without push configs costs the push queue and the push function nothing (its events are
    # not queued for push), nor the publish function a read: each status change's image counts the task's configs
    assert push_messages == 0 and not counter.sqs_sent, (push_messages, counter.sqs_sent)
    assert counter.calls[("publish", "dynamodb:Query")] == 0
    assert wru > 0 and rru > 0
    assert counter.calls[("api", "stepfunctions:StartExecution")] == 1
