"""sweep function (daily): removes push configs whose task no longer exists (a config lives as long as its
task; configs of ended tasks also expire by TTL)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from nylorun.observability import logger, metrics, tracer
from nylorun.wiring import build_runtime

runtime = build_runtime()


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    removed = runtime.store.sweep_push_configs()
    metrics.add_metric(name="PushConfigsSwept", unit="Count", value=removed)
    return {"removed": removed}
