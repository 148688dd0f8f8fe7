"""The attack tests drive the real daemon as tests/e2e/ does: the same fixtures (a fresh
workspace with a scripted model, and the daemons started on it), shared rather than copied."""

from __future__ import annotations

from tests.e2e.conftest import daemons, workspace  # noqa: F401 - fixtures, found by name
