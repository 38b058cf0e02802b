"""The README stays a short front page whose relative links all lead somewhere (docs/contributing.md)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 200
# A markdown link's target: [text](target), not an image's alt text or a code span's brackets.
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_at_most_200_lines() -> None:
    # Given the README, the repository's front page (its details live in the docs site)
    lines = README.read_text(encoding="utf-8").splitlines()

    # Then a reader scans it whole
    assert len(lines) <= MAX_LINES, (
        f"README.md has {len(lines)} lines; move detail into docs/ (at most {MAX_LINES})"
    )


def test_every_relative_link_in_the_readme_points_to_an_existing_file() -> None:
    # Given every link in the README that is not a URL or an anchor on the page itself
    targets = [t for t in LINK.findall(README.read_text(encoding="utf-8")) if not re.match(r"[a-z]+:|#", t)]

    # When each is resolved against the repository (its #anchor left off)
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]

    # Then each names a file or folder that exists
    assert targets, "no relative link found: the pattern is wrong"
    assert missing == [], f"README.md links to missing files: {missing}"
