"""turn function: called by the turn state machine to run, park, expire or fail one turn."""

from aws_lambda_powertools.utilities.typing import LambdaContext
from nylorun.observability import logger, metrics, tracer
from nylorun.wiring import build_runtime

runtime = build_runtime()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    return dict(runtime.runner.handle(event))
