"""Comments and docs cite what a reader can open: no internal tracker number, no record kept outside the repository.

A comment says WHY and, where the source matters, names a page under docs/ (docs/contributing.md). A decision
record may say which outside record it was taken from; nothing else names one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What `grep -rniE` covers: the code, its tests and benches, and the deployment files.
CODE = ("layers", "local", "client", "examples", "functions", "tests", "bench", "template.yaml", "Makefile")
# The user docs: the README and the site's pages.
DOCS = ("README.md", "docs")
SKIPPED_FOLDERS = {"__pycache__", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules"}
TRACKER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
OUTSIDE_RECORD = re.compile(r"\bADRs?[\s-]?\d+", re.IGNORECASE)
# The decision records that say which outside record they keep (docs/decisions/index.md).
RECORDS_FROM_OUTSIDE = (
    "docs/decisions/0020-components-and-push-config-lifetime.md",
    "docs/decisions/0021-strict-code-ref.md",
)


def text_files(root: Path, names: Iterable[str]) -> list[Path]:
    """Every text file under the names, once (a symlink into another folder is read where it lives)."""
    found: dict[Path, Path] = {}
    for name in names:
        top = root / name
        candidates = [top] if top.is_file() else sorted(top.rglob("*")) if top.is_dir() else []
        for path in candidates:
            if path.is_file() and not SKIPPED_FOLDERS.intersection(path.relative_to(root).parts):
                found.setdefault(path.resolve(), path)
    return sorted(found.values())


def read_text(path: Path) -> str | None:
    """The file's text, or None for a binary file (an image, a zip, a compiled module)."""
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def offending_lines(
    root: Path, names: Iterable[str], patterns: Iterable[re.Pattern[str]], skip: Iterable[str] = ()
) -> list[str]:
    """`path:line: text` for each line of a text file (but those in skip) that matches one of the patterns."""
    problems = []
    checks = tuple(patterns)
    skipped = set(skip)
    for path in text_files(root, names):
        relative = path.relative_to(root).as_posix()
        if relative in skipped:
            continue
        text = read_text(path)
        for number, line in enumerate(text.splitlines() if text else [], start=1):
            if any(check.search(line) for check in checks):
                problems.append(f"{relative}:{number}: {line.strip()}")
    return problems


def test_code_comments_cite_no_tracker_number_and_no_outside_record() -> None:
    # Given the code, tests, benches, template and Makefile
    # When every text line is searched for a tracker number or an outside record's number
    problems = offending_lines(ROOT, CODE, (TRACKER, OUTSIDE_RECORD))
    # Then none is found: say why, and cite a docs page instead
    assert not problems, "cite a page under docs/ instead of these:\n" + "\n".join(problems)


def test_docs_cite_no_tracker_number_and_name_outside_records_only_in_their_decision() -> None:
    # Given the README and every docs page
    # When every line is searched
    problems = offending_lines(ROOT, DOCS, (TRACKER,)) + offending_lines(
        ROOT, DOCS, (OUTSIDE_RECORD,), skip=RECORDS_FROM_OUTSIDE
    )
    # Then none cites a tracker, and only the decision records taken from outside name their source
    assert not problems, "cite a docs page or a decision record (docs/decisions/) instead:\n" + "\n".join(
        problems
    )


def test_the_check_names_each_offending_line_and_skips_binaries(tmp_path: Path) -> None:
    # Given a folder with a tracker citation, an outside record, a clean docs citation and a binary file
    # (the words are put together here so that this file does not cite them itself)
    issue, adr = "Issue", "ADR"
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "a.py").write_text(
        f"x = 1\n# {issue} 15: signed per subject\n# per subject (docs/security.md)\n"
    )
    (tmp_path / "layers" / "b.md").write_text(f"Taken from {adr} 0051.\n")
    (tmp_path / "layers" / "c.bin").write_bytes(f"\0{issue} 1\0".encode())
    # When the check runs on it
    problems = offending_lines(tmp_path, ["layers"], (TRACKER, OUTSIDE_RECORD))
    # Then each offending line is named with its place, and the clean line and the binary are not
    assert problems == [
        f"layers/a.py:2: # {issue} 15: signed per subject",
        f"layers/b.md:1: Taken from {adr} 0051.",
    ]
