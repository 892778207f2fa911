"""The README is a front door (short, pointing into docs/), and every relative link of README.md and docs/*.md
resolves: to a file, and for ``file.md#anchor`` to a heading of that file (GitHub's anchor of a heading)."""

from __future__ import annotations

import re

import pytest

from .conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def test_anchor_slugs_are_githubs():
    assert anchors("## DVC's views: metrics and plots\n# One ablation\n") == {"dvcs-views-metrics-and-plots",
                                                                              "one-ablation"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not followed offline
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            broken.append(target)
    assert broken == [], f"{page.name}: links that do not resolve: {broken}"


def test_readme_is_a_front_door():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for must in ("make repro", "make test", "make repro FORCE=1", "reports/timing.md", "dvc exp run -S",
                 "docs/pipeline.md", "docs/profiles.md", "docs/reproducibility.md", "docs/conventions.md"):
        assert must in readme, must
