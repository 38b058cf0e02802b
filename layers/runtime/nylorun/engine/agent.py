"""How an Agent is declared, and the one registry both the api function (cards) and the turn function
(turns) load.

    from nylorun.engine import Agent, Skill, Turn

    hello = Agent(name="hello", description="Greets people.",
                  skills=[Skill(id="greet", name="Greet", description="Says hello.", tags=["demo"])])

    @hello.turn
    def run(turn: Turn) -> None:
        turn.reply(f"Hello, {turn.text}!")

Set `NYLORUN_AGENTS=my_package.agents:hello,other.module:agent` to serve them: the registry holds exactly the
Agents named there (none by default; `nylorun serve` names the examples, nylorun_examples:AGENTS).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nylorun.protocol.models import Message

if TYPE_CHECKING:
    from nylorun.engine.turn import Turn


@dataclass(frozen=True)
class Skill:
    """A skill the Agent Card lists: `id`, `name`, `description`, at least one tag, and optional example prompts."""

    id: str
    name: str
    description: str
    tags: list[str] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)


TurnFunction = Callable[["Turn"], None]
DirectFunction = Callable[[Message], "Message | None"]


@dataclass
class Agent:
    """An Agent the Runtime serves: its card (`name`, `description`, `skills`, `version`, input and output media
    types) and its turn function (`@agent.turn`). `connections` names the providers its turns ask for: one the
    stack does not declare stops the Runtime from loading it. A file part (`raw` or `url`) whose media type is not
    in `input_modes` is refused with -32005."""

    name: str
    description: str
    skills: list[Skill]
    version: str = "1.0.0"
    input_modes: list[str] = field(default_factory=lambda: ["text/plain"])
    output_modes: list[str] = field(default_factory=lambda: ["text/plain"])
    run: TurnFunction | None = None
    # Optional stateless answer, run in the api function: a Message back means "no task" (A2A: a
    # SendMessage may answer with a Message instead of a Task).
    # It must have no side effects; anything durable belongs in `run`.
    direct: DirectFunction | None = None
    # The connection providers its turns ask for (`turn.connection`): one the stack does not declare stops the
    # Runtime from loading it (README "Connections"), before any person is asked.
    connections: list[str] = field(default_factory=list)

    def turn(self, fn: TurnFunction) -> TurnFunction:
        """Decorator: `fn(turn)` runs every turn of this Agent (and runs again from the top on every replay)."""
        self.run = fn
        return fn

    def direct_reply(self, fn: DirectFunction) -> DirectFunction:
        """Decorator: `fn(message)` may answer a message at once with a `Message` and no task (None: make a task).
        It runs in the api function and must have no side effects."""
        self.direct = fn
        return fn


class AgentRegistry:
    def __init__(self, agents: Iterable[Agent] = ()) -> None:
        self._agents: dict[str, Agent] = {}
        for agent in agents:
            self.add(agent)

    def add(self, agent: Agent) -> None:
        if agent.run is None:
            raise ValueError(f"agent {agent.name!r} has no turn function (decorate one with @agent.turn)")
        self._agents[agent.name] = agent

    def get(self, name: str) -> Agent | None:
        return self._agents.get(name)

    def names(self) -> list[str]:
        return sorted(self._agents)

    @classmethod
    def from_env(cls, builtins: Iterable[Agent] = ()) -> AgentRegistry:
        """`builtins` plus any Agents named in NYLORUN_AGENTS ("module:attribute", comma-separated)."""
        registry = cls(builtins)
        for ref in filter(None, (r.strip() for r in os.environ.get("NYLORUN_AGENTS", "").split(","))):
            module, _, attribute = ref.partition(":")
            found = getattr(importlib.import_module(module), attribute or "agent")
            for agent in found if isinstance(found, (list, tuple)) else [found]:
                registry.add(agent)
        return registry


def load_registry() -> AgentRegistry:
    """The Agents named in NYLORUN_AGENTS ("module:attribute", comma-separated); none when it is unset."""
    return AgentRegistry.from_env()
