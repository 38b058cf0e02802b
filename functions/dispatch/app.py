"""dispatch function: drains the context queue (SQS FIFO), the durable backstop that starts queued turns.

Powertools' FIFO processor with skip_group_on_error: a context that is still busy keeps its message (and
every later one of that context) for a later try, while other contexts' messages go on.
"""

import json
from typing import Any

from aws_lambda_powertools.utilities.batch import SqsFifoPartialProcessor, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from nylorun.adapters.sqs import hold_failed_groups
from nylorun.observability import logger, metrics, tracer
from nylorun.service.scheduler import ContextStillBusy
from nylorun.wiring import build_runtime

runtime = build_runtime()
processor = SqsFifoPartialProcessor(skip_group_on_error=True)
# A batch whose every message must wait is not an error: answer with all of them as failures (their delays
# are then applied), instead of failing the invocation. The FIFO processor takes no such argument.
processor.raise_on_entire_batch_failure = False
delays: dict[str, int] = {}  # message group → seconds its failed messages wait, in this invocation


def record_handler(record: SQSRecord) -> None:
    task_id = str(json.loads(record.body)["taskId"])
    try:
        runtime.scheduler.dispatch(task_id)
    except ContextStillBusy:
        # Look again later; the turn ending before it will normally have started it long before then.
        delays[record.attributes.message_group_id or ""] = runtime.settings.dispatch_retry_seconds
        raise


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    delays.clear()
    response = process_partial_response(event=event, record_handler=record_handler, processor=processor, context=context)
    hold_failed_groups(event, response, delays, runtime.queue.retry_later)
    return response
