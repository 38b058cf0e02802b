"""The api function as `sam local` runs it (docs/deploy.md#test-with-sam-local), in-process:
functions/api/app.py imported with events/env.json's ApiFunction variables (the dev mode, its tokens, the
Agents) beside what sam local sets (AWS_SAM_LOCAL=true, AWS_LAMBDA_FUNCTION_NAME), the local stack's moto
resources standing in for the dev stack's (env.json's `stack:` placeholders). `sam local invoke` hands it the
sample events as they are; `sam local start-api` runs no JWT authorizer, so its events carry no claims, only
the caller's headers.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from nylorun_local.lambda_shim import LambdaContext
from nylorun_local.runtime import LocalRuntime
from pydantic import ValidationError

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ROOT / "events"
SAM_LOCAL = {"AWS_SAM_LOCAL": "true", "AWS_LAMBDA_FUNCTION_NAME": "ApiFunction"}


def env_json_api() -> dict[str, str]:
    """env.json's ApiFunction variables but the stack placeholders (the local stack's values stay in force)."""
    given = json.loads((EVENTS / "env.json").read_text())["ApiFunction"]
    return {name: value for name, value in given.items() if not value.startswith("stack:")}


def import_api(env: dict[str, str]) -> ModuleType:
    """A cold start of functions/api/app.py with `env` over the local stack's environment."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        spec = importlib.util.spec_from_file_location(f"nylorun_api_sam_local_{uuid.uuid4().hex}", ROOT / "functions/api/app.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


@pytest.fixture(scope="module")
def api(local_runtime: LocalRuntime) -> ModuleType:
    return import_api({**env_json_api(), **SAM_LOCAL})


def invoke(api: ModuleType, event: dict[str, Any]) -> tuple[int, Any]:
    out = api.handler(event, LambdaContext("ApiFunction"))
    body = base64.b64decode(out["body"]).decode() if out.get("isBase64Encoded") else out.get("body") or ""
    return int(out["statusCode"]), json.loads(body) if body else None


def send_message_event(text: str) -> dict[str, Any]:
    """events/api-send-message.json with a fresh messageId (so each run makes its own task)."""
    event = dict(json.loads((EVENTS / "api-send-message.json").read_text()))
    body = json.loads(event["body"])
    body["params"]["message"].update(messageId=f"m-{uuid.uuid4()}", parts=[{"text": text}])
    event["body"] = json.dumps(body)
    return event


def owner_subject(local_runtime: LocalRuntime, task_id: str) -> str:
    assert local_runtime.runtime is not None
    record = local_runtime.runtime.store.get(task_id)
    assert record is not None
    return record.owner.subject


def test_under_sam_local_the_api_runs_in_the_dev_mode(api: ModuleType) -> None:
    assert api.runtime.settings.auth == "dev"


def test_the_sample_events_answer_as_deployed(api: ModuleType, local_runtime: LocalRuntime) -> None:
    # Given the api function under sam local with env.json (`sam local invoke ApiFunction -e events/…`)
    # When it gets the card sample
    status, card = invoke(api, json.loads((EVENTS / "api-get-card.json").read_text()))
    # Then it is echo's card
    assert status == 200 and card["name"] == "echo"
    # When it gets the SendMessage sample, whose bearer token is an env.json dev token
    event = send_message_event("hello from sam local")
    claims_sub = event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"]
    status, answer = invoke(api, event)
    # Then the echo turn completed, and the task belongs to the subject the sample's claims name, as deployed
    assert status == 200 and "error" not in answer, answer
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert owner_subject(local_runtime, task["id"]) == claims_sub == "user-sample-0001"


@pytest.mark.parametrize(("authorization", "subject"), [("Bearer local-alice", "alice"), ("Bearer local-bob", "bob")])
def test_start_api_requests_carry_no_claims_and_the_dev_token_names_the_caller(
    api: ModuleType, local_runtime: LocalRuntime, authorization: str, subject: str
) -> None:
    # Given a request as `sam local start-api` passes it: no authorizer ran, so no claims; the caller's header
    event = copy.deepcopy(send_message_event("via start-api"))
    del event["requestContext"]["authorizer"]
    event["headers"]["authorization"] = authorization
    # When the api function serves it
    status, answer = invoke(api, event)
    # Then the task belongs to the dev token's subject
    assert status == 200 and "error" not in answer, answer
    assert owner_subject(local_runtime, answer["result"]["task"]["id"]) == subject


@pytest.mark.parametrize("authorization", [None, "Bearer not-a-dev-token"])
def test_start_api_requests_without_a_dev_token_are_unauthenticated(api: ModuleType, authorization: str | None) -> None:
    # Given a start-api request with no bearer token, or one env.json does not list
    event = copy.deepcopy(send_message_event("nobody"))
    del event["requestContext"]["authorizer"]
    event["headers"].pop("authorization")
    if authorization:
        event["headers"]["authorization"] = authorization
    # When the api function serves it
    status, _ = invoke(api, event)
    # Then it is a 401
    assert status == 401


def test_env_json_outside_sam_local_refuses_to_start(local_runtime: LocalRuntime) -> None:
    # Given env.json's api variables on Lambda but without sam local (someone copied them onto a deployed function)
    # When the api function starts
    # Then its cold start fails: the dev mode is refused
    with pytest.raises(ValidationError, match="NYLORUN_AUTH=dev is refused on AWS Lambda"):
        import_api({**env_json_api(), "AWS_LAMBDA_FUNCTION_NAME": "ApiFunction"})
