"""The project's docs stand alone: a person gets the repository, not the requirements
document it was built from. README files, docs/ and the Neovim help never point at it
(no "SPEC", no "../shared", no requirement numbers such as PM-3 or G-7)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted(
    [REPO / "README.md", *REPO.glob("docs/**/*.md"), *REPO.glob("editors/*/README.md"), REPO / "editors/nvim/doc/dsh.txt"]
)
FORBIDDEN = re.compile(r"SPEC\b|\.\./shared|\b(?:PM|G|M|T|C|A|S)-\d+\b")


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_doc_points_at_no_requirement_document(path: Path) -> None:
    hits = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if FORBIDDEN.search(line)
    ]
    assert not hits, "docs must stand alone:\n" + "\n".join(hits)
