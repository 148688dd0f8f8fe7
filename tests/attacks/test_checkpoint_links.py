"""Links in the workspace at snapshot and restore: the real shadow repository (git) stores a
link as a link and never what it leads to, and a restore through a folder or file that
something replaced with a link out of the workspace writes and deletes nothing outside.
Controls in the same tests: a link restored is put back as the link it was, and the files
behind the planted links are restored inside, as regular files."""

from __future__ import annotations

import os
from pathlib import Path

from dshd.checkpoints import ShadowRepo
from tests.checkpoints.test_shadow import digest_tree, tree_listing, workspace, write  # noqa: F401 - workspace: a fixture


def test_links_are_stored_as_links_and_never_followed(workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    write(outside, "secret.txt", "outside\n")
    os.symlink(outside, workspace / "to-outside")
    os.symlink("README.md", workspace / "readme-link")
    shadow = ShadowRepo(workspace)
    snap = shadow.snapshot()
    listing = tree_listing(workspace, snap.tree)
    assert listing["to-outside"] == "120000" and listing["readme-link"] == "120000"
    assert not any("secret" in p for p in listing)

    # Restore of a link puts the link back, pointing where it did.
    (workspace / "readme-link").unlink()
    write(workspace, "readme-link", "now a file\n")
    shadow.restore(snap.tree, ["readme-link"], {})
    assert os.readlink(workspace / "readme-link") == "README.md"



def test_a_restore_through_a_planted_linked_folder_writes_nothing_outside(workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    write(outside, "util.py", "outside stays\n")
    write(outside, "app.py", "outside stays too\n")
    shadow = ShadowRepo(workspace)
    snap = shadow.snapshot()
    outside_before = digest_tree(outside)

    # Something replaced src/lib with a link out of the workspace, and src/app.py with a link
    # to a file outside.
    for path in (workspace / "src/lib/util.py", workspace / "src/app.py"):
        path.unlink()
    (workspace / "src/lib").rmdir()
    os.symlink(outside, workspace / "src/lib")
    os.symlink(outside / "app.py", workspace / "src/app.py")
    # A snapshot now stores the links and nothing behind them.
    planted = tree_listing(workspace, shadow.snapshot().tree)
    assert planted["src/lib"] == "120000" and planted["src/app.py"] == "120000"
    assert "src/lib/util.py" not in planted

    shadow.restore(snap.tree, ["src/lib/util.py", "src/app.py"], {})
    assert digest_tree(outside) == outside_before
    assert not (workspace / "src/lib").is_symlink() and (workspace / "src/lib/util.py").read_text().startswith("def")
    assert not (workspace / "src/app.py").is_symlink() and (workspace / "src/app.py").read_text() == "print('app')\n"

    # A deletion through a linked folder deletes nothing outside either.
    write(workspace, "gone/x.txt", "x\n")
    with_gone = shadow.snapshot()
    (workspace / "gone/x.txt").unlink()
    (workspace / "gone").rmdir()
    os.symlink(outside, workspace / "gone")
    write(outside, "x.txt", "outside x\n")
    shadow.restore(snap.tree, ["gone/x.txt"], {})
    assert (outside / "x.txt").read_text() == "outside x\n"
    assert "gone/x.txt" in tree_listing(workspace, with_gone.tree)
