"""The Agent Card (docs/protocol.md §9), per Profile v2: one JSON-RPC interface for A2A 1.0, `streaming: false`,
`pushNotifications` only with a push secret, the five extensions with `required: false`, and documentationUrl,
iconUrl and provider so a directory can show the Agent.

The card is made from what it shows, not from the engine's `Agent` or the Runtime's `Settings`: both fit the
two protocols below, and the profile rung imports neither."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from nylorun.profile.extensions import PROFILE_EXTENSIONS

A2A_PATH = "/v1/a2a/agents"


class CardSkill(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def tags(self) -> Sequence[str]: ...
    @property
    def examples(self) -> Sequence[str]: ...


class CardAgent(Protocol):
    """What a card shows of an Agent (`nylorun.engine.agent.Agent` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def input_modes(self) -> Sequence[str]: ...
    @property
    def output_modes(self) -> Sequence[str]: ...
    @property
    def skills(self) -> Sequence[CardSkill]: ...


class CardSettings(Protocol):
    """What a card shows of the Runtime's settings (`nylorun.settings.Settings` is one)."""

    @property
    def provider_organization(self) -> str: ...
    @property
    def provider_url(self) -> str: ...
    @property
    def documentation_url(self) -> str: ...
    @property
    def icon_url(self) -> str: ...
    @property
    def auth(self) -> str: ...
    @property
    def push_enabled(self) -> bool: ...


def agent_url(base_url: str, agent: CardAgent | str) -> str:
    """An Agent's URL ends with `/`: clients that resolve `.well-known/agent-card.json` relative to it (URL
    rules, as @a2a-js/sdk does) stay inside the Agent. The Runtime answers with and without the slash."""
    name = agent if isinstance(agent, str) else agent.name
    return f"{base_url.rstrip('/')}{A2A_PATH}/{name}/"


def build_card(agent: CardAgent, base_url: str, settings: CardSettings) -> dict[str, Any]:
    card: dict[str, Any] = {
        "name": agent.name,
        "description": agent.description,
        "version": agent.version,
        # Profile v2: JSON-RPC, A2A 1.0 only. Not HTTP+JSON, gRPC, or 0.3.
        "supportedInterfaces": [
            {"url": agent_url(base_url, agent), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "provider": {"organization": settings.provider_organization, "url": settings.provider_url},
        "documentationUrl": settings.documentation_url,
        "iconUrl": settings.icon_url,
        "capabilities": {
            # proto3 optional bools: sent even when false, so a client never has to guess a default.
            "streaming": False,
            "pushNotifications": settings.push_enabled,
            "extendedAgentCard": False,
            "extensions": [
                {"uri": uri, "description": description, "required": False}
                for uri, description in PROFILE_EXTENSIONS.items()
            ],
        },
        "defaultInputModes": list(agent.input_modes),
        "defaultOutputModes": list(agent.output_modes),
        "skills": [
            {
                "id": skill.id,
                "name": skill.name,
                "description": skill.description,
                "tags": list(skill.tags) or [agent.name],
                **({"examples": list(skill.examples)} if skill.examples else {}),
            }
            for skill in agent.skills
        ],
    }
    if settings.auth != "none":
        card["securitySchemes"] = {
            "bearer": {
                "httpAuthSecurityScheme": {
                    "scheme": "Bearer",
                    **({"bearerFormat": "JWT"} if settings.auth == "jwt" else {}),
                    "description": "A bearer token; the subject it names owns the tasks it creates.",
                }
            }
        }
        card["securityRequirements"] = [{"schemes": {"bearer": {"list": []}}}]
    return card
