"""list_files and search, both on ripgrep (the ``rg`` of the ``ripgrep`` wheel).

- ``list_files {path?, pattern?}``: the files under ``path`` (default: the workspace root),
  relative to the root, sorted. ``pattern`` is a glob in ``.gitignore`` syntax matched against
  the path relative to ``path`` (``*.py`` at any depth, ``src/**/*.ts``, ``/top-level.md``),
  matched with ``pathspec``. At most 1000 are listed (the result says how many there are).
- ``search {pattern, path?, glob?, ignoreCase?}``: a regular expression (ripgrep's syntax)
  over the files under ``path``, as ``path:line:text`` lines sorted by path and line; lines
  are cut at 500 characters; at most 200 matches are shown (the result says how many were
  found). ``glob`` limits the files as ``pattern`` does for ``list_files``.

Links: ripgrep runs without ``--follow``, and the folder or file it is given is the resolved
path. ripgrep itself opens files by name, so what it reports is checked again through
directory handles (:mod:`dshd.tools.safepath`) before anyone sees it: a listed path must be a
regular file reached through plain folders inside the workspace, and a match's line must be
that file's line. What fails the check (a folder swapped for a link while ripgrep walked) is
dropped, and the result says how many were.

What is left out, in both: what ``.gitignore`` (nested ones too), ``.ignore`` and git's
global excludes leave out, whether or not the workspace is a git repository; ``.git/`` and
``.dsh/``; binary files (search). Hidden files are included. (ripgrep's own ``--glob`` would
bring ignored files back in, so globs are matched here instead.)
"""

from __future__ import annotations

import asyncio
import shutil
import stat
import sys
import sysconfig
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dshd.agent.tools import ToolContext, ToolDescription, ToolOutcome, argument_text, path_location
from dshd.tools import safepath
from dshd.tools.files import READ_FILE_CAP, Refused, check_arguments
from dshd.formats import shown as escaped
from dshd.tools.paths import PathRefused, resolve, shown

if TYPE_CHECKING:
    import pathspec

LIST_CAP = 1000  # paths listed
MATCH_CAP = 200  # matches shown
COLUMN_CAP = 500  # characters of a matching line
SCAN_CAP = 10_000  # matches read from ripgrep before it is stopped
ARGS_BYTES = 96 * 1024  # file arguments per ripgrep run (far below the kernel's limits)
PATH_BYTES = 4096  # the longest path a record can start with (the kernel's PATH_MAX)

PREVIEW_MARK = b" [... omitted end of long line]"  # ripgrep's --max-columns-preview ending

COMMON = ["--hidden", "--no-require-git", "--glob", "!.git", "--glob", "!.dsh", "--no-config", "--no-messages"]

LIST_PARAMETERS = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "Folder to list, relative to the workspace root. Default: the root."},
        "pattern": {"type": "string", "description": "Glob (gitignore syntax) the files must match, e.g. *.py or src/**/*.ts."},
    },
    "additionalProperties": False,
}
SEARCH_PARAMETERS = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Regular expression (ripgrep syntax)."},
        "path": {"type": "string", "description": "File or folder to search, relative to the workspace root. Default: the root."},
        "glob": {"type": "string", "description": "Only files matching this glob (gitignore syntax), e.g. *.py."},
        "ignoreCase": {"type": "boolean", "description": "Match regardless of case. Default false."},
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


def rg_binary() -> str:
    """The ripgrep that ships with dshd's Python environment, else one on PATH."""
    candidate = Path(sysconfig.get_path("scripts")) / "rg"
    if candidate.exists():
        return str(candidate)
    beside = Path(sys.executable).with_name("rg")
    if beside.exists():
        return str(beside)
    found = shutil.which("rg")
    if found is None:
        raise Refused("ripgrep (rg) is missing: reinstall dshd (the ripgrep package provides it)")
    return found


async def _rg(args: list[str], cwd: Path, line_limit: int | None = None) -> tuple[list[bytes], bytes, int, bool]:
    """Run rg; (stdout records, stderr, exit status, stopped early). Killed if cancelled.

    A record is one ``path\\0line:text`` (``--null``); a path may hold a newline, so a line
    of output without its NUL is the start of a record that goes on (never a record of
    its own: read so, ``a\\nb.txt``'s match would be reported as the file ``b.txt``'s)."""
    proc = await asyncio.create_subprocess_exec(
        rg_binary(), *args, cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    lines: list[bytes] = []
    stopped = False
    pending = b""  # the start of a record whose path holds a newline
    try:
        assert proc.stdout is not None and proc.stderr is not None
        errors = asyncio.ensure_future(proc.stderr.read())
        while line := await proc.stdout.readline():
            line = pending + line
            pending = b""
            if b"\0" not in line:
                if line.endswith(b"\n") and len(line) <= PATH_BYTES:
                    pending = line  # no path is longer: anything else is no record
                continue
            lines.append(line.removesuffix(b"\n"))
            if line_limit is not None and len(lines) >= line_limit:
                stopped = True
                proc.kill()
                break
        stderr = await errors
        await proc.wait()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
        raise
    return lines, stderr, proc.returncode or 0, stopped


async def _rg_paths(args: list[str], cwd: Path) -> tuple[list[bytes], bytes, int]:
    """Run rg printing NUL-terminated paths (``--null``): a file name may hold a newline,
    so lines would split it in two. (paths, stderr, exit status); killed if cancelled."""
    proc = await asyncio.create_subprocess_exec(
        rg_binary(), "--null", *args, cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        out, err = await proc.communicate()
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await asyncio.shield(proc.wait())
        raise
    return [path for path in out.split(b"\0") if path], err, proc.returncode or 0


def _spec(glob: str, field: str) -> pathspec.PathSpec:
    if not glob.strip():
        raise Refused(f"{field} is empty")
    import pathspec  # on the first glob, not when the tools load (it probes its backends)

    try:
        return pathspec.GitIgnoreSpec.from_lines([glob])
    except Exception as exc:  # noqa: BLE001 - pathspec raises several kinds for a bad pattern
        raise Refused(f"{field} {glob!r} is not a valid glob: {exc}") from None


async def matching_files(root: Path, base: Path, glob: str | None, field: str) -> list[str]:
    """Files under ``base`` that ignore rules keep (relative to ``root``), filtered by
    ``glob`` (relative to ``base``); sorted."""
    spec = _spec(glob, field) if glob is not None else None
    rel = shown(root, base)
    lines, stderr, status = await _rg_paths(["--files", *COMMON, "--", rel], root)
    if status == 2 and not lines:
        raise Refused(f"listing failed: {stderr.decode(errors='replace').strip()}")
    paths = sorted(line.decode("utf-8", errors="surrogateescape") for line in lines)
    if spec is not None:
        prefix = "" if rel == "." else rel.rstrip("/") + "/"
        paths = [p for p in paths if spec.match_file(p[len(prefix):] if p.startswith(prefix) else p)]
    return [p[2:] if p.startswith("./") else p for p in paths]


def _entry(root: Path, base: Path) -> int | None:
    """The mode of ``base`` through directory handles (None: not there)."""
    st = safepath.lstat(root, base)
    return None if st is None else st.st_mode


def _dropped_note(dropped: int, what: str) -> str:
    return (
        f" ({dropped} {what} left out: not a regular file reached through plain folders inside the "
        "workspace when checked, e.g. a folder swapped for a link meanwhile)"
    )


async def list_files(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    try:
        check_arguments(arguments, LIST_PARAMETERS)
        base = resolve(ctx.root, arguments.get("path", "."))
        mode = _entry(ctx.root, base)
        if mode is None or not stat.S_ISDIR(mode):
            raise Refused(f"{shown(ctx.root, base)} is not a folder (read_file reads a file)")
        paths = await matching_files(ctx.root, base, arguments.get("pattern"), "pattern")
        with safepath.Folders(ctx.root) as folders:
            shown_paths, dropped = [], 0
            for path in paths:
                if len(shown_paths) == LIST_CAP:
                    break
                entry = folders.entry(path)
                if entry is not None and stat.S_ISREG(entry.st_mode):
                    shown_paths.append(path)
                else:
                    dropped += 1
    except (Refused, PathRefused, OSError) as exc:
        return ToolOutcome.failure(str(exc))
    where = shown(ctx.root, base)
    what = f" matching {arguments['pattern']!r}" if "pattern" in arguments else ""
    if not shown_paths:
        return ToolOutcome.success(f"no files under {where}{what}" + (_dropped_note(dropped, "paths") if dropped else ""))
    total = len(paths) - dropped
    header = f"{total} files under {where}{what}"
    if total > LIST_CAP:
        header += f" (the first {LIST_CAP} in path order are listed; narrow with path or pattern)"
    if dropped:
        header += _dropped_note(dropped, "paths")
    # One name a line: a name holding a newline (or a bidi control) is escaped, so it reads
    # as one name (dshd.formats.shown) and the model can name it back in JSON as it reads.
    return ToolOutcome.success(header + "\n" + "\n".join(escaped(path) for path in shown_paths))


def _chunks(paths: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    size = 0
    for path in paths:
        if size + len(path) + 1 > ARGS_BYTES and out[-1]:
            out.append([])
            size = 0
        out[-1].append(path)
        size += len(path) + 1
    return out


def _match_line(raw: bytes) -> tuple[str, int, bytes] | None:
    path, sep, rest = raw.partition(b"\0")
    number, colon, text = rest.partition(b":")
    if not sep or not colon or not number.isdigit():
        return None
    return path.decode("utf-8", errors="surrogateescape").removeprefix("./"), int(number), text


def _readable(path: str) -> str:
    return path.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


def _lines_of(folders: safepath.Folders, path: str, cache: dict[str, list[bytes] | None]) -> list[bytes] | None:
    """The lines of ``path`` read through handles; ``cache`` holds one file at a time
    (matches come sorted by path)."""
    if path not in cache:
        cache.clear()
        data = folders.read(path, READ_FILE_CAP)
        cache[path] = None if data is None else data.split(b"\n")
    return cache[path]


def _is_there(lines: list[bytes] | None, number: int, text: bytes) -> bool:
    """ripgrep's line ``text`` is line ``number`` of the file read through handles."""
    if lines is None or not 1 <= number <= len(lines):
        return False
    line = lines[number - 1]
    if text == line:
        return True
    return text.endswith(PREVIEW_MARK) and line.startswith(text[: -len(PREVIEW_MARK)])


async def search(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    try:
        check_arguments(arguments, SEARCH_PARAMETERS)
        pattern = arguments["pattern"]
        if not pattern:
            raise Refused("pattern is empty")
        base = resolve(ctx.root, arguments.get("path", "."))
        mode = _entry(ctx.root, base)
        if mode is None:
            raise Refused(f"{shown(ctx.root, base)} does not exist")
        base_is_dir = stat.S_ISDIR(mode)
        args = ["--no-heading", "--with-filename", "--line-number", "--null", "--color", "never",
                "--max-columns", str(COLUMN_CAP), "--max-columns-preview", *COMMON]
        if arguments.get("ignoreCase", False):
            args.append("--ignore-case")
        args += ["--regexp", pattern, "--"]
        if "glob" in arguments:
            targets = await matching_files(ctx.root, base if base_is_dir else base.parent, arguments["glob"], "glob")
            if not base_is_dir:
                targets = [t for t in targets if t == shown(ctx.root, base)]
            runs = _chunks(targets) if targets else []
        else:
            runs = [[shown(ctx.root, base)]]
        matches: list[tuple[str, int, str]] = []
        stopped = False
        for files in runs:
            lines, stderr, status, cut = await _rg(args + files, ctx.root, SCAN_CAP - len(matches))
            if status == 2 and not lines and b"error" in stderr.lower():
                raise Refused(f"search failed: {stderr.decode(errors='replace').strip()}")
            matches += [m for m in map(_match_line, lines) if m is not None]
            if cut:
                stopped = True
                break
        matches.sort(key=lambda m: (m[0], m[1]))
        shown_matches: list[tuple[str, int, bytes]] = []
        dropped = 0
        files_read: dict[str, list[bytes] | None] = {}
        with safepath.Folders(ctx.root) as folders:
            for match in matches:
                if len(shown_matches) == MATCH_CAP:
                    break
                if _is_there(_lines_of(folders, match[0], files_read), match[1], match[2]):
                    shown_matches.append(match)
                else:
                    dropped += 1
    except (Refused, PathRefused, OSError) as exc:
        return ToolOutcome.failure(str(exc))
    where = escaped(shown(ctx.root, base))
    note = _dropped_note(dropped, "matches") if dropped else ""
    if not shown_matches:
        return ToolOutcome.success(f"no matches for {pattern!r} under {where}{note}")
    count = f"more than {SCAN_CAP}" if stopped else str(len(matches) - dropped)
    header = f"{count} matches for {pattern!r} under {where}"
    if stopped or len(matches) - dropped > MATCH_CAP:
        header += f" (the first {MATCH_CAP} in path order are shown; narrow with path or glob)"
    header += note
    # One match a line: each path escaped (a name holding a newline or a bidi control is
    # one name), as list_files shows it; the model names it back in JSON as it reads.
    body = "\n".join(
        f"{escaped(_readable(path))}:{line}:{text.decode('utf-8', errors='replace')}"
        for path, line, text in shown_matches
    )
    return ToolOutcome.success(f"{header}\n{body}")


# ---- what each call is, for people and clients (agent/tools.py: Tool.describe) ----------


def describe_list_files(arguments: dict[str, Any]) -> ToolDescription:
    pattern = argument_text(arguments, "pattern")
    title = f"List files in {argument_text(arguments, 'path') or 'the workspace'}" + (f" matching {pattern}" if pattern else "")
    return ToolDescription(title, "search", path_location(arguments))


def describe_search(arguments: dict[str, Any]) -> ToolDescription:
    pattern, path = argument_text(arguments, "pattern"), argument_text(arguments, "path")
    title = (f"Search for {pattern}" if pattern else "Search") + (f" in {path}" if path else "")
    return ToolDescription(title, "search", path_location(arguments))
