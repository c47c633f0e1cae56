"""Issue 26, point 6: the README is short and points into docs/; every relative link of the README
and docs/ lands on a file that exists, and on a heading of it when it names one."""

from __future__ import annotations

import re
from pathlib import Path

from support.components import REPO

LINK = re.compile(r"\]\(([^)\s]+)\)")
PAGES = [REPO / "README.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"(?m)^#{1,6} (.+)$", text)}


def test_every_relative_link_lands():
    broken = []
    for page in PAGES:
        text = re.sub(r"(?ms)^```.*?^```", "", page.read_text(encoding="utf-8"))
        text = re.sub(r"`[^`\n]*`", "", text)  # inline code shows a format (`![label](x1,y1,x2,y2)`), links no file
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.name}: {target} (no file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.name}: {target} (no heading)")
    assert not broken, broken


def test_the_readme_is_read_in_ten_minutes():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 150, len(lines)
    text = "\n".join(lines)
    for guide in ("docs/user-guide.md", "docs/servers.md", "docs/cluster.md", "docs/formats.md",
                  "docs/troubleshooting.md", "docs/commands.md"):
        assert f"]({guide}" in text, guide
