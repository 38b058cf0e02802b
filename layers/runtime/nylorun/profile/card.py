"""The Agent Card, per Profile v2 (reference §6): one JSON-RPC 1.0 interface, `streaming: false`,
`pushNotifications` only with a push secret, the five extensions with `required: false`, and the card
polish the sister system learned to add (documentationUrl, iconUrl, provider)."""

from __future__ import annotations

from typing import Any

from nylorun.engine.agent import Agent
from nylorun.profile.extensions import PROFILE_EXTENSIONS
from nylorun.settings import Settings

A2A_PATH = "/v1/a2a/agents"


def agent_url(base_url: str, agent: Agent | str) -> str:
    """An Agent's URL ends with `/`: clients that resolve `.well-known/agent-card.json` relative to it (URL
    rules, as @a2a-js/sdk does) stay inside the Agent. The Runtime answers with and without the slash."""
    name = agent if isinstance(agent, str) else agent.name
    return f"{base_url.rstrip('/')}{A2A_PATH}/{name}/"


def build_card(agent: Agent, base_url: str, settings: Settings) -> dict[str, Any]:
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
            # proto3 optional bools: sent even when false (reference §1).
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
