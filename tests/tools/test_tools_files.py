"""read_file, write_file, edit_file and the path rules, called as the runner calls them
(a ToolContext on a real workspace folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dshd.agent.tools import Change, Policy, ToolContext
from dshd.tools import files


def ctx(root: Path, sandbox: str = "workspace-write", approved: Change | None = None) -> ToolContext:
    return ToolContext("call-1", 1, 1, root.resolve(), Policy(sandbox, False, ("write", "exec")), approved)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".dsh").mkdir()
    (root / "src" / "app.py").write_text("one\ntwo\nthree\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return root


async def test_read_file_numbers_lines_and_pages(ws):
    out = await files.read_file(ctx(ws), {"path": "src/app.py"})
    assert out.ok and out.content == "src/app.py: lines 1-3 of 3\n     1\tone\n     2\ttwo\n     3\tthree\n"
    page = await files.read_file(ctx(ws), {"path": "src/app.py", "offset": 2, "limit": 1})
    assert page.content == "src/app.py: lines 2-2 of 3 (read on with offset=3)\n     2\ttwo\n"
    past = await files.read_file(ctx(ws), {"path": "src/app.py", "offset": 9})
    assert not past.ok and "past the end" in past.content


async def test_read_file_caps_are_stated(ws):
    (ws / "long.txt").write_text("x" * 5000 + "\n" + "y\n" * 3000)
    out = await files.read_file(ctx(ws), {"path": "long.txt"})
    assert out.ok and "[line cut at 2000 characters]" in out.content
    assert "lines 1-2000 of 3001" in out.content and "read on with offset=2001" in out.content
    (ws / "wide.txt").write_text(("z" * 1900 + "\n") * 1000)
    wide = await files.read_file(ctx(ws), {"path": "wide.txt"})
    assert "output capped at 100 KiB" in wide.content and len(wide.content) < 110 * 1024


async def test_read_file_refuses_binary_and_non_utf8(ws):
    (ws / "img.bin").write_bytes(b"\x89PNG\0\0\x01")
    (ws / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    for name, why in [("img.bin", "binary"), ("latin1.txt", "not UTF-8")]:
        out = await files.read_file(ctx(ws), {"path": name})
        assert not out.ok and why in out.content


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("../outside.txt", "outside the workspace"),
        ("src/../../outside.txt", "outside the workspace"),
        ("/etc/passwd", "outside the workspace"),
        ("link-out/outside.txt", "outside the workspace"),
        ("", "non-empty path"),
    ],
)
async def test_escapes_are_refused_naming_the_rule(ws, path, rule):
    (ws / "link-out").symlink_to(ws.parent)
    for tool, args in [
        (files.read_file, {"path": path}),
        (files.write_file, {"path": path, "content": "x"}),
        (files.edit_file, {"path": path, "oldText": "secret", "newText": "public"}),
    ]:
        out = await tool(ctx(ws), args)
        assert not out.ok and rule in out.content, (tool, out)
    assert (ws.parent / "outside.txt").read_text() == "secret\n"


async def test_absolute_path_inside_the_workspace_is_accepted(ws):
    out = await files.read_file(ctx(ws), {"path": str(ws / "src" / "app.py")})
    assert out.ok and "lines 1-3 of 3" in out.content


@pytest.mark.parametrize("path", [".dsh/config.toml", ".git/config", ".git/hooks/pre-commit", "gitlink/config"])
async def test_dsh_and_git_are_never_written(ws, path):
    (ws / "gitlink").symlink_to(ws / ".git")
    rule = ".dsh/" if path.startswith(".dsh") else ".git/"
    for tool, args in [
        (files.write_file, {"path": path, "content": "x"}),
        (files.edit_file, {"path": path, "oldText": "[core]", "newText": "[evil]"}),
    ]:
        out = await tool(ctx(ws, "full-access"), args)
        assert not out.ok and rule in out.content, out
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert not (ws / ".dsh" / "config.toml").exists() and not (ws / ".git" / "hooks").exists()
    # Reading them is fine.
    assert (await files.read_file(ctx(ws), {"path": ".git/config"})).ok


async def test_write_file_creates_and_replaces_keeping_the_mode(ws):
    created = await files.write_file(ctx(ws), {"path": "pkg/new/mod.py", "content": "x = 1\n"})
    assert created.ok and created.content == "pkg/new/mod.py created: 6 bytes, 1 lines"
    script = ws / "run.sh"
    script.write_text("echo old\n")
    script.chmod(0o755)
    replaced = await files.write_file(ctx(ws), {"path": "run.sh", "content": "echo new\n"})
    assert replaced.ok and "replaced" in replaced.content
    assert script.read_text() == "echo new\n" and os.stat(script).st_mode & 0o777 == 0o755
    assert not [p for p in ws.rglob("*.dsh-tmp")]
    preview = await files.write_file_preview(ctx(ws), {"path": "pkg/other.py", "content": "y = 2"})
    assert preview.title == "Create pkg/other.py"
    assert preview.diff == "--- /dev/null\n+++ b/pkg/other.py\n@@ -0,0 +1 @@\n+y = 2\n\\ No newline at end of file\n"


async def test_write_tools_are_off_in_read_only(ws):
    for tool, args in [
        (files.write_file, {"path": "a.txt", "content": "x"}),
        (files.edit_file, {"path": "src/app.py", "oldText": "one", "newText": "1"}),
        (files.write_file_preview, {"path": "a.txt", "content": "x"}),
    ]:
        out = await tool(ctx(ws, "read-only"), args)
        assert not out.ok and "read-only" in out.content
    assert not (ws / "a.txt").exists()


async def test_edit_file_exact_once_unless_replace_all(ws):
    (ws / "dup.txt").write_text("a = 1\na = 1\n")
    missing = await files.edit_file(ctx(ws), {"path": "dup.txt", "oldText": "b = 1", "newText": "c"})
    assert not missing.ok and "not found" in missing.content
    twice = await files.edit_file(ctx(ws), {"path": "dup.txt", "oldText": "a = 1", "newText": "a = 2"})
    assert not twice.ok and "occurs 2 times" in twice.content
    assert (ws / "dup.txt").read_text() == "a = 1\na = 1\n"
    both = await files.edit_file(ctx(ws), {"path": "dup.txt", "oldText": "a = 1", "newText": "a = 2", "replaceAll": True})
    assert both.ok and "2 replacements" in both.content
    assert (ws / "dup.txt").read_text() == "a = 2\na = 2\n"
    once = await files.edit_file(ctx(ws), {"path": "src/app.py", "oldText": "two\n", "newText": "2\n"})
    assert once.ok
    assert once.content == (
        "src/app.py edited (1 replacement):\n--- a/src/app.py\n+++ b/src/app.py\n"
        "@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    )


@pytest.mark.parametrize(
    ("args", "why"),
    [
        ({"path": "src/app.py", "oldText": "one"}, "missing argument 'newText'"),
        ({"path": "src/app.py", "oldText": "one", "newText": 1}, "'newText' must be a string"),
        ({"path": "src/app.py", "oldText": "one", "newText": "1", "all": True}, "unexpected argument 'all'"),
        ({"path": "src/app.py", "oldText": "", "newText": "1"}, "oldText is empty"),
        ({"path": "src/app.py", "oldText": "one", "newText": "one"}, "nothing would change"),
        ({"path": "src/app.py", "oldText": "one", "newText": "1", "replaceAll": "yes"}, "must be a boolean"),
    ],
)
async def test_edit_file_bad_arguments(ws, args, why):
    out = await files.edit_file(ctx(ws), args)
    assert not out.ok and why in out.content
    assert (ws / "src" / "app.py").read_text() == "one\ntwo\nthree\n"


async def test_an_edit_applies_only_the_diff_that_was_approved(ws):
    args = {"path": "src/app.py", "oldText": "two", "newText": "2"}
    shown = await files.edit_file_preview(ctx(ws), args)
    assert shown.title == "Edit src/app.py"
    (ws / "src" / "app.py").write_text("one\ntwo\nthree\nfour\n")  # the file moves on meanwhile
    out = await files.edit_file(ctx(ws, approved=shown), args)
    assert not out.ok and "changed while the person was deciding" in out.content
    assert (ws / "src" / "app.py").read_text() == "one\ntwo\nthree\nfour\n"


async def test_content_over_max_write_bytes_is_refused_naming_the_cap_without_copies(ws):
    import time
    import tracemalloc

    big = "x" * (60 * 1024 * 1024)
    tracemalloc.start()
    started = time.monotonic()
    out = await files.write_file(ctx(ws), {"path": "big.txt", "content": big})
    preview = await files.write_file_preview(ctx(ws), {"path": "big.txt", "content": big})
    elapsed = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert not out.ok and "over [tools] maxWriteBytes (8 MiB)" in out.content and "big.txt" in out.content
    assert not preview.ok and "maxWriteBytes" in preview.content
    assert elapsed < 1 and peak < 1024 * 1024 and not (ws / "big.txt").exists()
    # The cap counts UTF-8 bytes: 334 three-byte characters are over 1000, 333 are not.
    assert not (await files.write_file(ctx(ws), {"path": "e.txt", "content": "€" * 334}, max_write_bytes=1000)).ok
    assert (await files.write_file(ctx(ws), {"path": "e.txt", "content": "€" * 333}, max_write_bytes=1000)).ok
    assert (ws / "e.txt").read_text() == "€" * 333


async def test_an_edit_over_max_write_bytes_is_refused(ws):
    (ws / "f.txt").write_text("a\n" * 400)  # 800 bytes
    grows = await files.edit_file(ctx(ws), {"path": "f.txt", "oldText": "a", "newText": "bb", "replaceAll": True}, max_write_bytes=1000)
    assert not grows.ok and "would be over [tools] maxWriteBytes (1000 bytes)" in grows.content
    too_long = await files.edit_file(ctx(ws), {"path": "f.txt", "oldText": "a\n", "newText": "c" * 1001}, max_write_bytes=1000)
    assert not too_long.ok and "newText for f.txt is over [tools] maxWriteBytes" in too_long.content
    assert (ws / "f.txt").read_text() == "a\n" * 400
    fits = await files.edit_file(ctx(ws), {"path": "f.txt", "oldText": "a", "newText": "b", "replaceAll": True}, max_write_bytes=1000)
    assert fits.ok and (ws / "f.txt").read_text() == "b\n" * 400


async def test_diffs_are_capped_by_lines_and_characters_and_say_so(ws):
    many = "".join(f"{n}\n" for n in range(5000))
    lines = await files.write_file_preview(ctx(ws), {"path": "many.txt", "content": many})
    assert lines.diff.endswith("[diff cut at 2000 lines of 5003]\n")
    wide = ("w" * 1000 + "\n") * 200
    chars = await files.write_file_preview(ctx(ws), {"path": "wide.txt", "content": wide})
    assert "[diff cut at 65536 characters of" in chars.diff and len(chars.diff) < 66 * 1024
    # Over 1 MiB of old + new, difflib is not run: all old lines out, all new in, cut.
    (ws / "huge.txt").write_text("old\n" * 300_000)
    huge = await files.write_file_preview(ctx(ws), {"path": "huge.txt", "content": "new\n" * 300_000})
    assert huge.diff.startswith("--- a/huge.txt\n+++ b/huge.txt\n@@ -1,300000 +1,300000 @@\n-old\n")
    assert huge.diff.endswith("[diff cut at 1999 lines of 600003]\n") and len(huge.diff) < 70 * 1024
    small = await files.write_file_preview(ctx(ws), {"path": "s.txt", "content": "s\n"})
    assert small.diff == "--- /dev/null\n+++ b/s.txt\n@@ -0,0 +1 @@\n+s\n"  # control: whole, no note
