"""Does the configured provider answer? (``dshd doctor``)

The check is a real one-token call through the same adapter the daemon uses (same key
variable, baseUrl, timeout and error kinds; no retries): it proves the key, the model
name and the endpoint together, for one output token. Listing models would be free but
proves neither the model name nor that chat calls are allowed. The key's value is never
part of the result: only its variable's name and whether it is set.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import attrs
import msgspec

from dshd.models import errors
from dshd.models.collect import collect
from dshd.models.interface import Message, ModelError, ModelRequest
from dshd.models.registry import model_from_config

if TYPE_CHECKING:
    from dshd.models.config import ModelSettings as Config

PROBE = ModelRequest("Answer with the single word OK.", (Message("user", "ping"),), ())


@attrs.frozen
class Health:
    provider: str
    model: str | None
    base_url: str | None
    key_env: str | None
    key_set: bool | None  # None: the provider needs no key (scripted)
    key_needed: bool
    answered: bool
    ms: int | None = None
    error: dict[str, str] | None = None

    @property
    def healthy(self) -> bool:
        return self.answered

    def to_dict(self) -> dict[str, Any]:
        """camelCase, absent values left out (``dshd doctor --json``)."""
        out = {_camel(k): v for k, v in attrs.asdict(self).items() if v is not None}
        return out | {"healthy": self.healthy}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


async def check(config: "Config") -> Health:
    options = config.model
    if options.provider == "scripted":
        return Health("scripted", None, None, None, None, False, True)
    adapter: Any = model_from_config(
        msgspec.structs.replace(config, model=msgspec.structs.replace(options, maxOutputTokens=1, maxRetries=0))
    )
    # The variable (and server) the provider itself reads: its own default unless the config names one.
    common = dict(
        provider=options.provider, model=options.model, base_url=adapter.base_url,
        key_env=errors.shown_key_env(adapter.key_env),
        key_set=bool(os.environ.get(adapter.key_env, "").strip()), key_needed=not errors.is_loopback(options.baseUrl),
    )  # fmt: skip
    started = time.monotonic()
    try:
        await collect(adapter.stream(PROBE))
    except ModelError as exc:
        return Health(**common, answered=False, error=exc.to_dict())
    return Health(**common, answered=True, ms=round((time.monotonic() - started) * 1000))
