"""``provider = "anthropic"``: the Messages API, streaming with tool use, through the
official ``anthropic`` SDK (``AsyncAnthropic``, ``messages.create(stream=True)``, read
event by event). The mapping lives in :mod:`dshd.models.anthropic_convert`, the retries
in :mod:`dshd.models.retry` (the SDK's own are off), the error kinds in
:mod:`dshd.models.errors`.

The SDK is imported on the first model call (it costs over a second), not when the
daemon starts. The key is read from ``apiKeyEnv`` (default ``ANTHROPIC_API_KEY``) at each
call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from dshd.models import errors
from dshd.models.anthropic_convert import events_from_stream, request_body, stream_error
from dshd.models.interface import ModelError, ModelEvent, ModelRequest
from dshd.models.retry import RetryPolicy, retrying

if TYPE_CHECKING:
    from dshd.agent.config import ModelConfig

DEFAULT_BASE_URL = "https://api.anthropic.com"
DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY"
NO_KEY = "no-key"


class AnthropicModel:
    label = "Anthropic"

    def __init__(self, options: "ModelConfig") -> None:
        self.options = options
        self.model = options.model or ""
        self.base_url = options.baseUrl or DEFAULT_BASE_URL
        self.key_env = options.apiKeyEnv or DEFAULT_KEY_ENV
        self.policy = RetryPolicy(options.maxRetries)
        self._client: Any = None
        self._client_key: str | None = None

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return retrying(lambda: self._attempt(request), self.policy)

    def _client_for(self, key: str) -> Any:
        if self._client is None or key != self._client_key:
            import anthropic  # only here: the SDK costs over a second to import

            self._client = anthropic.AsyncAnthropic(
                api_key=key, base_url=self.base_url, timeout=self.options.timeoutS, max_retries=0
            )
            self._client_key = key
        return self._client

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        key = errors.api_key(self.key_env, self.options.baseUrl, "Anthropic")
        client = self._client_for(key or NO_KEY)
        body = request_body(request, self.model, max_tokens=self.options.maxOutputTokens)
        try:
            stream = await client.messages.create(**body)
        except Exception as exc:
            raise self._error(exc, key) from None
        try:
            async for event in events_from_stream(self._events(stream, key)):
                yield event
        except ModelError as exc:
            raise ModelError(exc.kind, errors.redact(exc.message, key), retry_after=exc.retry_after, retryable=exc.retryable) from None
        finally:
            await stream.close()

    async def _events(self, stream: Any, key: str | None) -> AsyncIterator[Any]:
        try:
            async for event in stream:
                yield event
        except Exception as exc:
            raise self._error(exc, key, mid_stream=True) from None

    def _error(self, exc: Exception, key: str | None, *, mid_stream: bool = False) -> ModelError:
        import anthropic

        if isinstance(exc, anthropic.APIStatusError) and exc.status_code == 200:
            # An error event inside the stream (overloaded_error, ...): the SDK raises it
            # with the stream's own 200 status.
            body = exc.body if isinstance(exc.body, dict) else {}
            error = stream_error(body.get("error", body))
            return ModelError(error.kind, errors.redact(error.message, key), retryable=error.retryable)
        return errors.from_sdk(exc, anthropic, self, key=key, mid_stream=mid_stream)
