"""When the folder chose a model that was not used, every prompt says so.

An untrusted folder's ``.dsh/config.toml`` may not choose the model server (its
``[model] provider``, ``baseUrl``, ``apiKeyEnv`` are left out: see
``agent/config_layers.py``). Left with the built-in scripted model and no script, each
prompt would be answered "(script exhausted)", which tells the person nothing. Instead
the workspace gets :class:`UnchosenModel`, which answers every request with the reason
and what to do: trust the folder, or choose the model in the person's own settings.
Both front doors use it (:func:`workspace_model`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from dshd.models import ModelRequest
from dshd.models.interface import ModelEvent, Stop, TextDelta


class UnchosenModel:
    def __init__(self, text: str) -> None:
        self.text = text

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield TextDelta(self.text)
        yield Stop("end-turn")


def unchosen_model_text(loaded: Any, *, editor_trust: bool) -> str | None:
    """The answer to give, or None when the model in force is the one the person chose.

    ``loaded`` is the door's LoadedConfig; ``editor_trust``: the door can learn trust from
    the editor (``dshd serve``), not only from the user config (``dshd acp``)."""
    config = loaded.config
    provider = getattr(getattr(config, "model", None), "provider", None)
    if provider != "scripted" or getattr(config, "scriptReplies", None):
        return None
    left_out = [item for item in loaded.ignored if getattr(item, "untrusted", False) and item.key.startswith("model.")]
    if not left_out:
        return None
    keys = ", ".join(f"[model] {item.key.removeprefix('model.')}" for item in left_out)
    files = sorted({item.file for item in left_out})
    user = loaded.user_file or "~/.config/dsh/config.toml"
    trust = (
        "trust the folder in your editor (or add it to [trust] folders in " f"{user})"
        if editor_trust
        else f"add the folder to [trust] folders in {user}"
    )
    return (
        f"No model answered: this folder is not trusted, so the model it chose in {', '.join(files)} "
        f"({keys}) was not used, and dshd has no other model to ask. To use that model, {trust} "
        "and start dshd again; or choose your model in your own settings (your editor's dshd "
        f"settings, or [model] in {user})."
    )


def workspace_model(loaded: Any, *, editor_trust: bool) -> UnchosenModel | None:
    """The model a door gives its Workspace instead of the configured one (None: none)."""
    text = unchosen_model_text(loaded, editor_trust=editor_trust)
    return None if text is None else UnchosenModel(text)
