"""The socket wall's edges, through the one launcher against the real kernel: a family
with high bits set (which the kernel truncates to AF_UNIX), io_uring (which opens sockets
without socket()), socketpair (allowed: the command's own pipes); a host where the wall
cannot be loaded refuses commands, or runs them under the person's named "*" downgrade,
saying so; [tools] unixSockets only from the user config. Each probe runs outside the
sandbox first (the control: there it succeeds)."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dshd.agent.config_layers import load_layers
from dshd.agent.tools import Policy, ToolContext
from dshd.sandbox import run, seccomp
from dshd.sandbox.host import host_policy
from dshd.sandbox.launcher import sandbox_start
from dshd.tools.run import RunCommand
from tests.sandbox_support import PYTHON, needs_sandbox

probe_module = sys.modules["dshd.sandbox.probe"]  # the package's ``probe`` is the function

# socket(0x1_00000001, SOCK_STREAM): the kernel reads an int (AF_UNIX); io_uring_setup(1, params).
EDGES = r"""
import ctypes, errno, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def said(result):
    return "ok" if result >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
print("high-bits", said(libc.syscall(41, ctypes.c_long(0x100000001), 1, 0)))
params = ctypes.create_string_buffer(120)
print("io_uring", said(libc.syscall(425, 1, params)))
try:
    socket.socketpair(); print("socketpair ok")
except OSError as e:
    print("socketpair", errno.errorcode[e.errno])
try:
    socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM); print("packet ok")
except OSError as e:
    print("packet", errno.errorcode[e.errno])
"""


@needs_sandbox
@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "full-access"])
async def test_the_edges_of_the_family_allowlist(tmp_path, mode):
    ws = tmp_path.resolve()
    plain = subprocess.run([PYTHON, "-c", EDGES], capture_output=True, text=True, timeout=30)
    lines = plain.stdout.splitlines()
    assert lines[0] == "high-bits ok" and lines[2] == "socketpair ok", plain.stdout  # the control
    assert lines[1] in ("io_uring ok", "io_uring ENOSYS")
    found = await probe_module.probe()
    start = sandbox_start(host_policy(mode, False, ws, ()), [PYTHON, "-c", EDGES], ws, {"PATH": os.environ["PATH"]},
                          bwrap=found.bwrap or "bwrap")
    try:
        result = await run(start.argv, cwd=ws, env=start.env, timeout_s=30, output_cap=4096, pass_fds=start.pass_fds)
    finally:
        start.close()
    assert result.output.splitlines() == ["high-bits EPERM", "io_uring EPERM", "socketpair ok", "packet EPERM"], result.output


@needs_sandbox
async def test_where_the_wall_cannot_be_built_commands_are_refused_unless_the_person_allowed_sockets(tmp_path, monkeypatch):
    ws = tmp_path.resolve()
    ctx = ToolContext("test", 1, 1, ws, Policy("workspace-write", False, ()))  # type: ignore[arg-type]
    ran = await RunCommand()(ctx, {"command": "echo ran"})
    assert ran.ok and ran.content.splitlines()[1] == "ran"  # the control: it runs where the wall loads

    def no_libseccomp(variant):
        raise seccomp.SeccompUnavailable("libseccomp cannot be loaded (test)")

    monkeypatch.setattr(seccomp, "program", no_libseccomp)
    monkeypatch.setattr(probe_module, "_ok", {})
    monkeypatch.setattr("dshd.sandbox.launcher.program", no_libseccomp)
    refused = await RunCommand()(ctx, {"command": "echo ran > ran.txt"})
    assert not refused.ok and refused.content.startswith("Not run: the socket wall cannot be built here")
    assert 'unixSockets = ["*"]' in refused.content and not (ws / "ran.txt").exists()
    allowed = await RunCommand(unix_sockets=["*"])(ctx, {"command": "echo ran"})
    assert allowed.ok and allowed.content.splitlines()[1] == "ran"
    assert "no socket wall" in allowed.content.splitlines()[0]
    # Full access with the network on never had the wall: it runs.
    open_ctx = ToolContext("test", 1, 1, ws, Policy("full-access", True, ()))  # type: ignore[arg-type]
    assert (await RunCommand()(open_ctx, {"command": "true"})).ok


def test_unix_sockets_come_only_from_the_user_config(tmp_path):
    ws = tmp_path / "ws"
    (ws / ".dsh").mkdir(parents=True)
    (ws / ".dsh" / "config.toml").write_text('[tools]\nunixSockets = ["*"]\n')
    user = tmp_path / "user.toml"
    user.write_text("")
    loaded = load_layers(ws, {"tools": {"unixSockets": ["/run/docker.sock"]}}, user_file=user, editor_trusted=True)
    assert loaded.config.tools.unixSockets == []
    assert {(item.key, item.file) for item in loaded.ignored if item.key == "tools.unixSockets"} == {
        ("tools.unixSockets", str(ws / ".dsh" / "config.toml")),
        ("tools.unixSockets", "initializationOptions.config"),
    }
    user.write_text('[tools]\nunixSockets = ["/run/user/1000/bus"]\n')  # the control: the person's own
    assert load_layers(ws, None, user_file=user).config.tools.unixSockets == ["/run/user/1000/bus"]
    user.write_text('[tools]\nunixSockets = ["relative.sock"]\n')
    with pytest.raises(Exception, match="tools.unixSockets"):
        load_layers(ws, None, user_file=user)


# The other ABIs of an x86-64 kernel from a 64-bit program: i386 system calls through
# `int $0x80` (socket, and socketcall whose arguments are in memory: a non-PIE program keeps
# them below 4 GiB), and x32's numbering (bit 30 set; ENOSYS where the kernel has no x32).
OTHER_ABIS = r"""
#include <stdio.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

static unsigned int call_args[3] = {1, 1, 0};  /* AF_UNIX, SOCK_STREAM, 0: in low memory (-no-pie) */

static long int80(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile ("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b), "d"(c) : "memory");
    return ret;
}

static const char *said(long ret) {
    static char buf[32];
    if (ret >= 0) return "ok";
    snprintf(buf, sizeof buf, "%s", -ret == EPERM ? "EPERM" : -ret == ENOSYS ? "ENOSYS" : strerror(-ret));
    return buf;
}

int main(void) {
    printf("i386-socket %s\n", said(int80(359, 1, 1, 0)));
    printf("i386-socketcall %s\n", said(int80(102, 1, (long)call_args, 0)));
    long r = syscall(0x40000000 | 41, 1, 1, 0);
    printf("x32-socket %s\n", r >= 0 ? "ok" : errno == EPERM ? "EPERM" : errno == ENOSYS ? "ENOSYS" : strerror(errno));
    return 0;
}
"""


@needs_sandbox
@pytest.mark.skipif(platform.machine() != "x86_64" or shutil.which("gcc") is None, reason="x86-64 with gcc")
async def test_the_other_abis_cannot_make_a_socket(tmp_path):
    source = tmp_path / "abi.c"
    source.write_text(OTHER_ABIS)
    program = tmp_path / "abi"
    subprocess.run(["gcc", "-no-pie", "-O0", "-o", str(program), str(source)], check=True, capture_output=True, timeout=60)
    plain = subprocess.run([str(program)], capture_output=True, text=True, timeout=30).stdout.splitlines()
    assert plain[:2] == ["i386-socket ok", "i386-socketcall ok"], plain  # the control
    assert plain[2] in ("x32-socket ok", "x32-socket ENOSYS")
    ws = tmp_path.resolve()
    found = await probe_module.probe()
    start = sandbox_start(host_policy("full-access", False, ws, ()), [str(program)], ws, {}, bwrap=found.bwrap or "bwrap")
    try:
        result = await run(start.argv, cwd=ws, env=start.env, timeout_s=30, output_cap=4096, pass_fds=start.pass_fds)
    finally:
        start.close()
    assert result.output.splitlines() == ["i386-socket EPERM", "i386-socketcall EPERM", "x32-socket EPERM"], result.output
