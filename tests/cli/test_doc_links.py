"""Every relative link of the documentation resolves: README.md, ARCHITECTURE.md and docs/*.md.

A link to a file must name one that exists; a link with a `#fragment` into a Markdown file must name one of that file's
headings, as GitHub makes their anchors (lower case, punctuation dropped, spaces to hyphens). Links out of the
repository (`https:`, `mailto:`) are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose(text: str) -> str:
    """The text outside fenced code blocks and inline code."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return re.sub(r"`[^`\n]*`", "", text)


def anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.MULTILINE | re.DOTALL)
    return {anchor(heading) for heading in re.findall(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def broken(page: Path) -> list[str]:
    """The relative links of a page that do not resolve."""
    found = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (fragment and linked.suffix == ".md" and fragment not in anchors(linked)):
            found.append(target)
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_a_heading(page: Path) -> None:
    assert broken(page) == []


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A `code` heading, with (punctuation)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#a-code-heading-with-punctuation) [self](#page) [gone](gone.md) "
        "[no heading](other.md#nowhere) [web](https://example.com/x)\n\n```\n[in code](skipped.md)\n```\n"
    )
    assert broken(page) == ["gone.md", "other.md#nowhere"]


def test_the_readme_is_a_front_door_of_at_most_400_lines() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 400
