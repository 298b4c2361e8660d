"""A repository that explains itself: what src/ (code, comments, templates) cites is in the
repository. No path outside it, no vendor-repository path, no design seed, nobody's name; every
``docs/...`` page cited exists, docs/hardware/ included (the hardware facts in our own words)."""

from __future__ import annotations

import re
from pathlib import Path

import cnnforge
from support.paths import REPO

PACKAGE = Path(cnnforge.__file__).parent
SOURCES = [
    p
    for p in sorted(PACKAGE.rglob("*"))
    if p.is_file() and p.suffix in {".py", ".j2", ".c", ".h"} and "__pycache__" not in p.parts
]

#: What points outside the repository or says who wrote what.
OUTSIDE = re.compile(
    r"shared/|\.\./shared|[Ss]eeds?[ /-]0\d\d|\bizer/|ai8x-synthesis/|\bengineer [A-Z]\b"
    r"|(?<![/\w-])(devices|arithmetic|network-yaml|checkpoint-format|unet-walkthrough)\.md"
)
CITED_DOC = re.compile(r"\bdocs/[\w/.-]+?\.md\b")


def test_sources_cite_nothing_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
        for path in SOURCES
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert found == [], found


def test_every_cited_doc_exists() -> None:
    cited = {
        doc
        for path in [*SOURCES, *sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
        for doc in CITED_DOC.findall(path.read_text("utf-8"))
    }
    assert cited, "no citations found: the pattern is wrong"
    missing = sorted(doc for doc in cited if not (REPO / doc).is_file())
    assert missing == [], missing
