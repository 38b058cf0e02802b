"""One Logger, Tracer and Metrics for the whole Runtime (Powertools), shared by every module and handler.

The service name comes from POWERTOOLS_SERVICE_NAME (template Globals), "nylorun" by default.
"""

from __future__ import annotations

import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "nylorun"

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace="Nylorun", service=SERVICE)

# A request that records no metric is normal (a GetTask, a card fetch): not worth a warning per call.
warnings.filterwarnings("ignore", message="No application metrics to publish")
