"""The `assistant` example (examples/nylorun_examples/assistant.py) on the scripted stand-in model, as
`nylorun serve --model scripted` serves it; docs/writing/model-agents.md shows its code verbatim."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from nylorun.models import Bedrock, Scripted, model_from_settings
from nylorun.models.scripted import NOTICE
from nylorun.profile.extensions import PROFILE_EXTENSIONS
from nylorun.protocol.models import TaskState
from nylorun.service.a2a import Caller
from nylorun.settings import Settings
from nylorun_examples import assistant
from nylorun_examples.support import REFUNDS
from nylorun_local.runtime import ASSISTANT_AGENT, EXAMPLE_AGENTS, agent_refs
from unit_support import SUBJECT, answer, open_interaction, runtime, state, status_text

ROOT = Path(__file__).resolve().parents[2]
CALLER = Caller(subject=SUBJECT, agent="assistant", extensions=tuple(PROFILE_EXTENSIONS))


@pytest.fixture(autouse=True)
def scripted_model(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("NYLORUN_MODEL", "scripted")
    yield


def test_the_assistant_answers_from_its_lookup_tool_and_says_it_is_scripted() -> None:
    # Given the assistant on the scripted stand-in
    rt = runtime(assistant.agent)
    # When a caller asks about an order
    task = rt.send("What is order A-1002?", caller=CALLER)
    # Then the reply says which model answered, and carries what the lookup found
    assert state(task) == TaskState.COMPLETED
    assert status_text(task) == NOTICE + "Order A-1002 is one Grinder, 89.50 EUR."


@pytest.mark.parametrize("approved", [True, False])
def test_the_assistant_refunds_only_what_a_person_approves(approved: bool) -> None:
    rt = runtime(assistant.agent)
    before = dict(REFUNDS)
    # Given a refund request: the assistant asks with its author's prompt
    task = rt.send("Please refund A-1001", caller=CALLER)
    assert state(task) == TaskState.AUTH_REQUIRED
    assert open_interaction(task)["prompt"] == "Refund order A-1001 in full?"
    # When the person answers
    done = rt.send(caller=CALLER, **answer(task, approved=approved))
    # Then one refund was issued if approved, none if denied, and the reply says which
    new = {k: v for k, v in REFUNDS.items() if k not in before}
    assert state(done) == TaskState.COMPLETED
    if approved:
        assert len(new) == 1 and status_text(done) == NOTICE + "Order A-1001 (Espresso machine) is refunded: 249.00 EUR."
    else:
        assert new == {} and status_text(done) == NOTICE + "I did not refund order A-1001: the refund was not approved."


def test_the_assistant_asks_which_order_when_none_is_named() -> None:
    rt = runtime(assistant.agent)
    # Given a refund request that names no order: the model asks the person (the built-in ask_person)
    task = rt.send("Please refund my order", caller=CALLER)
    assert state(task) == TaskState.INPUT_REQUIRED
    assert status_text(task) == "Which order do you mean? Give me its id, for example A-1001."
    # When the person answers with an order id
    asked = rt.send(caller=CALLER, **answer(task, value="a-1002"))
    # Then the assistant goes on with that order: it asks to approve its refund, naming no tool
    assert state(asked) == TaskState.AUTH_REQUIRED
    assert open_interaction(asked)["prompt"] == "Refund order A-1002 in full?"
    assert "ask_person" not in json.dumps(asked)


def test_the_docs_example_is_the_assistants_code() -> None:
    # Given docs/writing/model-agents.md and the example's module
    page = (ROOT / "docs" / "writing" / "model-agents.md").read_text()
    block = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    assert block is not None
    code = (ROOT / "examples" / "nylorun_examples" / "assistant.py").read_text()
    # Then the page shows the module's code, word for word, in under 30 lines
    assert code.endswith(block.group(1)) and len(block.group(1).splitlines()) < 30


def test_the_assistant_is_served_locally_only_with_a_model() -> None:
    assert agent_refs(True, "", model=False) == EXAMPLE_AGENTS
    assert agent_refs(True, "", model=True) == f"{EXAMPLE_AGENTS},{ASSISTANT_AGENT}"
    assert agent_refs(False, "", model=True) == ""


def test_the_configured_model() -> None:
    # Scripted only with the Agent's script; a Bedrock id with its guardrail; none configured is an error
    assert isinstance(model_from_settings(assistant.assistant_script), Scripted)
    with pytest.raises(RuntimeError, match="no script"):
        model_from_settings()
    bedrock = model_from_settings(settings=Settings(model="amazon.nova-lite-v1:0", model_guardrail="gr-1:3"))
    assert isinstance(bedrock, Bedrock) and (bedrock.model_id, bedrock.guardrail) == ("amazon.nova-lite-v1:0", "gr-1:3")
    with pytest.raises(RuntimeError, match="no model configured"):
        model_from_settings(settings=Settings())
