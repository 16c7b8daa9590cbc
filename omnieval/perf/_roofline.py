"""Was each engine saturated, and what did the federated run wait on? Facts from the engines' own counters.

For each replica of a federated run (``manifest.replica_usage``, sampled from the engine's ``/metrics`` or its
in-process counters):

- **busy**: the share of the inference phase with a request in flight;
- **roofline bound**: the least time its measured work can take at the engine's calibrated saturated rates
  (``omnieval bench calibrate`` profile: every prompt token at ``prefill_per_token_s``, every generated token in full
  batches of ``slots`` at ``step_base_s / slots + step_per_seq_s``); efficiency = bound / the phase's wall. A
  replica without a calibration for its engine has no bound, and the report says which calibration is missing;
- **why it was idle**, read off its timeline, never guessed: it waited for its first request (start-up of what
  feeds it), or its work ran out while another replica still worked (the critical path is the replica busy last).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omnieval.perf._common import same_cpu

BUSY_TARGET = 0.85


def load_profiles(paths: Mapping[str, str | Path]) -> dict[str, dict[str, Any]]:
    """Engine name -> its calibrated profile (``bench calibrate``'s JSON), with where it came from and the cores it
    was measured on (its threads where it says, else the calibrating machine's CPUs)."""
    out = {}
    for engine, path in paths.items():
        data = json.loads(Path(path).expanduser().read_text())
        cores = data.get("threads") or (data.get("context") or {}).get("cpus")
        out[engine] = {**data["profile"], "file": str(path), "engine_version": data.get("engine_version"),
                       "cores": cores, "media_item_s": data.get("media_item_s") or {},
                       "cpu": (data.get("context") or {}).get("cpu"), "startup_s": data.get("startup_s"),
                       "checkpoint": data.get("checkpoint")}  # fmt: skip
    return out


def pick_calibration(paths: str | Path | list[str | Path], cpu: dict[str, Any] | None) -> Path:
    """Of one engine's calibrations (one per kind of CPU it was measured on), the one measured on ``cpu``'s kind;
    none being, the first, which ``calibration_check`` then names as another CPU's: a bound holds only for the
    kernels it was measured with (AVX-512 and AMX vs AVX2), so a suite benched on two machines keeps one per CPU."""
    options = [Path(p).expanduser() for p in (paths if isinstance(paths, list) else [paths])]
    if not options:
        raise ValueError("calibration: an engine names no calibration file")
    for p in options:
        try:
            theirs = (json.loads(p.read_text()).get("context") or {}).get("cpu")
        except OSError as e:
            raise ValueError(f"calibration {p}: cannot read it ({e}); run `omnieval bench calibrate` or fix the path") from e
        if same_cpu(theirs, cpu):
            return p
    return options[0]


def same_checkpoint(profile: dict[str, Any], path: str | None) -> bool:
    """Was the profile measured on this checkpoint? Its token rates hold for any model of the engine's kind only as
    far as their backbones match; its media costs are its own encoders' and hold for no other checkpoint."""
    theirs = profile.get("checkpoint")
    if not theirs or not path:
        return False
    return Path(str(theirs)).expanduser().resolve() == Path(path).expanduser().resolve()


def bound_s(u: dict[str, Any], profile: dict[str, Any], media: bool = True) -> float:
    """Least seconds the replica's prefill + decode (+ media encoding) work takes at its engine's saturated rates;
    prompt tokens the engine served from its prefix cache were not computed and cost nothing here. ``media``: charge
    its media items at the profile's item cost (False when the profile is another checkpoint's: its encoders are
    not this model's, and charging nothing keeps the bound a lower one)."""
    slots = max(1, int(profile.get("slots") or 1))
    per_decoded = float(profile["step_base_s"]) / slots + float(profile["step_per_seq_s"])
    costs = [float(v) for v in (profile.get("media_item_s") or {}).values()] if media else []
    per_item = min(costs) if costs else 0.0  # the engine counts items, not their kind: the cheapest keeps a bound
    computed = int(u["prompt_tokens"]) - int(u.get("cached_prompt_tokens") or 0)
    return (computed * float(profile["prefill_per_token_s"]) + int(u["output_tokens"]) * per_decoded
            + int(u.get("media_items") or 0) * per_item)  # fmt: skip


def node_bound(reps: list[dict[str, Any]], profiles: dict[str, dict[str, Any]], cpus: int | None) -> dict[str, Any]:
    """Replicas sharing one node's cores cannot all run at their solo rates: each calibrated bound used its
    profile's cores, so the node needs at least Σ bound × cores / the node's CPUs. The node's efficiency is that
    over the phase's wall; replicas without a calibration add nothing (the bound stays a lower one) and are named."""
    if not cpus:
        return {"bound_s": None, "why": "the node's CPU count is unknown"}
    core_s, missing = 0.0, []
    for r in reps:
        prof = profiles.get(r["engine"])
        if r["bound_s"] is None or prof is None or not prof.get("cores"):
            missing.append(r["replica_id"])
            continue
        core_s += r["bound_s"] * min(float(r.get("bound_cores") or prof["cores"]), float(cpus))
    return {"bound_s": core_s / cpus, "cpus": cpus, "core_s": core_s, "without": missing}


def floor(reps: list[dict[str, Any]], node: dict[str, Any], ray_init_s: float | None) -> dict[str, Any]:
    """The least end to end this machine allows the run: Ray's start-up, then no replica serves before its engine
    has loaded nor faster than its roofline (load + bound), and the node's cores do all the bounded work (the node
    bound). A load is the shorter of the run's and the calibration's (the engine alone): loads, scoring and the
    artifact add to the floor, so it is a floor, not an estimate."""

    def least_load(r: dict[str, Any]) -> float:
        return min([float(x) for x in (r.get("load_s"), r.get("solo_load_s")) if x is not None], default=0.0)

    per = [(r["replica_id"], least_load(r), r["bound_s"], bool(r.get("prestarted"))) for r in reps
           if r["bound_s"] is not None]  # fmt: skip
    if not per or ray_init_s is None:
        return {"floor_s": None, "why": "no replica has a roofline bound" if not per else "Ray's start-up unknown"}
    ray_s = float(ray_init_s)

    def ready(load: float, prestarted: bool) -> float:  # a pre-started server loads while Ray starts
        return max(ray_s, load) if prestarted else ray_s + load

    rid, load, bound, pre = max(per, key=lambda x: ready(x[1], x[3]) + x[2])
    node_s = float(node.get("bound_s") or 0.0)
    by_replica = ready(load, pre) + bound
    return {"floor_s": max(by_replica, ray_s + node_s), "ray_init_s": ray_s,
            "replica": rid, "load_s": load, "bound_s": bound, "node_bound_s": node_s, "prestarted": pre,
            "by": "replica" if by_replica >= ray_s + node_s else "node"}  # fmt: skip


def calibration_check(profiles: dict[str, dict[str, Any]], cpu: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per profile: was it measured on this machine's kind of CPU? A bound from another CPU (another ISA: AVX-512 vs
    AVX2 kernels) is that CPU's, not this one's, and the report says so rather than judging the run by it."""
    out = []
    for engine, prof in sorted(profiles.items()):
        theirs, note = prof.get("cpu"), None
        if cpu is not None and not theirs:
            note = "it does not record which CPU it was measured on"
        elif cpu is not None and theirs and not same_cpu(theirs, cpu):
            note = (f"it was measured on {theirs.get('model')} ({', '.join(theirs.get('isa') or []) or 'no AVX2'}), "
                    f"this machine is {cpu.get('model')} ({', '.join(cpu.get('isa') or []) or 'no AVX2'})")  # fmt: skip
        out.append({"engine": engine, "file": prof.get("file"), "cpu": theirs, "same_cpu": note is None and cpu is not None,
                    "note": note})  # fmt: skip
    return out


def cpu_share(u: dict[str, Any], efficiency: float | None, cores: float | None) -> dict[str, Any]:
    """The CPU the replica's engine got over the phase (kernel's count) against the cores its calibration ran on.

    The bound assumes those cores; an engine that got fewer (the node's other work took them) cannot reach it, so
    ``efficiency_per_core`` = efficiency × calibrated cores / cores used is what the engine made of the CPU it had:
    near 1 the shortfall is the node's contention, well below 1 the engine's own (work the bound does not charge)."""
    used, node_busy, cpus = u.get("cpu_cores"), u.get("node_busy_cores"), u.get("node_cpus")
    out: dict[str, Any] = {"cpu_cores": used, "node_busy_cores": node_busy, "node_cpus": cpus,
                           "calibrated_cores": cores, "efficiency_per_core": None, "cpu_note": None}  # fmt: skip
    if used is None or not cores:
        return out
    per_core = efficiency * float(cores) / used if efficiency is not None and used > 0 else None
    out["efficiency_per_core"] = per_core
    if efficiency is None or efficiency >= BUSY_TARGET or per_core is None:
        return out
    others = ""
    if node_busy is not None and cpus:
        named = u.get("node_others")
        who = (" (clients, framework actors, other engines, Ray)" if named is None else  # results saved before
               ": " + (", ".join(f"{o['name']} {o['cores']:.2f}" for o in named) or "no process above 0.01")
               + " (by process, each with the engines and servers it started; the rest ended or is the kernel's)")
        others = (f"; the node was busy {node_busy:.2f} of its {cpus} cores, {max(0.0, node_busy - used):.2f} of them "
                  f"other work{who}")  # fmt: skip
    verdict = ("the shortfall is the CPU it did not get" if per_core >= BUSY_TARGET else
               "it had the CPU yet fell short: its time went to work the bound does not charge (front-end "
               "preprocessing, scheduling gaps)")  # fmt: skip
    out["cpu_note"] = (f"its processes used {used:.2f} cores on average, against the {float(cores):g} its calibration "
                       f"ran on{others}: on the CPU it got, efficiency {per_core:.2f}, so {verdict}")  # fmt: skip
    return out


def first_sent_s(row: dict[str, Any], replica_id: str) -> float | None:
    """Seconds into the inference phase of the first timeline sample with a request of the pool in flight to the
    replica (None without a timeline): the engine's own counters start later when its front end holds them."""
    start = (row.get("timings") or {}).get("inference_start_unix")
    if start is None:
        return None
    ts = [float(x["t"]) for x in row.get("timeline") or []
          if x.get("replica_id") == replica_id and (x.get("pool_in_flight") or 0) > 0]  # fmt: skip
    return min(ts) - float(start) if ts else None


def diagnose(row: dict[str, Any], profiles: dict[str, dict[str, Any]], cpus: int | None = None,
             cpu: dict[str, Any] | None = None, checkpoints: Mapping[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """Per replica: busy share, bound, efficiency and the reason it was idle; the critical path; start-up + tail;
    whether each calibration is this CPU's (``cpu``: ``_common.cpu_identity()`` of the benched machine).
    ``checkpoints`` (model name -> its weights' path): a replica whose model is not its profile's checkpoint is not
    charged the profile's media costs (``bound_s``); without it every profile is taken as its replica's own."""
    wall = float(row["inference_s"])
    usage = row.get("replica_usage") or []
    reps = []
    critical = max(usage, key=lambda u: u.get("last_busy_s") or -1.0, default=None)
    for u in usage:
        prof = profiles.get(u["engine"])
        own = checkpoints is None or (prof is not None and same_checkpoint(prof, checkpoints.get(u["model"])))
        b = bound_s(u, prof, media=own) if prof else None
        cores = (prof or {}).get("cores")
        used, ncpu = u.get("cpu_cores"), u.get("node_cpus") or cpus
        if b is not None and cores and used is not None and ncpu and used > float(cores) < ncpu:
            # it computed on more cores than its calibration ran on (a 2-thread replica, a 1-thread profile): at
            # best it scales to all the node's, so its bound is the profile's over those, and stays a lower one
            b, cores = b * float(cores) / ncpu, ncpu
        busy = u.get("busy_fraction")
        up_at = float(u.get("up_at_s") or 0.0)
        window = max(wall - up_at, 1e-9)  # dispatch to a model starts when its replica is up: judged from then
        reasons = []
        if busy is not None and busy < BUSY_TARGET:
            first, last = u.get("first_busy_s"), u.get("last_busy_s")
            if first is not None and first - up_at > 0.05 * window:
                sent = first_sent_s(row, u["replica_id"])
                if sent is not None and sent < first - 1.0:  # sampled each second: a lag under that is the sampling
                    reasons.append(f"the pool had requests in flight to it from {max(sent - up_at, 0.0):.1f} s up, "
                                   f"but its engine counted none running or waiting until {first - up_at:.1f} s: its "
                                   "server's front end (tokenising, media preprocessing) held them")  # fmt: skip
                else:
                    reasons.append(f"no request for its first {first - up_at:.1f} s up")
            if last is not None and critical is not None and u is not critical and wall - last > 0.05 * wall:
                reasons.append(f"its work ran out at {last:.1f} s while {critical['replica_id']} worked to "
                               f"{critical['last_busy_s']:.1f} s")  # fmt: skip
            if first is None:
                reasons.append("never had a request in flight")
            if not reasons:
                reasons.append("idle between requests: in flight on average "
                               f"{u.get('mean_in_flight') or 0:.1f} of {u['slots']} slots")  # fmt: skip
        pool_mean, eng_mean = u.get("mean_pool_in_flight"), u.get("mean_in_flight")
        if pool_mean is not None and eng_mean is not None:
            if pool_mean > eng_mean + 1:
                reasons.append(f"the pool had {pool_mean:.1f} requests outstanding on average but the engine counted "
                               f"{eng_mean:.1f} running or waiting: the rest were in its server's front end "
                               "(tokenising, media preprocessing) before its scheduler")  # fmt: skip
            lim = u.get("peak_limit")
            if lim and max(pool_mean, eng_mean) < 0.5 * min(lim, u["slots"]):
                reasons.append(f"the pool sent {pool_mean:.1f} at a time on average while its limit allowed {lim} "
                               f"and the engine has {u['slots']} slots: the benchmarks' requests were not there "
                               "to send (supply)")  # fmt: skip
        eff = b / window if b is not None else None
        reps.append({
            # an idle replica's reasons explain its shortfall; the CPU it got explains a saturated one's
            **cpu_share(u, eff if not reasons else None, cores), "bound_cores": cores,
            "profile_cores": (prof or {}).get("cores"),
            "replica_id": u["replica_id"], "engine": u["engine"], "model": u["model"], "busy_fraction": busy,
            "prompt_tokens": u["prompt_tokens"], "output_tokens": u["output_tokens"], "bound_s": b,
            "cached_prompt_tokens": int(u.get("cached_prompt_tokens") or 0), "media_items": int(u.get("media_items") or 0),
            "efficiency": eff, "up_at_s": up_at, "window_s": window, "media_charged": own,
            "load_s": u.get("load_s"), "up_s": u.get("up_s"), "solo_load_s": (prof or {}).get("startup_s"),
            "no_bound": None if prof else f"no calibration for engine {u['engine']!r} "
                                          f"(omnieval bench calibrate --engine {u['engine']})",
            "last_busy_s": u.get("last_busy_s"), "idle_reasons": reasons, "prestarted": bool(u.get("prestarted")),
        })  # fmt: skip
    tm = row.get("timings") or {}
    loads = [r["load_s"] for r in reps if r.get("load_s") is not None]
    node = node_bound(reps, profiles, cpus)
    if node["bound_s"] is not None:
        node["efficiency"] = node["bound_s"] / wall if wall > 0 else None
    return {
        "node": node,
        "floor": floor(reps, node, row.get("ray_init_s")),
        "calibration": calibration_check(profiles, cpu),
        "inference_s": wall,
        "replicas": reps,
        "critical_path": critical["replica_id"] if critical else None,
        "startup_and_tail_s": float(row["e2e_s"]) - wall,
        "pool_up_s": tm.get("pool_up_s"),
        "slowest_load_s": max(loads) if loads else None,
        "node_cpu": row.get("node_cpu"),
    }


def node_cpu_line(nc: dict[str, Any], top: int = 6) -> str:
    """The whole run's CPU by process: on a node busy nearly all the time, no schedule ends sooner; less work does."""
    avail = float(nc["span_s"]) * int(nc["cpus"])
    share = float(nc["busy_core_s"]) / avail if avail > 0 else 0.0
    groups = nc["groups"][:top]
    rest = sum(g["core_s"] for g in nc["groups"][top:])
    who = ", ".join(f"{g['name']} {g['core_s']:.1f}" for g in groups) + (f", the rest {rest:.1f}" if rest else "")
    verdict = (": CPU-bound, so the run ends sooner only with less CPU work (loads, imports, control loops), not a "
               "better schedule" if share >= BUSY_TARGET else "")  # fmt: skip
    return (f"node CPU over the run ({nc['cpus']} cores x {nc['span_s']:.1f} s = {avail:.0f} core-s): busy "
            f"{nc['busy_core_s']:.0f} core-s ({100 * share:.0f}%){verdict}; by process (core-s, each with what it "
            f"started): {who}")  # fmt: skip


def _at_cores(r: dict[str, Any]) -> str:
    pc, bc = r.get("profile_cores"), r.get("bound_cores")
    if pc and bc and float(bc) != float(pc):
        return f" (its {float(pc):g}-core profile spread over the node's {float(bc):g}: it used {r['cpu_cores']:.2f})"
    return ""


def report_lines(diag: dict[str, Any]) -> list[str]:
    lines = [f"engines over the inference phase ({diag['inference_s']:.1f} s), from their own counters:"]
    for r in diag["replicas"]:
        busy = "n/a" if r["busy_fraction"] is None else f"{100 * r['busy_fraction']:.0f}%"
        eff = (f"roofline {r['bound_s']:.1f} s{_at_cores(r)} -> efficiency {r['efficiency']:.2f}"
               if r["bound_s"] is not None else r["no_bound"])  # fmt: skip
        crit = " [critical path]" if r["replica_id"] == diag["critical_path"] else ""
        up = ""
        if r.get("load_s") is not None:
            up = (f", engine load {r['load_s']:.1f} s (deploy to healthy {r['up_s']:.1f} s), up at "
                  f"{r.get('up_at_s') or 0:.1f} s of the phase")  # fmt: skip
        cached = f" ({r['cached_prompt_tokens']} from its prefix cache)" if r.get("cached_prompt_tokens") else ""
        media = f", {r['media_items']} media items encoded" if r.get("media_items") else ""
        if r.get("media_items") and r.get("media_charged") is False:
            media += " (not in its bound: its calibration is another checkpoint's)"
        if r.get("cpu_cores") is not None:
            media += f", {r['cpu_cores']:.2f} cores used"
        lines.append(f"  {r['replica_id']} ({r['engine']}): busy {busy}, prefill {r['prompt_tokens']} tok{cached}, "
                     f"decode {r['output_tokens']} tok{media}, {eff}{up}{crit}")  # fmt: skip
        lines += [f"    not saturated: {why}" for why in r["idle_reasons"]]
        if r.get("cpu_note"):
            lines.append(f"    below its roofline: {r['cpu_note']}")
    node = diag.get("node") or {}
    if node.get("bound_s") is not None:
        without = f"; without {', '.join(node['without'])} (no calibration)" if node["without"] else ""
        lines.append(f"  node roofline (the replicas share {node['cpus']} CPUs, each bound at its calibrated cores): "
                     f"{node['bound_s']:.1f} s -> node efficiency {node['efficiency']:.2f}{without}")  # fmt: skip
    for c in diag.get("calibration") or []:
        if c.get("note"):
            lines.append(f"  calibration for {c['engine']} ({c['file']}): {c['note']}: its bounds are not this "
                         "machine's (omnieval bench federated --calibrate measures them here; list its JSON beside this one "
                         "under the config's calibration and later runs on this CPU use it)")  # fmt: skip
    if diag.get("node_cpu"):
        lines.append(node_cpu_line(diag["node_cpu"]))
    pu, sl = diag.get("pool_up_s"), diag.get("slowest_load_s")
    lines.append(f"start-up + tail (end to end minus inference): {diag['startup_and_tail_s']:.1f} s"
                 + (f"; the slowest engine's own load: {sl:.1f} s" if sl is not None else "")
                 + (f"; every replica up {pu:.1f} s after the run's start (requests flow to each from its own)"
                    if pu else ""))  # fmt: skip
    return lines


def plot_timeline(row: dict[str, Any], path: Path) -> Path | None:
    """Per replica, requests in flight and waiting over the run (the inference phase shaded)."""
    from omnieval.perf._common import pyplot

    plt = pyplot()
    samples = row.get("timeline") or []
    if plt is None or not samples:
        return None
    by: dict[str, list[dict[str, Any]]] = {}
    for s in sorted(samples, key=lambda s: s["t"]):
        by.setdefault(s["replica_id"], []).append(s)
    t0 = min(s["t"] for s in samples)
    fig, axes = plt.subplots(len(by), 1, figsize=(11, 1.9 * len(by) + 0.6), sharex=True, squeeze=False)
    tm = row.get("timings") or {}
    for ax, (rid, ss) in zip(axes[:, 0], sorted(by.items()), strict=True):
        ts = [s["t"] - t0 for s in ss]
        ax.step(ts, [s["in_flight"] for s in ss], where="post", label="in flight")
        ax.step(ts, [s["queue_depth"] for s in ss], where="post", label="waiting", linestyle="--")
        if any(s.get("pool_in_flight") is not None for s in ss):
            ax.step(ts, [s.get("pool_in_flight") or 0 for s in ss], where="post", label="sent by the pool", alpha=0.7)
        ax.axhline(ss[-1]["slots"], color="grey", linewidth=0.6, linestyle=":", label="slots")
        if "inference_start_unix" in tm:
            ax.axvspan(tm["inference_start_unix"] - t0, tm["inference_end_unix"] - t0, color="#3b6fd8", alpha=0.07)
        ax.set_ylabel(f"{rid}\n({ss[0]['engine']})", fontsize=8)
    axes[0, 0].legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("seconds (shaded: inference phase)")
    fig.suptitle("federated run: each replica's requests in flight and waiting, from the engine's own counters")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
