"""One Logger, Tracer and Metrics for the whole Runtime (Powertools), shared by every module and handler.

The service name comes from POWERTOOLS_SERVICE_NAME (template Globals), "nylorun" by default.

Tracing patches what X-Ray's `patch_all` patches, but each library only once something imports it: botocore at
once (every function makes AWS calls and boto3 loads it anyway), the others (requests, httpx, sqlite3, database
drivers) on their import. `patch_all` imports every one that is installed to patch it — httpx alone brings its
CLI's click, rich and pygments — in functions that never use them.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from types import ModuleType
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import MetricResolution, MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.metrics.metric import SingleMetric

SERVICE = "nylorun"
NAMESPACE = "Nylorun"

# X-Ray's patch name → the module whose import gets it patched (aws_xray_sdk.core.patcher.NO_DOUBLE_PATCH).
_PATCH_ON_IMPORT = {
    "aiobotocore": "aiobotocore",
    "pynamodb": "pynamodb",
    "requests": "requests",
    "sqlite3": "sqlite3",
    "mysql": "mysql.connector",
    "pymongo": "pymongo",
    "pymysql": "pymysql",
    "psycopg2": "psycopg2",
    "psycopg": "psycopg",
    "pg8000": "pg8000",
    "sqlalchemy_core": "sqlalchemy",
    "httpx": "httpx",
}


class _Metrics(Metrics):
    """Powertools' Metrics, safe to add to from several threads: the push function runs a batch's message groups
    side by side, and the EMF provider adds a metric by get-then-set (two threads adding a metric it did not hold yet
    kept one value: eight threads adding 14,400 counts lost 128 without this lock)."""

    _adding = threading.Lock()  # class-wide: every Metrics instance shares one metric set

    def add_metric(
        self, name: str, unit: MetricUnit | str, value: float, resolution: MetricResolution | int = 60
    ) -> None:
        # Disabled (the local Runtime), nothing is kept: Powertools would keep every value (its flush clears only what
        # it prints) and print the whole set on stdout at the 100th value of a metric, disabled or not, into
        # whatever else the process is printing (a CLI command's answer, say).
        if is_metrics_disabled():
            return
        with self._adding:
            super().add_metric(name=name, unit=unit, value=value, resolution=resolution)


class _KeysPerContext(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter whose keys (`append_keys`, the Lambda context's) belong to the running context
    (a thread, an asyncio task), not to the process.

    Deployed, each function is a process of its own, its invocations one after another: the same lines as
    Powertools' formatter. Locally every function runs in one process, side by side on threads: with one set of
    keys, a line took the function name (and task id) of whichever function had set them last. A context that set
    none has the keys the Logger was made with; a thread started by a function's code has its keys only when
    started in a copy of its context (`contextvars.copy_context`)."""

    def __init__(self, **kwargs: Any) -> None:
        self._keys: ContextVar[dict[str, Any] | None] = ContextVar("nylorun_log_keys", default=None)
        self._made_with: dict[str, Any] = {}
        super().__init__(**kwargs)

    @property
    def log_format(self) -> dict[str, Any]:
        keys = self._keys.get()
        return self._made_with if keys is None else keys

    @log_format.setter
    def log_format(self, keys: dict[str, Any]) -> None:
        self._keys.set(keys)

    # A new dict on each change: a context copied from this one (a thread it started) keeps its own.
    def append_keys(self, **additional_keys: Any) -> None:
        self.log_format = {**self.log_format, **additional_keys}

    def remove_keys(self, keys: Iterable[str]) -> None:
        gone = set(keys)
        self.log_format = {key: value for key, value in self.log_format.items() if key not in gone}

    def keep_as_made(self) -> None:
        """The keys this context holds now are those of every context that set none."""
        self._made_with = dict(self.log_format)


_formatter = _KeysPerContext()
logger = Logger(service=SERVICE, logger_formatter=_formatter)
_formatter.keep_as_made()
tracer = Tracer(service=SERVICE, patch_modules=["botocore"])
metrics = _Metrics(namespace=NAMESPACE, service=SERVICE)


@contextmanager
def log_keys(**keys: Any) -> Iterator[None]:
    """`keys` on every line the block logs in this context; after it the keys are as they were before it, so what
    the block itself appended (a turn's task id) is gone too. One set and one reset of the context's keys: per
    request, cheaper than `append_keys` and `remove_keys`, which copy them each."""
    token = _formatter._keys.set({**_formatter.log_format, **keys})
    try:
        yield
    finally:
        _formatter._keys.reset(token)


def _patch_on_import() -> None:
    if tracer.disabled:
        return
    from wrapt import when_imported  # X-Ray's own dependency: here only when tracing is on

    def patcher(name: str) -> Callable[[ModuleType], None]:
        return lambda _module: tracer.patch([name])

    for patch_name, module in _PATCH_ON_IMPORT.items():
        when_imported(module)(patcher(patch_name))


_patch_on_import()

# A request that records no metric is normal (a GetTask, a card fetch): not worth a warning per call.
warnings.filterwarnings("ignore", message="No application metrics to publish")


def count_rpc(method: str, *, failed: bool) -> None:
    """One JSON-RPC request answered (RpcRequests) and, when its answer is a JSON-RPC error, RpcErrors, both with
    a Method dimension. `method` must come from a fixed set (each dimension value is a metric CloudWatch bills).

    A `SingleMetric` of its own, not the shared `metrics`: a dimension added to that one would land on every other
    metric of the invocation, and locally one app serves requests on many threads. Each is made once per method
    and only serialized per request (printed as `single_metric` prints it, with that moment's timestamp): making
    one per request cost GetTask about a tenth of its time. Powertools prints a single metric even when metrics
    are disabled, so the disabled check is made here (the local Runtime disables them)."""
    if is_metrics_disabled():
        return
    _print_metric(_rpc_metric(name="RpcRequests", method=method))
    if failed:
        _print_metric(_rpc_metric(name="RpcErrors", method=method))


@cache
def _rpc_metric(name: str, method: str) -> SingleMetric:
    """Read-only once made (serializing only reads it), so one is shared by every thread."""
    metric = SingleMetric(namespace=NAMESPACE)
    metric.add_metric(name=name, unit=MetricUnit.Count, value=1)
    for dimension, value in (("service", SERVICE), ("Method", method)):
        metric.add_dimension(name=dimension, value=value)
    return metric


def _print_metric(metric: SingleMetric) -> None:
    print(json.dumps(metric.serialize_metric_set(), separators=(",", ":")))  # as single_metric prints it
