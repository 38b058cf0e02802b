"""What a per-subject request limit in DynamoDB would add to every call (why it is not built:
docs/decisions/0015-no-per-subject-rate.md).

The cheapest form is one conditional UpdateItem per request (a counter per subject and second, refused over the
limit). Measured here on moto, beside the one consistent GetItem a GetTask makes: moto's latency, not AWS's, so
compare the two rows. `python -m bench.token_bucket`.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable

import boto3
from moto.server import ThreadedMotoServer

ROUNDS, WARMUP = 500, 50


def timed(call: Callable[[], object]) -> tuple[float, float]:
    """p50 and p99 of `call`, in ms."""
    for _ in range(WARMUP):
        call()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99)]


def main() -> None:
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    db = boto3.client("dynamodb", endpoint_url=f"http://{host}:{port}", region_name="us-east-1",
                      aws_access_key_id="bench", aws_secret_access_key="bench")  # fmt: skip
    keys = [{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}]
    attributes = [{"AttributeName": k, "AttributeType": "S"} for k in ("PK", "SK")]
    db.create_table(TableName="t", KeySchema=keys, AttributeDefinitions=attributes, BillingMode="PAY_PER_REQUEST")

    def take() -> None:
        second = int(time.time())
        db.update_item(
            TableName="t",
            Key={"PK": {"S": f"SUBJ#s#{second}"}, "SK": {"S": "RATE"}},
            UpdateExpression="ADD n :one SET expiresAt = :expires",
            ConditionExpression="attribute_not_exists(n) OR n < :limit",
            ExpressionAttributeValues={":one": {"N": "1"}, ":limit": {"N": "1000000"},
                                       ":expires": {"N": str(second + 60)}},
        )  # fmt: skip

    def read() -> None:
        db.get_item(TableName="t", Key={"PK": {"S": "TASK#t"}, "SK": {"S": "TASK"}}, ConsistentRead=True)

    for name, call in (("conditional UpdateItem (the limit)", take), ("consistent GetItem (GetTask's read)", read)):
        p50, p99 = timed(call)
        print(f"{name:40s} p50 {p50:6.2f} ms   p99 {p99:6.2f} ms")
    server.stop()


if __name__ == "__main__":
    main()
