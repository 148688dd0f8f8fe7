"""Replay's hot loop (folds.replay.fold_file) keeps its integer comparisons specialized.

CPython 3.11 specializes ``COMPARE_OP`` (to an int or str compare fused with its jump)
only when the very next instruction is a conditional jump; a jump farther than 255 code
units needs ``EXTENDED_ARG`` first, and the comparison then runs as a generic rich compare
on every event (it did for the seq and turn checks, a few percent of strict replay).
This checks the compiled loop, with a control showing the check finds a far jump.
"""

from __future__ import annotations

import dis
import sys

import pytest

from dshd.folds.replay import fold_file

pytestmark = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11), reason="the specialization rule checked here is CPython 3.11's"
)


def unspecializable_compares(fn) -> list[int]:
    """Source lines of comparisons in ``fn`` not followed directly by a conditional jump."""
    instructions = list(dis.get_instructions(fn))
    return [
        ins.positions.lineno
        for ins, following in zip(instructions, instructions[1:])
        if ins.opname == "COMPARE_OP" and not following.opname.startswith("POP_JUMP")
    ]


def test_every_comparison_in_the_hot_loop_can_specialize():
    assert unspecializable_compares(fold_file) == []


def test_control_a_comparison_jumping_over_a_long_body_is_found():
    body = "\n".join(f"        y = x + {i}" for i in range(120))
    source = f"def far(x, n):\n    if x == n:\n{body}\n    return x\n"
    namespace: dict = {}
    exec(compile(source, "<far>", "exec"), namespace)
    assert unspecializable_compares(namespace["far"]) == [2]
