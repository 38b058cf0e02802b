"""AWS on one machine: `LocalAws`, moto in-process in server mode on loopback, and its snapshot readers.

moto's Step Functions really executes the state machine file (`execute_state_machine`), including
`.waitForTaskToken`; our Lambda handlers run in-process (lambda_shim.py); moto's fixes are one module each in
nylorun_local/moto/.
Written for moto 5.2.5 (pinned); tests/integration/test_local_aws.py fails loudly if it stops working.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC
from typing import Any

import boto3
import requests

from nylorun_local.account import ACCOUNT, REGION
from nylorun_local.activity import watch_boto3_writes
from nylorun_local.lambda_shim import install_lambda_shim
from nylorun_local.moto import install_all
from nylorun_local.moto.direct_transport import install_direct_transport, remove_direct_transport
from nylorun_local.moto.patching import dynamodb_lock, sqs_lock


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        install_all()
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

        with dynamodb_lock:
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
        with dynamodb_lock:
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

        with sqs_lock:
            queue = sqs_backends[ACCOUNT][REGION].get_queue(queue_url.rsplit("/", 1)[1])
            # A message visible again is released by the next receive (moto/sqs_fifo_release.py): not in flight.
            held = {m.group_id for m in queue.pending_messages if not m.visible} if queue.fifo_queue else set()
            return any(message.group_id not in held for message in queue.messages)

    @staticmethod
    def expired_keys(table_name: str, attribute: str, now: int) -> list[dict[str, Any]]:
        """The keys of the items whose TTL `attribute` is at or before `now`, read from moto's memory under the
        DynamoDB lock (only the keys are copied: the local TTL looks often, at a table that only grows in a session)."""
        from moto.dynamodb.models import dynamodb_backends

        with dynamodb_lock:
            table = dynamodb_backends[ACCOUNT][REGION].get_table(table_name)
            found = []
            # table.items (hash key -> range key -> item), not all_items(), which sorts: 15 ms for 20,000 items, not 990
            for rows in table.items.values():
                for item in rows.values() if isinstance(rows, dict) else [rows]:
                    value = item.attrs.get(attribute)
                    if value is not None and value.type == "N" and float(value.value) <= now and item.range_key is not None:
                        found.append({"PK": item.hash_key.to_json(), "SK": item.range_key.to_json()})
            return found
