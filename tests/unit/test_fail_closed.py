"""Fail closed: on AWS Lambda only API Gateway's JWT authorizer says who calls. `NYLORUN_AUTH=dev` or
`none` set on a deployed function by mistake would let every caller act as one subject (or as any dev token's),
so the settings refuse them there and the function fails its cold start. Under `sam local` (which runs no JWT
authorizer, and sets AWS_SAM_LOCAL) and outside Lambda (`nylorun serve`, tests) they stay allowed.

Settings.from_env is what every function's cold start calls (wiring.build_runtime); the api function itself is
imported under these environments in tests/static/test_fail_closed_start.py.
"""

from __future__ import annotations

import pytest
from nylorun.settings import Settings
from pydantic import ValidationError

DEV_TOKEN = "tok-unit-secret-never-logged"
RUNTIME_KEY_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:runtime-key"


@pytest.fixture()
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """A clean slate: none of the variables that tell Lambda, sam local and the auth mode apart."""
    for name in ("AWS_LAMBDA_FUNCTION_NAME", "AWS_SAM_LOCAL", "NYLORUN_AUTH", "NYLORUN_DEV_TOKENS", "NYLORUN_RUNTIME_KEY"):
        monkeypatch.delenv(name, raising=False)
    # The template gives every function the Runtime's key; test_without_the_runtime_key_… takes it away.
    monkeypatch.setenv("NYLORUN_RUNTIME_KEY_ARN", RUNTIME_KEY_ARN)
    return monkeypatch


@pytest.mark.parametrize("mode", ["none", "dev"])
def test_on_lambda_an_auth_mode_other_than_jwt_refuses_to_start(env: pytest.MonkeyPatch, mode: str) -> None:
    # Given a deployed function's environment (Lambda sets AWS_LAMBDA_FUNCTION_NAME; sam local is not running)
    env.setenv("AWS_LAMBDA_FUNCTION_NAME", "nylorun-runtime-dev-ApiFunction-AbC123")
    env.setenv("NYLORUN_AUTH", mode)
    env.setenv("NYLORUN_DEV_TOKENS", f"{DEV_TOKEN}=alice")
    # When the cold start reads the settings
    with pytest.raises(ValidationError) as refused:
        Settings.from_env()
    # Then it fails, saying what is wrong and what to set, without the dev token (a secret) in the message
    message = str(refused.value)
    assert f"NYLORUN_AUTH={mode} is refused on AWS Lambda" in message
    assert "set NYLORUN_AUTH=jwt" in message
    assert DEV_TOKEN not in message


@pytest.mark.parametrize("mode", ["dev", "none"])
def test_under_sam_local_the_local_auth_modes_are_allowed(env: pytest.MonkeyPatch, mode: str) -> None:
    # Given sam local's container (it sets AWS_LAMBDA_FUNCTION_NAME and AWS_SAM_LOCAL=true) with a local mode
    env.setenv("AWS_LAMBDA_FUNCTION_NAME", "ApiFunction")
    env.setenv("AWS_SAM_LOCAL", "true")
    env.setenv("NYLORUN_AUTH", mode)
    env.setenv("NYLORUN_DEV_TOKENS", f"{DEV_TOKEN}=alice")
    # When the cold start reads the settings
    settings = Settings.from_env()
    # Then the mode is the one set, and dev tokens name their subjects
    assert settings.auth == mode
    assert settings.dev_tokens == {DEV_TOKEN: "alice"}


@pytest.mark.parametrize("mode", ["dev", "none", "jwt"])
def test_outside_lambda_every_auth_mode_is_allowed_as_before(env: pytest.MonkeyPatch, mode: str) -> None:
    # Given no Lambda at all (`nylorun serve`, the tests, the TCK's `--auth none`)
    env.setenv("NYLORUN_AUTH", mode)
    # When the settings are read
    # Then the mode is the one set
    assert Settings.from_env().auth == mode


def test_on_lambda_jwt_starts(env: pytest.MonkeyPatch) -> None:
    # Given a deployed function with the template's auth mode (and one without any: jwt is the default)
    env.setenv("AWS_LAMBDA_FUNCTION_NAME", "nylorun-runtime-dev-ApiFunction-AbC123")
    assert Settings.from_env().auth == "jwt"
    env.setenv("NYLORUN_AUTH", "jwt")
    # When the settings are read
    # Then they are
    assert Settings.from_env().auth == "jwt"


def test_sam_local_set_to_false_does_not_open_the_local_modes(env: pytest.MonkeyPatch) -> None:
    # Given a deployed function where someone wrote AWS_SAM_LOCAL=false
    env.setenv("AWS_LAMBDA_FUNCTION_NAME", "nylorun-runtime-dev-ApiFunction-AbC123")
    env.setenv("AWS_SAM_LOCAL", "false")
    env.setenv("NYLORUN_AUTH", "none")
    # When the settings are read
    # Then they are still refused
    with pytest.raises(ValidationError, match="NYLORUN_AUTH=none is refused"):
        Settings.from_env()


@pytest.mark.parametrize("sam_local", ["true", ""])
def test_on_lambda_without_the_runtime_key_a_function_refuses_to_start(env: pytest.MonkeyPatch, sam_local: str) -> None:
    # Given a function (deployed, or under sam local) whose environment lost NYLORUN_RUNTIME_KEY_ARN
    env.setenv("AWS_LAMBDA_FUNCTION_NAME", "nylorun-runtime-dev-ApiFunction-AbC123")
    env.setenv("AWS_SAM_LOCAL", sam_local)
    env.delenv("NYLORUN_RUNTIME_KEY_ARN")
    # When the cold start reads the settings
    # Then it fails: each instance would key subjects its own way and find no task again (docs/security.md)
    with pytest.raises(ValidationError, match="NYLORUN_RUNTIME_KEY_ARN is not set"):
        Settings.from_env()
