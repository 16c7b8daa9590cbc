"""Calibrate the SIMULATED engine from real llama-server measurements (``omnieval bench calibrate``).

Method (docs/scale-study.md): for each ``--parallel P`` a fresh llama-server decodes P concurrent requests of a fixed
length (``ignore_eos``) at two prompt lengths; llama-server's own ``timings.predicted_per_token_ms`` is the per-step
decode time at batch P, because the P sequences advance in lock-step. Prefill is timed on single requests of
growing unique prompts (``timings.prompt_ms`` over ``prompt_n``), and a repeated prompt checks that a prefix-cache
hit skips its prefill. Least squares then fits ``step = a + b·batch + c·kv_tokens`` and ``prefill = p0 + p1·tokens``.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from omnieval.perf._common import LlamaServer, median
from serving import DEFAULT_PROFILE, EngineProfile

_WORDS = ("alpha beta gamma delta river stone cloud paper green light music window number table orange "
          "system random market winter garden silver planet engine letter forest").split()  # fmt: skip


@dataclass(frozen=True)
class DecodePoint:
    batch: int
    kv_tokens: float
    step_s: float


@dataclass(frozen=True)
class PrefillPoint:
    tokens: int
    prefill_s: float


def _median_points(points: list[DecodePoint]) -> list[DecodePoint]:
    """One point per (batch, prompt size): the median over repeats, so one disturbed repeat cannot steer the fit."""
    groups: dict[tuple[int, float], list[DecodePoint]] = {}
    for p in points:
        groups.setdefault((p.batch, round(p.kv_tokens / p.batch, -1)), []).append(p)
    return [
        DecodePoint(b, median([p.kv_tokens for p in g]), median([p.step_s for p in g])) for (b, _), g in groups.items()
    ]


def filler(n_words: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_WORDS) for _ in range(n_words))


def fit_profile(decode: list[DecodePoint], prefill: list[PrefillPoint], *, base: EngineProfile = DEFAULT_PROFILE,
                chars_per_token: float | None = None, source: str = "fit") -> EngineProfile:  # fmt: skip
    """Least-squares fit; a negative coefficient (noise) is dropped and the rest refitted, so costs stay >= 0."""

    def lsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        coef = np.linalg.lstsq(x, y, rcond=None)[0]
        return coef

    d = np.array([[1.0, p.batch, p.kv_tokens] for p in decode])
    y = np.array([p.step_s for p in decode])
    cols = [0, 1, 2]
    coef = lsq(d[:, cols], y)
    while len(cols) > 1 and (coef[1:] < 0).any():
        worst = cols[1 + int(np.argmin(coef[1:]))]
        cols.remove(worst)
        coef = lsq(d[:, cols], y)
    full = dict.fromkeys([0, 1, 2], 0.0)
    full.update(zip(cols, (float(c) for c in coef), strict=True))
    px = np.array([[1.0, p.tokens] for p in prefill])
    py = np.array([p.prefill_s for p in prefill])
    p0, p1 = (float(c) for c in lsq(px, py))
    if p0 < 0:
        p0, p1 = 0.0, float(py.sum() / px[:, 1].sum())
    return base.with_(
        step_base_s=max(0.0, full[0]), step_per_seq_s=full[1], step_per_kv_token_s=full[2],
        prefill_base_s=p0, prefill_per_token_s=max(0.0, p1),
        chars_per_token=chars_per_token or base.chars_per_token, source=source,
    )  # fmt: skip


async def _chat(client: httpx.AsyncClient, content: str, max_tokens: int) -> dict[str, Any]:
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, "temperature": 0.0,
            "ignore_eos": True, "cache_prompt": True}  # fmt: skip
    r = await client.post("/v1/chat/completions", json=body)
    r.raise_for_status()
    return dict(r.json())


async def _decode_round(url: str, batch: int, words: int, out_tokens: int, seed: int) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=url, timeout=600.0) as c:
        prompts = [f"[{seed}-{i}] " + filler(words, seed * 100 + i) for i in range(batch)]
        return list(await asyncio.gather(*(_chat(c, p, out_tokens) for p in prompts)))


async def _prefill_round(url: str, words: list[int], seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    async with httpx.AsyncClient(base_url=url, timeout=600.0) as c:
        fresh, again = [], []
        for i, w in enumerate(words):
            p = f"[{seed}-{i}] " + filler(w, seed * 1000 + i)
            fresh.append(await _chat(c, p, 1) | {"_chars": len(p)})
            again.append(await _chat(c, p, 1))  # same prompt: its prefix is in the KV cache now
        return fresh, again


def measure(model_path: str | Path, *, threads: int, parallels: list[int], out_tokens: int = 32,
            prompt_words: tuple[int, ...] = (16, 300), prefill_words: tuple[int, ...] = (50, 150, 400, 800),
            repeats: int = 2, log: Any = print) -> dict[str, Any]:  # fmt: skip
    """Run the measurement protocol against real llama-server processes; returns raw points and the fit."""
    decode: list[DecodePoint] = []
    raw: list[dict[str, Any]] = []
    for p in parallels:
        with LlamaServer(model_path, threads=threads, parallel=p, ctx_per_slot=2048) as srv:
            asyncio.run(_decode_round(srv.base_url, 1, 8, 4, seed=0))  # warm-up
            for rep in range(repeats):
                for w in prompt_words:
                    res = asyncio.run(_decode_round(srv.base_url, p, w, out_tokens, seed=rep * 7 + p))
                    steps = [r["timings"]["predicted_per_token_ms"] / 1000 for r in res]
                    n_prompt = median([r["usage"]["prompt_tokens"] for r in res])
                    kv = p * (n_prompt + out_tokens / 2)
                    decode.append(DecodePoint(p, kv, median(steps)))
                    raw.append({"parallel": p, "prompt_tokens": n_prompt, "step_ms": [s * 1000 for s in steps]})
                    log(f"  decode parallel={p} prompt≈{n_prompt:.0f} tok: step {median(steps) * 1000:.1f} ms")
    prefill: list[PrefillPoint] = []
    cache: list[dict[str, Any]] = []
    chars, toks = 0, 0
    with LlamaServer(model_path, threads=threads, parallel=1, ctx_per_slot=4096) as srv:
        for rep in range(repeats):
            fresh, again = asyncio.run(_prefill_round(srv.base_url, list(prefill_words), seed=rep + 1))
            for f, a in zip(fresh, again, strict=True):
                ft, at = f["timings"], a["timings"]
                prefill.append(PrefillPoint(int(ft["prompt_n"]), ft["prompt_ms"] / 1000))
                chars += f["_chars"]
                toks += int(f["usage"]["prompt_tokens"])
                cache.append({"prompt_tokens": ft["prompt_n"], "fresh_ms": ft["prompt_ms"],
                              "repeat_prompt_n": at["prompt_n"], "repeat_cache_n": at.get("cache_n"),
                              "repeat_ms": at["prompt_ms"]})  # fmt: skip
                log(
                    f"  prefill {ft['prompt_n']} tok: {ft['prompt_ms']:.0f} ms; repeated: {at['prompt_n']} uncached "
                    f"tok, {at['prompt_ms']:.0f} ms"
                )
    source = f"bench calibrate: llama-server -t {threads}, --parallel {parallels}, {Path(model_path).name}"
    dec_med = _median_points(decode)
    pre_med = [PrefillPoint(t, median([p.prefill_s for p in prefill if p.tokens == t]))
               for t in sorted({p.tokens for p in prefill})]  # fmt: skip
    profile = fit_profile(dec_med, pre_med, chars_per_token=chars / max(toks, 1), source=source)
    residuals = [{"batch": p.batch, "kv_tokens": p.kv_tokens, "measured_ms": p.step_s * 1e3,
                  "model_ms": profile.step_s(p.batch, p.kv_tokens) * 1e3} for p in dec_med]  # fmt: skip
    return {
        "simulated_engine_calibration": True,
        "profile": profile.to_dict(),
        "decode_points": [p.__dict__ for p in decode],
        "decode_medians_vs_model": residuals,
        "prefill_points": [p.__dict__ for p in prefill],
        "decode_raw": raw,
        "prefix_cache_check": cache,
    }


def measure_engine(engine: str, model_dir: str | Path | None, *, threads: int = 1, parallel: list[int] | None = None,
                   out_tokens: int | None = None, repeats: int | None = None, log: Any = print) -> dict[str, Any]:  # fmt: skip
    """``bench calibrate``'s measurement of one engine with its defaults (llama-server: the embedded GGUF; vllm,
    transformers: the HF checkpoint ``model_dir``); the CLI and ``bench federated --calibrate`` both call it."""
    if engine == "vllm":
        from omnieval.perf._calibrate_vllm import measure_vllm

        return measure_vllm(str(model_dir), concurrencies=parallel or [1, 2, 4, 8, 16], out_tokens=out_tokens or 64,
                            repeats=repeats or 1, log=log)  # fmt: skip
    if engine == "transformers":
        from omnieval.perf._calibrate_transformers import measure_transformers

        return measure_transformers(str(model_dir), threads=threads, batches=parallel or [1, 2, 4, 8],
                                    out_tokens=out_tokens or 32, repeats=repeats or 1, log=log)  # fmt: skip
    if engine == "llama-server":
        from omnieval.perf._common import default_model_path

        res = measure(default_model_path(), threads=threads, parallels=parallel or [1, 2, 4, 8],
                      out_tokens=out_tokens or 24, repeats=repeats or 3, log=log)  # fmt: skip
        return {"engine": "llama-server", **res}
    raise ValueError(f"no calibration for engine {engine!r} (llama-server, vllm, transformers)")
