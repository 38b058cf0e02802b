"""push function: drains the push queue (SQS FIFO). An event, queued by the publish function in its task's own message
group, fans out into one delivery per push config; a delivery is one signed POST, retried on its own with backoff
for up to 24 hours. Each batch stops before the function's time runs out: what is left goes back to the
queue as batch failures, to come back at once."""

import json
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from nylorun.adapters.sqs import hold_failed_groups, process_groups_at_once
from nylorun.observability import logger, metrics, tracer
from nylorun.ports import Delivery
from nylorun.service.push import Outcome
from nylorun.wiring import build_runtime

runtime = build_runtime()
# A batch's message groups (at most ten) are processed side by side, each in order.
GROUPS_AT_ONCE = 10
delays: dict[str, int] = {}  # message group → seconds its failed messages wait, in this invocation
# Kept for what follows the last record (the batch answer, the visibility changes of failed groups).
RESERVE_SECONDS = 2.0
lambda_context: list[LambdaContext] = []  # this invocation's context, for each record's time check


class RetryLater(Exception):
    """Keeps the delivery (and the later ones of its group, in order) for another attempt."""


def seconds_left() -> float:
    """What a record may still take: the invocation's remaining time less the reserve."""
    return lambda_context[0].get_remaining_time_in_millis() / 1000 - RESERVE_SECONDS


def record_handler(record: SQSRecord) -> None:
    group = record.attributes.message_group_id or ""
    body = json.loads(record.body)
    # A delivery may take push_timeout_seconds (its overall deadline); it starts only if that much is left, so
    # a receiver is never cut short (and charged an attempt) because the batch ran out of time.
    needed = runtime.settings.push_timeout_seconds if "delivery" in body else 1
    if seconds_left() < needed:
        delays[group] = 0  # back at once, in order (the rest of its group with it), for the next invocation
        raise RetryLater("the invocation's time is nearly up")
    if "fanOut" in body:  # in the task's own group
        resumed = int(record.attributes.approximate_receive_count or 1) > 1
        if not runtime.push.fan_out(body["fanOut"], resumed=resumed).done:
            delays[group] = 0  # the next step, after the deliveries queued meanwhile (its task's events wait)
            raise RetryLater("fan-out continues")
    elif "delivery" in body:
        attempt = int(record.attributes.approximate_receive_count or 1)
        result = runtime.push.deliver(Delivery(**body["delivery"]), attempt)
        if result.outcome is Outcome.RETRY:
            delays[group] = result.delay_seconds
            raise RetryLater(result.reason)
    else:
        runtime.push.hand_off(body)  # an event the push rule of earlier versions queued (in its one group)
    # A FIFO group stays locked while any of its messages is in flight, and Lambda deletes a batch's
    # messages only once the whole batch has ended: a task's own group and a config's next delivery would wait for
    # the slowest delivery in the batch (another subject's receiver, up to push_timeout_seconds). A message handled
    # is deleted at once.
    runtime.push_queue.done(record.receipt_handle)


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    delays.clear()
    lambda_context[:] = [context]

    def process_group(group_event: dict[str, Any]) -> dict[str, Any]:
        processor = SqsFifoPartialProcessor(skip_group_on_error=True)
        # A group whose every message must wait is not an error: answer with all of them as failures (their delays
        # are then applied), instead of failing the invocation. The FIFO processor takes no such argument.
        processor.raise_on_entire_batch_failure = False
        return process_partial_response(
            event=group_event, record_handler=record_handler, processor=processor, context=context
        )

    response = process_groups_at_once(event, process_group, GROUPS_AT_ONCE)
    hold_failed_groups(event, response, delays, runtime.push_queue.retry_later)
    return response
