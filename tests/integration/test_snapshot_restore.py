"""SnapStart: every copy of the api function Lambda restores from one snapshot runs the after-restore hook, so no two
copies share random state or ids, and none serves a secret cached before the snapshot
(https://docs.aws.amazon.com/lambda/latest/dg/snapstart-uniqueness.html).

Simulated as Lambda does it: a stand-in `snapshot_restore_py` records the hooks functions/api/app.py registers; the
"snapshot" is this process once the module is imported and has served a request (so it holds a cached secret and an
open connection); each "restored copy" is an os.fork() of it that runs the recorded hooks, then serves requests.
A fork is not quite a restore: CPython reseeds `random` in a forked child (os.register_at_fork), which a snapshot's
restore never does, so each copy first puts back the state it was forked with.
"""

from __future__ import annotations

import base64
import copy
import importlib.util
import json
import os
import random
import secrets
import sys
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from nylorun.api.app import PUSH_SIGNING_PATH
from nylorun.domain.signing import subject_secret
from nylorun_local.lambda_shim import LambdaContext
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]


def whsec() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


OLD, NEW = whsec(), whsec()


@dataclass
class Snapshot:
    module: ModuleType
    hooks: list[Callable[[], object]]
    rotate: Callable[[str], None]


def keys_event(sub: str) -> dict[str, Any]:
    """GET /v1/a2a/push-signing-secrets as API Gateway hands it over, the JWT authorizer's `sub` in the claims."""
    event = copy.deepcopy(json.loads((REPO_ROOT / "events/api-send-message.json").read_text()))
    event.update(rawPath=PUSH_SIGNING_PATH, routeKey=f"GET {PUSH_SIGNING_PATH}", body=None, pathParameters=None)
    event["requestContext"]["http"].update(method="GET", path=PUSH_SIGNING_PATH)
    event["requestContext"]["routeKey"] = f"GET {PUSH_SIGNING_PATH}"
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = sub
    return dict(event)


def signing_keys(module: ModuleType, sub: str) -> list[str]:
    out = module.handler(keys_event(sub), LambdaContext("nylorun-local-ApiFunction"))
    assert out["statusCode"] == 200, out
    return list(json.loads(out["body"])["secrets"])


@pytest.fixture()
def snapshot(local_runtime: LocalRuntime) -> Iterator[Snapshot]:
    """functions/api/app.py imported as deployed (jwt, the push secret in Secrets Manager), its hooks recorded, and
    alice's keys served once: the state a snapshot would hold."""
    client = local_runtime.aws.client("secretsmanager")
    arn = client.create_secret(Name=f"push-{uuid.uuid4().hex}", SecretString=OLD)["ARN"]
    hooks: list[Callable[[], object]] = []
    stand_in = ModuleType("snapshot_restore_py")
    stand_in.register_after_restore = lambda hook, *args, **kwargs: hooks.append(hook)  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as env:
        env.setitem(sys.modules, "snapshot_restore_py", stand_in)
        env.setenv("NYLORUN_AUTH", "jwt")
        env.setenv("NYLORUN_PUSH_SECRET_ARN", arn)
        env.delenv("NYLORUN_PUSH_SECRET", raising=False)
        spec = importlib.util.spec_from_file_location(
            f"nylorun_api_snap_{uuid.uuid4().hex}", REPO_ROOT / "functions/api/app.py"
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    assert signing_keys(module, "alice") == [subject_secret(OLD, "alice")]
    yield Snapshot(module, hooks, lambda value: client.put_secret_value(SecretId=arn, SecretString=value) and None)
    client.delete_secret(SecretId=arn, ForceDeleteWithoutRecovery=True)


def restored_copy(snap: Snapshot) -> dict[str, Any]:
    """One copy restored from the snapshot: a fork of this process that runs the after-restore hooks, as Lambda
    does before the copy's first request, then reports what it draws and serves."""
    snapshot_random = random.getstate()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the restored copy: never returns into pytest
        code = 1
        try:
            os.close(read)
            random.setstate(snapshot_random)  # as restored: the memory of the snapshot, not fork's reseed
            for hook in snap.hooks:
                hook()
            seen = {
                "jitter": [random.random() for _ in range(4)],
                "id": str(uuid.uuid4()),
                "keys": signing_keys(snap.module, "alice"),
            }
            code = 0
        except BaseException:  # noqa: BLE001 - the parent reports it
            seen = {"error": traceback.format_exc()}
        with os.fdopen(write, "w") as out:
            out.write(json.dumps(seen))
        os._exit(code)
    os.close(write)
    with os.fdopen(read) as got:
        seen = json.loads(got.read() or "{}")
    os.waitpid(pid, 0)
    assert "error" not in seen, seen.get("error")
    return dict(seen)


def test_two_restored_copies_draw_their_own_random_numbers_and_ids(snapshot: Snapshot) -> None:
    # Given the api function's state once initialized (the snapshot)
    # When two copies are restored from it
    first, second = restored_copy(snapshot), restored_copy(snapshot)
    # Then their retry jitter differs (one shared `random` state retries every copy in step), and so do their ids
    assert first["jitter"] != second["jitter"]
    assert first["id"] != second["id"]


def test_a_restored_copy_serves_the_secret_rotated_after_the_snapshot(snapshot: Snapshot) -> None:
    # Given the snapshot holds alice's keys derived from the old push secret (read within its 5-minute max age)
    # When the secret is rotated after the snapshot, and a copy is restored and asked for alice's keys
    snapshot.rotate(NEW)
    copy_ = restored_copy(snapshot)
    # Then it reads the secret again and hands her the key derived from the new one, not the cached old one
    assert copy_["keys"] == [subject_secret(NEW, "alice")]
