"""MkDocs hook: writes the generated Reference (each CLI command's --help, every template.yaml parameter) into pages.

A page asks for a generated block with a marker line: `<!-- generated: cli -->` or `<!-- generated: parameters -->`.
The block is made from the code at build time (the argparse parser of `nylorun`, the template's `Parameters`), so
the Reference cannot drift from what the command and the stack accept. tests/static/test_reference_pages.py checks
the same sources.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HELP_COLUMNS = "100"  # argparse wraps to $COLUMNS: a fixed width so the page reads the same on every machine


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command under `parser`, depth first, each with its full name (`nylorun admin resolve`)."""
    name = path or parser.prog
    yield name, parser
    for sub_name, sub in _subcommands(parser).items():
        yield from commands(sub, f"{name} {sub_name}")


def cli_reference() -> str:
    """Markdown: one section per `nylorun` command with its --help, in the parser's order."""
    from nylorun_client.command import build_parser

    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        sections = [
            f"## `{name}`\n\n```text\n{parser.format_help().rstrip()}\n```\n"
            for name, parser in commands(build_parser())
        ]
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous
    return "\n".join(sections)


def template_parameters(template: Path = ROOT / "template.yaml") -> dict[str, dict[str, Any]]:
    """The `Parameters` of template.yaml, in the template's order."""
    from nylorun_local.template import load_template

    return dict(load_template(template)["Parameters"])


def _cell(text: Any, code: bool = False) -> str:
    """One table cell: one line, `|` escaped, and outside code `<` kept as text (not read as an HTML tag)."""
    cell = " ".join(str(text).split()).replace("|", "\\|")
    return cell if code else cell.replace("<", "&lt;")


def _allowed(spec: dict[str, Any]) -> str:
    facts = []
    if "AllowedValues" in spec:
        facts.append(", ".join(f"`{value}`" for value in spec["AllowedValues"]))
    for key, label in (("MinValue", "≥"), ("MaxValue", "≤"), ("MinLength", "length ≥"), ("MaxLength", "length ≤")):
        if key in spec:
            facts.append(f"{label} {spec[key]}")
    if "AllowedPattern" in spec:
        facts.append(f"pattern `{_cell(spec['AllowedPattern'], code=True)}`")
    return "; ".join(facts) or "any"


def _default(spec: dict[str, Any]) -> str:
    if "Default" not in spec:
        return "**required**"
    return f"`{spec['Default']}`" if str(spec["Default"]) != "" else '`""` (empty)'


def parameters_reference() -> str:
    """Markdown: a table of every template.yaml parameter with its type, default, bounds and Description."""
    rows = [
        f"| `{name}` | {spec.get('Type', '')} | {_default(spec)} | {_allowed(spec)} | {_cell(spec.get('Description', ''))} |"
        for name, spec in template_parameters().items()
    ]
    return "\n".join(["| Parameter | Type | Default | Allowed | Description |", "|---|---|---|---|---|", *rows])


GENERATORS: dict[str, Callable[[], str]] = {"cli": cli_reference, "parameters": parameters_reference}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace each `<!-- generated: NAME -->` line with what GENERATORS[NAME] makes now."""
    lines = []
    for line in markdown.splitlines():
        marker = line.strip()
        if marker.startswith("<!-- generated:") and marker.endswith("-->"):
            name = marker.removeprefix("<!-- generated:").removesuffix("-->").strip()
            lines.append(GENERATORS[name]())  # an unknown name fails the build: a KeyError naming it
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"
