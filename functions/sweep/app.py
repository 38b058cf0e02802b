"""sweep function: removes what has expired (docs/operate.md#data-retention), and measures the tasks waiting
for an operator.

- The table's stream, filtered to the REMOVE of an expired task item (DynamoDB's TTL): the rest of that task, its
  files first (Powertools BatchProcessor: a record that fails is retried from there on, so nothing is skipped).
- Daily (the schedule's event): push configs whose task no longer exists (a config lives as long as its task).
- Every 5 minutes (`{"action": "uncertain"}`): the tasks waiting for an operator and the oldest wait
  (UncertainTasks, UncertainOldestAgeSeconds: docs/operate.md, "Alarms").
"""

from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from nylorun.observability import logger, metrics, tracer
from nylorun.service.operator import gauge
from nylorun.wiring import build_runtime

runtime = build_runtime()
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def record_handler(record: DynamoDBRecord) -> None:
    runtime.retention.expired_record(record.raw_event)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    if "Records" in event:  # the stream's batch
        return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    if event.get("action") == "uncertain":
        waiting, oldest = gauge(runtime.store, datetime.now(UTC))
        metrics.add_metric(name="UncertainTasks", unit="Count", value=waiting)
        metrics.add_metric(name="UncertainOldestAgeSeconds", unit="Seconds", value=oldest)
        return {"uncertain": waiting, "oldestAgeSeconds": oldest}
    removed = runtime.store.sweep_push_configs()
    metrics.add_metric(name="PushConfigsSwept", unit="Count", value=removed)
    return {"removed": removed}
