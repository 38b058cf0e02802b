"""`python -m bench.moto_patches`: what each speed-only moto patch of the local stand-in saves, in CPU time per call.

For each patch (nylorun_local/moto/), the operation it speeds up is timed in two fresh processes: moto's server
with every patch (as `nylorun serve` runs it) and with every patch but that one. Each call is a boto3 call of the
process's own client (client and server CPU both count: one process, as the local Runtime), timed with
`time.process_time`; the figure is the median over repeats of the mean per call, so other work on a busy machine
(which takes wall time, not this process's CPU) moves it little. Prints a table; `--json` prints the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
REPEATS = 7


def _stack(without: str) -> Any:
    """moto's server on loopback with every patch but `without`, and the environment boto3 reads: a boto3 session."""
    import boto3
    from nylorun_local.account import REGION
    from nylorun_local.aws import free_port
    from nylorun_local.moto import PATCHES
    from nylorun_local.moto.direct_transport import install_direct_transport
    from nylorun_local.moto_server import MotoServer

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": REGION, "MOTO_PORT": str(port)})  # fmt: skip
    for patch in PATCHES:
        if patch.__name__.rsplit(".", 1)[1] != without:
            patch.install()
    MotoServer(port).start()
    if without != "direct_transport":
        install_direct_transport(endpoint)
    return boto3.session.Session(region_name=REGION)


def _table(session: Any, items: int, partition: str = "p") -> tuple[Any, str]:
    dynamodb = session.client("dynamodb")
    name = f"bench-{uuid.uuid4().hex[:6]}"
    keys = [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}]
    types = [{"AttributeName": n, "AttributeType": "S"} for n in ("PK", "SK")]
    dynamodb.create_table(TableName=name, KeySchema=keys, AttributeDefinitions=types, BillingMode="PAY_PER_REQUEST")
    for i in range(items):
        attributes = {f"a{j}": {"S": f"value {j}"} for j in range(8)}
        pk = partition if i % 2 else f"other-{i % 50}"  # half the items in one partition, the rest in 50 others
        dynamodb.put_item(TableName=name, Item={"PK": {"S": pk}, "SK": {"S": f"{i:06d}"}, **attributes})
    return dynamodb, name


def _queue(session: Any, messages: int, fifo: bool = False) -> tuple[Any, str]:
    sqs = session.client("sqs")
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"} if fifo else {}
    url = sqs.create_queue(QueueName=f"bench-{uuid.uuid4().hex[:6]}" + (".fifo" if fifo else ""),
                           Attributes=attributes)["QueueUrl"]  # fmt: skip
    for i in range(0, messages, 10):
        entries = [{"Id": str(j), "MessageBody": f"m{i + j}", **({"MessageGroupId": f"g{j}"} if fifo else {})}
                   for j in range(10)]  # fmt: skip
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    return sqs, url


def _get_item(session: Any) -> Callable[[], Any]:
    dynamodb, name = _table(session, 100)
    return lambda: dynamodb.get_item(TableName=name, Key={"PK": {"S": "p"}, "SK": {"S": "000001"}})


def _transaction(session: Any) -> Callable[[], Any]:
    dynamodb, name = _table(session, 2_000)
    put = {"Put": {"TableName": name, "Item": {"PK": {"S": "t"}, "SK": {"S": "t"}, "n": {"S": "1"}}}}
    return lambda: dynamodb.transact_write_items(TransactItems=[put])


def _query(session: Any) -> Callable[[], Any]:
    dynamodb, name = _table(session, 2_000)
    values = {":p": {"S": "p"}}
    return lambda: dynamodb.query(TableName=name, KeyConditionExpression="PK = :p", ExpressionAttributeValues=values,
                                  Limit=10)  # fmt: skip


def _receive(session: Any, messages: int = 1_000) -> Callable[[], Any]:
    sqs, url = _queue(session, messages)
    return lambda: sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)


def _send_batch_fifo(session: Any) -> Callable[[], Any]:
    sqs, url = _queue(session, 1_000, fifo=True)
    sent = iter(range(10**9))

    def send() -> Any:
        entries = [{"Id": str(j), "MessageBody": f"b{next(sent)}", "MessageGroupId": f"g{j}"} for j in range(10)]
        return sqs.send_message_batch(QueueUrl=url, Entries=entries)

    return send


def _send(session: Any) -> Callable[[], Any]:
    sqs, url = _queue(session, 0)
    return lambda: sqs.send_message(QueueUrl=url, MessageBody="m")


def _parse(session: Any) -> Callable[[], Any]:
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    definition = (REPO / "statemachines" / "turn.asl.json").read_text()
    return lambda: AmazonStateLanguageParser.parse(definition)


# patch module -> (the operation it speeds up, how to make one call of it, calls per repeat)
CASES: dict[str, tuple[str, Callable[[Any], Callable[[], Any]], int]] = {
    "dynamodb_transaction_snapshot": ("TransactWriteItems (1 Put), table of 2,000 items", _transaction, 10),
    "dynamodb_query_partition": ("Query Limit 10, partition of 1,000 in 2,000 items", _query, 20),
    "sqs_clock": ("ReceiveMessage (10) of a 1,000-message queue", _receive, 10),
    "sqs_counted_once": ("SendMessageBatch (10) to a 1,000-message FIFO queue", _send_batch_fifo, 10),
    "plain_json": ("GetItem of a 10-attribute item", _get_item, 50),
    "attribute_keys": ("ReceiveMessage (10) of a 10-message queue", lambda s: _receive(s, 10), 50),
    "memoized_names": ("SendMessage", _send, 50),
    "dispatch_listing": ("GetItem of a 10-attribute item", _get_item, 50),
    "sfn_parse_once": ("the parse each execution starts with (turn.asl.json)", _parse, 10),
    "direct_transport": ("GetItem of a 10-attribute item", _get_item, 50),
}


def _measure(case: str, without: bool) -> float:
    """CPU ms per call: median over the repeats of the mean of a repeat's calls (one warm-up repeat first)."""
    session = _stack(case if without else "")
    _, make, calls = CASES[case]
    call = make(session)
    means = []
    for _ in range(REPEATS + 1):
        started = time.process_time()
        for _ in range(calls):
            call()
        means.append((time.process_time() - started) * 1000 / calls)
    return statistics.median(means[1:])


def _in_fresh_process(case: str, without: bool) -> float:
    argv = [sys.executable, "-m", "bench.moto_patches", "--case", case, *(["--without"] if without else [])]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True, timeout=600)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--case", choices=sorted(CASES), help="one side of one case, in this process")
    parser.add_argument("--without", action="store_true", help="with that case's patch left out")
    parser.add_argument("--only", default="", help="comma-separated cases (default: all)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.case:
        print(_measure(args.case, args.without))
        return 0
    rows = []
    for case in [c for c in CASES if not args.only or c in args.only.split(",")]:
        without, with_ = _in_fresh_process(case, True), _in_fresh_process(case, False)
        rows.append({"patch": case, "operation": CASES[case][0], "without_ms": round(without, 3),
                     "with_ms": round(with_, 3), "saved": round(1 - with_ / without, 3)})  # fmt: skip
        if not args.json:
            row = rows[-1]
            print(f"{case:32} {row['operation']:54} {without:9.3f} {with_:9.3f} {row['saved']:7.1%}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    sys.exit(main())
