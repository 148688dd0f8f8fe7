"""Layer 1: the key that tells dshd's own state from state a repository brought.

Everything under a workspace's ``.dsh/`` may have come with a clone. What dshd acts on
there as its own (the checkpoint repository, a restore journal, the caches beside a
session log) carries an HMAC-SHA256 made with a random key that lives outside every
workspace, in the user's state folder: ``$XDG_STATE_HOME/dsh/state.key`` (see :func:`state_dir`). A clone cannot bring a valid mark:
the key never leaves this user on this machine.

The folder is made 0700 and must be a folder (not a link) of this user that no one else
can write; the key is 32 random bytes in a regular file of this user that no one else can
read or write. Anything else is refused (:class:`UnsafePath`): dshd then trusts nothing
that needs the key (fail closed), and says why. Two processes making the key at once
end with the same one: it is written to a temporary name and linked into place, and the
loser reads the winner's.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
import threading
from pathlib import Path

from dshd.log.safefs import UnsafePath, io_error

KEY_NAME = "state.key"
KEY_BYTES = 32
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_lock = threading.Lock()
_keys: dict[tuple[str, str], bytes] = {}


def state_dir() -> Path:
    """The user's dshd state folder (made by :func:`state_key` when needed), by the one rule
    ``dshd_connect.state_dir`` keeps (the shared daemon's fallback socket folder is ``run``
    inside it), so the sandbox, which hides that folder whole, hides the key with it."""
    import dshd_connect

    try:
        return Path(dshd_connect.state_dir(os.environ, os.getuid()))
    except dshd_connect.ConnectError as exc:  # no home folder at all: nothing can be trusted
        raise UnsafePath("$XDG_STATE_HOME/dsh", str(exc)) from None


def state_key() -> bytes:
    """This user's key on this machine, made on first use (cached for the environment that
    chose its folder, so a mark costs no ``stat``)."""
    env = (os.environ.get("XDG_STATE_HOME", ""), os.environ.get("HOME", ""))
    found = _keys.get(env)
    if found is not None:
        return found
    with _lock:
        found = _keys.get(env)
        if found is None:
            found = _keys[env] = _load_or_make(state_dir())
        return found


def mac(purpose: str, data: bytes) -> str:
    """The hex HMAC of ``data`` for ``purpose`` (a mark made for one use never passes for another)."""
    return hmac.new(state_key(), purpose.encode() + b"\0" + data, hashlib.sha256).hexdigest()


def mac_ok(purpose: str, data: bytes, given: object) -> bool:
    """Whether ``given`` is :func:`mac` of ``data`` for ``purpose`` (compared in constant time)."""
    return isinstance(given, str) and hmac.compare_digest(mac(purpose, data), given)


def _load_or_make(folder: Path) -> bytes:
    dir_fd = _open_state_dir(folder)
    try:
        try:
            return _read_key(dir_fd, folder)
        except FileNotFoundError:
            pass
        tmp = f"{KEY_NAME}.new-{os.getpid()}-{os.urandom(4).hex()}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=dir_fd)
            try:
                os.write(fd, os.urandom(KEY_BYTES))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, KEY_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            except FileExistsError:
                pass  # another process made it first: theirs is the key
            finally:
                os.unlink(tmp, dir_fd=dir_fd)
            os.fsync(dir_fd)
        except OSError as exc:
            raise io_error(exc, folder / KEY_NAME, "make the state key") from None
        return _read_key(dir_fd, folder)
    finally:
        os.close(dir_fd)


def _open_state_dir(folder: Path) -> int:
    try:
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        fd = os.open(folder, _DIR_FLAGS)
    except OSError as exc:
        if os.path.islink(folder):
            raise UnsafePath(folder, "is a symbolic link") from None
        raise io_error(exc, folder, "open the state folder") from None
    st = os.fstat(fd)
    reason = None
    if st.st_uid != os.getuid():
        reason = "belongs to another user"
    elif st.st_mode & 0o022:
        reason = "can be written by other users (chmod 700 it)"
    if reason is not None:
        os.close(fd)
        raise UnsafePath(folder, reason)
    return fd


def _read_key(dir_fd: int, folder: Path) -> bytes:
    path = folder / KEY_NAME
    try:
        fd = os.open(KEY_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafePath(path, "is a symbolic link") from None
        raise io_error(exc, path, "read the state key") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafePath(path, "is not a regular file")
        if st.st_uid != os.getuid():
            raise UnsafePath(path, "belongs to another user")
        if st.st_mode & 0o077:
            raise UnsafePath(path, "can be read or written by other users (chmod 600 it)")
        data = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise UnsafePath(path, f"is not a key of {KEY_BYTES} bytes (delete it: a new one is made)")
    return data
