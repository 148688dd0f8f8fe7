"""read_file, write_file and edit_file.

- ``read_file {path, offset?, limit?}``: numbered lines (``cat -n`` style), from line
  ``offset`` (1-based, default 1), at most ``limit`` lines (default and cap 2000); lines
  longer than 2000 characters are cut; the output is capped at 100 KiB. Binary files
  (a NUL byte, or not UTF-8) are refused.
- ``write_file {path, content}``: creates or replaces a UTF-8 text file (parents created),
  atomically (a temporary file renamed over it; an existing file keeps its mode).
- ``edit_file {path, oldText, newText, replaceAll?}``: exact text replacement; ``oldText``
  must occur exactly once unless ``replaceAll``; returns the unified diff.

Write tools are refused in the read-only sandbox, never write ``.dsh/`` or ``.git/``, and
show the person the unified diff before anything is written. If the file changed between
the person's yes and the write (the diff is no longer the one allowed), nothing is written.
What a write tool would write is at most ``[tools] maxWriteBytes`` (default 8 MiB): more is
a failed result naming the cap, checked before any diff is made.

Every open goes through :mod:`dshd.tools.safepath` (directory handles, no link followed
after the one resolve): a folder or file swapped for a link during the call fails it with
``unsafe-path``. Files read are regular files of at most :data:`READ_FILE_CAP` bytes.
"""

from __future__ import annotations

import difflib
import functools
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dshd.agent.tools import Change, ToolContext, ToolDescription, ToolOutcome, argument_text, path_location
from dshd.tools import safepath
from dshd.tools.paths import PathRefused, resolve, shown

READ_LIMIT = 2000  # lines per read_file call (default and cap)
LINE_CAP = 2000  # characters per line shown
READ_CAP = 100 * 1024  # characters of read_file output
DIFF_CAP = 64 * 1024  # characters of a diff in a result or an approval
DIFF_LINES = 2000  # lines of a diff in a result or an approval
DIFF_INPUT_CAP = 1024 * 1024  # characters of old + new above which difflib is not run
SNIFF = 8192  # bytes looked at for a NUL byte
READ_FILE_CAP = 64 * 1024 * 1024  # bytes of a file the tools read at all
MAX_WRITE_BYTES = 8 * 1024 * 1024  # default of [tools] maxWriteBytes

READ_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path relative to the workspace root."},
        "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Default 1."},
        "limit": {"type": "integer", "minimum": 1, "maximum": READ_LIMIT, "description": f"Lines to read (at most {READ_LIMIT})."},
    },
    "required": ["path"],
    "additionalProperties": False,
}
WRITE_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path relative to the workspace root."},
        "content": {"type": "string", "description": "The whole new content of the file."},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}
EDIT_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "File path relative to the workspace root."},
        "oldText": {"type": "string", "description": "Exact text to replace (must occur once unless replaceAll)."},
        "newText": {"type": "string", "description": "Text to put in its place."},
        "replaceAll": {"type": "boolean", "description": "Replace every occurrence. Default false."},
    },
    "required": ["path", "oldText", "newText"],
    "additionalProperties": False,
}


class Refused(Exception):
    """A call that cannot go ahead; the message is the failed result."""


def check_arguments(arguments: dict[str, Any], schema: dict[str, Any]) -> None:
    """Names, required keys and JSON types as the schema says (the model sees the same)."""
    properties = schema["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise Refused(f"unexpected argument {unknown[0]!r} (arguments: {', '.join(properties)})")
    for name in schema.get("required", []):
        if name not in arguments:
            raise Refused(f"missing argument {name!r}")
    for name, value in arguments.items():
        expected = properties[name]["type"]
        ok = {
            "string": isinstance(value, str),
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int) and not isinstance(value, bool),
        }[expected]
        if not ok:
            raise Refused(f"argument {name!r} must be a {expected}")
        if expected == "integer" and value < properties[name].get("minimum", value):
            raise Refused(f"argument {name!r} must be at least {properties[name]['minimum']}")


def read_text(root: Path, target: Path, shown_path: str) -> str:
    """The file's text exactly as stored (line endings kept), or Refused. Opened through
    directory handles (:mod:`dshd.tools.safepath`)."""
    try:
        data = safepath.read_bytes(root, target, READ_FILE_CAP)
    except FileNotFoundError:
        raise Refused(f"{shown_path} does not exist") from None
    except safepath.NotRegular as exc:
        if exc.kind == "a folder":
            raise Refused(f"{shown_path} is a directory (use list_files)") from None
        raise Refused(f"{shown_path} is {exc.kind}: the file tools use regular files only") from None
    if b"\0" in data[:SNIFF]:
        raise Refused(f"{shown_path} is a binary file (it has NUL bytes): read_file shows text only")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"{shown_path} is not UTF-8 text (byte {exc.start}): read_file shows text only") from None


def unified_diff(old: str, new: str, shown_path: str, *, created: bool = False) -> str:
    fromfile = "/dev/null" if created else f"a/{shown_path}"
    if len(old) + len(new) > DIFF_INPUT_CAP:
        # difflib is quadratic at worst: a big file is shown as all of it replaced (the
        # caps below cut that to its start).
        return _whole_replacement(old, new, fromfile, f"b/{shown_path}")
    lines = difflib.unified_diff(
        old.splitlines(keepends=True),
        new.splitlines(keepends=True),
        fromfile=fromfile,
        tofile=f"b/{shown_path}",
    )
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _whole_replacement(old: str, new: str, fromfile: str, tofile: str) -> str:
    """A unified diff removing every old line and adding every new one, made only as far
    as the caps show (its last line then says where it was cut, of how many lines)."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out = [f"--- {fromfile}\n", f"+++ {tofile}\n", f"@@ -{1 if old_lines else 0},{len(old_lines)} +1,{len(new_lines)} @@\n"]
    total = len(out) + len(old_lines) + len(new_lines)
    size = sum(map(len, out))
    for sign, lines in (("-", old_lines), ("+", new_lines)):
        for line in lines:
            entry = sign + (line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
            if size + len(entry) > DIFF_CAP - 100 or len(out) >= DIFF_LINES - 1:
                return "".join(out) + f"[diff cut at {len(out)} lines of {total}]\n"
            out.append(entry)
            size += len(entry)
    return "".join(out)


def capped(text: str, cap: int, what: str) -> str:
    if len(text) <= cap:
        return text
    return text[:cap] + f"\n[{what} cut at {cap} characters of {len(text)}]\n"


def capped_diff(diff: str) -> str:
    """A diff as a person or the model is shown it: at most :data:`DIFF_LINES` lines and
    :data:`DIFF_CAP` characters, with a last line saying it was cut."""
    lines = diff.splitlines(keepends=True)
    if len(lines) > DIFF_LINES:
        kept = "".join(lines[:DIFF_LINES])
        if len(kept) <= DIFF_CAP:
            return kept + f"[diff cut at {DIFF_LINES} lines of {len(lines)}]\n"
    return capped(diff, DIFF_CAP, "diff")


def _refusal(exc: Exception) -> ToolOutcome:
    if isinstance(exc, OSError) and exc.strerror:
        # The OS's words, without Python's "[Errno n]" ("src/a.py: not a folder").
        where = f"{exc.filename}: " if exc.filename else ""
        return ToolOutcome.failure(f"{where}{exc.strerror}")
    return ToolOutcome.failure(str(exc))


# ---- read_file -------------------------------------------------------------------------


async def read_file(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    try:
        check_arguments(arguments, READ_PARAMETERS)
        target = resolve(ctx.root, arguments["path"])
        name = shown(ctx.root, target)
        if target == ctx.root:
            raise Refused(f"{name} is a directory (use list_files)")
        text = read_text(ctx.root, target, name)
    except (Refused, PathRefused, OSError) as exc:
        return _refusal(exc)
    offset = arguments.get("offset", 1)
    limit = min(arguments.get("limit", READ_LIMIT), READ_LIMIT)
    lines = text.splitlines()
    total = len(lines)
    if total == 0:
        return ToolOutcome.success(f"{name} is empty (0 lines)")
    if offset > total:
        return ToolOutcome.failure(f"offset {offset} is past the end of {name} ({total} lines)")
    out: list[str] = []
    size = 0
    last = offset - 1
    notes: list[str] = []
    for number in range(offset, min(offset + limit, total + 1)):
        line = lines[number - 1]
        if len(line) > LINE_CAP:
            line = line[:LINE_CAP] + f" [line cut at {LINE_CAP} characters]"
        entry = f"{number:>6}\t{line}\n"
        if size + len(entry) > READ_CAP:
            notes.append(f"output capped at {READ_CAP // 1024} KiB")
            break
        out.append(entry)
        size += len(entry)
        last = number
    header = f"{name}: lines {offset}-{last} of {total}"
    if last < total:
        notes.append(f"read on with offset={last + 1}")
    if notes:
        header += f" ({'; '.join(notes)})"
    return ToolOutcome.success(header + "\n" + "".join(out))


# ---- write tools -----------------------------------------------------------------------


def _writable(ctx: ToolContext, arguments: dict[str, Any], schema: dict[str, Any]) -> tuple[Path, str]:
    check_arguments(arguments, schema)
    if ctx.policy.sandbox == "read-only":
        raise Refused(
            "the sandbox is read-only: files cannot be changed (the person can change the "
            "sandbox mode with [tools] sandbox or from the editor)"
        )
    target = resolve(ctx.root, arguments["path"], write=True)
    return target, shown(ctx.root, target)


def _within_cap(content: str, max_bytes: int, name: str, what: str) -> None:
    """``content``'s UTF-8 size is at most ``max_bytes`` (counted without encoding a
    string that is plainly over: a character is at least one byte)."""
    if len(content) > max_bytes or (len(content) * 4 > max_bytes and len(content.encode("utf-8", "surrogatepass")) > max_bytes):
        raise Refused(
            f"{what} for {name} is over [tools] maxWriteBytes ({safepath.human(max_bytes)}): nothing was "
            "written; write a smaller file, or split it into several"
        )


def _planned_write(ctx: ToolContext, arguments: dict[str, Any], max_bytes: int) -> tuple[Path, str, str, str, bool]:
    target, name = _writable(ctx, arguments, WRITE_PARAMETERS)
    _within_cap(arguments["content"], max_bytes, name, "the content")
    st = safepath.lstat(ctx.root, target)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise Refused(f"{name} is a directory")
    created = st is None
    old = "" if created else read_text(ctx.root, target, name)
    return target, name, old, arguments["content"], created


def _planned_edit(ctx: ToolContext, arguments: dict[str, Any], max_bytes: int) -> tuple[Path, str, str, str, int]:
    target, name = _writable(ctx, arguments, EDIT_PARAMETERS)
    old_text, new_text = arguments["oldText"], arguments["newText"]
    if not old_text:
        raise Refused("oldText is empty: give the exact text to replace (write_file writes whole files)")
    if old_text == new_text:
        raise Refused("oldText and newText are the same: nothing would change")
    _within_cap(new_text, max_bytes, name, "newText")
    old = read_text(ctx.root, target, name)
    count = old.count(old_text)
    if count == 0:
        raise Refused(f"oldText was not found in {name} (it must match exactly, whitespace included)")
    if count > 1 and not arguments.get("replaceAll", False):
        raise Refused(
            f"oldText occurs {count} times in {name}: include more surrounding text so it "
            "matches once, or set replaceAll"
        )
    grown = len(old) + count * (len(new_text) - len(old_text))
    if grown > max_bytes:
        raise Refused(
            f"the edited {name} would be over [tools] maxWriteBytes ({safepath.human(max_bytes)}): nothing was written"
        )
    new = old.replace(old_text, new_text)
    _within_cap(new, max_bytes, name, "the edited file")
    return target, name, old, new, count


def _write_atomically(root: Path, target: Path, content: str) -> None:
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise Refused(f"the content is not valid text (a lone surrogate at character {exc.start}): nothing was written") from None
    safepath.write_atomically(root, target, data)


def _shown_diff(old: str, new: str, name: str, *, created: bool = False) -> Callable[[], str]:
    """The diff a person is shown (capped), made once and only when read."""
    return functools.cache(lambda: capped_diff(unified_diff(old, new, name, created=created)))


def _still_as_approved(ctx: ToolContext, diff_of: Callable[[], str], name: str) -> None:
    """Only a diff a person saw is compared (no one asked: no diff made)."""
    if ctx.approved is not None and ctx.approved.diff is not None and ctx.approved.diff != diff_of():
        raise Refused(f"{name} changed while the person was deciding: nothing was written; read it again")


async def write_file_preview(
    ctx: ToolContext, arguments: dict[str, Any], *, max_write_bytes: int = MAX_WRITE_BYTES
) -> Change | ToolOutcome:
    try:
        _, name, old, new, created = _planned_write(ctx, arguments, max_write_bytes)
    except (Refused, PathRefused, OSError) as exc:
        return _refusal(exc)
    title = f"Create {name}" if created else f"Replace {name}"
    return Change(title=title, diff_of=_shown_diff(old, new, name, created=created))


async def write_file(ctx: ToolContext, arguments: dict[str, Any], *, max_write_bytes: int = MAX_WRITE_BYTES) -> ToolOutcome:
    try:
        target, name, old, new, created = _planned_write(ctx, arguments, max_write_bytes)
        _still_as_approved(ctx, _shown_diff(old, new, name, created=created), name)
        _write_atomically(ctx.root, target, new)
    except (Refused, PathRefused, OSError) as exc:
        return _refusal(exc)
    lines = len(new.splitlines())
    verb = "created" if created else "replaced"
    return ToolOutcome.success(f"{name} {verb}: {len(new.encode())} bytes, {lines} lines")


async def edit_file_preview(
    ctx: ToolContext, arguments: dict[str, Any], *, max_write_bytes: int = MAX_WRITE_BYTES
) -> Change | ToolOutcome:
    try:
        _, name, old, new, count = _planned_edit(ctx, arguments, max_write_bytes)
    except (Refused, PathRefused, OSError) as exc:
        return _refusal(exc)
    where = f" ({count} places)" if count > 1 else ""
    return Change(title=f"Edit {name}{where}", diff_of=_shown_diff(old, new, name))


async def edit_file(ctx: ToolContext, arguments: dict[str, Any], *, max_write_bytes: int = MAX_WRITE_BYTES) -> ToolOutcome:
    try:
        target, name, old, new, count = _planned_edit(ctx, arguments, max_write_bytes)
        diff_of = _shown_diff(old, new, name)
        _still_as_approved(ctx, diff_of, name)
        _write_atomically(ctx.root, target, new)
    except (Refused, PathRefused, OSError) as exc:
        return _refusal(exc)
    replaced = f"{count} replacements" if count > 1 else "1 replacement"
    return ToolOutcome.success(f"{name} edited ({replaced}):\n{diff_of()}")


# ---- what each call is, for people and clients (agent/tools.py: Tool.describe) ----------


def describe_read_file(arguments: dict[str, Any]) -> ToolDescription:
    path = argument_text(arguments, "path")
    return ToolDescription(f"Read {path}" if path else "Read a file", "read", path_location(arguments, line=arguments.get("offset")))


def describe_write_file(arguments: dict[str, Any]) -> ToolDescription:
    path = argument_text(arguments, "path")
    return ToolDescription(f"Write {path}" if path else "Write a file", "edit", path_location(arguments))


def describe_edit_file(arguments: dict[str, Any]) -> ToolDescription:
    path = argument_text(arguments, "path")
    return ToolDescription(f"Edit {path}" if path else "Edit a file", "edit", path_location(arguments))
