"""An Agent Card checked against A2A 1.0 (a2a-1.0.md §6) and Nylorun Profile v2, each check saying what it read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from nylorun_client.client import PROFILE_V2

REQUIRED = ("name", "description", "supportedInterfaces", "version", "capabilities", "defaultInputModes",
            "defaultOutputModes", "skills")  # fmt: skip
REMOVED_IN_1_0 = ("url", "preferredTransport", "additionalInterfaces", "protocolVersion")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "pass", "warn" or "fail"
    looked_at: str  # what in the card this check read, in words

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "lookedAt": self.looked_at}


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def jsonrpc_interface(card: dict[str, Any]) -> str | None:
    """The first JSON-RPC interface speaking 1.0 (order is preference, §6)."""
    for interface in card.get("supportedInterfaces") or []:
        if isinstance(interface, dict) and interface.get("protocolBinding") == "JSONRPC" and str(
            interface.get("protocolVersion", "")
        ).startswith("1."):
            return str(interface.get("url") or "") or None
    return None


def card_checks(card: dict[str, Any], typed_url: str) -> list[Check]:
    checks = []
    for key in REQUIRED:
        value = card.get(key)
        present = value not in (None, "", [], {}) or key == "capabilities" and isinstance(value, dict)
        checks.append(Check(f"{key} present", "pass" if present else "fail", f"the card's `{key}` (required, §6)"))
    old = [key for key in REMOVED_IN_1_0 if key in card]
    checks.append(Check(
        "no A2A 0.3 fields", "warn" if old else "pass",
        f"top-level {', '.join(old) if old else 'url, preferredTransport, additionalInterfaces, protocolVersion'}"
        " (removed in 1.0)",
    ))  # fmt: skip
    interface = jsonrpc_interface(card)
    checks.append(Check(
        "JSON-RPC 1.0 interface", "pass" if interface else "fail",
        f"supportedInterfaces[]: protocolBinding JSONRPC, protocolVersion 1.x → {interface or 'none'}",
    ))  # fmt: skip
    if interface:
        same = origin(interface) == origin(typed_url)
        checks.append(Check(
            "interface on the host you typed", "pass" if same else "warn",
            f"{origin(interface)} against {origin(typed_url)}: your token goes only to the host you typed"
            + ("" if same else "; the console asks before using another"),
        ))  # fmt: skip
    for index, skill in enumerate(card.get("skills") or []):
        missing = [k for k in ("id", "name", "description", "tags") if not (isinstance(skill, dict) and skill.get(k))]
        checks.append(Check(
            f"skill {index + 1} complete", "fail" if missing else "pass",
            f"skills[{index}]: id, name, description, tags" + (f" (missing {', '.join(missing)})" if missing else ""),
        ))  # fmt: skip
    declared = {e.get("uri"): e for e in (card.get("capabilities") or {}).get("extensions") or [] if isinstance(e, dict)}
    for uri in PROFILE_V2:
        short = uri.rstrip("/").split("/")[-2] + "/" + uri.rstrip("/").split("/")[-1]
        extension = declared.get(uri)
        if extension is None:
            checks.append(Check(f"Profile {short}", "warn", f"capabilities.extensions[] has no {uri} (core tier for it)"))
        else:
            optional = not extension.get("required", False)
            checks.append(Check(
                f"Profile {short}", "pass" if optional else "warn",
                f"capabilities.extensions[] declares {uri} with required: {str(not optional).lower()}"
                + ("" if optional else " (a core-tier caller is refused)"),
            ))  # fmt: skip
    return checks

