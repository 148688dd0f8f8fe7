"""The adapter a config names. A provider's module (and so its SDK) is imported only
when that provider is configured: a daemon on the scripted model never loads one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dshd.models.interface import ModelAdapter

if TYPE_CHECKING:
    from dshd.agent.config import Config


def model_from_config(config: "Config") -> ModelAdapter:
    provider = config.model.provider
    if provider == "scripted":
        from dshd.models.scripted import ScriptedModel

        return ScriptedModel(config.scriptReplies)
    from dshd.errors import DshError

    raise DshError("invalid-config", f"provider {provider!r} is not built yet", key="model.provider")
