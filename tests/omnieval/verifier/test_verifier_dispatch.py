"""VerifierPool.generate over real Ray actors that stand in for workers (no engine): order, refill, dead worker."""

from __future__ import annotations

from typing import Any

import pytest

from omnieval.core import PathModelSource, VerifierConfig
from omnieval.verifier import VerifierPool, judge_with_retries

pytestmark = pytest.mark.ray


def _fake_worker_cls() -> Any:
    import ray

    @ray.remote(num_cpus=0)
    class FakeWorker:
        def __init__(self, name: str, die_after: int | None = None) -> None:
            self.name, self.die_after, self.calls = name, die_after, 0

        def generate(
            self, prompts: list[str], options: dict[str, Any]
        ) -> list[tuple[str | None, float | None, str | None]]:
            self.calls += 1
            if self.die_after is not None and self.calls > self.die_after:
                import os

                os._exit(1)  # the actor process dies mid-run, like a crashed worker
            return [
                (None, None, "HTTP 500") if p == "bad" else (f"{self.name}:{p}\nRating: 1", 0.9, None) for p in prompts
            ]

        def count(self) -> int:
            return self.calls

    return FakeWorker


def _pool(workers: list[Any], parallel: int = 1) -> VerifierPool:
    pool = VerifierPool(VerifierConfig(model=PathModelSource(path="/x.gguf"), parallel=parallel))
    pool.workers, pool.alive = workers, list(range(len(workers)))
    return pool


def test_generate_keeps_order_and_uses_every_worker(ray_local: None) -> None:
    import ray

    w = _fake_worker_cls()
    a, b = w.remote("a"), w.remote("b")
    prompts = [f"p{i}" for i in range(11)]
    out = _pool([a, b]).generate(prompts + ["bad"], attempt=0)
    assert [o.text.split(":", 1)[1].split("\n")[0] for o in out[:-1]] == prompts  # type: ignore[union-attr]
    assert all(o.p_correct == 0.9 for o in out[:-1])  # type: ignore[union-attr]
    assert isinstance(out[-1], RuntimeError) and "HTTP 500" in str(out[-1])
    assert ray.get(a.count.remote()) > 0 and ray.get(b.count.remote()) > 0


def test_dead_worker_fails_its_chunk_then_others_take_over(ray_local: None) -> None:
    w = _fake_worker_cls()
    pool = _pool([w.remote("dies", die_after=0), w.remote("ok")])
    prompts = [f"q{i}" for i in range(8)]
    verdicts = judge_with_retries(prompts, pool.generate, max_retries=1)
    assert pool.alive == [1]  # the dead worker is dropped for later attempts
    assert all(v.rating == 1 and v.probability == 0.9 for v in verdicts)  # retried on the live worker
    assert any(v.attempts == 2 for v in verdicts) and all(v.raw.startswith("ok:") for v in verdicts)
    pool.alive = []
    assert all(isinstance(o, RuntimeError) for o in pool.generate(["x"], attempt=0))
