"""``omnieval bench verifier-overhead``: modes alternate per repeat, ratios of medians and per-repeat ranges; the
suite each mode runs (no Ray: an injected runner)."""

from __future__ import annotations

from typing import Any

from omnieval._suite import load_suite
from omnieval.core import SuiteConfig
from omnieval.perf._verifier_overhead import bench_verifier_overhead, table

WALL = {"off": [10.0, 12.0, 11.0], "stream": [11.0, 12.6, 11.5], "after": [20.0, 22.0, 21.0]}


def test_modes_alternate_and_ratios_are_of_medians() -> None:
    seen: list[SuiteConfig] = []

    def runner(suite: SuiteConfig) -> dict[str, Any]:
        seen.append(suite)
        mode = "off" if suite.verifier is None else suite.verifier.mode
        rep = sum(1 for s in seen if (s.verifier.mode if s.verifier else "off") == mode) - 1
        return {"wall_s": WALL[mode][rep], "verifier_tail_s": None if mode == "off" else 1.0}

    res = bench_verifier_overhead(load_suite("examples/quickstart.yaml"), repeats=3, limit=2, runner=runner,
                                  log=lambda m: None)  # fmt: skip
    assert [r["mode"] for r in res["runs"]] == ["off", "stream", "after", "after", "stream", "off",
                                                "off", "stream", "after"]  # fmt: skip
    for s in seen:  # every run: the limit applied, the cache off, the offline judge on in the verifier modes
        assert all(b.limit == 2 for b in s.benchmarks) and not s.cache.enabled
        assert s.verifier is None or (s.verifier.enabled and s.verifier.model.kind == "pypi")
    sm = res["summary"]
    assert sm["off"]["wall_s_median"] == 11.0 and sm["stream"]["wall_s_median"] == 11.5
    assert sm["stream"]["ratio_vs_off"] == 11.5 / 11.0
    assert sm["stream"]["ratio_vs_off_range"] == [
        min(11 / 10, 12.6 / 12, 11.5 / 11),
        max(11 / 10, 12.6 / 12, 11.5 / 11),
    ]
    assert sm["after"]["wall_s_range"] == [20.0, 22.0]
    out = table(sm)
    assert "| stream | 11.5 | 11.0–12.6 | 1.05 (1.05–1.10) | 1.0 |" in out and "| off | 11.0 |" in out
