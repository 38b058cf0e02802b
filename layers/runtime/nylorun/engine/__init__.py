"""The turn engine: the agent programming model (Agent, Turn) and durable replay."""

from nylorun.engine.agent import Agent, AgentRegistry, Skill, load_registry
from nylorun.engine.turn import Turn

__all__ = ["Agent", "AgentRegistry", "Skill", "Turn", "load_registry"]
