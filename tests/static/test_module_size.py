"""Rooms that fit in a head: no module of the Runtime, the local stand-in, the client or the functions passes 400
lines, and each opens with a docstring whose first line says its one job (docs: "Layout")."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("layers", "local", "client", "functions")
MAX_LINES = 400


def modules(root: Path) -> list[Path]:
    """Every Python module under the folders, once: `local/nylorun_local/sam-stack` links to `functions/`."""
    found: dict[Path, Path] = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            if ".venv" not in path.parts:
                found.setdefault(path.resolve(), path)
    return sorted(found.values())


def too_long(paths: list[Path], root: Path) -> list[str]:
    sizes = ((path, len(path.read_text(encoding="utf-8").splitlines())) for path in paths)
    return [f"{path.relative_to(root)}: {lines} lines" for path, lines in sizes if lines > MAX_LINES]


def without_job(paths: list[Path], root: Path) -> list[str]:
    problems = []
    for path in paths:
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if not docstring or not docstring.splitlines()[0].strip():
            problems.append(f"{path.relative_to(root)}: no docstring saying its job")
    return problems


def test_no_module_passes_400_lines() -> None:
    # Given every module of the four folders
    # When each is counted
    problems = too_long(modules(ROOT), ROOT)
    # Then none passes the limit: split it by what it does
    assert not problems, f"modules over {MAX_LINES} lines (split each by what it does):\n" + "\n".join(problems)


def test_every_module_says_its_job() -> None:
    problems = without_job(modules(ROOT), ROOT)
    assert not problems, "\n".join(problems)


def test_the_check_names_a_long_module_and_its_size(tmp_path: Path) -> None:
    # Given a copy of a folder with one module of 401 lines and one of 400
    (tmp_path / "client").mkdir()
    (tmp_path / "client" / "long.py").write_text('"""Too long."""\n' + "x = 1\n" * 400)
    (tmp_path / "client" / "fits.py").write_text('"""Fits."""\n' + "x = 1\n" * 399)
    (tmp_path / "client" / "bare.py").write_text("x = 1\n")
    # When the checks run on it
    paths = modules(tmp_path)
    # Then the long one is named with its size, the one that fits is not, and the bare one has no job
    assert too_long(paths, tmp_path) == ["client/long.py: 401 lines"]
    assert without_job(paths, tmp_path) == ["client/bare.py: no docstring saying its job"]
