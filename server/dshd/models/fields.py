"""Reading a provider's stream items whichever way they arrive: the SDKs hand over
typed objects (attributes), the tests and raw SSE hand over dicts (keys)."""

from __future__ import annotations

from typing import Any


def field(obj: Any, name: str, default: Any = None) -> Any:
    if obj is None:
        return default
    if isinstance(obj, dict):
        value = obj.get(name, default)
    else:
        value = getattr(obj, name, default)
    return default if value is None else value
