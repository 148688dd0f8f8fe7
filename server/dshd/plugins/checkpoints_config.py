"""The checkpoints plugin's ``[checkpoints]`` table.

Keys::

    [checkpoints]
    enabled = true            # snapshot the files before and after each step that may change them
    maxFileBytes = 1048576    # files larger than this are left out of snapshots (0 to 67108864)

Light on purpose: the composer imports it without the plugin.
"""

from __future__ import annotations

from dshd.config_tables import ConfigTable, Table, config_error

DEFAULT_MAX_FILE_BYTES = 1 << 20
# A snapshot copies every file under the cap into .dsh/checkpoints.git: a workspace file
# cannot make that copy its own disk-filling gigabytes.
MAX_FILE_BYTES_LIMIT = 64 << 20


class CheckpointsConfig(Table):
    enabled: bool = True
    maxFileBytes: int = DEFAULT_MAX_FILE_BYTES


def check_checkpoints(checkpoints: CheckpointsConfig) -> None:
    if not 0 <= checkpoints.maxFileBytes <= MAX_FILE_BYTES_LIMIT:
        raise config_error("checkpoints.maxFileBytes", f"must be from 0 to {MAX_FILE_BYTES_LIMIT}")


TABLE = ConfigTable("checkpoints", CheckpointsConfig, check=check_checkpoints)
