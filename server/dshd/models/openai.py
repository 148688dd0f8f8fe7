"""``provider = "openai"``: any OpenAI-compatible Chat Completions server (OpenAI, vLLM,
llama.cpp's server, ollama, LM Studio, OpenRouter) through the official ``openai`` SDK:
``AsyncOpenAI``, ``chat.completions.create(stream=True, stream_options={"include_usage":
true})``. The mapping lives in :mod:`dshd.models.openai_convert`, the retries in
:mod:`dshd.models.retry` (the SDK's own are off), the error kinds in
:mod:`dshd.models.errors`.

The SDK is imported on the first model call, not when the daemon starts: a daemon on
this provider answers ``initialize`` as fast as one on the scripted model. The key is
read from ``apiKeyEnv`` (default ``OPENAI_API_KEY``) at each call and never stored
anywhere but the SDK client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from dshd.models import errors
from dshd.models.interface import ModelError, ModelEvent, ModelRequest
from dshd.models.openai_convert import events_from_chunks, request_body
from dshd.models.retry import RetryPolicy, retrying

if TYPE_CHECKING:
    from dshd.agent.config import ModelConfig

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
# Sent to a keyless server on this machine (ollama, llama.cpp): the SDK needs some key.
NO_KEY = "no-key"


class OpenAIModel:
    label = "the OpenAI-compatible server"

    def __init__(self, options: "ModelConfig") -> None:
        self.options = options
        self.model = options.model or ""
        self.base_url = options.baseUrl or DEFAULT_BASE_URL
        self.key_env = options.apiKeyEnv or DEFAULT_KEY_ENV
        self.policy = RetryPolicy(options.maxRetries)
        # api.openai.com's newer models refuse max_tokens; compatible servers know only it.
        self.max_tokens_key = "max_completion_tokens" if options.baseUrl is None else "max_tokens"
        self._client: Any = None
        self._client_key: str | None = None

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return retrying(lambda: self._attempt(request), self.policy)

    def _client_for(self, key: str) -> Any:
        if self._client is None or key != self._client_key:
            import openai  # only here: the SDK costs ~0.5 s to import

            self._client = openai.AsyncOpenAI(
                api_key=key, base_url=self.base_url, timeout=self.options.timeoutS, max_retries=0
            )
            self._client_key = key
        return self._client

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        key = errors.api_key(self.key_env, self.options.baseUrl, "OpenAI")
        client = self._client_for(key or NO_KEY)
        body = request_body(request, self.model, max_tokens=self.options.maxOutputTokens, max_tokens_key=self.max_tokens_key)
        try:
            stream = await client.chat.completions.create(**body)
        except Exception as exc:
            raise self._error(exc, key) from None
        try:
            async for event in events_from_chunks(self._chunks(stream, key)):
                yield event
        except ModelError as exc:
            raise ModelError(exc.kind, errors.redact(exc.message, key), retry_after=exc.retry_after, retryable=exc.retryable) from None
        finally:
            await stream.close()

    async def _chunks(self, stream: Any, key: str | None) -> AsyncIterator[Any]:
        try:
            async for chunk in stream:
                yield chunk
        except Exception as exc:
            raise self._error(exc, key, mid_stream=True) from None

    def _error(self, exc: Exception, key: str | None, *, mid_stream: bool = False) -> ModelError:
        import openai

        return errors.from_sdk(exc, openai, self, key=key, mid_stream=mid_stream)
