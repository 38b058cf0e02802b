"""X-Ray never records what the api function answers: its responses carry callers' messages, artifacts
and presigned file URLs, and Powertools' Tracer puts a handler's response into the trace as metadata unless
`capture_response=False`. The other functions answer with ids and counts only (batch item failures, a turn's
outcome, the sweep's count), which may stay in their traces.

Behavioural: the real handler runs under a recording X-Ray provider, with the ASGI app swapped for one whose
answer holds a marker; the trace must hold the handler's subsegment but not the marker. The broken copy (the
handler without `capture_response=False`) shows the check failing.
"""

from __future__ import annotations

import importlib.util
import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from nylorun.observability import tracer
from nylorun_local.lambda_shim import LambdaContext

API_APP = Path(__file__).resolve().parents[2] / "functions" / "api" / "app.py"
MARKER = "caller-secret-text https://bucket.s3.amazonaws.com/file?X-Amz-Signature=abc"


class Subsegment:
    def __init__(self, name: str) -> None:
        self.name = name
        self.metadata: list[tuple[str, Any]] = []
        self.annotations: dict[str, Any] = {}

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        self.metadata.append((key, value))

    def put_annotation(self, key: str, value: Any) -> None:
        self.annotations[key] = value


class RecordingProvider:
    """Stands in for the X-Ray SDK: every subsegment the tracer opens, with what was put on it."""

    def __init__(self) -> None:
        self.subsegments: list[Subsegment] = []

    @contextmanager
    def in_subsegment(self, name: str, **_: Any) -> Iterator[Subsegment]:
        subsegment = Subsegment(name)
        self.subsegments.append(subsegment)
        yield subsegment


def load_api(source: str, tmp_path: Path) -> ModuleType:
    path = tmp_path / "app.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"nylorun_api_tracing_{uuid.uuid4().hex}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def broken_copy(source: str) -> str:
    """The api handler as it was: the tracer's default, which captures the response."""
    assert "@tracer.capture_lambda_handler(capture_response=False)" in source
    return source.replace("@tracer.capture_lambda_handler(capture_response=False)", "@tracer.capture_lambda_handler")


@pytest.mark.parametrize(("variant", "recorded"), [("as shipped", False), ("broken copy", True)])
def test_the_api_handler_keeps_its_response_out_of_the_trace(
    variant: str, recorded: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the api function (or its broken copy) under a recording X-Ray provider, answering with caller content
    monkeypatch.setenv("NYLORUN_AUTH", "jwt")
    source = API_APP.read_text()
    api = load_api(source if variant == "as shipped" else broken_copy(source), tmp_path)
    provider = RecordingProvider()
    monkeypatch.setattr(tracer, "provider", provider)
    answer = {"statusCode": 200, "headers": {"content-type": "application/json"}, "body": json.dumps({"text": MARKER})}
    monkeypatch.setattr(api, "_asgi", lambda event, context: answer)
    event = json.loads((API_APP.parents[2] / "events" / "api-get-card.json").read_text())

    # When Lambda invokes the handler
    assert api.handler(event, LambdaContext("nylorun-unit-ApiFunction")) == answer

    # Then the trace has the handler's subsegment, annotated as usual
    [subsegment] = provider.subsegments
    assert subsegment.name == "## handler"
    assert subsegment.annotations["Service"] == "nylorun"
    # And the answer is in it only when the response is captured (the broken copy)
    assert (MARKER in json.dumps(subsegment.metadata)) is recorded
