"""The shadow repository (SPEC section 20, K-1; K-4 is bench/snapshots.py): snapshots of
every file into .dsh/checkpoints.git with the real git binary, restores that are
all-or-nothing across kill -9, the person's .git never touched. Links, files grown past the
cap mid-snapshot and planted git configuration have their attack tests in tests/attacks/
(test_checkpoint_links.py, test_checkpoint_grown_files.py, test_planted_git.py)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dshd.checkpoints import EMPTY_TREE, FileChange, ShadowRepo
from dshd.checkpoints.shadow import JOURNAL_NAME
from dshd.errors import DshError
from dshd.log import statekey

CHILD = Path(__file__).with_name("shadow_child.py")
GIT = ["git", "-c", "user.name=person", "-c", "user.email=person@example.invalid"]


def write(root: Path, rel: str, text: str | bytes) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


def files_of(root: Path) -> dict[str, bytes | str]:
    """Every file (content) and link (its target) under root, but .git and .dsh."""
    out: dict[str, bytes | str] = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not (Path(folder) == root and d in (".git", ".dsh"))]
        for name in dirs + names:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
                if name in dirs:
                    dirs.remove(name)
            elif name in names:
                out[rel] = path.read_bytes()
    return out


def tree_listing(root: Path, tree: str) -> dict[str, str]:
    """path -> mode of every entry of a tree, read with plain git from the shadow."""
    out = subprocess.run(["git", "--git-dir", str(root / ".dsh" / "checkpoints.git"), "ls-tree", "-r", "-z", tree],
                         capture_output=True, check=True).stdout
    listing = {}
    for item in out.split(b"\0"):
        if item:
            meta, _, name = item.partition(b"\t")
            listing[name.decode()] = meta.split()[0].decode()
    return listing


def digest_tree(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    write(root, "README.md", "hello\n")
    write(root, "src/app.py", "print('app')\n")
    write(root, "src/lib/util.py", "def util():\n    return 1\n")
    return root


def test_snapshot_then_restore_undoes_edits_new_files_deletions_and_a_commands_work(workspace: Path):
    shadow = ShadowRepo(workspace)
    before_files = files_of(workspace)
    before = shadow.snapshot()
    assert before.files == 3 and len(before.tree) == 40

    write(workspace, "README.md", "edited\n")
    write(workspace, "src/new/deep/file.txt", "new\n")
    (workspace / "src/lib/util.py").unlink()
    # A command changes files too, not only the file tools.
    subprocess.run(["sh", "-c", "echo made > made.txt && rm src/app.py && mkdir -p tmp && echo t > tmp/t"],
                   cwd=workspace, check=True)
    after = shadow.snapshot()
    assert after.files == 4 == len(tree_listing(workspace, after.tree))
    assert ShadowRepo(workspace).snapshot() == after  # another instance (another process) agrees
    write(workspace, "README.md", "edited again\n")
    assert ShadowRepo(workspace).snapshot().files == 4
    write(workspace, "README.md", "edited\n")
    assert shadow.snapshot() == after  # the first instance's count survives the other's snapshots
    changes = shadow.changes(before.tree, after.tree)
    assert changes == [
        FileChange("README.md", "modified"), FileChange("made.txt", "added"), FileChange("src/app.py", "deleted"),
        FileChange("src/lib/util.py", "deleted"), FileChange("src/new/deep/file.txt", "added"),
        FileChange("tmp/t", "added"),
    ]

    # What the files are now, back to what they were: the reverse direction.
    back = shadow.changes(after.tree, before.tree)
    restored = shadow.restore(before.tree, [c.path for c in back], {"checkpoint": 7})
    assert restored == sorted(c.path for c in back)
    assert files_of(workspace) == before_files
    assert not (workspace / "src/new").exists() and not (workspace / "tmp").exists()  # emptied folders go
    assert shadow.snapshot() == before
    assert shadow.recover() is None  # nothing was left half-done


def test_the_persons_git_is_byte_for_byte_the_same(workspace: Path):
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run([*GIT, "-C", str(workspace), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(workspace), "commit", "-qm", "one"], check=True)
    write(workspace, "staged.txt", "staged\n")
    subprocess.run([*GIT, "-C", str(workspace), "add", "staged.txt"], check=True)
    git_before = digest_tree(workspace / ".git")

    shadow = ShadowRepo(workspace)
    first = shadow.snapshot()
    write(workspace, "README.md", "changed\n")
    write(workspace, "untracked.txt", "u\n")
    second = shadow.snapshot()
    shadow.restore(first.tree, [c.path for c in shadow.changes(second.tree, first.tree)], {})
    shadow.diff(first.tree, second.tree)

    assert ".git/HEAD" not in tree_listing(workspace, second.tree)
    assert not any(p.startswith((".git/", ".dsh/")) for p in tree_listing(workspace, second.tree))
    assert digest_tree(workspace / ".git") == git_before
    assert "staged.txt" in tree_listing(workspace, first.tree)


def test_a_workspace_that_is_no_git_repository(workspace: Path):
    assert not (workspace / ".git").exists()
    shadow = ShadowRepo(workspace)
    snap = shadow.snapshot()
    assert set(tree_listing(workspace, snap.tree)) == {"README.md", "src/app.py", "src/lib/util.py"}
    assert shadow.changes(EMPTY_TREE, snap.tree)[0] == FileChange("README.md", "added")


def test_ignored_files_big_files_and_other_repositories_are_left_out(workspace: Path):
    write(workspace, ".gitignore", "*.log\nbuild/\n")
    write(workspace, "debug.log", "noise\n")
    write(workspace, "build/out.bin", "built\n")
    write(workspace, "big.bin", b"x" * 2048)
    write(workspace, "grows.txt", "small\n")
    subprocess.run(["git", "init", "-q", str(workspace / "vendor/other")], check=True)
    write(workspace, "vendor/other/inner.txt", "inner\n")
    # The person's local exclude file counts too.
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    write(workspace, ".git/info/exclude", "local-only.txt\n")
    write(workspace, "local-only.txt", "mine\n")
    subprocess.run(["mkfifo", str(workspace / "a-fifo")], check=True)

    shadow = ShadowRepo(workspace, max_file_bytes=1024)
    first = shadow.snapshot()
    listed = set(tree_listing(workspace, first.tree))
    assert listed == {".gitignore", "README.md", "grows.txt", "src/app.py", "src/lib/util.py"}
    assert first.files == len(listed)

    write(workspace, "grows.txt", "y" * 4096)  # a kept file over the cap later: dropped
    second = shadow.snapshot()
    assert "grows.txt" not in tree_listing(workspace, second.tree)
    assert second.files == first.files - 1
    assert shadow.changes(first.tree, second.tree) == [FileChange("grows.txt", "deleted")]


class _RacedShadow(ShadowRepo):
    """The real repository, with a racing command that grows files in the one window the
    size check cannot see: after dshd's lstat of each file, before git reads them."""

    def __init__(self, root: Path, grow: dict[str, int], **kwargs) -> None:
        super().__init__(root, **kwargs)
        self.grow = grow

    def _update_index(self, update, force_remove):
        for rel, size in self.grow.items():
            with open(self.root / rel, "ab") as f:
                f.write(b"g" * (size - f.tell()))
        self.grow = {}
        return super()._update_index(update, force_remove)


def _blob_size(root: Path, tree: str, rel: str) -> int:
    out = subprocess.run(["git", "--git-dir", str(root / ".dsh" / "checkpoints.git"), "ls-tree", "-l", tree, "--", rel],
                         capture_output=True, check=True).stdout.split()
    return int(out[3])


def test_a_file_that_became_a_folder_and_back(workspace: Path):
    shadow = ShadowRepo(workspace)
    snap = shadow.snapshot()
    (workspace / "README.md").unlink()
    write(workspace, "README.md/inner.txt", "inner\n")
    now = shadow.snapshot()
    back = [c.path for c in shadow.changes(now.tree, snap.tree)]
    assert sorted(back) == ["README.md", "README.md/inner.txt"]
    shadow.restore(snap.tree, back, {})
    assert (workspace / "README.md").read_text() == "hello\n"
    shadow.restore(now.tree, back, {})
    assert (workspace / "README.md/inner.txt").read_text() == "inner\n"
    assert shadow.snapshot() == now


def _plant_hostile_repository(workspace: Path, marker: Path) -> None:
    """A .dsh/checkpoints.git as a cloned repository could ship it: a clean filter, an
    fsmonitor hook and a post-index-change hook, each of which would create the marker."""
    evil = workspace / ".dsh" / "checkpoints.git"
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)
    script = f"#!/bin/sh\ntouch {marker}\ncat\n"
    write(evil, "evil.sh", script)
    (evil / "evil.sh").chmod(0o755)
    hook = evil / "hooks" / "post-index-change"
    write(evil, "hooks/post-index-change", f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    with open(evil / "config", "a") as config:
        config.write(f'[filter "evil"]\n\tclean = {evil}/evil.sh\n\tsmudge = {evil}/evil.sh\n'
                     f"[core]\n\tfsmonitor = {evil}/evil.sh\n\tbare = false\n")
    write(workspace, ".gitattributes", "* filter=evil\n*.py diff=evil\n")


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)
    return child.pid


def _plant_leftovers(dsh: Path, outside: Path) -> tuple[list[Path], list[Path]]:
    """Temporary repositories as a killed create leaves them: (those to go, those to stay)."""
    dead = _dead_pid()
    dsh.mkdir(exist_ok=True)
    folder = dsh / f"checkpoints.git.new-{dead}-0123abcd"
    (folder / "objects" / "pack").mkdir(parents=True)
    (folder / "HEAD").write_text("ref: refs/heads/dsh-snapshots\n")
    (folder / "dsh-owner").write_bytes(b"dshd 00 " + statekey.mac("checkpoints.git owner v1", b"00").encode() + b"\n")
    os.symlink(outside, folder / "objects" / "into-outside")  # rmtree removes the link, not its target
    linked = dsh / f"checkpoints.git.new-{dead}-89abcdef"
    os.symlink(outside, linked)  # a link is nothing dshd made: left as it is, never followed
    unmarked = dsh / f"checkpoints.git.new-{dead}-00000000"  # no owner mark (a clone's): not ours to delete
    (unmarked / "objects").mkdir(parents=True)
    live = dsh / f"checkpoints.git.new-{os.getpid()}-0123abcd"  # a create still under way
    live.mkdir()
    not_the_pattern = [dsh / f"checkpoints.git.new-{dead}-0123ABCD", dsh / f"checkpoints.git.new-{dead}-0123abcd.x",
                       dsh / f"other.git.new-{dead}-0123abcd"]
    for path in not_the_pattern:
        path.mkdir()
    return [folder], [linked, unmarked, live, *not_the_pattern]


def test_temporary_repositories_left_by_a_killed_create_are_removed_on_open(workspace: Path, tmp_path: Path):
    ShadowRepo(workspace).snapshot()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    gone, kept = _plant_leftovers(workspace / ".dsh", outside)
    write(workspace, "README.md", "changed\n")
    snapshot = ShadowRepo(workspace).snapshot()  # the next daemon opens the repository
    assert [p for p in gone if os.path.lexists(p)] == []
    assert all(os.path.lexists(p) for p in kept) and kept[0].is_symlink()
    assert (outside / "keep.txt").read_text() == "mine\n" and sorted(os.listdir(outside)) == ["keep.txt"]
    assert "README.md" in tree_listing(workspace, snapshot.tree)


def test_temporary_repositories_left_by_a_killed_create_are_removed_on_create(workspace: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("mine\n")
    gone, kept = _plant_leftovers(workspace / ".dsh", outside)
    ShadowRepo(workspace).snapshot()  # no repository yet: made now
    assert (workspace / ".dsh" / "checkpoints.git").is_dir()
    assert [p for p in gone if os.path.lexists(p)] == []
    assert all(os.path.lexists(p) for p in kept)
    assert sorted(os.listdir(outside)) == ["keep.txt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_file_is_left_out_and_the_rest_snapshotted(workspace: Path):
    shadow = ShadowRepo(workspace)
    first = shadow.snapshot()
    write(workspace, "secret.txt", "no\n")
    (workspace / "secret.txt").chmod(0)
    write(workspace, "README.md", "changed\n")
    second = shadow.snapshot()
    assert shadow.changes(first.tree, second.tree) == [FileChange("README.md", "modified")]
    assert second.files == first.files


def test_a_path_git_cannot_process_is_left_out_and_the_rest_applied(workspace: Path, tmp_path: Path):
    """The retry under the unreadable-file case, reachable as root too: a path named to git
    that lies behind a link (what a folder swapped for one between the listing and the update
    looks like to git)."""
    shadow = ShadowRepo(workspace)
    shadow.snapshot()
    write(tmp_path / "outside", "util.py", "outside\n")
    write(workspace, "README.md", "changed\n")
    os.symlink(tmp_path / "outside", workspace / "via-link")
    assert shadow._update_index(["via-link/util.py", "README.md"], []) is False
    listed = subprocess.run(["git", "--git-dir", str(workspace / ".dsh/checkpoints.git"), "ls-files", "-s"],
                            capture_output=True, text=True, check=True).stdout
    assert "via-link" not in listed and "README.md" in listed
    changed = subprocess.run(["git", "hash-object", "--stdin"], input="changed\n", capture_output=True,
                             text=True, check=True).stdout.strip()
    assert f"{changed} 0\tREADME.md" in listed  # the change beside the refused path was applied


def test_a_file_made_right_after_a_snapshot_is_in_the_next(workspace: Path):
    """The untracked cache trusts folder mtimes: a file made in a folder the moment after
    a snapshot listed it is still found."""
    shadow = ShadowRepo(workspace)
    shadow.snapshot()
    for n in range(25):
        write(workspace, f"src/lib/new{n}.py", "n\n")
        snap = shadow.snapshot()
        assert f"src/lib/new{n}.py" in tree_listing(workspace, snap.tree)
        assert snap.files == 4 + n


def test_odd_names_round_trip(workspace: Path):
    names = ["sp ace.txt", "ünï/cödé.txt", "new\nline.txt", 'quo"te\\.txt', "tab\there.txt", "-dash.txt"]
    shadow = ShadowRepo(workspace)
    before_files = files_of(workspace)
    before = shadow.snapshot()
    for name in names:
        write(workspace, name, f"{name}\n")
    after = shadow.snapshot()
    assert sorted(c.path for c in shadow.changes(before.tree, after.tree)) == sorted(names)
    diffs = shadow.diff(before.tree, after.tree)
    assert {d.path for d in diffs} == set(names)
    assert all(d.diff.startswith("diff --git ") and "\n+" in d.diff for d in diffs)  # each header found
    shadow.restore(before.tree, names, {})
    assert files_of(workspace) == before_files
    shadow.restore(after.tree, names, {})
    assert all((workspace / name).read_text() == f"{name}\n" for name in names)


def test_diff_per_file_binary_and_capped(workspace: Path):
    shadow = ShadowRepo(workspace)
    before = shadow.snapshot()
    write(workspace, "README.md", "".join(f"line {i}\n" for i in range(400)))
    write(workspace, "blob.bin", b"\0\1\2binary")
    write(workspace, 'odd "name"\tx.txt', "odd\n")
    after = shadow.snapshot()
    diffs = {d.path: d for d in shadow.diff(before.tree, after.tree, max_bytes=1000)}
    assert set(diffs) == {"README.md", "blob.bin", 'odd "name"\tx.txt'}
    readme = diffs["README.md"]
    assert readme.status == "modified" and not readme.binary
    assert readme.diff.startswith("diff --git a/README.md b/README.md\n") and "-hello" in readme.diff
    assert len(readme.diff) < 1200 and "left out" in readme.diff.splitlines()[-1]
    assert diffs["blob.bin"].binary and diffs["blob.bin"].diff is None and diffs["blob.bin"].status == "added"
    assert "+odd" in diffs['odd "name"\tx.txt'].diff
    only = shadow.diff(before.tree, after.tree, paths=["blob.bin"])
    assert [d.path for d in only] == ["blob.bin"]
    # Past the cap on all of them, a file's diff is a one-line note.
    total = {d.path: d for d in shadow.diff(before.tree, after.tree, max_bytes=1000, max_total_bytes=500)}
    assert len(total["README.md"].diff) < 1200
    assert total['odd "name"\tx.txt'].diff.startswith("(diff left out") and not total['odd "name"\tx.txt'].binary


@pytest.mark.parametrize("bad", ["../escape", "/abs", ".git/config", "a/.GIT/x", ".dsh/sessions/x", "a//b", ""])
def test_restore_refuses_paths_outside_what_a_snapshot_holds(workspace: Path, bad: str):
    shadow = ShadowRepo(workspace)
    snap = shadow.snapshot()
    with pytest.raises(DshError) as caught:
        shadow.restore(snap.tree, [bad], {})
    assert caught.value.kind == "invalid-params" and caught.value.data == {"field": "paths"}


def test_restore_refuses_an_unknown_tree_and_changes_nothing(workspace: Path):
    shadow = ShadowRepo(workspace)
    shadow.snapshot()
    before = files_of(workspace)
    with pytest.raises(DshError) as caught:
        shadow.restore("0" * 40, ["README.md"], {})
    assert caught.value.kind == "io-error"
    with pytest.raises(DshError) as caught:
        shadow.restore("not-a-tree", ["README.md"], {})
    assert caught.value.data == {"field": "tree"}
    assert files_of(workspace) == before
    assert not (workspace / ".dsh" / "checkpoints.git" / JOURNAL_NAME).exists()


def _spawn(*args: str) -> subprocess.Popen:
    # Its own process group, so the kill takes the git processes it runs with it.
    return subprocess.Popen([sys.executable, str(CHILD), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def _kill_after_start(proc: subprocess.Popen, delay: float) -> bool:
    """Kill the child's whole group ``delay`` seconds after it says "start"; True when it
    had not finished by then."""
    assert proc.stdout.readline().strip() == b"start"
    time.sleep(delay)
    finished = proc.poll() is not None
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it had finished, and nothing of its group is left
    proc.wait()
    return not finished


def _many_files(root: Path, count: int, text: str) -> list[str]:
    paths = [f"d{n % 10}/f{n:04d}.txt" for n in range(count)]
    for rel in paths:
        write(root, rel, f"{text} {rel}\n")
    return paths


def test_kill_during_a_snapshot_then_recover_and_snapshot_again(tmp_path: Path):
    root = tmp_path / "ws"
    _many_files(root, 600, "v1")
    before = files_of(root)
    # A reference tree from a shadow repository no one killed.
    reference_root = tmp_path / "ref"
    _many_files(reference_root, 600, "v1")
    reference = ShadowRepo(reference_root).snapshot()
    rng = random.Random(5)
    mid_way = 0
    index = root / ".dsh/checkpoints.git/index"
    for attempt in range(30):
        index.unlink(missing_ok=True)  # so each try has every file to add, not nothing
        killed = _kill_after_start(_spawn("snapshot", str(root)), rng.uniform(0.0, 0.15))
        mid_way += killed and (root / ".dsh/checkpoints.git/index.lock").exists()
        if mid_way:
            break
    assert mid_way >= 1, "no kill landed while git held the index"
    assert files_of(root) == before  # a snapshot never changes the workspace
    shadow = ShadowRepo(root)
    assert shadow.recover() is None
    assert not (root / ".dsh/checkpoints.git/index.lock").exists()
    assert shadow.snapshot() == reference


def test_a_git_left_running_by_a_killed_snapshot_is_ended_before_the_next(tmp_path: Path):
    """kill -9 of the snapshotting process alone (as of a daemon) leaves its git running,
    with the index lock: the next snapshot ends that git before it takes the lock file,
    so the orphan's late rename cannot take the new git's lock for its index."""
    root = tmp_path / "ws"
    (root / "big").mkdir(parents=True)
    for n in range(80):
        (root / "big" / f"{n}.bin").write_bytes(os.urandom(1_000_000))
    lock = root / ".dsh/checkpoints.git/index.lock"
    git_dir = f"GIT_DIR={root / '.dsh/checkpoints.git'}".encode()

    def gits() -> list[str]:
        found = []
        for entry in os.scandir("/proc"):
            try:
                if entry.name.isdigit() and git_dir in Path(entry.path, "environ").read_bytes():
                    if Path(entry.path, "stat").read_bytes().rsplit(b")", 1)[-1].split()[0] != b"Z":
                        found.append(entry.name)
            except OSError:
                pass
        return found

    orphans: list[str] = []
    for attempt in range(10):
        shutil.rmtree(root / ".dsh", ignore_errors=True)  # each try hashes every file again
        proc = _spawn("snapshot", str(root))
        assert proc.stdout.readline().strip() == b"start"
        deadline = time.monotonic() + 20
        while not lock.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0005)
        os.kill(proc.pid, signal.SIGKILL)  # the python child only: its git lives on
        proc.wait()
        orphans = gits()
        if orphans and lock.exists():
            break
        time.sleep(0.5)  # let a finishing orphan end before the next try
    assert orphans and lock.exists(), "no kill left a git running with the index lock"
    shadow = ShadowRepo(root)
    first = shadow.snapshot()
    assert first.files == 80
    assert shadow.snapshot() == first
    assert not gits(), f"orphans {orphans} still running"


def test_kill_during_a_restore_then_recover_finishes_it(tmp_path: Path):
    root = tmp_path / "ws"
    paths = _many_files(root, 300, "old")
    shadow = ShadowRepo(root)
    old = shadow.snapshot()
    old_files = files_of(root)
    _many_files(root, 300, "new")
    write(root, "extra/added.txt", "added\n")
    new = shadow.snapshot()
    new_files = files_of(root)
    wanted = [c.path for c in shadow.changes(new.tree, old.tree)]
    assert len(wanted) == 301
    paths_file = tmp_path / "paths.json"
    paths_file.write_text(json.dumps(wanted))
    journal = root / ".dsh/checkpoints.git" / JOURNAL_NAME

    rng = random.Random(7)
    half_done = False
    for attempt in range(40):
        _kill_after_start(_spawn("restore", str(root), old.tree, str(paths_file)), rng.uniform(0.0, 0.4))
        now = files_of(root)
        if journal.exists():
            half_done = half_done or (now != old_files and now != new_files)
            assert ShadowRepo(root).recover() == {"by": "child"}
            assert files_of(root) == old_files  # all after
        else:
            assert now in (old_files, new_files)  # all before, or all after
        assert not journal.exists()
        assert ShadowRepo(root).recover() is None
        if half_done:
            break
        shadow.restore(new.tree, wanted, {})  # back to "new" for the next try
        assert files_of(root) == new_files
    assert half_done, "no kill landed part-way through a restore"
    assert not any(p.name.startswith(".dsh-restore-") for p in root.rglob("*"))
    assert ShadowRepo(root).snapshot() == old
    assert paths[0] in tree_listing(root, old.tree)
