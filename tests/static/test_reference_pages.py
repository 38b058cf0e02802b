"""The generated Reference (docs/reference/cli.md, parameters.md) shows every command and every template parameter,
each parameter with a Description, as the MkDocs hook scripts/docs_hooks.py renders them at build time."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

from nylorun_client.command import build_parser

ROOT = Path(__file__).resolve().parents[2]


def hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None, "scripts/docs_hooks.py is missing"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rendered(page: str) -> str:
    """The page's Markdown after the hook, as `mkdocs build` hands it on."""
    markdown = (ROOT / "docs" / page).read_text(encoding="utf-8")
    result: str = hooks().on_page_markdown(markdown)
    return result


def undescribed(parameters: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, spec in parameters.items() if not str(spec.get("Description", "")).strip()]


def test_every_template_parameter_has_a_description_and_is_on_the_parameters_page() -> None:
    # Given every parameter of template.yaml
    parameters = hooks().template_parameters()
    assert len(parameters) > 30
    # When the Template parameters page is rendered
    page = rendered("reference/parameters.md")
    # Then each parameter has a Description, and its row names it with that Description
    assert undescribed(parameters) == []
    rows = {line.split("|")[1].strip(): line for line in page.splitlines() if line.startswith("| `")}
    missing = [name for name in parameters if f"`{name}`" not in rows]
    assert missing == [], f"parameters not on docs/reference/parameters.md: {missing}"
    first_words = {name: " ".join(str(spec["Description"]).split())[:30] for name, spec in parameters.items()}
    assert [name for name, words in first_words.items() if words not in rows[f"`{name}`"]] == []


def test_a_parameter_without_a_description_is_named(tmp_path: Path) -> None:
    # Given a copy of template.yaml whose A2aWaitMs has lost its Description
    lines = (ROOT / "template.yaml").read_text(encoding="utf-8").splitlines()
    start = lines.index("  A2aWaitMs:")
    description = next(i for i in range(start, len(lines)) if lines[i].startswith("    Description:"))
    end = next(i for i in range(description + 1, len(lines)) if not lines[i].startswith("      "))
    broken = tmp_path / "template.yaml"
    broken.write_text("\n".join(lines[:description] + lines[end:]) + "\n", encoding="utf-8")
    # When the check reads it
    found = undescribed(hooks().template_parameters(broken))
    # Then it names that parameter, and only it
    assert found == ["A2aWaitMs"]


def test_the_cli_page_shows_every_commands_help() -> None:
    # Given every `nylorun` command the parser knows, down to `nylorun admin resolve`
    names = [name for name, _ in hooks().commands(build_parser())]
    assert {"nylorun serve", "nylorun send", "nylorun admin"} <= set(names)
    # When the CLI reference page is rendered
    page = rendered("reference/cli.md")
    # Then each command has its section with its usage line
    assert [name for name in names if f"## `{name}`" not in page] == []
    assert [name for name in names if f"usage: {name}" not in page] == []
