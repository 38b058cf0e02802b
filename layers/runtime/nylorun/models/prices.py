"""What a model call costs: tokens from Converse's `usage` times a per-model price (US dollars per million tokens).

The defaults are Amazon Bedrock's on-demand prices in US East (N. Virginia) for the models
docs/writing/model-agents.md documents, from https://aws.amazon.com/bedrock/pricing/ as published in June
2025. They were NOT re-read from this repository's build machines (they reach no AWS page): check the page
before relying on a cost figure, and set NYLORUN_MODEL_PRICES to your own (a model id absent from both reports
its tokens at cost 0, logged). Cache reads and writes, batch and provisioned throughput are priced otherwise
and not counted here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from nylorun.observability import logger


class Price(BaseModel):
    model_config = ConfigDict(frozen=True)

    input: float  # USD per million input tokens
    output: float  # USD per million output tokens


DEFAULT_PRICES: dict[str, Price] = {
    "amazon.nova-micro-v1:0": Price(input=0.035, output=0.14),
    "amazon.nova-lite-v1:0": Price(input=0.06, output=0.24),
    "amazon.nova-pro-v1:0": Price(input=0.80, output=3.20),
    "anthropic.claude-3-haiku-20240307-v1:0": Price(input=0.25, output=1.25),
    "anthropic.claude-3-5-haiku-20241022-v1:0": Price(input=0.80, output=4.00),
    "anthropic.claude-3-7-sonnet-20250219-v1:0": Price(input=3.00, output=15.00),
    "anthropic.claude-sonnet-4-20250514-v1:0": Price(input=3.00, output=15.00),
}

# A cross-Region inference profile id is the model id behind a geography prefix
# (https://docs.aws.amazon.com/bedrock/latest/userguide/inference-profiles-support.html); priced as the model.
_PROFILE_PREFIXES = ("us.", "eu.", "apac.", "us-gov.", "global.")


def price_table(overrides: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Price]:
    """The defaults with the setting's prices (NYLORUN_MODEL_PRICES) over them."""
    return {**DEFAULT_PRICES, **{model: Price.model_validate(price) for model, price in (overrides or {}).items()}}


def cost_usd(prices: Mapping[str, Price], model_id: str, usage: Mapping[str, Any]) -> float:
    """What one call cost, from its Converse `usage` (inputTokens, outputTokens)."""
    price = prices.get(model_id)
    if price is None and model_id.startswith(_PROFILE_PREFIXES):
        price = prices.get(model_id.split(".", 1)[1])
    if price is None:
        logger.warning("no price for model; its cost is reported as 0", extra={"model_id": model_id})
        return 0.0
    return (int(usage.get("inputTokens", 0)) * price.input + int(usage.get("outputTokens", 0)) * price.output) / 1e6
