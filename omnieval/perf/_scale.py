"""``omnieval bench scale``: routing policies at 256 replicas × 64 clients, in a discrete-event simulation.

Every number it prints is SIMULATED (serving/_simulated.py's timing model, calibrated by ``omnieval bench
calibrate`` from llama-server or vLLM), not measured on 256 real replicas; the JSON and the plot say so, and name the
engine the profile was calibrated from. See docs/scale-study.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from omnieval.perf._sim import SimConfig, simulate
from omnieval.perf._workloads import WORKLOADS, make_workload
from serving import DEFAULT_PROFILE, EngineProfile

POLICIES = ("p2c", "round_robin", "least_loaded", "prefix_aware")
_ENGINES = (("vllm", "vLLM"), ("llama-server", "llama-server"), ("sglang", "SGLang"))


def calibrated_engine(profile: EngineProfile) -> str:
    """The engine a profile was calibrated from, read from its ``source`` ("an unnamed engine" if it names none)."""
    src = profile.source.lower()
    return next((name for key, name in _ENGINES if key in src), "an unnamed engine")


def label(profile: EngineProfile = DEFAULT_PROFILE) -> str:
    """The SIMULATED banner every scale-study output carries, naming the engine its timing model comes from."""
    return (f"SIMULATED (discrete-event model calibrated from {calibrated_engine(profile)}; not a measurement of real "
            "replicas)")  # fmt: skip


LABEL = label(DEFAULT_PROFILE)
"""The banner for the shipped (llama-server) profile; ``label(profile)`` for any other."""


def load_profile(path: str | None) -> EngineProfile:
    if not path:
        return DEFAULT_PROFILE
    data = json.loads(Path(path).read_text())
    return EngineProfile.from_dict(data.get("profile", data))


def scale_study(*, replicas: int = 256, clients: int = 64, requests: int = 8192, workloads: tuple[str, ...] = WORKLOADS,
                policies: tuple[str, ...] = POLICIES, profile: EngineProfile = DEFAULT_PROFILE, seed: int = 0,
                rpc_s: float = 0.002, chunks_per_client: int | None = None, log: Any = print) -> dict[str, Any]:  # fmt: skip
    rows = []
    for w in workloads:
        reqs = make_workload(w, requests, profile, seed=seed)
        for pol in policies:
            cfg = SimConfig(replicas=replicas, clients=clients, policy=pol, seed=seed, rpc_s=rpc_s,
                            chunks_per_client=chunks_per_client)  # fmt: skip
            m = simulate(cfg, profile, reqs) | {"workload": w}
            rows.append(m)
            log(
                f"  [simulated] {w:12s} {pol:13s} makespan {m['makespan_s']:7.1f} s  p99 {m['latency_p99_s']:6.1f} s  "
                f"cache hits {m['prefix_cache_hit_rate']:.2f}  (sim took {m['sim_wall_s']:.1f} s)"
            )
    return {
        "simulated": True,
        "label": label(profile),
        "calibrated_engine": calibrated_engine(profile),
        "profile": profile.to_dict(),
        "config": {
            "replicas": replicas,
            "clients": clients,
            "requests": requests,
            "seed": seed,
            "rpc_s": rpc_s,
            "rpc_jitter": SimConfig.rpc_jitter,
            "max_inflight_per_replica": SimConfig.max_inflight_per_replica,
            "chunk_size": SimConfig.chunk_size,
            "health_period_s": SimConfig.health_period_s,
        },  # fmt: skip
        "rows": rows,
    }


def markdown_table(result: dict[str, Any]) -> str:
    head = ("| workload | policy | makespan (s) | output tok/s | p50 latency (s) | p99 latency (s) | prefix-cache hit "
            "| replica busy | max/mean load |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")  # fmt: skip
    lines = []
    for r in result["rows"]:
        lines.append(f"| {r['workload']} | {r['policy']} | {r['makespan_s']:.1f} | {r['output_tokens_per_s']:.0f} | "
                     f"{r['latency_p50_s']:.2f} | {r['latency_p99_s']:.2f} | {r['prefix_cache_hit_rate']:.2f} | "
                     f"{r['replica_busy_mean']:.2f} | {r['load_imbalance_max_over_mean']:.2f} |")  # fmt: skip
    return head + "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path | None:
    from omnieval.perf._common import pyplot

    plt = pyplot()
    if plt is None:
        return None
    rows = result["rows"]
    wls = list(dict.fromkeys(r["workload"] for r in rows))
    pols = list(dict.fromkeys(r["policy"] for r in rows))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    width = 0.8 / max(len(pols), 1)
    for ax, key, title in zip(axes, ("makespan_s", "latency_p99_s", "prefix_cache_hit_rate"),
                              ("makespan (s)", "p99 latency (s)", "prefix-cache hit rate"), strict=True):  # fmt: skip
        for j, pol in enumerate(pols):
            vals = [next((r[key] for r in rows if r["workload"] == w and r["policy"] == pol), 0.0) for w in wls]
            ax.bar([i + (j - (len(pols) - 1) / 2) * width for i in range(len(wls))], vals, width, label=pol)
        ax.set_xticks(range(len(wls)), wls)
        ax.set_title(title)
    axes[0].legend(fontsize=8)
    c = result["config"]
    engine = result.get("calibrated_engine", "llama-server")
    fig.suptitle(f"SIMULATED ({engine} profile): {c['replicas']} replicas × {c['clients']} clients, "
                 f"{c['requests']} requests per workload")  # fmt: skip
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
