"""publish function: the table's change stream → Runtime events on EventBridge (docs/events.md).

Partial batch failures (Powertools BatchProcessor): a record whose events were not accepted is retried by
Lambda from that record on, so no event is skipped; consumers drop duplicates by `eventId`.
"""

from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from nylorun.observability import logger, metrics, tracer
from nylorun.service.publish import EventPublisher
from nylorun.wiring import build_runtime

runtime = build_runtime()
publisher = EventPublisher(runtime.store, runtime.bus)
processor = BatchProcessor(event_type=EventType.DynamoDBStreams)


def record_handler(record: DynamoDBRecord) -> None:
    publisher.publish_record(record.raw_event)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
