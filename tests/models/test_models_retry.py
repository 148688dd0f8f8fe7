"""The retry policy (what is retried, how long it waits) and the retrying stream (never
after output; a Retrying event before each wait)."""

from __future__ import annotations

import pytest

from dshd.models import ModelError, Retrying, Stop, TextDelta, collect
from dshd.models.errors import from_status, retry_after
from dshd.models.retry import RetryPolicy, retrying

INFO = {"label": "the server", "key_env": "MY_KEY", "model": "m", "base_url": "http://127.0.0.1:1/v1"}


@pytest.mark.parametrize(
    "status, kind, retryable",
    [
        (400, "bad-request", False), (401, "auth", False), (403, "auth", False), (404, "bad-request", False),
        (408, "timeout", True), (413, "context-overflow", False), (422, "bad-request", False),
        (429, "rate-limit", True), (500, "server", True), (502, "server", True), (503, "server", True),
        (529, "server", True),
    ],
)  # fmt: skip
def test_models_status_maps_to_kind_and_retryability(status, kind, retryable):
    error = from_status(status, {"error": {"message": "nope"}}, {}, **INFO)
    assert (error.kind, error.retryable) == (kind, retryable)
    assert RetryPolicy(2).delay(1, error) is None if not retryable else RetryPolicy(2).delay(1, error) > 0


def test_models_error_messages_say_what_to_do():
    assert "check the key in MY_KEY" in from_status(401, None, {}, **INFO).message
    assert "check [model] model ('m') and baseUrl (http://127.0.0.1:1/v1)" in from_status(404, "", {}, **INFO).message
    overflow = from_status(400, {"error": {"message": "This model's maximum context length is 8192 tokens"}}, {}, **INFO)
    assert overflow.kind == "context-overflow" and "start a new session" in overflow.message
    quota = from_status(429, {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}}, {}, **INFO)
    assert quota.kind == "rate-limit" and not quota.retryable and "billing" in quota.message
    # A body that is not JSON still gives a message, cut to a readable length.
    plain = from_status(502, "<html>" + "x" * 1000 + "</html>", {}, **INFO)
    assert plain.kind == "server" and len(plain.message) < 400


def test_models_401_never_repeats_the_providers_text():
    """OpenAI's 401 text echoes part of the refused key: it is left out."""
    error = from_status(401, {"error": {"message": "Incorrect API key provided: sk-abc...wxyz"}}, {}, **INFO)
    assert "sk-" not in error.message


def test_models_retry_after_forms():
    assert retry_after({"retry-after": "3"}) == 3
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0  # in the past
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


def test_models_backoff_is_capped_exponential_with_jitter_and_honours_retry_after():
    policy = RetryPolicy(5, base_s=0.5, cap_s=4)
    error = ModelError("server", "x")
    lows = [policy.delay(n, error, rand=lambda: 0.0) for n in range(1, 6)]
    highs = [policy.delay(n, error, rand=lambda: 1.0) for n in range(1, 6)]
    assert highs == [0.5, 1.0, 2.0, 4.0, 4.0] and lows == [h / 2 for h in highs]
    assert policy.delay(6, error) is None  # maxRetries spent
    assert policy.delay(1, ModelError("rate-limit", "x", retry_after=7)) == 7
    assert policy.delay(1, ModelError("rate-limit", "x", retry_after=3600)) is None  # too long to wait in a turn
    assert RetryPolicy(0).delay(1, error) is None


def attempts(*outcomes):
    """An attempt factory: each attempt yields its events, then raises its error (if any)."""
    queue = list(outcomes)
    made = []

    def attempt():
        events, error = queue.pop(0)
        made.append(1)

        async def run():
            for event in events:
                yield event
            if error is not None:
                raise error

        return run()

    return attempt, made


async def test_models_retrying_retries_before_output_and_announces_each_wait():
    waits = []

    async def sleep(seconds):
        waits.append(seconds)

    attempt, made = attempts(
        ([], ModelError("rate-limit", "429", retry_after=0.2)),
        ([], ModelError("connection", "refused")),
        ([TextDelta("ok"), Stop("end-turn")], None),
    )
    events = [e async for e in retrying(attempt, RetryPolicy(2), sleep=sleep)]
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [(r.attempt, r.error.kind) for r in retries] == [(2, "rate-limit"), (3, "connection")]
    assert retries[0].delay_ms == 200 and waits[0] == 0.2 and 500 <= retries[1].delay_ms <= 1000  # attempt 2 failed: 1 s backoff, jittered
    assert len(made) == 3 and events[-1] == Stop("end-turn")


async def test_models_retrying_stops_after_max_retries_and_never_after_output():
    attempt, made = attempts(*[([], ModelError("server", "500"))] * 3)
    with pytest.raises(ModelError):
        await collect(retrying(attempt, RetryPolicy(2, base_s=0), sleep=lambda s: _noop()))
    assert len(made) == 3  # maxRetries + 1 attempts

    attempt, made = attempts(([TextDelta("half")], ModelError("connection", "dropped")), ([Stop("end-turn")], None))
    with pytest.raises(ModelError) as caught:
        await collect(retrying(attempt, RetryPolicy(2, base_s=0), sleep=lambda s: _noop()))
    assert caught.value.kind == "connection" and len(made) == 1

    attempt, made = attempts(([], ModelError("auth", "401")), ([Stop("end-turn")], None))
    with pytest.raises(ModelError):
        await collect(retrying(attempt, RetryPolicy(2, base_s=0), sleep=lambda s: _noop()))
    assert len(made) == 1


async def _noop():
    return None
