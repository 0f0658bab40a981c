"""Every relative link of the README, docs/, the test and device guides and the model cards points
at a file that exists, and every #anchor at a heading of that file: the README's claims link to
their measurements, so a renamed result file or section must fail here, not on a reader."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "tests" / "README.md",
         ROOT / "benchmarks" / "device" / "README.md", *sorted((ROOT / "model_cards").glob("*/README.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
EXTERNAL = re.compile(r"[a-z][a-z0-9+.-]*:", re.I)  # https:, mailto:, ...


def heading_anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    anchors, seen = set(), {}
    for heading in re.findall(r"^#+\s+(.+)$", _prose(page.read_text()), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _prose(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # code blocks hold no links or headings


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        destination = (page.parent / path) if path else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and destination.suffix == ".md" and anchor not in heading_anchors(destination):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert broken_links(page) == []


def test_the_checker_sees_a_broken_file_and_a_broken_heading(tmp_path):
    (tmp_path / "other.md").write_text("# A `code` heading (v1.2)\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-code-heading-v12) [ok](other.md#twice-1) [ok](https://x.org/y#z)\n"
                    "[gone](missing.json) [wrong](other.md#twice-2)\n```\n[in code](nowhere.md)\n```\n")
    assert broken_links(page) == ["missing.json: no such file", "other.md#twice-2: no such heading"]
