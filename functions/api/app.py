"""api function: API Gateway → Mangum → the FastAPI app (Agent Cards and JSON-RPC). Turns run in the turn
function; the only agent code that runs here is an Agent's optional `direct` answer (stateless, no side
effects: see `Agent.direct` in nylorun/engine/agent.py)."""

from aws_lambda_powertools.utilities.typing import LambdaContext
from mangum import Mangum
from nylorun.api.startup_heap import freeze_startup_heap
from nylorun.observability import logger, metrics, tracer
from nylorun.snapshot import after_restore
from nylorun.wiring import build_runtime

runtime = build_runtime()  # once per cold start
_asgi = Mangum(runtime.app(), lifespan="off")
# SnapStart (docs/deploy.md "SnapStart"): each copy restored from the snapshot of this init remakes its random
# state, AWS clients and secrets.
after_restore(runtime.after_restore)
freeze_startup_heap()  # Mangum runs no lifespan: frozen here, at the end of init


@logger.inject_lambda_context(clear_state=True)
# The answer holds callers' messages, artifacts and presigned file URLs: never into X-Ray (Powertools' Tracer
# records a handler's response as trace metadata by default).
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    return _asgi(event, context)
