"""``provider = "anthropic"``: the Messages API, streaming with tool use, through the
official ``anthropic`` SDK (``AsyncAnthropic``, ``messages.create(stream=True)``, read
event by event). The mapping lives in :mod:`dshd.models.anthropic_convert`; retries, the
key and closing the stream in :mod:`dshd.models.sdk_provider` (the SDK's own retries are
off).

The SDK is imported on the first model call (it costs over a second), not when the
daemon starts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from dshd.models import errors
from dshd.models.anthropic_convert import events_from_stream, request_body, stream_error
from dshd.models.interface import ModelError, ModelEvent, ModelRequest
from dshd.models.sdk_provider import SdkProvider


class AnthropicModel(SdkProvider):
    label = "Anthropic"
    key_label = "Anthropic"
    default_base_url = "https://api.anthropic.com"
    default_key_env = "ANTHROPIC_API_KEY"

    def _new_client(self, key: str) -> Any:
        import anthropic  # only here: the SDK costs over a second to import

        return anthropic.AsyncAnthropic(api_key=key, base_url=self.base_url, timeout=self.options.timeoutS, max_retries=0)

    async def _open(self, client: Any, request: ModelRequest) -> Any:
        return await client.messages.create(**request_body(request, self.model, max_tokens=self.options.maxOutputTokens))

    def _convert(self, items: AsyncIterator[Any]) -> AsyncIterator[ModelEvent]:
        return events_from_stream(items)

    def _error(self, exc: Exception, key: str | None, *, mid_stream: bool = False) -> ModelError:
        import anthropic

        if isinstance(exc, anthropic.APIStatusError) and exc.status_code == 200:
            # An error event inside the stream (overloaded_error, ...): the SDK raises it
            # with the stream's own 200 status.
            body = exc.body if isinstance(exc.body, dict) else {}
            return errors.redacted(stream_error(body.get("error", body)), key)
        return errors.from_sdk(exc, anthropic, self, key=key, mid_stream=mid_stream)
