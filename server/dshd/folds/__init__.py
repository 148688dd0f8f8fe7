"""Layer 2: typed events, pure folds over frozen states, strict replay."""

from dshd.folds.replay import (
    CHECKPOINT_VERSION,
    Checkpoint,
    ReplayError,
    ReplayResult,
    encode_checkpoint,
    fingerprint,
    fold_file,
    fold_lines,
    replay,
)
from dshd.folds.rules import FoldError, apply, fold_goal, fold_open_turn, fold_plan_mode
from dshd.folds.state import GoalState, PlanState, SessionState, TurnState

__all__ = [
    "CHECKPOINT_VERSION",
    "Checkpoint",
    "FoldError",
    "GoalState",
    "PlanState",
    "ReplayError",
    "ReplayResult",
    "SessionState",
    "TurnState",
    "apply",
    "encode_checkpoint",
    "fingerprint",
    "fold_goal",
    "fold_file",
    "fold_lines",
    "fold_open_turn",
    "fold_plan_mode",
    "replay",
]
