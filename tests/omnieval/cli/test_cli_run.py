"""``omnieval run``'s end-of-run lines."""

from __future__ import annotations

import pytest

from omnieval._artifacts import RunManifest
from omnieval.cli._run import throughput_line


def _manifest(inferred: int, hits: int, tokens: float, seconds: float = 10.0) -> RunManifest:
    return RunManifest(
        run_id="r", suite_name="s", created="2026-01-01T00:00:00", config={}, timings={"inference_s": seconds},
        throughput={"output_tokens": tokens, "output_tokens_per_s": tokens / seconds, "requests_per_s": inferred / seconds,
                    "inferred": float(inferred), "cache_hits": float(hits)},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("inferred", "hits", "tokens", "line"),
    [
        (20, 0, 720.0, "inference 10.0s · 72.0 output tok/s · 2.00 req/s"),
        (4, 6, 40.0, "inference 10.0s · 4.0 output tok/s · 0.40 req/s · 6 answered from the response cache"),
        # a framework task answered from the cache printed "0.0 output tok/s · 0.00 req/s" here
        (0, 3, 0.0, "inference 10.0s · no request inferred (3 answered from the response cache)"),
        (0, 0, 0.0, "inference 10.0s · no request inferred"),
    ],
)
def test_throughput_line_rates_only_over_requests_inferred(inferred: int, hits: int, tokens: float, line: str) -> None:
    assert throughput_line(_manifest(inferred, hits, tokens)) == line
