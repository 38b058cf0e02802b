"""NYLORUN_AGENTS (`nylorun serve --agents`, the stack's `Agents`) names Agents as module:attribute; a name that
finds no Agent stops the Runtime from loading with an error saying what it looked for and what the module has
(docs/tutorial.md: `--agents module` alone means the attribute `agent`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from nylorun.engine import AgentRegistry

SHOP = '''
from nylorun.engine import Agent, Skill, Turn

shop = Agent(name="shop", description="Refunds orders.", skills=[Skill("refund", "Refund", "Refund an order.")])
NAME = "shop"


@shop.turn
def run(turn: Turn) -> None:
    turn.reply("done")
'''


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    # Given a module whose one Agent is the attribute `shop` (not `agent`)
    (tmp_path / "shop_refs_module.py").write_text(SHOP)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "shop_refs_module"
    sys.modules.pop("shop_refs_module", None)


def load(monkeypatch: pytest.MonkeyPatch, refs: str) -> str:
    monkeypatch.setenv("NYLORUN_AGENTS", refs)
    with pytest.raises(ValueError) as refused:
        AgentRegistry.from_env()
    return str(refused.value)


def test_a_module_without_an_agent_attribute_says_the_default_and_what_it_has(
    module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # When it is named without an attribute
    error = load(monkeypatch, module)
    # Then the error says the attribute `agent` was looked for, and names the Agent the module has
    assert error == (
        f"NYLORUN_AGENTS names {module!r}: module {module!r} has no attribute 'agent' (without ':attribute', "
        f"the attribute is 'agent'); its Agents: {module}:shop"
    )


def test_an_attribute_that_is_no_agent_says_what_it_is(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # When an attribute that is a string is named
    error = load(monkeypatch, f"{module}:NAME")
    # Then the error says it is not an Agent, and names the Agent the module has
    assert error == (
        f"NYLORUN_AGENTS names '{module}:NAME': a str, not an Agent or a list of Agents; its Agents: {module}:shop"
    )


def test_a_missing_module_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # When a module that does not exist is named
    error = load(monkeypatch, "no_such_agents_module:agent")
    # Then the error names it (and where Agents are imported from)
    assert error.startswith("NYLORUN_AGENTS names 'no_such_agents_module:agent': no module named 'no_such_agents_module'")


def test_the_named_agent_loads(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # When the module's Agent is named by its attribute
    monkeypatch.setenv("NYLORUN_AGENTS", f"{module}:shop")
    # Then it is served
    assert AgentRegistry.from_env().names() == ["shop"]
