"""list_files and search, both on ripgrep (the ``rg`` of the ``ripgrep`` wheel).

- ``list_files {path?, pattern?}``: the files under ``path`` (default: the workspace root),
  relative to the root, sorted. ``pattern`` is a glob in ``.gitignore`` syntax matched against
  the path relative to ``path`` (``*.py`` at any depth, ``src/**/*.ts``, ``/top-level.md``),
  matched with ``pathspec``. At most 1000 are listed (the result says how many there are).
- ``search {pattern, path?, glob?, ignoreCase?}``: a regular expression (ripgrep's syntax)
  over the files under ``path``, as ``path:line:text`` lines sorted by path and line; lines
  are cut at 500 characters; at most 200 matches are shown (the result says how many were
  found). ``glob`` limits the files as ``pattern`` does for ``list_files``.

What is left out, in both: what ``.gitignore`` (nested ones too), ``.ignore`` and git's
global excludes leave out, whether or not the workspace is a git repository; ``.git/`` and
``.dsh/``; binary files (search). Hidden files are included. (ripgrep's own ``--glob`` would
bring ignored files back in, so globs are matched here instead.)
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pathspec

from dshd.agent.tools import ToolContext, ToolOutcome
from dshd.tools.files import Refused, check_arguments
from dshd.tools.paths import PathRefused, resolve, shown

LIST_CAP = 1000  # paths listed
MATCH_CAP = 200  # matches shown
COLUMN_CAP = 500  # characters of a matching line
SCAN_CAP = 10_000  # matches read from ripgrep before it is stopped
ARGS_BYTES = 96 * 1024  # file arguments per ripgrep run (far below the kernel's limits)

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
    """Run rg; (stdout lines, stderr, exit status, stopped early). Killed if cancelled."""
    proc = await asyncio.create_subprocess_exec(
        rg_binary(), *args, cwd=str(cwd),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    lines: list[bytes] = []
    stopped = False
    try:
        assert proc.stdout is not None and proc.stderr is not None
        errors = asyncio.ensure_future(proc.stderr.read())
        while line := await proc.stdout.readline():
            lines.append(line.rstrip(b"\n"))
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


def _spec(glob: str, field: str) -> pathspec.PathSpec:
    if not glob.strip():
        raise Refused(f"{field} is empty")
    try:
        return pathspec.GitIgnoreSpec.from_lines([glob])
    except Exception as exc:  # noqa: BLE001 - pathspec raises several kinds for a bad pattern
        raise Refused(f"{field} {glob!r} is not a valid glob: {exc}") from None


async def matching_files(root: Path, base: Path, glob: str | None, field: str) -> list[str]:
    """Files under ``base`` that ignore rules keep (relative to ``root``), filtered by
    ``glob`` (relative to ``base``); sorted."""
    spec = _spec(glob, field) if glob is not None else None
    rel = shown(root, base)
    lines, stderr, status, _ = await _rg(["--files", *COMMON, "--", rel], root)
    if status == 2 and not lines:
        raise Refused(f"listing failed: {stderr.decode(errors='replace').strip()}")
    paths = sorted(line.decode("utf-8", errors="surrogateescape") for line in lines)
    if spec is not None:
        prefix = "" if rel == "." else rel.rstrip("/") + "/"
        paths = [p for p in paths if spec.match_file(p[len(prefix):] if p.startswith(prefix) else p)]
    return [p[2:] if p.startswith("./") else p for p in paths]


async def list_files(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    try:
        check_arguments(arguments, LIST_PARAMETERS)
        base = resolve(ctx.root, arguments.get("path", "."))
        if not base.is_dir():
            raise Refused(f"{shown(ctx.root, base)} is not a folder (read_file reads a file)")
        paths = await matching_files(ctx.root, base, arguments.get("pattern"), "pattern")
    except (Refused, PathRefused) as exc:
        return ToolOutcome.failure(str(exc))
    where = shown(ctx.root, base)
    what = f" matching {arguments['pattern']!r}" if "pattern" in arguments else ""
    if not paths:
        return ToolOutcome.success(f"no files under {where}{what}")
    header = f"{len(paths)} files under {where}{what}"
    if len(paths) > LIST_CAP:
        header += f" (the first {LIST_CAP} in path order are listed; narrow with path or pattern)"
    return ToolOutcome.success(header + "\n" + "\n".join(paths[:LIST_CAP]))


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


def _match_line(raw: bytes) -> tuple[str, int, str] | None:
    path, sep, rest = raw.partition(b"\0")
    number, colon, text = rest.partition(b":")
    if not sep or not colon or not number.isdigit():
        return None
    return path.decode("utf-8", errors="replace").removeprefix("./"), int(number), text.decode("utf-8", errors="replace")


async def search(ctx: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    try:
        check_arguments(arguments, SEARCH_PARAMETERS)
        pattern = arguments["pattern"]
        if not pattern:
            raise Refused("pattern is empty")
        base = resolve(ctx.root, arguments.get("path", "."))
        if not base.exists():
            raise Refused(f"{shown(ctx.root, base)} does not exist")
        args = ["--no-heading", "--with-filename", "--line-number", "--null", "--color", "never",
                "--max-columns", str(COLUMN_CAP), "--max-columns-preview", *COMMON]
        if arguments.get("ignoreCase", False):
            args.append("--ignore-case")
        args += ["--regexp", pattern, "--"]
        if "glob" in arguments:
            targets = await matching_files(ctx.root, base if base.is_dir() else base.parent, arguments["glob"], "glob")
            if base.is_file():
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
    except (Refused, PathRefused) as exc:
        return ToolOutcome.failure(str(exc))
    where = shown(ctx.root, base)
    if not matches:
        return ToolOutcome.success(f"no matches for {pattern!r} under {where}")
    matches.sort(key=lambda m: (m[0], m[1]))
    count = f"more than {SCAN_CAP}" if stopped else str(len(matches))
    header = f"{count} matches for {pattern!r} under {where}"
    if stopped or len(matches) > MATCH_CAP:
        header += f" (the first {MATCH_CAP} in path order are shown; narrow with path or glob)"
    body = "\n".join(f"{path}:{line}:{text}" for path, line, text in matches[:MATCH_CAP])
    return ToolOutcome.success(f"{header}\n{body}")
