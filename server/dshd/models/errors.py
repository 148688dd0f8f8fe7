"""Turning what a provider answered into a :class:`ModelError` a person can act on.

Both providers share this: an HTTP status (and the provider's own error text, when it
sent JSON) maps to a kind and a message that says what to do. The API key is never put in
a message: the provider's text is left out for 401/403 (OpenAI echoes part of a refused
key) and every message is scrubbed of the key's value before it leaves the provider.
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
import re
import time
import traceback
from typing import Any, Protocol
from urllib.parse import urlparse

from dshd.formats import shown, shown_lines
from dshd.models.fields import field
from dshd.models.interface import ModelError

_CONTEXT_WORDS = (
    "context_length", "context length", "context window", "maximum context", "prompt is too long",
    "too many tokens", "reduce the length", "exceeds the model", "input is too long",
)  # fmt: skip


REDACTED = "[redacted]"
# Any run of this many characters of a key is taken out: a server that echoes the key
# cut short (its last characters dropped, or a middle part) still leaks most of it.
FRAGMENT = 12


@functools.lru_cache(maxsize=16)
def _windows(secret: str) -> frozenset[str]:
    return frozenset(secret[i : i + FRAGMENT] for i in range(len(secret) - FRAGMENT + 1))


def redact(text: str, secret: str | None) -> str:
    """``text`` with every run of ``FRAGMENT`` or more characters of ``secret`` replaced by
    "[redacted]" (a secret shorter than that, of 4 characters or more: where it occurs whole).

    One pass over ``text``: each of its ``FRAGMENT``-character windows is looked up in the
    set of the secret's windows, and overlapping hits merge into one redacted run."""
    if not secret or len(secret) < 4 or not text:
        return text
    if len(secret) < FRAGMENT:
        return text.replace(secret, REDACTED)
    windows = _windows(secret)
    pieces: list[str] = []
    kept = 0  # text[kept:] is not written out yet
    run_end = -1  # end of the redacted run being extended
    for i in range(len(text) - FRAGMENT + 1):
        if text[i : i + FRAGMENT] in windows:
            if i > run_end:  # a new run: write out what came before it
                pieces.append(text[kept:i])
                pieces.append(REDACTED)
            run_end = i + FRAGMENT
            kept = run_end
    if not pieces:
        return text
    pieces.append(text[kept:])
    return "".join(pieces)


def redacted(error: ModelError, secret: str | None) -> ModelError:
    """The same error with ``secret`` (and any long enough piece of it) out of its message."""
    message = redact(error.message, secret)
    if message == error.message:
        return error
    return ModelError(error.kind, message, retry_after=error.retry_after, retryable=error.retryable)


# The keys this process has read (in process only): every log record is scrubbed of them.
_known_secrets: set[str] = set()


def remember_secret(secret: str) -> None:
    _known_secrets.add(secret)


def remember_pasted_key(env_name: object) -> None:
    """An ``apiKeyEnv`` that is no variable name is likely the key itself, pasted in the
    wrong place: scrub it from every log line, from the moment the setting arrives."""
    if isinstance(env_name, str) and len(env_name.strip()) >= 4 and not _ENV_NAME.fullmatch(env_name):
        remember_secret(env_name.strip())


PASTED_KEY_SHOWN = "(not a variable name, so likely the key itself: not shown)"


def shown_key_env(env_name: str | None) -> str | None:
    """``apiKeyEnv`` as a person may see it (``dsh/config/get``, ``dshd doctor``): a
    variable name as it is; any other text, likely the key pasted in the wrong place, is
    never repeated."""
    if isinstance(env_name, str) and not _ENV_NAME.fullmatch(env_name):
        return PASTED_KEY_SHOWN
    return env_name


def redact_known(text: str) -> str:
    """``text`` scrubbed of every key this process has read, and of their pieces."""
    for secret in _known_secrets:
        text = redact(text, secret)
    return text


class RedactingFormatter(logging.Formatter):
    """A log formatter whose output (message, traceback and all) never holds a key the
    process has read, and never a character that acts on a terminal or hides text: every
    handler that writes for people uses it (stderr, the daemon's log file, the editor's
    log panel, the CLIs). A record's message is one line whatever its arguments hold (a
    server's tool name, a provider's error text: ``formats.shown``), so a record is a line
    and no argument can forge another; a traceback keeps its lines, every other control
    escaped (``formats.shown_lines``)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = shown(record.message)  # set by format() from getMessage() each time
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:
        """The traceback with each exception's own text on one line (a server's error
        carried in an exception forges no line either); the frames keep their lines."""
        try:
            top = traceback.TracebackException(*ei)
        except Exception:  # noqa: BLE001 - an odd exception: the plain traceback, escaped by format()
            return super().formatException(ei)
        todo, seen = [top], set()
        while todo:
            exc = todo.pop()
            if id(exc) in seen:
                continue
            seen.add(id(exc))
            if isinstance(getattr(exc, "_str", None), str):  # the text format_exception_only writes
                exc._str = shown(exc._str)
            todo += [e for e in (exc.__cause__, exc.__context__) if e is not None]
            todo += list(getattr(exc, "exceptions", None) or ())
        return "".join(top.format()).rstrip("\n")

    def format(self, record: logging.LogRecord) -> str:
        # The whole text again: a traceback cached by another handler, a field of the format.
        return shown_lines(redact_known(super().format(record)))


def is_loopback(base_url: str | None) -> bool:
    """A server on this machine (ollama, llama.cpp, LM Studio): these run without a key."""
    host = urlparse(base_url or "").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def api_key(env_name: str, base_url: str | None, label: str) -> str | None:
    """The key from the environment at call time; None for a keyless server on this
    machine. A key that is needed and missing is an auth error naming the variable."""
    if not _ENV_NAME.fullmatch(env_name):
        # Likely the key itself pasted in the wrong place: never repeat it.
        remember_pasted_key(env_name)
        raise ModelError(
            "auth",
            "[model] apiKeyEnv must be the name of an environment variable (letters, digits and _), "
            "not the key itself: put the key in a variable and name that variable here",
        )
    value = os.environ.get(env_name, "").strip()
    if value:
        remember_secret(value)
        return value
    if is_loopback(base_url):
        return None
    raise ModelError(
        "auth",
        f"{env_name} is not set: set it to your {label} API key in the environment that starts dshd "
        f"(or name another variable with [model] apiKeyEnv)",
    )


def retry_after(headers: Any) -> float | None:
    """Seconds from ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date)."""
    if headers is None:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            import email.utils  # only for a Retry-After date, a rare answer

            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def provider_text(body: Any) -> str:
    """The provider's own error text from a JSON body (OpenAI and Anthropic nest it under
    ``error.message``), else a bounded piece of a plain body."""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = field(error, "message") if isinstance(error, dict) else error
        text = str(message or "")
    elif isinstance(body, (str, bytes)):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    else:
        text = ""
    text = " ".join(text.split())
    return text[:300] + ("..." if len(text) > 300 else "")


def provider_code(body: Any) -> str:
    """``error.code`` / ``error.type`` of a JSON error body ("" when none)."""
    error = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return ""
    return str(error.get("code") or error.get("type") or "")


def from_status(status: int, body: Any, headers: Any, *, label: str, key_env: str, model: str, base_url: str) -> ModelError:
    text = provider_text(body)
    said = f": {text}" if text else ""
    code = provider_code(body)
    if status == 401:
        return ModelError("auth", f"{label} refused the API key (401): check the key in {key_env}")
    if status == 403:
        return ModelError("auth", f"{label} did not allow this request (403): check that the key in {key_env} may use model {model!r}")
    if status == 404:
        return ModelError("bad-request", f"{label} answered 404 not found{said}: check [model] model ({model!r}) and baseUrl ({base_url})")
    if status == 408:
        return ModelError("timeout", f"{label} timed out the request (408){said}; try again", retry_after=retry_after(headers))
    if status == 429:
        if code == "insufficient_quota":
            return ModelError("rate-limit", f"{label} says the account is out of quota (429){said}: check your plan and billing", retryable=False)
        return ModelError("rate-limit", f"{label} is rate-limiting requests (429){said}: wait and try again, or raise your rate limit", retry_after=retry_after(headers))
    if status == 413 or status == 400 and any(word in text.lower() or word in code.lower() for word in _CONTEXT_WORDS):
        return ModelError("context-overflow", f"the conversation does not fit the model's context window ({status}){said}: start a new session, or compact this one")
    if status >= 500:
        return ModelError("server", f"{label} failed ({status}){said}; try again later", retry_after=retry_after(headers))
    return ModelError("bad-request", f"{label} rejected the request ({status}){said}: check [model] model, maxOutputTokens and baseUrl")


def connection_error(label: str, base_url: str) -> ModelError:
    return ModelError("connection", f"could not reach {label} at {base_url}: check baseUrl and the network, or that the server runs")


def timeout_error(label: str, timeout_s: float) -> ModelError:
    return ModelError("timeout", f"{label} sent nothing for {timeout_s:g} s: try again, or raise [model] timeoutS")


def dropped_error(label: str) -> ModelError:
    return ModelError("connection", f"the connection to {label} dropped mid-reply; try again")


class ProviderInfo(Protocol):
    label: str
    key_env: str
    model: str
    base_url: str
    options: Any  # ModelConfig: timeoutS


def from_sdk(exc: BaseException, sdk: Any, provider: ProviderInfo, *, key: str | None, mid_stream: bool) -> ModelError:
    """A ModelError for what the ``openai`` or ``anthropic`` SDK raised (both share one
    exception family), or for a transport error that reached us unwrapped."""
    import httpx2  # the SDKs' HTTP client: already imported with them

    label = provider.label
    if isinstance(exc, ModelError):
        error = exc
    elif isinstance(exc, sdk.APIStatusError):
        error = from_status(
            exc.status_code, exc.body, exc.response.headers,
            label=label, key_env=provider.key_env, model=provider.model, base_url=provider.base_url,
        )  # fmt: skip
    elif isinstance(exc, (sdk.APITimeoutError, httpx2.TimeoutException)):
        error = timeout_error(label, provider.options.timeoutS)
    elif isinstance(exc, (sdk.APIConnectionError, httpx2.TransportError)):
        error = dropped_error(label) if mid_stream else connection_error(label, provider.base_url)
    elif isinstance(exc, sdk.APIError):  # an error event inside the stream
        error = ModelError("server", f"{label} reported an error mid-stream: {provider_text(exc.body) or exc.message}; try again")
    elif isinstance(exc, (ValueError, UnicodeDecodeError)):  # json.JSONDecodeError is a ValueError
        error = ModelError("bad-response", f"{label} sent an event that is not JSON; try again, or check baseUrl")
    else:
        error = ModelError("bad-response", f"{label} sent something unexpected ({type(exc).__name__}); check baseUrl")
    return redacted(error, key)
