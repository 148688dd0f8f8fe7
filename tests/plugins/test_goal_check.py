"""What the model reads of a failed ``[goals] check`` (G-23): the run's first line (exit code,
sandbox), then the tail of the output, where test runners print their summary; the real
runs are in tests/e2e/test_goal_check.py."""

from __future__ import annotations

from dshd.plugins.goals import CHECK_TAIL_CHARS, CHECK_TAIL_LINES, check_output_tail


def test_the_tail_keeps_the_first_line_and_the_last_lines():
    output = "\n".join(f"line {n}" for n in range(1, 101))
    tail = check_output_tail(f"exit code 1 (workspace-write sandbox, network off)\n{output}")
    lines = tail.splitlines()
    assert lines[0] == "exit code 1 (workspace-write sandbox, network off)"
    assert lines[1] == f"[the first {100 - CHECK_TAIL_LINES} lines of its output are left out]"
    assert lines[2:] == [f"line {n}" for n in range(101 - CHECK_TAIL_LINES, 101)]


def test_short_output_is_kept_whole_and_long_lines_are_capped():
    assert check_output_tail("exit code 2 (x)\nFAILED test_a") == "exit code 2 (x)\nFAILED test_a"
    assert check_output_tail("exit code 0 (x)") == "exit code 0 (x)"
    wide = check_output_tail("exit code 1 (x)\n" + "y" * 50_000 + "\nsummary: 1 failed")
    assert wide.endswith("summary: 1 failed") and len(wide) <= len("exit code 1 (x)\n") + CHECK_TAIL_CHARS
