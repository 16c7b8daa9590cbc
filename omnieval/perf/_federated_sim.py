"""``omnieval bench federated-sim``: the paper's Table 7 setting, SIMULATED from a calibrated engine profile.

Every number it prints is SIMULATED: no GPU runs. The timing model is ``serving._simulated.EngineProfile`` as
``omnieval bench calibrate`` fitted it on a real engine (vLLM by default, ``docs/calibration-vllm.json``); the setting
around it is stated, not measured:

* **GPUs of two kinds**: ``fast`` ones run at the profile's speed, ``slow`` ones ``slow_factor`` times slower (every
  step and prefill cost scaled), e.g. a spare A100 and idle V100s;
* **several models** (Table 7's four), each ``size`` times the profile's per-token cost, each evaluated on three
  modalities (text, image, video), whose requests differ in prompt tokens (image and video tokens as the model's
  prefill sees them) and output tokens;
* **conventional**: each (model, modality) benchmark is a process of its own on one GPU, loading the model, then
  sending one request at a time (batch 1, the frameworks' default for generation); a model's three jobs are
  list-scheduled on its GPUs, longest first, to the GPU that finishes them first;
* **federated**: one replica of the model per GPU, the pool's clients sending every benchmark at once, each replica
  a continuous-batching engine (``_sim.PoolSim``, the routing policy real). Per modality, the speedup is the
  conventional job's wall over the federated time to that modality's last result (both from the start, loads
  included).

Why: the bench on a 2-core CPU (``bench federated --config``) measures this machine's kernels as much as pooling;
this projection shows what the same pooling does in the paper's setting, from the engine's measured rates.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omnieval.perf._sim import PoolSim, SimConfig
from omnieval.perf._workloads import SimRequest
from serving import DEFAULT_PROFILE, EngineProfile

LABEL = ("SIMULATED (the paper's Table 7 setting on a discrete-event model calibrated from {engine}; GPU kinds, "
         "model sizes and workloads are stated assumptions; not a measurement)")  # fmt: skip


@dataclass(frozen=True)
class Modality:
    name: str
    requests: int
    prompt_tokens: int
    """Prompt tokens per request as prefill sees them (image patches and video frames included)."""
    output_tokens: int


MODALITIES = (
    Modality("text", 400, 300, 160),  # GSM8K-like: short prompts, chain-of-thought answers
    Modality("image", 300, 1200, 12),  # MMBench-like: one image, a letter or a word
    Modality("video", 150, 4000, 32),  # Video-MME-like: sampled frames, a short answer
)
MODELS = (("4B", 1.0), ("omni-8B", 2.0), ("omni-3B", 0.75), ("omni-7B", 1.75))
"""Table 7's four models as per-token cost multiples of the calibrated profile."""


def _scaled(p: EngineProfile, f: float) -> EngineProfile:
    return p.with_(step_base_s=p.step_base_s * f, step_per_seq_s=p.step_per_seq_s * f,
                   step_per_kv_token_s=p.step_per_kv_token_s * f, prefill_base_s=p.prefill_base_s * f,
                   prefill_per_token_s=p.prefill_per_token_s * f)  # fmt: skip


def _requests(mods: tuple[Modality, ...], p: EngineProfile) -> list[SimRequest]:
    ids = itertools.count()
    blocks = itertools.count(1)
    out = []
    for m in mods:
        for _ in range(m.requests):
            rid = next(ids)
            n_blocks = max(1, m.prompt_tokens // p.block_tokens)
            out.append(SimRequest(rid=rid, group=m.name, prompt=f"#{rid}:" + "x" * int(m.prompt_tokens * p.chars_per_token),
                                  blocks=tuple(next(blocks) for _ in range(n_blocks)), n_prompt=m.prompt_tokens,
                                  n_out=m.output_tokens, max_tokens=m.output_tokens))  # fmt: skip
    return out


def conventional_job_s(m: Modality, p: EngineProfile, load_s: float) -> float:
    """One process: load, then each request alone (prefill, then decode at batch 1 over a growing KV)."""
    per = p.prefill_s(m.prompt_tokens) + m.output_tokens * p.step_s(1, m.prompt_tokens + m.output_tokens / 2)
    return load_s + m.requests * per


def _schedule(jobs: dict[str, dict[str, float]]) -> dict[str, float]:
    """List scheduling, longest first (on the fastest GPU), each job to the GPU that would finish it first; returns
    each job's finish time. ``jobs``: job -> GPU -> its time there."""
    free: dict[str, float] = {}
    done = {}
    for name in sorted(jobs, key=lambda j: -min(jobs[j].values())):
        gpu = min(jobs[name], key=lambda g: free.get(g, 0.0) + jobs[name][g])
        free[gpu] = free.get(gpu, 0.0) + jobs[name][gpu]
        done[name] = free[gpu]
    return done


def simulate_model(name: str, size: float, base: EngineProfile, *, fast: int, slow: int, slow_factor: float,
                   load_s: float, clients: int, policy: str, mods: tuple[Modality, ...] = MODALITIES,
                   seed: int = 0) -> dict[str, Any]:  # fmt: skip
    gpus = [("fast", 1.0)] * fast + [("slow", slow_factor)] * slow
    profiles = [_scaled(base, size * f) for _, f in gpus]
    gpu_ids = [f"{kind}{i}" for i, (kind, _) in enumerate(gpus)]
    conv_jobs = {m.name: {g: conventional_job_s(m, prof, load_s * f)
                          for g, prof, (_, f) in zip(gpu_ids, profiles, gpus, strict=True)} for m in mods}  # fmt: skip
    conv = _schedule(conv_jobs)
    reqs = _requests(mods, profiles[0])
    cfg = SimConfig(replicas=len(gpus), clients=clients, policy=policy, seed=seed,
                    max_inflight_per_replica=max(p.slots for p in profiles))  # fmt: skip
    sim = PoolSim(cfg, profiles, reqs).run()
    start = load_s * max(f for _, f in gpus)  # conservative: every replica waits for the slowest load
    fed = {m.name: start + max(r.t_done for r in reqs if r.group == m.name) for m in mods}  # fmt: skip
    return {
        "model": name, "size": size,
        "modalities": {m.name: {"conventional_s": conv[m.name], "federated_s": fed[m.name],
                                "speedup": conv[m.name] / fed[m.name]} for m in mods},
        "conventional_s": max(conv.values()), "federated_s": max(fed.values()),
        "speedup": max(conv.values()) / max(fed.values()),
        "replica_busy_mean": sim["replica_busy_mean"],
    }  # fmt: skip


def paper_setting(profile: EngineProfile = DEFAULT_PROFILE, *, engine: str = "llama-server", fast: int = 1,
                  slow: int = 2, slow_factor: float = 2.0, load_s: float = 30.0, clients: int = 4,
                  policy: str = "p2c", log: Any = print) -> dict[str, Any]:  # fmt: skip
    rows = []
    for name, size in MODELS:
        r = simulate_model(name, size, profile, fast=fast, slow=slow, slow_factor=slow_factor, load_s=load_s,
                           clients=clients, policy=policy)  # fmt: skip
        rows.append(r)
        cells = "  ".join(f"{k} {v['speedup']:.2f}x" for k, v in r["modalities"].items())
        log(f"  [simulated] {name:8s} {cells}  overall {r['speedup']:.2f}x")
    avg = {m.name: sum(r["modalities"][m.name]["speedup"] for r in rows) / len(rows) for m in MODALITIES}
    return {
        "simulated": True,
        "label": LABEL.format(engine=engine),
        "profile": profile.to_dict(),
        "setting": {"gpus": {"fast": fast, "slow": slow, "slow_factor": slow_factor}, "load_s": load_s,
                    "clients": clients, "policy": policy, "models": [{"name": n, "size": f} for n, f in MODELS],
                    "modalities": [m.__dict__ for m in MODALITIES]},  # fmt: skip
        "rows": rows,
        "modality_avg": avg,
    }


def markdown_table(res: dict[str, Any]) -> str:
    mods = [m["name"] for m in res["setting"]["modalities"]]
    out = ["| model (SIMULATED) | " + " | ".join(mods) + " | overall |", "|---|" + "---:|" * (len(mods) + 1)]
    for r in res["rows"]:
        out.append(f"| {r['model']} | " + " | ".join(f"{r['modalities'][m]['speedup']:.2f}×" for m in mods)
                   + f" | {r['speedup']:.2f}× |")  # fmt: skip
    out.append("| modality avg. | " + " | ".join(f"{res['modality_avg'][m]:.2f}×" for m in mods) + " | |")
    return "\n".join(out) + "\n"


def load(path: str | None) -> tuple[EngineProfile, str, float | None]:
    """The profile of a ``bench calibrate`` JSON (default: the shipped one), its engine and measured start-up."""
    if not path:
        return DEFAULT_PROFILE, "llama-server", None
    data = json.loads(Path(path).read_text())
    return EngineProfile.from_dict(data.get("profile", data)), str(data.get("engine") or "llama-server"), data.get("startup_s")
