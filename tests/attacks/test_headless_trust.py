"""A cloned repository cannot drop approvals for a headless run: the real `dshd run` (its own
runtime and user config folder, tests/e2e/test_headless.py's Headless) in a workspace whose
`.dsh/config.toml` says `approve = []`. Untrusted, the key is ignored and said so, and the
write is not made (no one was there to approve it); positive control in the same test: the
same files in a folder the person trusts in their user config write the file."""

from __future__ import annotations

from tests.e2e.test_headless import TOOLS, headless, reply, workspace  # noqa: F401 - headless: a fixture


def test_an_untrusted_workspace_cannot_drop_approvals_for_the_run(tmp_path, headless):
    """The same trust as the editors: a cloned repository's `approve = []` is ignored (and
    said so) unless the person trusts the folder; trusted, the same run writes."""
    write = ("write_file", {"path": "src/new.py", "content": "X = 1\n"})
    root = workspace(tmp_path, [reply("Writing.", write), reply("Done.")], plugins=TOOLS,
                     extra="\n[tools]\napprove = []\n")
    done = headless.run(root, "make src/new.py", "--json")
    assert done.code == 3, done.stderr
    assert "approve" in done.stderr and "trust" in done.stderr  # the ignored key is reported
    assert not (root / "src" / "new.py").exists()
    # Control: the person trusts the folder in their user config; the same run writes.
    trusted = workspace(tmp_path / "trusted", [reply("Writing.", write), reply("Done.")], plugins=TOOLS,
                        extra="\n[tools]\napprove = []\n")
    headless.trust(trusted)
    ok = headless.run(trusted, "make src/new.py", "--json")
    assert ok.code == 0, ok.stderr
    assert (trusted / "src" / "new.py").read_text() == "X = 1\n"
