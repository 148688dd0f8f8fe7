"""Can a sandbox be built here? A real bubblewrap run of ``true`` with the namespaces the
modes use; when it fails, the reason (bubblewrap's own words) and how to fix it.

Known causes: not Linux; bubblewrap not installed; unprivileged user namespaces refused
(Ubuntu 23.10+ restricts them with AppArmor: ``kernel.apparmor_restrict_unprivileged_userns``;
Debian's older kernels had ``kernel.unprivileged_userns_clone``; ``user.max_user_namespaces``
may be 0; containers often forbid them). A success is remembered for the process; a failure
is probed again next time, so installing bubblewrap takes effect without a restart.

The same run loads the socket wall (:mod:`dshd.sandbox.seccomp`, ``--seccomp``): where it
cannot be built (libseccomp missing) or loaded (a kernel without seccomp filters), the
sandbox still works but :attr:`Probe.wall` is False with the reason, and the callers
refuse to start anything that needs the wall (fail closed) unless the person's user
config allows Unix sockets (``[tools] unixSockets = ["*"]``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

INSTALL = (
    "install bubblewrap (Debian/Ubuntu: sudo apt install bubblewrap; Fedora: sudo dnf install "
    "bubblewrap; Arch: sudo pacman -S bubblewrap)"
)
UNSANDBOXED = (
    "or, knowingly, run commands without a sandbox: [tools] sandbox = \"full-access\" with network = true"
)
APPARMOR = (
    "Ubuntu restricts unprivileged user namespaces with AppArmor: allow bwrap with an AppArmor "
    "profile (see docs/tools.md), or for the whole machine: "
    "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
)


@dataclass(frozen=True)
class Probe:
    ok: bool
    reason: str = ""  # why no sandbox can be built
    fix: str = ""  # what the person can do about it
    bwrap: str | None = None  # the bubblewrap found
    wall: bool = False  # the seccomp socket wall can be loaded here
    wall_reason: str = ""  # why not

    def wall_refusal(self) -> str:
        """Why a start that needs the socket wall is refused here, and the way out."""
        return (
            f"the socket wall cannot be built here: {self.wall_reason}. Install libseccomp (Debian/Ubuntu: "
            "sudo apt install libseccomp2), or, knowingly, allow Unix sockets in your user config: "
            '[tools] unixSockets = ["*"]'
        )


_ok: dict[str, Probe] = {}


def _sysctl(name: str) -> str | None:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return None


def _fix_for(stderr: str) -> str:
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return APPARMOR
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        return "enable unprivileged user namespaces: sudo sysctl -w kernel.unprivileged_userns_clone=1"
    if _sysctl("user.max_user_namespaces") == "0":
        return "allow user namespaces: sudo sysctl -w user.max_user_namespaces=15000"
    return "run dshd where user namespaces are allowed (a container may need --privileged or a seccomp profile that allows them)"


async def probe(bwrap: str | None = None) -> Probe:
    if sys.platform != "linux":
        return Probe(False, f"the sandbox uses bubblewrap, which runs on Linux only (this is {sys.platform})", UNSANDBOXED)
    found = shutil.which(bwrap or "bwrap")
    if found is None:
        return Probe(False, "bubblewrap (bwrap) is not installed", f"{INSTALL}; {UNSANDBOXED}")
    if found in _ok:
        return _ok[found]
    from dshd.sandbox.seccomp import SeccompUnavailable, program

    try:
        wall_program: bytes | None = program("strict")
        unavailable = ""
    except SeccompUnavailable as exc:
        wall_program, unavailable = None, str(exc)
    ok, said = await _run_true(found, wall_program)
    if ok is None:
        return Probe(False, "bubblewrap did not start a sandbox within 10 s", _fix_for(""), found)
    if not ok and wall_program is not None:
        first = said
        ok, said = await _run_true(found, None)  # without the wall: is it the filter?
        if ok:
            unavailable = f"bubblewrap could not load the seccomp socket filter ({first})"
    if ok is None:
        return Probe(False, "bubblewrap did not start a sandbox within 10 s", _fix_for(""), found)
    if not ok:
        if said.startswith("exec: "):
            return Probe(False, f"bubblewrap could not be started: {said[6:]}", INSTALL, found)
        return Probe(False, f"bubblewrap cannot build a sandbox here ({said})", f"{_fix_for(said)}; {UNSANDBOXED}", found)
    result = _ok[found] = Probe(True, bwrap=found, wall=not unavailable, wall_reason=unavailable)
    return result


async def _run_true(bwrap: str, wall_program: bytes | None) -> tuple[bool | None, str]:
    """(ran, bubblewrap's words) for ``true`` in a sandbox, with the wall when given; ran
    is None on a timeout."""
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "--unshare-net",
            "--die-with-parent"]
    fds: tuple[int, ...] = ()
    if wall_program is not None:
        read, write = os.pipe()
        fds = (read,)
        argv += ["--seccomp", str(read)]
    argv += ["--", "true"]
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE, pass_fds=fds, env={},
            )
        finally:
            if wall_program is not None:
                os.close(read)
                try:
                    os.write(write, wall_program)  # a few hundred bytes: the pipe holds them
                finally:
                    os.close(write)
        try:
            _, stderr = await asyncio.wait_for(proc.communicate(), 10)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return None, ""
    except OSError as exc:
        return False, f"exec: {exc}"
    if proc.returncode != 0:
        return False, stderr.decode(errors="replace").strip() or f"exit status {proc.returncode}"
    return True, ""
