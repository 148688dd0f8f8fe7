"""G-25 through `dshd run --json` (the real command, a loopback OpenAI server): the result's
usage says how much of the input came from the server's prompt cache, and that counts
are estimated when the server reported none; the chat items say so per reply."""

from __future__ import annotations

import pytest
from loopback_models import LoopbackModelServer, Reply

from .test_headless import headless, loopback_workspace  # noqa: F401  (fixtures)


@pytest.fixture
def loopback():
    with LoopbackModelServer("openai") as server:
        yield server


@pytest.mark.slow
def test_run_usage_sums_cached_input_and_says_estimated(tmp_path, headless, loopback):  # noqa: F811
    loopback.script(
        Reply(text="First, with a cache hit.", usage=(1000, 10), cached=900),
        Reply(text="Second, with no usage at all: " + "word " * 40, usage=None),
    )
    root = loopback_workspace(tmp_path, headless, loopback)
    first = headless.run(root, "hi", "--json")
    assert first.code == 0, first.stderr
    assert first.result["usage"] == {"inputTokens": 1000, "outputTokens": 10, "cachedInputTokens": 900}
    [item] = [i for i in first.items("assistant-message") if not i["partial"]]
    assert item["usage"] == {"inputTokens": 1000, "outputTokens": 10, "cachedInputTokens": 900}
    second = headless.run(root, "again", "--json")
    assert second.code == 0, second.stderr
    usage = second.result["usage"]
    assert usage["estimated"] is True and "cachedInputTokens" not in usage
    assert usage["outputTokens"] >= len("word " * 40) // 4 and usage["inputTokens"] > 0
    [item] = [i for i in second.items("assistant-message") if not i["partial"]]
    assert item["usage"]["estimated"] is True
