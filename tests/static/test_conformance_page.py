"""docs/conformance.md cannot rot: every test of this repository it cites (`tests/TIER/FILE.py::test_name`) and every module path it cites exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "conformance.md"
TEST = re.compile(r"`(tests/(?:unit|integration|e2e|reliability|static)/[\w/]+\.py)(?:::(\w+))?`")
MODULE = re.compile(r"`((?:nylorun|layers|local|client|examples|functions)/[\w/.]+\.py)`")


def defined_names(path: Path) -> set[str]:
    """The names of every function (test functions, in classes too) the file defines."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def missing_tests(text: str, root: Path) -> list[str]:
    missing = []
    for file, name in TEST.findall(text):
        path = root / file
        if not path.is_file():
            missing.append(file)
        elif name and name not in defined_names(path):
            missing.append(f"{file}::{name}")
    return missing


def missing_modules(text: str, root: Path) -> list[str]:
    """A cited `nylorun/...` path is under layers/runtime/ (the page says so); any other is from the root."""
    def where(cited: str) -> Path:
        return root / "layers" / "runtime" / cited if cited.startswith("nylorun/") else root / cited

    return [cited for cited in MODULE.findall(text) if not where(cited).is_file()]


def test_every_test_the_conformance_page_cites_exists() -> None:
    # Given the Conformance page
    text = PAGE.read_text(encoding="utf-8")
    # When each cited `tests/FILE.py::test_name` is looked up
    cited = TEST.findall(text)
    # Then there are many, and each file defines that test
    assert len(cited) > 100
    assert missing_tests(text, ROOT) == []


def test_every_module_the_conformance_page_cites_exists() -> None:
    # Given the Conformance page
    text = PAGE.read_text(encoding="utf-8")
    # When each cited module path is looked up
    cited = MODULE.findall(text)
    # Then there are many, and each is a file of the repository
    assert len(cited) > 100
    assert missing_modules(text, ROOT) == []


def test_a_renamed_test_or_a_moved_module_is_named() -> None:
    # Given a page citing a test and a module that do not exist, beside ones that do
    text = (
        "`tests/e2e/test_card.py::test_card_has_every_required_field` `tests/e2e/test_card.py::test_gone` "
        "`nylorun/api/app.py` `nylorun/api/gone.py`"
    )
    # When the checks read it
    # Then each names exactly the one that is missing
    assert missing_tests(text, ROOT) == ["tests/e2e/test_card.py::test_gone"]
    assert missing_modules(text, ROOT) == ["nylorun/api/gone.py"]
