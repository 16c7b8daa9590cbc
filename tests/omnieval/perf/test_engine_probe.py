"""The engine probe against the INSTANT server (no model): batching gain's shape, streamed and plain timings."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator

import pytest

from omnieval.perf._engine_probe import RequestTiming, batching_gain, client_for, completions_url, timed_completion
from serving import ManagedServer


@pytest.fixture(scope="module")
def instant_url() -> Iterator[str]:
    srv = ManagedServer("instant-probe", [sys.executable, "-m", "serving._instant", "--host", "{host}", "--port",
                                          "{port}"], bind_all=False)  # fmt: skip
    srv.launch()
    try:
        asyncio.run(srv.wait_ready(30))
        yield srv.local_url + "/v1"
    finally:
        srv.stop()


def test_batching_gain_reports_both_rates_and_their_ratio(instant_url: str) -> None:
    g = batching_gain(instant_url, "instant", concurrency=4, max_tokens=8)
    assert g["concurrency"] == 4 and g["max_tokens"] == 8
    assert g["tok_s_1"] > 0 and g["tok_s_saturated"] > 0
    assert g["ratio"] == pytest.approx(g["tok_s_saturated"] / g["tok_s_1"])
    assert g["completion_tokens_saturated"] == 4 * 8  # every request's usage counted
    assert g["tok_s_saturated"] == pytest.approx(32 / g["wall_saturated_s"])


def test_batching_gain_takes_a_server_root_too(instant_url: str) -> None:
    g = batching_gain(instant_url.removesuffix("/v1"), "instant", concurrency=2, max_tokens=3)
    assert set(g) >= {"tok_s_1", "tok_s_saturated", "concurrency", "ratio"}


def test_streamed_completion_counts_tokens_and_times_the_first(instant_url: str) -> None:
    async def go() -> tuple[RequestTiming, RequestTiming]:
        async with client_for(1) as c:
            url = completions_url(instant_url)
            return (await timed_completion(c, url, "instant", "hi", 8, stream=True),
                    await timed_completion(c, url, "instant", "hi", 8))  # fmt: skip

    streamed, plain = asyncio.run(go())
    assert streamed.completion_tokens == 8 and streamed.prompt_tokens == 1
    assert 0 < streamed.first_token_s <= streamed.total_s
    assert plain.completion_tokens == 8 and plain.first_token_s == plain.total_s and plain.step_s is None


def test_step_time_is_the_time_after_the_first_token_per_further_token() -> None:
    assert RequestTiming(10, 11, first_token_s=0.5, total_s=1.5).step_s == pytest.approx(0.1)
    assert RequestTiming(10, 1, first_token_s=0.5, total_s=0.5).step_s is None


def test_completions_url() -> None:
    assert completions_url("http://h:1/v1/") == "http://h:1/v1/completions"
    assert completions_url("http://h:1") == "http://h:1/v1/completions"
