"""Judge scoring with a pool model: the judge is just another pool member (issue item 2).

``make_pool_judge`` turns a model that the pool controller serves into a ``JudgeFn`` for rubric benchmarks
(EgoMem, OmniAssistBench ``score_records(records, judge)``). Requests go through an ``EvalClient`` actor, so the
judge gets the pool's routing, in-flight caps, retries on another replica and health handling for free.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from omnieval.core import GenerationOptions, Message, PoolConfig, Record

log = logging.getLogger("omnieval.verifier")

JudgeFn = Callable[[list[str]], list[str]]
"""A batch of judge prompts -> the batch of raw judge outputs, same order."""


class PoolJudge:
    """Callable ``JudgeFn`` over one pool model.

    A prompt seen before is a retry by the caller's parse loop (its last output was unparsable): it is re-sent with
    sampling and a fresh seed, since a greedy re-send would return the same unparsable text. A request that fails
    after the pool's own retries comes back as ``""``, which every parser rejects, so the caller records a judge
    error for that prompt instead of losing the batch.
    """

    def __init__(self, model: str, controller: Any, pool_cfg: PoolConfig, *, max_tokens: int = 512,
                 retry_temperature: float = 0.7) -> None:  # fmt: skip
        self.model = model
        self.controller = controller
        self.pool_cfg = pool_cfg
        self.max_tokens = max_tokens
        self.retry_temperature = retry_temperature
        self._client: Any = None
        self._seen: Counter[str] = Counter()
        self._calls = 0
        self.failures: list[str] = []
        """Pool errors of failed requests, newest last (for logs and tests)."""

    def _ensure_client(self) -> Any:
        if self._client is None:
            from pool import EvalClient

            cfg = self.pool_cfg.model_copy(update={"clients": 1})  # one judge client: it takes the whole limit
            self._client = EvalClient.remote(self.controller, cfg, 0, 900)  # type: ignore[attr-defined]
        return self._client

    def __call__(self, prompts: list[str], grammars: list[str] | None = None) -> list[str]:
        import ray

        if not prompts:
            return []
        if grammars is not None and len(grammars) != len(prompts):
            raise ValueError(f"{len(grammars)} grammars for {len(prompts)} judge prompts")
        self._calls += 1
        records = []
        for i, p in enumerate(prompts):
            n = self._seen[p]
            self._seen[p] += 1
            opts = GenerationOptions(
                temperature=0.0 if n == 0 else self.retry_temperature, max_tokens=self.max_tokens, seed=n,
                grammar=grammars[i] if grammars is not None else None,
            )
            records.append(
                Record(benchmark=f"judge-{self._calls}", index=i, model=self.model,
                       messages=[Message.text("user", p)], generation_options=opts)
            )  # fmt: skip
        done: list[Record] = ray.get(self._ensure_client().run.remote(records))
        out = []
        for r in sorted(done, key=lambda r: r.index):
            if r.error is not None or r.prediction is None:
                msg = r.error.message if r.error else "no output"
                log.warning("judge %s request %d failed: %s", self.model, r.index, msg)
                self.failures.append(msg)
                out.append("")
            else:
                out.append(r.prediction)
        return out

    def close(self) -> None:
        """Drop the client actor (it also goes away when this object is garbage-collected)."""
        import ray

        if self._client is not None:
            ray.kill(self._client, no_restart=True)
            self._client = None


def make_pool_judge(model: str, controller: Any, pool_cfg: PoolConfig, *, max_tokens: int = 512) -> JudgeFn:
    """A ``JudgeFn`` that sends each prompt as a one-turn chat request to pool model ``model``, outputs in order.

    The model must already be in the pool (``controller.ensure_model``); its replicas are shared with any run that
    evaluates the same spec.
    """
    return PoolJudge(model, controller, pool_cfg, max_tokens=max_tokens)
