"""``provider = "openai"``: any OpenAI-compatible Chat Completions server (OpenAI, vLLM,
llama.cpp's server, ollama, LM Studio, OpenRouter) through the official ``openai`` SDK:
``AsyncOpenAI``, ``chat.completions.create(stream=True, stream_options={"include_usage":
true})``. The mapping lives in :mod:`dshd.models.openai_convert`; retries, the key and
closing the stream in :mod:`dshd.models.sdk_provider` (the SDK's own retries are off).

The SDK is imported on the first model call, not when the daemon starts: a daemon on
this provider answers ``initialize`` as fast as one on the scripted model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from dshd.models import errors
from dshd.models.interface import ModelError, ModelEvent, ModelRequest
from dshd.models.openai_convert import events_from_chunks, request_body
from dshd.models.sdk_provider import SdkProvider

if TYPE_CHECKING:
    from dshd.models.config import ModelConfig


class OpenAIModel(SdkProvider):
    label = "the OpenAI-compatible server"
    key_label = "OpenAI"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = "OPENAI_API_KEY"

    def __init__(self, options: "ModelConfig") -> None:
        super().__init__(options)
        # api.openai.com's newer models refuse max_tokens; compatible servers know only it.
        self.max_tokens_key = "max_completion_tokens" if options.baseUrl is None else "max_tokens"

    def _new_client(self, key: str) -> Any:
        import openai  # only here: the SDK costs ~0.5 s to import

        return openai.AsyncOpenAI(api_key=key, base_url=self.base_url, timeout=self.options.timeoutS, max_retries=0)

    async def _open(self, client: Any, request: ModelRequest) -> Any:
        import openai

        body = request_body(request, self.model, max_tokens=self.options.maxOutputTokens, max_tokens_key=self.max_tokens_key)
        # The SDK's documented raw request (``client.post``, the same HTTP, errors and SSE
        # decoding as ``chat.completions.create``) with ``cast_to=object``: each chunk as
        # the JSON the server sent. The typed chunk objects cost about 100 µs each to build,
        # more than all the rest of a streamed token's way to the editor; the converter
        # reads dicts.
        return await client.post("/chat/completions", body=body, cast_to=object, stream=True, stream_cls=openai.AsyncStream[object])

    def _convert(self, items: AsyncIterator[Any]) -> AsyncIterator[ModelEvent]:
        return events_from_chunks(items)

    def _error(self, exc: Exception, key: str | None, *, mid_stream: bool = False) -> ModelError:
        import openai

        return errors.from_sdk(exc, openai, self, key=key, mid_stream=mid_stream)
