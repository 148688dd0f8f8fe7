"""Layer 1: snapshots of a workspace's files in a shadow git repository of dshd's own
(``.dsh/checkpoints.git``), their differences, and crash-safe restores. Knows files and
the ``git`` binary; nothing of sessions, steps or the log."""

from dshd.checkpoints.shadow import (
    EMPTY_TREE,
    FileChange,
    FileDiff,
    ShadowRepo,
    Snapshot,
)

__all__ = ["EMPTY_TREE", "FileChange", "FileDiff", "ShadowRepo", "Snapshot"]
