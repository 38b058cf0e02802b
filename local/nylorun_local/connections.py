"""The connection providers a local Runtime declares (docs/writing/connections.md): those in `--connections
FILE` (a JSON list, as NYLORUN_CONNECTION_PROVIDERS), and with the examples, the example payments provider it
runs on loopback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CALLBACK_PATH = "/v1/a2a/connections/callback"  # nylorun.service.connections: the one redirect URI


def provider_env(base_url: str, file: str | None, examples: bool) -> tuple[dict[str, str], Any]:
    """The environment that declares them, and the example provider it started (None without the examples)."""
    providers: list[dict[str, Any]] = json.loads(Path(file).read_text()) if file else []
    env: dict[str, str] = {}
    example = None
    if examples and not any(p.get("name") == "payments" for p in providers):
        from nylorun_examples.payments_provider import ExamplePaymentsProvider

        example = ExamplePaymentsProvider().start(base_url + CALLBACK_PATH)
        providers.append(example.declaration())
        env["NYLORUN_EXAMPLE_PAYMENTS_URL"] = example.url
    if providers:
        env["NYLORUN_CONNECTION_PROVIDERS"] = json.dumps(providers)
    return env, example
