"""AWS on one machine: moto in-process in server mode on loopback, with our Lambda handlers run in-process.

moto's Step Functions really executes the state machine file (`execute_state_machine`), including
`.waitForTaskToken`. moto cannot run Lambda code without Docker, so `install_lambda_shim` routes moto's
Lambda invoke to the Python handlers registered here (the deployed code, loaded from `functions/`).
Written for moto 5.2.5 (pinned); tests/integration/test_local_aws.py fails loudly if it stops working.
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC
from typing import Any

import boto3
import requests

from nylorun_local.activity import watch_boto3_writes
from nylorun_local.turns import TURNS

REGION = "us-east-1"
ACCOUNT = "123456789012"
LambdaHandler = Callable[[dict[str, Any], Any], Any]

_handlers: dict[str, list[LambdaHandler]] = {}  # function name -> one handler per execution environment
_timeouts_ms: dict[str, int] = {}  # function name -> its Timeout
_DEFAULT_TIMEOUT_MS = 300_000  # a function registered without one
_installed = threading.Lock()
_shim_on = False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LambdaContext:
    """The parts of Lambda's context object Powertools reads."""

    def __init__(self, name: str, timeout_ms: int | None = None) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "local"
        # Counts down from the function's Timeout (the template's, as registered), as Lambda's does.
        self._ends = time.monotonic() + (timeout_ms or function_timeout_ms(name)) / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._ends - time.monotonic()) * 1000))


def register_handler(function_name: str, handler: LambdaHandler, timeout_seconds: int | None = None) -> None:
    """The function's (first) execution environment."""
    _handlers[function_name] = [handler]
    if timeout_seconds is not None:
        _timeouts_ms[function_name] = timeout_seconds * 1000


def function_timeout_ms(function_name: str) -> int:
    """The function's Timeout as registered (the template's), in milliseconds."""
    return _timeouts_ms.get(function_name, _DEFAULT_TIMEOUT_MS)


def add_environment(function_name: str, handler: LambdaHandler) -> int:
    """One more execution environment of a registered function (its own copy of the handler module): its number."""
    _handlers[function_name].append(handler)
    return len(_handlers[function_name]) - 1


def invoke_registered(function_name: str, event: dict[str, Any], environment: int = 0) -> tuple[Any, str | None]:
    """Run a registered handler, in that execution environment, as Lambda would: (result, None) or (error
    payload, "Unhandled")."""
    handler = _handlers[function_name][environment]
    try:
        # In a context of its own, as Lambda runs each invocation: the keys its handler gives its log lines
        # (nylorun.observability) stay its own, whichever thread invoked it.
        return contextvars.copy_context().run(handler, event, LambdaContext(function_name)), None
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - Lambda reports the error type and message, never our stack
        return {"errorType": type(exc).__name__, "errorMessage": str(exc)}, "Unhandled"
    except BaseException:  # noqa: BLE001 - the process died mid-invocation (simulated crashes)
        return {"errorType": "Runtime.ExitError", "errorMessage": "Runtime exited"}, "Unhandled"


def install_lambda_shim() -> None:
    global _shim_on
    with _installed:
        if _shim_on:
            return
        from moto.awslambda.models import LambdaBackend
        from moto.awslambda_simple.models import LambdaSimpleBackend

        original = LambdaBackend.invoke

        def invoke(
            self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> Any:
            name = function_name.split(":")[6] if function_name.startswith("arn:") else function_name
            if name not in _handlers:
                return original(self, function_name, qualifier, body, headers, response_headers)
            event = json.loads(body) if body else {}
            result, error = invoke_registered(name, event)
            if error:
                response_headers["x-amz-function-error"] = error
            payload = json.dumps(result).encode()
            response_headers["Content-Length"] = str(len(payload))
            return payload

        LambdaBackend.invoke = invoke  # type: ignore[method-assign]
        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
        _shim_on = True


_dynamodb_lock = threading.RLock()
_sqs_lock = threading.RLock()
_SQS_OPERATIONS = (
    "send_message", "send_message_batch", "delete_message", "delete_message_batch",
    "change_message_visibility", "change_message_visibility_batch", "purge_queue",
)


# A queue's message counts, each counted once per queue operation, on the thread running it (see patch_moto_dynamodb).
_sqs_counts = threading.local()


def _serialized(operation: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(operation)
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with _sqs_lock:
            outer = getattr(_sqs_counts, "memo", None)
            _sqs_counts.memo = {}
            try:
                return operation(*args, **kwargs)
            finally:
                _sqs_counts.memo = outer

    return serialized


def _counted_once(count: Callable[[Any], int], name: str) -> property:
    def once(queue: Any) -> int:
        memo = getattr(_sqs_counts, "memo", None)
        if memo is None:  # outside a queue operation (GetQueueAttributes): counted now
            return count(queue)
        key = (id(queue), name)
        if key not in memo:
            memo[key] = count(queue)
        return int(memo[key])

    return property(once)


_dynamodb_patched = False


def _first_of_page(partition: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """The items a first page of a Query of one partition can hold: those its key condition keeps, in key order,
    `Limit` + 1 of them (moto needs the one after the page to say there is more). moto tests the condition and
    sizes every item of the partition for every page: a page of 11 of a task's 1,000 push configs took 16 ms, 10 ms
    with this (7 ms with the serializer's memo, `_memoize_attribute_keys`). Items are compared by the same values
    moto's own sort and condition use (`cast_value`); a page that starts after a key (ExclusiveStartKey) or uses
    legacy filters is left to moto whole. A FilterExpression is applied after the Limit, on DynamoDB and in moto, so
    it does not change which items a page reads."""
    from moto.dynamodb.comparisons import get_comparison_func

    names = ("range_comparison", "range_objs", "limit", "exclusive_start_key", "scan_index_forward")
    known = {*names, "projection_expressions", "index_name", "consistent_read", "filter_expression",
             "hash_key_conditions", "range_key_conditions"}  # fmt: skip
    given = dict(zip(names, args, strict=False)) | {name: kwargs[name] for name in names if name in kwargs}
    legacy_filters = set(kwargs) - known
    if given.get("exclusive_start_key") is not None or legacy_filters or not partition or partition[0].range_key is None:
        return partition
    if given.get("range_comparison"):
        compare = get_comparison_func(given["range_comparison"])
        values = [value.cast_value for value in given.get("range_objs") or ()]
        partition = [item for item in partition if compare(item.range_key.cast_value, *values)]
    partition.sort(key=lambda item: item.range_key.cast_value, reverse=given.get("scan_index_forward") is False)
    return partition[: given["limit"] + 1] if given.get("limit") else partition


def patch_moto_dynamodb() -> None:
    """Fixes to moto 5.2.5's DynamoDB for a server many threads write to at once (AWS needs neither), and
    one to its item size limit:

    * its request handling is not thread-safe (a transaction deep-copies the table while another request
      writes it: "dictionary changed size during iteration"), so DynamoDB requests are serialized;
    * for its rollback, every transaction deep-copies each table it touches — every item and every stream
      record ever written — so transactions slow down as the table grows. Under the lock, a snapshot of just
      the items the transaction names (and the stream's length) restores the same state on failure;
    * an update that replaces an attribute counts the old value and the new one against the 400 KB item limit;
      AWS limits the item as written, so the value replaced no longer counts;
    * a Query of the table reads its partition, not every item of the table sorted.
    """
    global _dynamodb_patched
    with _installed:
        if _dynamodb_patched:
            return
        import copy

        from moto.dynamodb.models import DynamoDBBackend
        from moto.dynamodb.models.dynamo_type import DynamoType
        from moto.dynamodb.models.table import Table
        from moto.dynamodb.responses import DynamoHandler

        original_transact = DynamoDBBackend.transact_write_items

        def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
            saved: list[tuple[Any, Any, Any, Any]] = []
            streams: dict[int, tuple[Any, int]] = {}
            for entry in transact_items:
                op = next(iter(entry.values()))
                table = self.tables.get(op.get("TableName"))
                if table is None:
                    continue
                key = op.get("Key") or op.get("Item") or {}
                if table.hash_key_attr not in key or (table.range_key_attr and table.range_key_attr not in key):
                    continue  # malformed: moto rejects it before writing anything
                hash_key = DynamoType(key[table.hash_key_attr])
                range_key = DynamoType(key[table.range_key_attr]) if table.range_key_attr else None
                row = table.items.get(hash_key)
                old = row.get(range_key) if range_key is not None and isinstance(row, dict) else row
                saved.append((table, hash_key, range_key, copy.deepcopy(old)))
                if table.stream_shard is not None:
                    streams[id(table)] = (table.stream_shard, len(table.stream_shard.items))
            Table.__deepcopy__ = lambda table, memo: table  # type: ignore[attr-defined]  # no whole-table copy
            try:
                original_transact(self, transact_items)
            except Exception:
                for table, hash_key, range_key, old in reversed(saved):
                    if range_key is None:
                        if old is None:
                            table.items.pop(hash_key, None)
                        else:
                            table.items[hash_key] = old
                    elif old is None:
                        table.items.get(hash_key, {}).pop(range_key, None)
                    else:
                        table.items[hash_key][range_key] = old
                for shard, length in streams.values():
                    del shard.items[length:]  # no stream record for writes that were rolled back
                raise
            finally:
                del Table.__deepcopy__  # type: ignore[attr-defined]

        DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]
        original_query = Table.query

        def query(self: Any, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
            # moto finds a Query's items by sorting every item of the table and keeping the partition's, so each
            # Query costs the whole table (19 ms a page for one task's 1,000 push configs, and more as a session's
            # table grows). A Query of the table itself (no index) reads only its partition; moto sorts the
            # result by range key as before. Under the DynamoDB lock (call_action below), like every request.
            index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
            if index_name or hash_key is None:
                return original_query(self, hash_key, *args, **kwargs)
            rows = self.items.get(hash_key)
            partition = list(rows.values()) if isinstance(rows, dict) else [rows] if rows is not None else []
            partition = _first_of_page(partition, args, kwargs)
            self.all_items = lambda: partition  # this call's view of the table, removed after
            try:
                return original_query(self, hash_key, *args, **kwargs)
            finally:
                del self.all_items

        Table.query = query  # type: ignore[method-assign]
        original_call = DynamoHandler.call_action

        def call_action(self: Any) -> Any:
            with _dynamodb_lock:
                return original_call(self)

        DynamoHandler.call_action = call_action  # type: ignore[method-assign]

        from moto.dynamodb.models.dynamo_type import LimitedSizeDict

        original_setitem = LimitedSizeDict.__setitem__

        def setitem(self: Any, key: str, value: Any) -> None:
            old = dict.pop(self, key, None)
            try:
                original_setitem(self, key, value)
            except Exception:
                if old is not None:
                    dict.__setitem__(self, key, old)
                raise

        LimitedSizeDict.__setitem__ = setitem  # type: ignore[method-assign]

        # moto's FIFO receive releases a visible-again message only as its loop reaches it, while the other
        # visible-again messages of its group still count as in flight: it skips them and delivers a later
        # one first (out of order). Release every visible-again message before receiving.
        from moto.sqs.models import SQSBackend

        original_receive = SQSBackend.receive_message
        # moto also hands a FIFO queue's messages out strictly in the order they were sent, across message groups:
        # a group whose message is handed back (a push fan-out step) keeps its early place and is taken again
        # before any group that queued after it. SQS promises no order across groups; locally they take turns:
        # a group waits in line from its first message, and each time it is served it goes to the back (stable
        # sort, so a group's own messages keep their order).
        group_turns: dict[str, dict[str, int]] = {}
        turn_counter = itertools.count()

        def rotate_groups(queue: Any) -> dict[str, int]:
            previous = group_turns.get(queue.name, {})
            turns = {}
            for message in queue._messages:
                group = message.group_id or ""
                if group not in turns:
                    turns[group] = previous[group] if group in previous else next(turn_counter)
            group_turns[queue.name] = turns
            queue._messages.sort(key=lambda message: turns[message.group_id or ""])
            return turns

        def receive_message(
            self: Any, queue_name: str, count: int, wait_seconds_timeout: int, *args: Any, **kwargs: Any
        ) -> Any:
            # A long poll (`nylorun admin dlq`'s) waits between tries outside the lock: held through the wait, it
            # would stop every other queue operation (the pollers') for that long.
            deadline = time.monotonic() + wait_seconds_timeout
            while True:
                with _sqs_lock:
                    queue = self.get_queue(queue_name)
                    for message in list(queue.pending_messages):
                        if message.visible:
                            queue.pending_messages.remove(message)
                    turns = rotate_groups(queue) if queue.fifo_queue else {}
                    received = original_receive(self, queue_name, count, 0, *args, **kwargs)
                    for message in received if queue.fifo_queue else ():
                        turns[message.group_id or ""] = next(turn_counter)
                if received or time.monotonic() >= deadline:
                    return received
                TURNS.sleep(0.05)  # asked over HTTP, the request lets the next one in meanwhile

        SQSBackend.receive_message = receive_message  # type: ignore[method-assign]
        # moto's SQS asks its clock for every message each time it walks a queue (is it visible? delayed?), and its
        # clock builds two datetimes a call: at 1,000 messages a walk took ~17 ms, and a receive, a send and each
        # queue attribute walk the queue. The same time, read as epoch seconds, is ten times cheaper.
        import moto.sqs.models as sqs_models
        from moto.core.utils import unix_time_millis as original_unix_time_millis

        def unix_time_millis(dt: Any = None) -> float:
            return time.time() * 1000.0 if dt is None else float(original_unix_time_millis(dt))

        sqs_models.unix_time_millis = unix_time_millis  # type: ignore[attr-defined]  # the name models.py calls
        # And every message a send takes computes the queue's whole attribute map (to read ContentBasedDeduplication),
        # which counts the queue's messages three times: a batch of ten walked a 1,000-message queue thirty times. In
        # a queue operation, each count is made once (they are approximate on SQS too; nothing it returns shows them).
        for name in (
            "approximate_number_of_messages",
            "approximate_number_of_messages_delayed",
            "approximate_number_of_messages_not_visible",
        ):
            setattr(sqs_models.Queue, name, _counted_once(getattr(sqs_models.Queue, name).fget, name))
        # One queue operation at a time. moto's queues are plain lists: a delete rebuilds the list, so a message
        # sent meanwhile (appended to the old one) is lost; and a FIFO group is marked in flight only as a receive
        # hands out its messages, so two receives at once could both take one group (out of order). SQS does
        # neither; with several pollers and the api sending at once, moto must not either.
        for name in _SQS_OPERATIONS:
            setattr(SQSBackend, name, _serialized(getattr(SQSBackend, name)))
        _answer_items_as_plain_json()
        _dynamodb_patched = True


# DynamoDB operations whose answers hold items, keys, counts and capacities only: no timestamp, and below the top
# level no member the operation's shape lacks. Their JSON is written as it stands (`_answer_items_as_plain_json`).
PLAIN_JSON_OPERATIONS = frozenset(
    {
        "GetItem", "PutItem", "UpdateItem", "DeleteItem", "Query", "Scan", "BatchGetItem", "BatchWriteItem",
        "TransactGetItems", "TransactWriteItems",
    }
)  # fmt: skip
plain_json = threading.local()  # `plain_json.off = True`: this thread's answers go through moto's serializer


def _answer_items_as_plain_json() -> None:
    """moto 5.2.5 writes every answer by walking the operation's output shape in botocore's model, member by
    member: for an item, each attribute's value through a map, a structure and a picker. That walk was an eighth
    of the local stack's CPU while one task's 1,000 push configs were pushed (issue 15's fair-push figure), most of
    it for GetItem and Query answers. The answers of `PLAIN_JSON_OPERATIONS` are already the wire's JSON (moto's own
    `dynamo_to_dict`: attribute values as `{type: value}`, numbers as strings), but for binary values (bytes: base64
    on the wire, as moto's serializer writes them), members that are None and members the operation's output does not
    have (DeleteItem's `ConsumedCapacityUnits`), which the walk leaves out: written as they stand,
    the same JSON the walk gives (tests/integration/test_local_aws.py compares the two)."""
    import base64

    from moto.core.responses import ActionResult
    from moto.dynamodb.responses import DynamoResult

    def wire(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: wire(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [wire(v) for v in value]
        if isinstance(value, bytes):
            return base64.b64encode(value).decode()
        return value

    def execute_result(self: Any, context: Any) -> Any:
        if (
            context.operation_model.name not in PLAIN_JSON_OPERATIONS
            or not isinstance(self.result, dict)
            or getattr(plain_json, "off", False)
        ):
            return ActionResult.execute_result(self, context)
        members = context.operation_model.output_shape.members
        answer = {k: v for k, v in wire(self.result).items() if k in members}
        content_type = "application/x-amz-json-" + context.service_model.metadata.get("jsonVersion", "1.0")
        return 200, {"Content-Type": content_type}, json.dumps(answer, separators=(",", ":"))

    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]


_dispatch_patched = False


def patch_moto_dispatch() -> None:
    """moto's server finds each request's backend with `host in list_of_moto_modules()`, which lists moto's package
    folder and stats each of its ~170 entries: per request, under the dispatcher's one lock. Every stat lets go of
    the interpreter lock, so a request waits its turn ~170 times while other threads run: next to one thread that
    only computes, a task with one push config took 10 s from send to delivery instead of 0.3 s (a profile put three
    fifths of its waiting there; 0.65 s once listed). The folder does not change while the process runs: it is
    listed once. The server's serializer is patched here too (`_memoize_attribute_keys`)."""
    global _dispatch_patched
    with _installed:
        if _dispatch_patched:
            return
        from moto import backends

        modules = tuple(backends.list_of_moto_modules())
        backends.list_of_moto_modules = lambda: modules  # werkzeug_app calls it by module
        _memoize_attribute_keys()
        _memoize_names()
        _parse_each_definition_once()
        _dispatch_patched = True


# Definitions whose parse trees are kept: the stack's one state machine, and the few a test run makes.
_KEPT_DEFINITIONS = 32


def _parse_each_definition_once() -> None:
    """moto's Step Functions parses the state machine's definition (ANTLR, in Python) for every execution it starts:
    47 ms of CPU for turn.asl.json, a third of a local turn alone, in the interpreter the api and moto share. The
    parse tree depends on the definition only: it is kept per definition, and each execution still builds its own
    states from it (moto's preprocessor, 9 ms), so no execution shares state with another."""
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.asl.parse.preprocessor import Preprocessor

    original = AmazonStateLanguageParser.parse

    @functools.lru_cache(maxsize=_KEPT_DEFINITIONS)
    def tree(definition: str) -> Any:
        return original(definition)[1]  # a definition that does not parse raises, as before, and is not kept

    def parse(definition: str) -> tuple[Any, Any]:
        parsed = tree(definition)
        return Preprocessor().visit(parsed), parsed

    AmazonStateLanguageParser.parse = staticmethod(parse)  # type: ignore[method-assign]


def _memoize_names() -> None:
    """Work moto's server repeats for every request, on values fixed while the process runs (a profile of the
    1,000-config push put a sixth of the moto process's interpreter here): each request lists its response class's
    methods (`inspect.getmembers`) to find the action's; each action name, and each of a queue's attribute names,
    is turned into snake case character by character; and every message a receive hands out reads the queue's whole
    attribute map three times over (`get_queue_attributes`) to check its retention period. The method lists and the
    names are worked out once; the retention check reads the one attribute."""
    from moto.core import responses
    from moto.core.utils import camelcase_to_underscores, method_names_from_class
    from moto.sqs import models as sqs_models

    snake_case = functools.lru_cache(maxsize=4096)(camelcase_to_underscores)
    responses.camelcase_to_underscores = snake_case  # type: ignore[attr-defined]  # the names each module calls
    sqs_models.camelcase_to_underscores = snake_case  # type: ignore[attr-defined]
    # Keyed by class: the local stack's patches replace methods (same names) before the first request.
    responses.method_names_from_class = functools.cache(method_names_from_class)  # type: ignore[attr-defined]

    def retained(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > time.time())

    sqs_models.SQSBackend.is_message_valid_based_on_retention_period = retained  # type: ignore[method-assign]


def _memoize_attribute_keys() -> None:
    """moto's response serializer asks, for every member of every structure it writes, which attribute names the
    value may be found under: it builds six alias providers and asks each (a DynamoDB AttributeValue has ten
    members, so an item of ten attributes asks ~100 times). The answer depends only on the object's class, the
    shape and the member's name, all fixed while the process runs: it is worked out once for each. A GetItem
    spent four fifths of moto's time there."""
    from moto.core.serialize import AttributePicker, XFormedAttributePicker

    for picker in (AttributePicker, XFormedAttributePicker):
        original = picker.get_possible_keys
        known: dict[tuple[Any, ...], tuple[Any, tuple[str, ...]]] = {}

        def get_possible_keys(self: Any, context: Any, original: Any = original, known: dict[Any, Any] = known) -> Any:
            obj, shape = context.obj, context.shape
            if "Meta" in getattr(obj, "__dict__", ()):  # aliases of its own: not the class's
                return original(self, context)
            # moto sets a member's shape's `parent` as it writes the structure: part of the question too
            shapes = (shape, getattr(shape, "parent", None))
            key = (type(self), tuple(self.alias_providers), type(obj), *map(id, shapes), context.key)
            hit = known.get(key)
            # the shapes are kept with their answer, so their ids are not reused while it is
            if hit is None or any(a is not b for a, b in zip(hit[0], shapes, strict=True)):
                hit = known[key] = (shapes, tuple(original(self, context)))
            return hit[1]

        picker.get_possible_keys = get_possible_keys  # type: ignore[method-assign]


_direct_endpoints: set[str] = set()  # scheme://host:port of the moto servers this process runs
_direct_app: Any = None  # moto's WSGI application, once the direct transport is installed


def install_direct_transport(*endpoints: str) -> None:
    """Requests this process's own boto3 clients make to its own moto server skip the socket: each runs moto's WSGI
    application on the caller's thread, as moto's server would on one of its own. The same application and the
    same backends, so nothing changes but the cost. Over loopback, HTTP (urllib3 and http.client on one side,
    werkzeug's server and a thread per connection on the other) was a third of the local stack's CPU, all of it
    under one GIL with the Runtime it stands in for (issue 15's fair-push figure). Other processes (the CLI, a
    receiver) still reach the same moto over HTTP."""
    global _direct_app
    with _installed:
        _direct_endpoints.update(endpoints)
        if _direct_app is not None:
            return
        from botocore.endpoint import Endpoint
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        _direct_app = DomainDispatcherApplication(create_backend_app)
        original_send = Endpoint._send

        def send(self: Any, request: Any) -> Any:
            parts = request.url.split("/", 3)
            if "/".join(parts[:3]) not in _direct_endpoints:
                return original_send(self, request)
            return _run_in_process(request)

        Endpoint._send = send


def remove_direct_transport(*endpoints: str) -> None:
    _direct_endpoints.difference_update(endpoints)


def _run_in_process(request: Any) -> Any:
    """One botocore request through moto's WSGI application, the environ built as werkzeug's server builds it."""
    import io
    import sys
    from urllib.parse import unquote, urlsplit

    from botocore.awsrequest import AWSResponse
    from moto.core.botocore_stubber import MockRawResponse
    from moto.core.request import (
        PRESERVED_HEADER_NAMES_ENVIRON_KEY,
        environ_key_for_header,
        should_preserve_original_header_name,
    )

    from nylorun_local.moto_server import call_app  # imports moto: not before the local stack needs it

    url = urlsplit(request.url)
    body = request.body
    if hasattr(body, "read"):
        body = body.read()
    if isinstance(body, str):
        body = body.encode()
    body = body or b""

    def latin1(value: str) -> str:  # PEP 3333: environ strings are bytes decoded as latin-1
        return value.encode().decode("latin-1")

    raw_path = url.path + (f"?{url.query}" if url.query else "")
    environ: dict[str, Any] = {
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": url.scheme,
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "REQUEST_METHOD": request.method,
        "SCRIPT_NAME": "",
        "PATH_INFO": latin1(unquote(url.path)),
        "QUERY_STRING": latin1(url.query),
        "REQUEST_URI": latin1(raw_path),
        "RAW_URI": latin1(raw_path),
        "REMOTE_ADDR": "127.0.0.1",
        "REMOTE_PORT": 0,
        "SERVER_NAME": url.hostname or "127.0.0.1",
        "SERVER_PORT": str(url.port or 80),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": url.netloc,
        "CONTENT_LENGTH": str(len(body)),
    }
    names: dict[str, str] = {}
    for name, value in request.headers.items():
        value = value.decode("latin-1") if isinstance(value, bytes) else str(value)
        key = environ_key_for_header(name)
        if "_" in name:
            if should_preserve_original_header_name(name):  # as moto's own request handler keeps them
                names.setdefault(key, name)
                environ[key] = value
            continue
        environ[key] = value
    environ[PRESERVED_HEADER_NAMES_ENVIRON_KEY] = names
    line, answered, content = call_app(_direct_app, environ)
    headers: dict[str, str] = {}
    for name, value in answered:
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return AWSResponse(request.url, int(line.split(" ", 1)[0]), headers, MockRawResponse(content))


class LocalAws:
    """One moto server for the process, on 127.0.0.1. Sets the environment boto3 reads."""

    def __init__(self, port: int | None = None) -> None:
        # NYLORUN_LOCAL_AWS_PORT: where a `nylorun serve` puts moto, for a test that looks at its table and bucket.
        self.port = port or int(os.environ.get("NYLORUN_LOCAL_AWS_PORT") or 0) or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server: Any = None

    def start(self) -> LocalAws:
        from nylorun_local.moto_server import MotoServer  # imports moto: not before the local stack needs it

        os.environ.update(
            {
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_SESSION_TOKEN": "testing",
                "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION,
                # Step Functions task integrations call back into moto on this port.
                "MOTO_PORT": str(self.port),
                "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            }
        )
        install_lambda_shim()
        patch_moto_dynamodb()
        patch_moto_dispatch()
        # Before any function makes its clients: a botocore client copies its session's handlers when it is made,
        # so a client made before the watch would write without waking the pollers (its writes then wait for a
        # poller's idle timeout).
        watch_boto3_writes()
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request otherwise
        self._server = MotoServer(self.port)
        self._server.start()
        install_direct_transport(self.endpoint, f"http://localhost:{self.port}")
        response = requests.post(
            f"{self.endpoint}/moto-api/config",
            json={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}},
            timeout=10,
        )
        response.raise_for_status()
        return self

    def stop(self) -> None:
        remove_direct_transport(self.endpoint, f"http://localhost:{self.port}")
        if self._server is not None:
            self._server.stop()
            self._server = None

    @staticmethod
    def client(name: str) -> Any:
        return boto3.client(name, region_name=REGION)

    @staticmethod
    def table_items(table_name: str) -> list[dict[str, Any]]:
        """Every item of a table, typed as a Scan returns them, read from moto's memory in one step under the
        DynamoDB lock: a consistent snapshot (a Scan's pages are not), and cheap on a large table, where a Scan
        of 1 MB pages re-walks the table for each page and sends every byte through JSON twice. For the tests
        that prove a request wrote nothing."""
        import copy

        from moto.dynamodb.models import dynamodb_backends

        with _dynamodb_lock:
            table = dynamodb_backends[ACCOUNT][REGION].get_table(table_name)
            # deepcopy: to_json hands out moto's own lists and maps (strings are shared, not copied).
            return [copy.deepcopy(item.to_json()["Attributes"]) for item in table.all_items()]

    @staticmethod
    def stream_records(stream_arn: str, position: int, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` records of a table's stream from `position` (0: its first record; moto keeps one shard),
        read from moto's memory under the DynamoDB lock, as Lambda's event gives them (the wire's JSON: the creation
        time in epoch seconds, binaries in base64). What GetRecords returns, without its cost: moto's serializer
        and botocore's parser took two fifths of the local stack's CPU while one task's 1,000 push configs expired
        (the records of every table write pass through here, for each stream poller)."""
        import copy

        from moto.dynamodb.models import dynamodb_backends

        table_name = stream_arn.split(":", 6)[5].split("/")[1]
        with _dynamodb_lock:
            shard = dynamodb_backends[ACCOUNT][REGION].get_table(table_name).stream_shard
            if shard is None:
                return []
            # deepcopy: to_json hands out moto's own record, which the poller annotates.
            records = copy.deepcopy([record.to_json() for record in shard.items[position : position + limit]])
        for record in records:
            created = record["dynamodb"]["ApproximateCreationDateTime"]  # moto's naive UTC datetime
            record["dynamodb"]["ApproximateCreationDateTime"] = int(created.replace(tzinfo=UTC).timestamp())
        return records

    @staticmethod
    def receivable(queue_url: str) -> bool:
        """Whether a ReceiveMessage of the queue could hand out a message now (one visible, not delayed and, in a
        FIFO queue, of a group with nothing in flight), read from moto's memory under the SQS lock. Lambda's
        pollers receive outside the function's account of time; locally each empty ReceiveMessage (moto's request
        handling, botocore's parsing) ran in the Runtime's one process: 1,540 of 1,760 receives were empty, a
        seventh of its CPU, while one task's 1,000 push configs were delivered."""
        from moto.sqs.models import sqs_backends

        with _sqs_lock:
            queue = sqs_backends[ACCOUNT][REGION].get_queue(queue_url.rsplit("/", 1)[1])
            # A message visible again is released by the next receive (receive_message above): not in flight.
            held = {m.group_id for m in queue.pending_messages if not m.visible} if queue.fifo_queue else set()
            return any(message.group_id not in held for message in queue.messages)

    @staticmethod
    def expired_keys(table_name: str, attribute: str, now: int) -> list[dict[str, Any]]:
        """The keys of the items whose TTL `attribute` is at or before `now`, read from moto's memory under the
        DynamoDB lock (only the keys are copied: the local TTL looks often, at a table that only grows in a session)."""
        from moto.dynamodb.models import dynamodb_backends

        with _dynamodb_lock:
            table = dynamodb_backends[ACCOUNT][REGION].get_table(table_name)
            found = []
            # table.items (hash key -> range key -> item), not all_items(), which sorts: 15 ms for 20,000 items, not 990
            for rows in table.items.values():
                for item in rows.values() if isinstance(rows, dict) else [rows]:
                    value = item.attrs.get(attribute)
                    if value is not None and value.type == "N" and float(value.value) <= now and item.range_key is not None:
                        found.append({"PK": item.hash_key.to_json(), "SK": item.range_key.to_json()})
            return found
