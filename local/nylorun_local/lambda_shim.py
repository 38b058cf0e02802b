"""The Lambda shim: moto's Lambda invoke runs our handlers (the deployed code, loaded from `functions/`) in-process.

moto cannot run Lambda code without Docker, so `install_lambda_shim` routes moto's Lambda invoke (Step Functions'
task states call it) to the Python handlers registered here, one per execution environment. Written for moto
5.2.5 (pinned in pyproject.toml); tests/integration/test_local_aws.py fails loudly if it stops working.
"""

from __future__ import annotations

import contextvars
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from nylorun_local.account import ACCOUNT, REGION
from nylorun_local.moto.patching import installing

LambdaHandler = Callable[[dict[str, Any], Any], Any]

_handlers: dict[str, list[LambdaHandler]] = {}  # function name -> one handler per execution environment
_timeouts_ms: dict[str, int] = {}  # function name -> its Timeout
_DEFAULT_TIMEOUT_MS = 300_000  # a function registered without one
_shim_on = False


class LambdaContext:
    """The parts of Lambda's context object Powertools reads."""

    def __init__(self, name: str, timeout_ms: int | None = None) -> None:
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{name}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "local"
        # Counts down from the function's Timeout (the template's, as registered), as Lambda's does.
        self._ends = time.monotonic() + (timeout_ms or function_timeout_ms(name)) / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._ends - time.monotonic()) * 1000))


def register_handler(function_name: str, handler: LambdaHandler, timeout_seconds: int | None = None) -> None:
    """The function's (first) execution environment."""
    _handlers[function_name] = [handler]
    if timeout_seconds is not None:
        _timeouts_ms[function_name] = timeout_seconds * 1000


def function_timeout_ms(function_name: str) -> int:
    """The function's Timeout as registered (the template's), in milliseconds."""
    return _timeouts_ms.get(function_name, _DEFAULT_TIMEOUT_MS)


def add_environment(function_name: str, handler: LambdaHandler) -> int:
    """One more execution environment of a registered function (its own copy of the handler module): its number."""
    _handlers[function_name].append(handler)
    return len(_handlers[function_name]) - 1


def invoke_registered(function_name: str, event: dict[str, Any], environment: int = 0) -> tuple[Any, str | None]:
    """Run a registered handler, in that execution environment, as Lambda would: (result, None) or (error
    payload, "Unhandled")."""
    handler = _handlers[function_name][environment]
    try:
        # In a context of its own, as Lambda runs each invocation: the keys its handler gives its log lines
        # (nylorun.observability) stay its own, whichever thread invoked it.
        return contextvars.copy_context().run(handler, event, LambdaContext(function_name)), None
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - Lambda reports the error type and message, never our stack
        return {"errorType": type(exc).__name__, "errorMessage": str(exc)}, "Unhandled"
    except BaseException:  # noqa: BLE001 - the process died mid-invocation (simulated crashes)
        return {"errorType": "Runtime.ExitError", "errorMessage": "Runtime exited"}, "Unhandled"


def install_lambda_shim() -> None:
    """moto runs a Lambda function's code only in Docker: its invoke runs the Python handler registered here."""
    global _shim_on
    with installing:
        if _shim_on:
            return
        from moto.awslambda.models import LambdaBackend
        from moto.awslambda_simple.models import LambdaSimpleBackend

        original = LambdaBackend.invoke

        def invoke(
            self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
        ) -> Any:
            name = function_name.split(":")[6] if function_name.startswith("arn:") else function_name
            if name not in _handlers:
                return original(self, function_name, qualifier, body, headers, response_headers)
            event = json.loads(body) if body else {}
            result, error = invoke_registered(name, event)
            if error:
                response_headers["x-amz-function-error"] = error
            payload = json.dumps(result).encode()
            response_headers["Content-Length"] = str(len(payload))
            return payload

        LambdaBackend.invoke = invoke  # type: ignore[method-assign]
        LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
        _shim_on = True
