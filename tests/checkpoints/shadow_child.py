"""Child process for tests/checkpoints/test_shadow.py (not a test module); the test kills it.

    shadow_child.py snapshot ROOT               print "start", take one snapshot, print "done <tree>"
    shadow_child.py restore ROOT TREE PATHS     print "start", restore the paths (a JSON list file), print "done"
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dshd.checkpoints import ShadowRepo


def main() -> int:
    mode, root = sys.argv[1], Path(sys.argv[2])
    shadow = ShadowRepo(root)
    print("start", flush=True)
    if mode == "snapshot":
        print("done", shadow.snapshot().tree, flush=True)
    else:
        paths = json.loads(Path(sys.argv[4]).read_text())
        shadow.restore(sys.argv[3], paths, {"by": "child"})
        print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
