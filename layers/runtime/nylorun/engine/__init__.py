"""The turn engine: the agent programming model (Agent, Turn) and durable replay."""

from nylorun.engine.agent import Agent, AgentRegistry, Skill, load_registry
from nylorun.engine.connections import Connection, ConnectionLost, Declined
from nylorun.engine.delegation import Delegated
from nylorun.engine.turn import Turn, TurnFailed
from nylorun.profile.components import Component, InvalidComponent, code_ref, register_component

__all__ = [
    "Agent",
    "AgentRegistry",
    "Component",
    "Connection",
    "ConnectionLost",
    "Declined",
    "Delegated",
    "InvalidComponent",
    "Skill",
    "Turn",
    "TurnFailed",
    "code_ref",
    "load_registry",
    "register_component",
]
