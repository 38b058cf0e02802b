"""Lost outcomes end to end (docs/operate.md): an operator resolves a lost outcome with `nylorun admin --local PORT`
against the local Runtime (moto; the turn state machine really executes), while a caller watches over A2A.

The Agent (`crash_agent.billing`) charges a card; its first charge of each task dies mid-way (after the charge went
out, before its result was journaled), Step Functions retries the run, and the retry reports the outcome lost:
WORKING with effects/v1 `uncertain`, the task waiting for an operator and holding its context. A second message
in the same context queues behind it. The CLI runs in-process (`nylorun_client.command.main`).

The uncertainty deadline needs a Runtime whose setting is shrunk: `nylorun serve` in a subprocess with
NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS=8, and `nylorun admin` in a subprocess too, as an operator runs them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import crash_agent
import pytest
from a2a_caller import EFFECTS, PROFILE, state, status_ext
from conftest import A2A, ALICE, auth, nylorun_serve, poll, rpc, user_message
from nylorun.observability import logger
from nylorun.profile.status import UNKNOWN_OUTCOME_TEXT
from nylorun_client.command import main
from nylorun_local.lambda_shim import LambdaContext
from nylorun_local.runtime import LocalRuntime

pytestmark = pytest.mark.e2e

HERE = Path(__file__).parent
AGENT = "billing"


@pytest.fixture(scope="module")
def url(local_runtime: LocalRuntime) -> str:
    local_runtime.add_agent(crash_agent.agent)
    return local_runtime.agent_url(AGENT)


Admin = Callable[..., tuple[int, str, str]]



@pytest.fixture()
def admin(local_runtime: LocalRuntime, capsys: pytest.CaptureFixture[str]) -> Admin:
    """`nylorun admin --local PORT ARGS…` in-process: (exit code, stdout, stderr)."""

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(["admin", "--local", str(local_runtime.options.port), *args])
        seen = capsys.readouterr()
        return code, seen.out, seen.err

    return run


def headers() -> dict[str, str]:
    return auth(ALICE, **{"A2A-Extensions": ",".join(PROFILE)})


def send(url: str, text: str, context_id: str, headers_: dict[str, str] | None = None) -> dict[str, Any]:
    params = {"message": user_message(text, contextId=context_id), "configuration": {"returnImmediately": True}}
    answer = rpc(url, "SendMessage", params, headers=headers_ or headers())
    assert "result" in answer, answer
    return dict(answer["result"]["task"])


def get(url: str, task_id: str, headers_: dict[str, str] | None = None) -> dict[str, Any]:
    answer = rpc(url, "GetTask", {"id": task_id}, headers=headers_ or headers())
    assert "result" in answer, answer
    return dict(answer["result"])


def text_of(task: dict[str, Any]) -> str:
    return " ".join(p.get("text", "") for p in task["status"]["message"]["parts"])


def ended(task: dict[str, Any]) -> bool:
    return state(task) in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED")


def lost_with_one_queued(url: str) -> tuple[dict[str, Any], str]:
    """A task whose charge lost its outcome (as the caller sees it), and a turn queued behind it."""
    context = f"ctx-{uuid.uuid4()}"
    first = send(url, "charge my card", context)
    lost = poll(lambda: get(url, first["id"]), lambda t: status_ext(t, EFFECTS) is not None, timeout=60, every=0.3)
    assert state(lost) == "TASK_STATE_WORKING"
    queued = send(url, "next, please", context)
    assert state(queued) == "TASK_STATE_SUBMITTED"
    return lost, queued["id"]


def listed(admin: Admin, task_id: str) -> dict[str, Any] | None:
    code, out, err = admin("--json", "uncertain")
    assert code == 0, err
    return next((w for w in json.loads(out) if w["taskId"] == task_id), None)


def test_resolve_with_a_result_completes_the_task_and_the_queued_turn_runs_and_a_repeat_does_nothing(
    url: str, admin: Admin, local_runtime: LocalRuntime
) -> None:
    # Given a task whose charge lost its outcome, and a turn queued behind it in the same context
    lost, queued_id = lost_with_one_queued(url)
    key = status_ext(lost, EFFECTS)["uncertain"]
    # When the operator lists the tasks waiting
    waiting = listed(admin, lost["id"])
    # Then it is there, with its Agent, subject, context, age, the effect's name and its idempotency key
    assert waiting is not None
    assert (waiting["agent"], waiting["subject"], waiting["contextId"]) == (AGENT, "alice", lost["contextId"])
    assert waiting["effect"] == {**waiting["effect"], "name": "charge_card", "id": key}
    assert waiting["ageSeconds"] >= 0 and crash_agent.charges[lost["id"]] == [key]
    code, out, _ = admin("uncertain")
    assert code == 0 and "charge_card" in out and key in out

    # When the operator resolves it: the charge went through, with this result
    code, out, err = admin("resolve", lost["id"], key, "--result", '{"charged": "EUR 25 (checked in the PSP)"}')
    # Then the turn resumed and completed with that result, the charge never went out again
    assert code == 0, err
    assert f"task {lost['id']} resumed as attempt 1" in out
    done = poll(lambda: get(url, lost["id"]), ended, timeout=60, every=0.3)
    assert state(done) == "TASK_STATE_COMPLETED", done["status"]
    assert text_of(done) == "Charged: EUR 25 (checked in the PSP)"
    assert status_ext(done, EFFECTS) is None
    assert crash_agent.charges[lost["id"]] == [key]
    # And the turn queued behind it ran
    after = poll(lambda: get(url, queued_id), ended, timeout=60, every=0.3)
    assert state(after) == "TASK_STATE_COMPLETED" and text_of(after) == "next turn done"
    # And nobody waits any more
    assert listed(admin, lost["id"]) is None
    # And the resumed turn ran as its own execution, named by the task and its attempt; the lost attempt's, which
    # only waited for the deadline, was stopped
    assert local_runtime.stack is not None
    executions = local_runtime.stack.state_machine_arn.replace(":stateMachine:", ":execution:")
    sfn = local_runtime.aws.client("stepfunctions")
    resumed = poll(lambda: sfn.describe_execution(executionArn=f"{executions}:{lost['id']}-1")["status"],
                   lambda s: s != "RUNNING", timeout=20)
    assert resumed == "SUCCEEDED"
    assert sfn.describe_execution(executionArn=f"{executions}:{lost['id']}")["status"] == "ABORTED"

    # When the operator repeats the same resolution
    code, out, err = admin("resolve", lost["id"], key, "--result", '{"charged": "EUR 25 (checked in the PSP)"}')
    # Then nothing more is done: same answer, same history, no charge
    assert code == 0, err
    assert "already resolved this way (attempt 1): nothing more done" in out
    assert get(url, lost["id"]) == get(url, lost["id"]) and get(url, lost["id"])["history"] == done["history"]
    assert crash_agent.charges[lost["id"]] == [key]

    # And `show` gives the operator the journal (name, key, times, result) and who resolved it
    code, out, err = admin("--json", "show", lost["id"])
    assert code == 0, err
    view = json.loads(out)
    (effect,) = [s for s in view["journal"] if s["kind"] == "effect"]
    assert (effect["name"], effect["key"], effect["finished"]) == ("charge_card", key, True)
    assert effect["result"] == {"charged": "EUR 25 (checked in the PSP)"}
    assert effect["startedAt"] and effect["finishedAt"] and effect["startedAt"] <= effect["finishedAt"]
    (action,) = view["operatorActions"]  # the repeat wrote nothing
    assert action["action"] == "resolve" and action["operator"].startswith("local:")
    assert action["detail"] == {"effect": key, "how": "result", "result": {"charged": "EUR 25 (checked in the PSP)"}}
    assert view["task"]["attempt"] == 1 and view["task"]["uncertain"] is None


def test_resolve_not_done_runs_the_effect_once_more_with_the_same_key(url: str, admin: Admin) -> None:
    # Given a task whose charge lost its outcome
    lost, queued_id = lost_with_one_queued(url)
    key = status_ext(lost, EFFECTS)["uncertain"]
    # When the operator finds the charge never happened
    code, _out, err = admin("resolve", lost["id"], key, "--not-done")
    assert code == 0, err
    # Then the charge runs once more, with the same idempotency key, and the task completes
    done = poll(lambda: get(url, lost["id"]), ended, timeout=60, every=0.3)
    assert state(done) == "TASK_STATE_COMPLETED", done["status"]
    assert crash_agent.charges[lost["id"]] == [key, key]
    assert text_of(done) == "Charged: EUR 25"
    assert state(poll(lambda: get(url, queued_id), ended, timeout=60, every=0.3)) == "TASK_STATE_COMPLETED"


def test_fail_ends_the_task_with_the_reason_its_caller_reads_and_the_queued_turn_runs(url: str, admin: Admin) -> None:
    lost, queued_id = lost_with_one_queued(url)
    # When the operator fails it (--json, with the Runtime logging at INFO)
    logger.setLevel("INFO")
    try:
        code, out, err = admin("--json", "fail", lost["id"], "The charge was refunded by hand; please order again.")
    finally:
        logger.setLevel("WARNING")  # as tests/conftest.py sets it
    assert code == 0, err
    # Then stdout holds only the answer; the Runtime's log lines (the next turn started) went to stderr
    assert json.loads(out)["state"] == "TASK_STATE_FAILED"
    assert "next queued turn started" in err
    # Then the caller reads FAILED and the reason
    failed = get(url, lost["id"])
    assert state(failed) == "TASK_STATE_FAILED"
    assert text_of(failed) == "An operator ended this task: The charge was refunded by hand; please order again."
    assert crash_agent.charges[lost["id"]] == [status_ext(lost, EFFECTS)["uncertain"]]
    # And the turn queued behind it ran
    assert state(poll(lambda: get(url, queued_id), ended, timeout=60, every=0.3)) == "TASK_STATE_COMPLETED"
    # And a resolution now is refused in one line, exit 1
    code, out, err = admin("resolve", lost["id"], status_ext(lost, EFFECTS)["uncertain"], "--not-done")
    assert (code, out) == (1, "")
    assert err == f"nylorun admin: task {lost['id']} is not waiting for an operator (it is FAILED)\n"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--result", "{not json"], "--result is not JSON: ", id="bad-json"),
        pytest.param(["--not-done"], "is not the effect task", id="another-effect"),
    ],
)
def test_a_wrong_resolution_is_refused_in_one_line_and_changes_nothing(
    url: str, admin: Admin, args: list[str], expected: str
) -> None:
    lost, _ = lost_with_one_queued(url)
    effect = "eff-0123456789abcdef" if expected.startswith("is not the effect") else status_ext(lost, EFFECTS)["uncertain"]
    before = get(url, lost["id"])
    # When the operator gives a bad resolution
    code, out, err = admin("resolve", lost["id"], effect, *args)
    # Then it is refused in one line, exit 1, and the task still waits, unchanged, with nothing recorded
    assert code == 1 and out == "" and err.count("\n") == 1 and expected in err, err
    assert get(url, lost["id"]) == before
    assert json.loads(admin("--json", "show", lost["id"])[1])["operatorActions"] == []
    admin("fail", lost["id"], "test over")  # frees the context


def test_the_sweep_functions_gauge_counts_the_tasks_waiting_and_the_oldest_wait(
    url: str, admin: Admin, local_runtime: LocalRuntime
) -> None:
    # Given a task waiting for an operator
    lost, _ = lost_with_one_queued(url)
    waiting = len(json.loads(admin("--json", "uncertain")[1]))
    # When the sweep function runs with its 5-minute schedule's input
    sample = json.loads((HERE.parents[1] / "events" / "sweep-uncertain-gauge.json").read_text())
    sweep = local_runtime._functions["SweepFunction"]
    out = sweep.handler(sample, LambdaContext("nylorun-local-SweepFunction"))
    # Then it counts every task waiting (the UncertainTasks metric) and how long the oldest has (its age metric)
    assert out["uncertain"] == waiting >= 1 and out["oldestAgeSeconds"] > 0
    admin("fail", lost["id"], "test over")  # frees the context


def test_an_unknown_task_is_refused(admin: Admin) -> None:
    code, out, err = admin("show", "no-such-task")
    assert (code, out, err) == (1, "", "nylorun admin: no task no-such-task\n")


# ---------------------------------------------------------------- the deadline, with a shrunk setting
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, dict[str, str]]]:
    state_dir = str(tmp_path_factory.mktemp("state"))
    env = {**os.environ, "NYLORUN_AGENTS": "crash_agent:agent", "PYTHONPATH": str(HERE),
           "NYLORUN_UNCERTAINTY_TIMEOUT_SECONDS": "8", "NYLORUN_STATE_DIR": state_dir}
    with nylorun_serve(["--auth", "none", "--no-push", "--no-examples"], f"{AGENT}/.well-known/agent-card.json",
                       env=env) as base:
        port = int(base.split(":")[2].split("/")[0])
        yield f"{base}/{AGENT}", port, env


def test_nobody_resolving_within_the_deadline_fails_the_task_with_an_unknown_outcome_and_the_context_moves_on(
    served: tuple[str, int, dict[str, str]],
) -> None:
    url, port, env = served
    plain = {**A2A, "A2A-Extensions": ",".join(PROFILE)}
    # Given a Runtime whose uncertainty deadline is 8 s, and a task whose charge lost its outcome there
    context = f"ctx-{uuid.uuid4()}"
    first = send(url, "charge my card", context, plain)
    lost = poll(lambda: get(url, first["id"], plain), lambda t: status_ext(t, EFFECTS) is not None or ended(t),
                timeout=60, every=0.2)
    assert status_ext(lost, EFFECTS) is not None, lost["status"]
    queued = send(url, "next, please", context, plain)
    # And an operator sees it waiting (`nylorun admin --local PORT uncertain`, a process of its own)
    listing = subprocess.run(
        [sys.executable, "-m", "nylorun_client.command", "admin", "--local", str(port), "--json", "uncertain"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    assert any(w["taskId"] == first["id"] for w in json.loads(listing.stdout)), listing.stdout
    # When nobody resolves it for the deadline
    failed = poll(lambda: get(url, first["id"], plain), ended, timeout=60, every=0.3)
    # Then it FAILED, saying the step's outcome is unknown, and the turn queued behind it ran
    assert state(failed) == "TASK_STATE_FAILED", failed["status"]
    assert text_of(failed) == UNKNOWN_OUTCOME_TEXT
    after = poll(lambda: get(url, queued["id"], plain), ended, timeout=60, every=0.3)
    assert state(after) == "TASK_STATE_COMPLETED"
    # And it waits for nobody any more
    listing = subprocess.run(
        [sys.executable, "-m", "nylorun_client.command", "admin", "--local", str(port), "--json", "uncertain"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    assert all(w["taskId"] != first["id"] for w in json.loads(listing.stdout))
