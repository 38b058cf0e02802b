"""The model a tool loop calls: Amazon Bedrock's Converse API (one request shape for every model, tool use, and
token usage in every answer), or the local scripted stand-in (nylorun.models.scripted).

Throttling is retried here, inside the model call's effect, with capped exponential backoff and full jitter
(https://docs.aws.amazon.com/bedrock/latest/userguide/troubleshooting-api-error-codes.html: ThrottlingException
and ServiceUnavailableException are retryable; ModelNotReadyException while a model is being brought up).
botocore's own retries are off for this client, so the attempts are counted once, here, and tested.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from nylorun.models.prices import Price, cost_usd, price_table
from nylorun.observability import logger

RETRYABLE = frozenset({"ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException"})
# A model may take minutes to write a long answer; botocore's default read timeout (60 s) would cut it off.
# Bedrock's guidance is a long read timeout (https://docs.aws.amazon.com/bedrock/latest/userguide/troubleshooting-api-error-codes.html);
# the turn function's own timeout still bounds a call.
READ_TIMEOUT_SECONDS = 300


class Model(Protocol):
    model_id: str

    def converse(self, request: dict[str, Any]) -> dict[str, Any]:
        """Converse: `request` has messages, system, toolConfig; the model adds its id and settings."""
        ...

    def cost(self, usage: Mapping[str, Any]) -> float: ...


def bedrock_client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        config=Config(read_timeout=READ_TIMEOUT_SECONDS, retries={"total_max_attempts": 1, "mode": "standard"}),
    )


@dataclass
class Bedrock:
    """A Bedrock model (or inference profile) through Converse."""

    model_id: str
    max_tokens: int | None = None
    temperature: float | None = None
    guardrail: str = ""  # "identifier:version"
    prices: Mapping[str, Price] = field(default_factory=price_table)
    client: Any = None  # a bedrock-runtime client; made on first use
    attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 20.0
    sleep: Callable[[float], None] = time.sleep

    def converse(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.client is None:
            self.client = bedrock_client()
        request = {"modelId": self.model_id, **request}
        inference = {"maxTokens": self.max_tokens, "temperature": self.temperature}
        if any(v is not None for v in inference.values()):
            request["inferenceConfig"] = {k: v for k, v in inference.items() if v is not None}
        if self.guardrail:
            identifier, _, version = self.guardrail.rpartition(":")
            request["guardrailConfig"] = {"guardrailIdentifier": identifier, "guardrailVersion": version}
        for attempt in range(self.attempts):
            try:
                return dict(self.client.converse(**request))
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                if code not in RETRYABLE or attempt == self.attempts - 1:
                    raise
                delay = random.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))
                logger.warning("Bedrock busy; retrying", extra={"code": code, "attempt": attempt + 1, "delay": delay})
                self.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def cost(self, usage: Mapping[str, Any]) -> float:
        return cost_usd(self.prices, self.model_id, usage)
