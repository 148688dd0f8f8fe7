"""Layer 1: an OS sandbox for commands. Knows nothing of agents, sessions or tools.

- :mod:`policy`: a pure function from a :class:`SandboxPolicy` to a bubblewrap argv;
- :mod:`launcher`: the one launcher every sandboxed process starts through (bubblewrap's
  own environment, the child's set inside, options through ``--args``, the socket wall);
- :mod:`seccomp`: the socket wall, a seccomp allowlist of socket families;
- :mod:`runner`: runs an argv in its own process group with a timeout, keeps the tail of
  its output, and kills the whole group (and every descendant it can find) on timeout,
  cancellation, exit and daemon shutdown;
- :mod:`probe`: whether a sandbox can be built here, and if not why and how to fix it.
"""

from dshd.sandbox.policy import MODES, SandboxPolicy, bwrap_argv
from dshd.sandbox.probe import Probe, probe
from dshd.sandbox.runner import RunResult, kill_all, run

__all__ = ["MODES", "Probe", "RunResult", "SandboxPolicy", "bwrap_argv", "kill_all", "probe", "run"]
