"""One Logger, Tracer and Metrics for the whole Runtime (Powertools), shared by every module and handler.

The service name comes from POWERTOOLS_SERVICE_NAME (template Globals), "nylorun" by default.

Tracing patches what X-Ray's `patch_all` patches, but each library only once something imports it: botocore at
once (every function makes AWS calls and boto3 loads it anyway), the others (requests, httpx, sqlite3, database
drivers) on their import. `patch_all` imports every one that is installed to patch it — httpx alone brings its
CLI's click, rich and pygments — in functions that never use them.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from types import ModuleType

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.metrics import MetricResolution, MetricUnit, single_metric
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

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


logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE, patch_modules=["botocore"])
metrics = _Metrics(namespace=NAMESPACE, service=SERVICE)


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

    `single_metric`, not the shared `metrics`: a dimension added to that one would land on every other metric of
    the invocation, and locally one app serves requests on many threads. Powertools prints a single metric even
    when metrics are disabled, so the disabled check is made here (the local Runtime disables them)."""
    if is_metrics_disabled():
        return
    dimensions = {"service": SERVICE, "Method": method}
    with single_metric(
        name="RpcRequests", unit=MetricUnit.Count, value=1, namespace=NAMESPACE, default_dimensions=dimensions
    ):
        pass
    if failed:
        with single_metric(
            name="RpcErrors", unit=MetricUnit.Count, value=1, namespace=NAMESPACE, default_dimensions=dimensions
        ):
            pass
