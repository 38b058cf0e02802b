"""`nylorun admin` commands on tasks that wait for an operator: uncertain, show, resolve, fail (issue 16)."""

from __future__ import annotations

from typing import Any


def add_commands(sub: Any) -> None:
    """Add this module's commands to `nylorun admin`'s subparsers."""
