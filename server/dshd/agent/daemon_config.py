"""The ``[daemon]`` table: the shared daemon's lifetime (``dshd daemon``, which ``dshd
connect`` and ``dshd acp`` start).

Keys (defaults below)::

    [daemon]  idleTimeoutS = 60   # seconds with no connection before the daemon exits

Accepted in every config layer. The daemon reads it at start from the user config and
the workspace file (an editor's settings come per connection, and the daemon outlives
any one of them); ``dshd serve``, one process per client, ignores it.
"""

from __future__ import annotations

from dshd.config_tables import ConfigTable, Table, config_error


class DaemonConfig(Table):
    idleTimeoutS: float = 60.0


def check_daemon(daemon: DaemonConfig) -> None:
    if not 0 < daemon.idleTimeoutS < float("inf"):
        raise config_error("daemon.idleTimeoutS", "must be a positive number of seconds")


TABLE = ConfigTable("daemon", DaemonConfig, check=check_daemon)
