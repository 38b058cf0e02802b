"""push function: drains the push queue (SQS FIFO). An event from the bus fans out into one delivery per
push config; a delivery is one signed POST, retried on its own with backoff for up to 24 hours."""

import json
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from nylorun.adapters.sqs import hold_failed_groups
from nylorun.observability import logger, metrics, tracer
from nylorun.ports import Delivery
from nylorun.service.push import Outcome
from nylorun.wiring import build_runtime

runtime = build_runtime()
processor = SqsFifoPartialProcessor(skip_group_on_error=True)
# A batch whose every message must wait is not an error: answer with all of them as failures (their delays
# are then applied), instead of failing the invocation. The FIFO processor takes no such argument.
processor.raise_on_entire_batch_failure = False
delays: dict[str, int] = {}  # message group → seconds its failed messages wait, in this invocation


class RetryLater(Exception):
    """Keeps the delivery (and the later ones of its group, in order) for another attempt."""


def record_handler(record: SQSRecord) -> None:
    body = json.loads(record.body)
    if "delivery" not in body:
        runtime.push.fan_out(body)  # an EventBridge event
        return
    attempt = int(record.attributes.approximate_receive_count or 1)
    result = runtime.push.deliver(Delivery(**body["delivery"]), attempt)
    if result.outcome is Outcome.RETRY:
        delays[record.attributes.message_group_id or ""] = result.delay_seconds
        raise RetryLater(result.reason)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    delays.clear()
    response = process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    hold_failed_groups(event, response, delays, runtime.push_queue.retry_later)
    return response
