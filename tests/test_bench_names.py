"""No benchmark shadows a module: several tests put bench/ on sys.path (to share a bench's
log builder), and a bench named like a package (bench/mcp.py, bench/acp.py once) then hid
the real one from every later test in that process ("'mcp' is not a package"). The test
folders count too: pytest imports them as top-level packages (``sandbox.test_sandbox``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
TESTS = Path(__file__).resolve().parent


def test_no_bench_is_named_like_an_importable_module():
    path = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
    saved = sys.path[:]
    sys.path[:] = path
    try:
        clashes = []
        for script in sorted(BENCH.glob("*.py")):
            name = script.stem
            # A module already loaded under that name from elsewhere counts too.
            loaded = sys.modules.get(name)
            if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve().parent != BENCH:
                clashes.append(name)
                continue
            if loaded is None and (importlib.util.find_spec(name) is not None or (TESTS / name).is_dir()):
                clashes.append(name)
    finally:
        sys.path[:] = saved
    assert clashes == []
    # The control: a name that is a module (the SDK this once hid) is found the same way.
    assert importlib.util.find_spec("mcp") is not None
