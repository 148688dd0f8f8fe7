"""The adapter a config names. A provider's module (and so its SDK) is imported only
when that provider is configured: a daemon on the scripted model never loads one."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dshd.models.interface import ModelAdapter

if TYPE_CHECKING:
    from dshd.models.config import ModelSettings as Config


def model_from_config(config: "Config") -> ModelAdapter:
    provider = config.model.provider
    if provider == "scripted":
        from dshd.models.scripted import ScriptedModel

        return ScriptedModel(config.scriptReplies)
    if provider == "openai":
        from dshd.models.openai import OpenAIModel

        return OpenAIModel(config.model)
    if provider == "anthropic":
        from dshd.models.anthropic import AnthropicModel

        return AnthropicModel(config.model)
    from dshd.errors import DshError

    raise DshError("invalid-config", f"unknown provider {provider!r}", key="model.provider")
