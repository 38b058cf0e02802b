"""The console: a local web page where a person works with any A2A 1.0 Agent (docs/console.md).

`console_app()` builds the Starlette app; `nylorun console` serves it on loopback and `nylorun serve` mounts it at
`/console`. It ships with the client, never in the Lambda layer.
"""

from nylorun_client.console.app import console_app

__all__ = ["console_app"]
