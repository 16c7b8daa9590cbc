"""The federated bench's diagnosis: bounds from a calibrated profile, idle reasons read off the timeline."""

from __future__ import annotations

import json

import pytest

from omnieval.perf._roofline import bound_s, diagnose, load_profiles, report_lines

PROFILE = {"step_base_s": 0.032, "step_per_seq_s": 0.0005, "prefill_per_token_s": 0.001, "slots": 16}


def _u(rid: str, engine: str, busy: float | None, first: float | None, last: float | None, p: int, o: int) -> dict:
    return {"replica_id": rid, "model": "m", "engine": engine, "samples": 10, "busy_fraction": busy,
            "mean_in_flight": 2.0, "peak_queue": 0, "slots": 4, "prompt_tokens": p, "output_tokens": o,
            "requests": 0, "batches": 0, "first_busy_s": first, "last_busy_s": last}  # fmt: skip


def test_bound_efficiency_critical_path_and_reasons(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "cal.json").write_text(json.dumps({"profile": PROFILE, "engine_version": "vllm 0.32.0"}))
    profiles = load_profiles({"vllm": tmp_path / "cal.json"})
    row = {"inference_s": 100.0, "e2e_s": 140.0, "timings": {"pool_up_s": 35.0}, "replica_usage": [
        _u("vlm-r1", "vllm", 0.97, 0.5, 99.0, 60_000, 1_600),
        _u("alm-r1", "transformers", 0.40, 30.0, 60.0, 2_000, 900),
        _u("idle-r1", "vllm", 0.0, None, None, 0, 0),
    ]}  # fmt: skip
    d = diagnose(row, profiles)
    vlm, alm, idle = d["replicas"]
    assert vlm["bound_s"] == pytest.approx(60_000 * 0.001 + 1_600 * (0.032 / 16 + 0.0005))  # 60 + 4 s
    assert vlm["efficiency"] == pytest.approx(0.64) and vlm["idle_reasons"] == []
    assert d["critical_path"] == "vlm-r1" and d["startup_and_tail_s"] == 40.0
    assert alm["bound_s"] is None and "bench calibrate --engine transformers" in alm["no_bound"]
    assert alm["idle_reasons"] == ["no request for its first 30.0 s up",
                                   "its work ran out at 60.0 s while vlm-r1 worked to 99.0 s"]  # fmt: skip
    assert idle["idle_reasons"] == ["never had a request in flight"]
    text = "\n".join(report_lines(d))
    assert "[critical path]" in text and "efficiency 0.64" in text and "every replica up 35.0 s" in text
    assert bound_s(_u("x", "vllm", 1, 0, 1, 0, 16), PROFILE) == pytest.approx(16 * (0.002 + 0.0005))


def test_a_replica_up_inside_the_phase_is_judged_from_then() -> None:
    """Requests go to a model once its replica is up: a slow engine that joins at 40 s of a 100 s phase has 60 s,
    its efficiency is over those, and its late start is not 'no request'."""
    late = {**_u("vlm-r1", "vllm", 0.95, 41.0, 99.0, 30_000, 1_600), "up_at_s": 40.0, "load_s": 33.5, "up_s": 38.0}
    d = diagnose({"inference_s": 100.0, "e2e_s": 108.0, "replica_usage": [late]}, {"vllm": PROFILE})
    (r,) = d["replicas"]
    assert r["window_s"] == 60.0 and r["efficiency"] == pytest.approx(r["bound_s"] / 60.0)
    assert r["idle_reasons"] == [] and d["slowest_load_s"] == 33.5
    text = "\n".join(report_lines(d))
    assert "engine load 33.5 s (deploy to healthy 38.0 s), up at 40.0 s of the phase" in text
    assert "the slowest engine's own load: 33.5 s" in text


def test_requests_held_in_the_engines_front_end_are_not_called_missing() -> None:
    """vLLM's counters start at its scheduler: media requests the pool had already sent wait in its API server's
    preprocessing first. The timeline's pool-side in-flight count tells that apart from a replica nobody fed."""
    held = {**_u("vlm-r1", "vllm", 0.84, 46.0, 99.0, 30_000, 1_600), "up_at_s": 40.0}
    fed = [{"t": 1000.0 + t, "replica_id": "vlm-r1", "pool_in_flight": 19 if t >= 41 else 0} for t in range(40, 50)]
    row = {"inference_s": 100.0, "e2e_s": 108.0, "replica_usage": [held],
           "timings": {"inference_start_unix": 1000.0}, "timeline": fed}  # fmt: skip
    (r,) = diagnose(row, {"vllm": PROFILE})["replicas"]
    assert r["idle_reasons"] == ["the pool had requests in flight to it from 1.0 s up, but its engine counted none "
                                 "running or waiting until 6.0 s: its server's front end (tokenising, media "
                                 "preprocessing) held them"]  # fmt: skip
    unfed = {**row, "timeline": [{**x, "pool_in_flight": 0} for x in fed]}
    (r,) = diagnose(unfed, {"vllm": PROFILE})["replicas"]
    assert r["idle_reasons"] == ["no request for its first 6.0 s up"]


@pytest.mark.parametrize(("used", "per_core", "verdict"), [
    (1.2, 0.64 * 2 / 1.2, "the shortfall is the CPU it did not get"),
    (1.9, 0.64 * 2 / 1.9, "it had the CPU yet fell short"),
])  # fmt: skip
def test_below_the_roofline_the_cpu_it_got_says_whose_shortfall(used: float, per_core: float, verdict: str) -> None:
    """The bound assumes the calibration's cores; an engine that got fewer could not reach it."""
    u = {**_u("vlm-r1", "vllm", 0.97, 0.5, 99.0, 60_000, 1_600), "cpu_cores": used, "node_busy_cores": 1.95,
         "node_cpus": 2}  # fmt: skip
    d = diagnose({"inference_s": 100.0, "e2e_s": 110.0, "replica_usage": [u]}, {"vllm": {**PROFILE, "cores": 2}})
    (r,) = d["replicas"]
    assert r["efficiency"] == pytest.approx(0.64) and r["efficiency_per_core"] == pytest.approx(per_core)
    assert verdict in r["cpu_note"] and f"{1.95 - used:.2f} of them other work" in r["cpu_note"]
    text = "\n".join(report_lines(d))
    assert f"{used:.2f} cores used" in text and "below its roofline: its processes used" in text
    fine = diagnose({"inference_s": 64.0, "e2e_s": 70.0, "replica_usage": [u]}, {"vllm": {**PROFILE, "cores": 2}})
    assert fine["replicas"][0]["cpu_note"] is None  # at its roofline: nothing to explain
    idle = {**u, "busy_fraction": 0.3, "last_busy_s": 30.0}
    d = diagnose({"inference_s": 100.0, "e2e_s": 110.0, "replica_usage": [idle, {**u, "replica_id": "other"}]},
                 {"vllm": {**PROFILE, "cores": 2}})  # fmt: skip
    assert d["replicas"][0]["idle_reasons"] and d["replicas"][0]["cpu_note"] is None  # idle: its reasons say why


def test_pool_side_counts_tell_front_end_work_from_missing_supply() -> None:
    """What the pool had outstanding vs what the engine's scheduler counted: a gap is work in the server's front
    end; a pool far below its limit and the slots had no more requests to send."""
    front = {**_u("vlm-r1", "vllm", 0.97, 0.1, 70.0, 1000, 100), "mean_in_flight": 4.0, "mean_pool_in_flight": 21.0,
             "peak_limit": 32, "slots": 32}  # fmt: skip
    supply = {**_u("alm-r1", "vllm", 0.9, 0.1, 70.0, 10, 10), "mean_in_flight": 1.0, "mean_pool_in_flight": 1.2,
              "peak_limit": 32, "slots": 32}  # fmt: skip
    d = diagnose({"inference_s": 72.0, "e2e_s": 100.0, "replica_usage": [front, supply]}, {})
    (f_why,), (s_why,) = (r["idle_reasons"] for r in d["replicas"])
    assert f_why.startswith("the pool had 21.0 requests outstanding on average but the engine counted 4.0")
    assert "front end" in f_why
    assert s_why.startswith("the pool sent 1.2 at a time on average while its limit allowed 32") and "supply" in s_why


def test_replicas_sharing_a_node_are_bound_by_its_cores(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Each bound is at its engine's solo rate on the cores it was calibrated with: on one 2-CPU node a 2-core vLLM
    bound of 30 s and a 1-thread transformers bound of 10 s need at least (30·2 + 10·1) / 2 = 35 s together. Media
    items add their calibrated cost; a replica without a calibration adds nothing and is named."""
    (tmp_path / "v.json").write_text(json.dumps({"profile": PROFILE, "context": {"cpus": 2}}))
    tf = {**PROFILE, "slots": 8}
    (tmp_path / "t.json").write_text(json.dumps({"profile": tf, "threads": 1, "media_item_s": {"audio": 0.25}}))
    profiles = load_profiles({"vllm": tmp_path / "v.json", "transformers": tmp_path / "t.json"})
    assert (profiles["vllm"]["cores"], profiles["transformers"]["cores"]) == (2, 1)
    v = _u("v-r1", "vllm", 0.9, 0.0, 49.0, 30_000, 0)  # 30 s of prefill
    t = {**_u("t-r1", "transformers", 0.9, 0.0, 40.0, 0, 0), "media_items": 40}  # 40 clips × 0.25 s
    x = _u("x-r1", "sglang", 0.9, 0.0, 40.0, 100, 100)
    d = diagnose({"inference_s": 50.0, "e2e_s": 60.0, "replica_usage": [v, t, x]}, profiles, cpus=2)
    assert [r["bound_s"] for r in d["replicas"]] == [pytest.approx(30.0), pytest.approx(10.0), None]
    node = d["node"]
    assert node["bound_s"] == pytest.approx(35.0) and node["efficiency"] == pytest.approx(0.7)
    assert node["without"] == ["x-r1"]
    assert "node roofline" in "\n".join(report_lines(d)) and "without x-r1" in "\n".join(report_lines(d))
    assert diagnose({"inference_s": 50.0, "e2e_s": 60.0, "replica_usage": [v]}, profiles)["node"]["bound_s"] is None


def test_prefix_cache_hits_and_media_items_in_the_bound() -> None:
    """vLLM counts the prompt tokens it served from its prefix cache: they were not computed, so the bound charges
    only the rest; media items its encoder ran on add their calibrated cost, and the report names both."""
    prof = {**PROFILE, "media_item_s": {"image": 0.05}}
    u = {**_u("v-r1", "vllm", 0.9, 0.0, 49.0, 10_000, 0), "cached_prompt_tokens": 4_000, "media_items": 20}
    assert bound_s(u, prof) == pytest.approx(6_000 * 0.001 + 20 * 0.05)
    d = diagnose({"inference_s": 50.0, "e2e_s": 60.0, "replica_usage": [u]}, {"vllm": prof})
    (r,) = d["replicas"]
    assert (r["cached_prompt_tokens"], r["media_items"]) == (4_000, 20)
    text = "\n".join(report_lines(d))
    assert "prefill 10000 tok (4000 from its prefix cache)" in text and "20 media items encoded" in text


def test_floor_is_ray_start_then_the_slowest_load_plus_bound_or_the_node() -> None:
    """No replica serves before its engine loaded (the shorter of the run's load and the calibration's solo one) nor
    faster than its bound; the node's cores bound all of it together; Ray starts first."""
    prof = {**PROFILE, "startup_s": 30.0, "cores": 2}
    v = {**_u("v-r1", "vllm", 0.9, 40.0, 99.0, 40_000, 0), "load_s": 36.0, "up_at_s": 35.0}  # bound 40 s
    t = {**_u("t-r1", "transformers", 0.9, 0.0, 60.0, 10_000, 0), "load_s": 2.0}  # bound 10 s, 1 core
    d = diagnose({"inference_s": 100.0, "e2e_s": 120.0, "ray_init_s": 5.0, "replica_usage": [v, t]},
                 {"vllm": prof, "transformers": {**PROFILE, "cores": 1}}, cpus=2)  # fmt: skip
    fl = d["floor"]
    assert (fl["replica"], fl["load_s"], fl["bound_s"], fl["by"]) == ("v-r1", 30.0, pytest.approx(40.0), "replica")
    assert fl["floor_s"] == pytest.approx(5.0 + 70.0) and fl["node_bound_s"] == pytest.approx((40 * 2 + 10) / 2)
    t1, t2 = ({**t, "replica_id": f"t-r{i}", "prompt_tokens": 60_000} for i in (1, 2))  # 60 s each on one core
    d2 = diagnose({"inference_s": 100.0, "e2e_s": 120.0, "ray_init_s": 5.0, "replica_usage": [v, t1, t2]},
                  {"vllm": prof, "transformers": {**PROFILE, "cores": 1}}, cpus=2)  # fmt: skip
    assert d2["floor"]["by"] == "node" and d2["floor"]["floor_s"] == pytest.approx(5.0 + (80 + 60 + 60) / 2)
    assert diagnose({"inference_s": 1.0, "e2e_s": 2.0, "replica_usage": [v]}, {"vllm": prof})["floor"]["floor_s"] is None
    # a server the driver pre-started loads while Ray starts: the later of the two, then its bound
    pre = {**v, "prestarted": True}
    d3 = diagnose({"inference_s": 100.0, "e2e_s": 120.0, "ray_init_s": 5.0, "replica_usage": [pre, t]},
                  {"vllm": prof, "transformers": {**PROFILE, "cores": 1}}, cpus=2)  # fmt: skip
    assert d3["floor"]["floor_s"] == pytest.approx(max(5.0, 30.0) + 40.0) and d3["floor"]["prestarted"]
    slow_ray = diagnose({"inference_s": 100.0, "e2e_s": 120.0, "ray_init_s": 38.0, "replica_usage": [pre]},
                        {"vllm": prof}, cpus=2)  # fmt: skip
    assert slow_ray["floor"]["floor_s"] == pytest.approx(38.0 + 40.0)  # it cannot serve before Ray is up


def test_ceiling_bounds_the_speedup_and_says_whether_the_paper_row_fits() -> None:
    from omnieval.perf._omni import ceiling

    rows = [{"mode": "conventional_sequential", "e2e_s": e} for e in (200.0, 190.0, 210.0)]
    c = ceiling(rows, {"floor": {"floor_s": 80.0}})
    assert c is not None and c["best_speedup_e2e"] == pytest.approx(2.5) and c["possible"] is False
    assert c["paper_best_needs_s"] == pytest.approx(200.0 / 2.8)
    assert ceiling(rows, {"floor": {"floor_s": None}}) is None and ceiling([], {"floor": {"floor_s": 80.0}}) is None
    assert "work_core_s" not in c  # no federated run's CPU measured: no work ceiling


@pytest.mark.parametrize(("work", "fits"), [(150.0, False), (130.0, True)])
def test_the_runs_own_cpu_work_bounds_the_speedup_whatever_the_schedule(work: float, fits: bool) -> None:
    """On a 2-core node a run that made the cores do W core-s of work cannot end before W / 2 s: with 200 s
    sequential, 2.8x needs the work done in 71.4 s, at most 142.9 core-s."""
    from omnieval.perf._omni import ceiling

    rows = [{"mode": "conventional_sequential", "e2e_s": e} for e in (200.0, 190.0, 210.0)]
    rows += [{"mode": "federated", "e2e_s": e, "cpu_s": c} for e, c in ((90.0, work + 20), (80.0, work), (70.0, 1.0))]
    c = ceiling(rows, {"floor": {"floor_s": 60.0}}, cpus=2)
    assert c is not None and c["possible"]  # the critical engine's floor alone allows 3.33x
    assert c["work_core_s"] == work  # the median repeat's (by end to end), not the least
    assert c["work_floor_s"] == pytest.approx(work / 2) and c["best_speedup_at_this_work"] == pytest.approx(400 / work)
    assert c["paper_best_needs_core_s"] == pytest.approx(200 / 2.8 * 2)
    assert (c["best_speedup_at_this_work"] >= 2.8) is fits


def test_a_calibration_from_another_cpu_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A bound measured on an AVX-512 CPU is not an AVX2-only machine's: the report says so and how to measure here;
    a calibration that does not record its CPU is named too."""
    from omnieval.perf._common import cpu_identity, same_cpu

    here = cpu_identity()
    assert here["model"] and same_cpu(here, dict(here))
    avx2 = {"model": "AMD EPYC 7B12", "isa": ["avx2"]}
    (tmp_path / "v.json").write_text(json.dumps({"profile": PROFILE, "context": {"cpus": 2, "cpu": here}}))
    (tmp_path / "t.json").write_text(json.dumps({"profile": PROFILE, "context": {"cpus": 2}}))
    profiles = load_profiles({"vllm": tmp_path / "v.json", "transformers": tmp_path / "t.json"})
    u = _u("v-r1", "vllm", 0.9, 0.0, 49.0, 1000, 10)
    same = diagnose({"inference_s": 50.0, "e2e_s": 60.0, "replica_usage": [u]}, profiles, 2, here)
    assert [(c["engine"], c["same_cpu"]) for c in same["calibration"]] == [("transformers", False), ("vllm", True)]
    other = diagnose({"inference_s": 50.0, "e2e_s": 60.0, "replica_usage": [u]}, profiles, 2, avx2)
    notes = {c["engine"]: c["note"] for c in other["calibration"]}
    assert "this machine is AMD EPYC 7B12 (avx2)" in notes["vllm"]
    assert notes["transformers"] == "it does not record which CPU it was measured on"
    text = "\n".join(report_lines(other))
    assert "calibration for vllm" in text and "bench federated --calibrate" in text


def test_calibrate_here_needs_a_suite_model_of_the_engine(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from omnieval._suite import load_suite
    from omnieval.perf._omni import calibrate_here, load_config

    cfg, suite_path, _ = load_config("examples/bench_federated.yaml")
    cfg = cfg.model_copy(update={"calibration": {"sglang": "x.json"}})
    with pytest.raises(ValueError, match="the suite has no sglang model with a local path"):
        calibrate_here(cfg, load_suite(suite_path), tmp_path)
    assert not list(tmp_path.iterdir())


def test_media_costs_are_charged_only_to_the_profiles_own_checkpoint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A profile's token rates stand for its engine, but its media item cost is its own checkpoint's encoder: a
    replica of another model (same engine, other encoder) is bound without it, so the bound stays a lower one."""
    (tmp_path / "cal.json").write_text(json.dumps({"profile": PROFILE, "media_item_s": {"audio": 0.5},
                                                   "checkpoint": str(tmp_path / "alm")}))  # fmt: skip
    profiles = load_profiles({"transformers": tmp_path / "cal.json"})
    alm = {**_u("alm-r1", "transformers", 0.9, 0.0, 9.0, 1_000, 0), "model": "alm", "media_items": 4}
    vlm = {**_u("vlm-r1", "transformers", 0.9, 0.0, 9.0, 1_000, 0), "model": "vlm", "media_items": 4}
    row = {"inference_s": 10.0, "e2e_s": 12.0, "replica_usage": [alm, vlm]}
    a, v = diagnose(row, profiles, checkpoints={"alm": str(tmp_path / "alm"), "vlm": str(tmp_path / "vlm")})["replicas"]
    assert a["bound_s"] == pytest.approx(1.0 + 4 * 0.5) and a["media_charged"]
    assert v["bound_s"] == pytest.approx(1.0) and not v["media_charged"]
    assert "(not in its bound: its calibration is another checkpoint's)" in "\n".join(
        report_lines(diagnose(row, profiles, checkpoints={"alm": str(tmp_path / "alm")})))
    a, v = diagnose(row, profiles)["replicas"]  # no checkpoints given: each profile is taken as its replica's own
    assert a["bound_s"] == v["bound_s"] == pytest.approx(3.0)


def test_each_machine_uses_the_calibration_measured_on_its_cpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """One engine, calibrations from two CPUs: the bench takes the one measured on the benched CPU's kind,
    whichever the list names first; with none of this CPU's kind, the first (which the report then names)."""
    from omnieval.perf._common import cpu_identity
    from omnieval.perf._roofline import pick_calibration

    here, other = cpu_identity(), {"model": "AMD EPYC 7B12", "isa": ["avx2"]}
    for name, cpu in (("amd.json", other), ("here.json", here)):
        (tmp_path / name).write_text(json.dumps({"profile": PROFILE, "context": {"cpus": 2, "cpu": cpu}}))
    amd, mine = tmp_path / "amd.json", tmp_path / "here.json"
    assert pick_calibration([amd, mine], here) == mine and pick_calibration([mine, amd], here) == mine
    assert pick_calibration([amd, mine], other) == amd and pick_calibration(str(amd), here) == amd
    assert pick_calibration([amd], {"model": "Neoverse-V2", "isa": []}) == amd
    with pytest.raises(ValueError, match=r"missing\.json: cannot read it"):
        pick_calibration([tmp_path / "missing.json", mine], here)


def test_the_federated_bench_config_names_a_calibration_per_cpu_it_was_benched_on() -> None:
    """Every calibration the example config lists exists and records its CPU, one per kind of CPU: a second file
    of the same CPU would never be picked."""
    from pathlib import Path

    from omnieval.perf._common import same_cpu
    from omnieval.perf._omni import load_config

    cfg, _, _ = load_config("examples/bench_federated.yaml")
    for engine, files in cfg.calibration.items():
        cpus = [json.loads((Path("examples") / f).read_text())["context"]["cpu"]
                for f in (files if isinstance(files, list) else [files])]  # fmt: skip
        assert all(c and c.get("model") for c in cpus), engine
        assert not any(same_cpu(a, b) for i, a in enumerate(cpus) for b in cpus[i + 1:]), engine


def test_a_replica_on_more_cores_than_its_calibration_is_bound_at_the_nodes() -> None:
    """A 2-thread replica judged by a 1-thread profile would get a 'bound' it can beat (efficiency above 1): the
    bound is the profile's work spread over every core of the node, and the node's core-seconds stay the same."""
    prof = {**PROFILE, "cores": 1}
    wide = {**_u("vlm-r1", "transformers", 0.95, 0.0, 49.0, 20_000, 100), "cpu_cores": 1.74, "node_cpus": 2}
    narrow = {**wide, "replica_id": "alm-r1", "cpu_cores": 0.9}
    d = diagnose({"inference_s": 50.0, "e2e_s": 55.0, "replica_usage": [wide, narrow]}, {"transformers": prof}, 2)
    w, n = d["replicas"]
    full = bound_s(wide, prof)
    assert n["bound_s"] == pytest.approx(full) and n["bound_cores"] == 1  # within its profile's cores: as measured
    assert w["bound_s"] == pytest.approx(full / 2) and w["bound_cores"] == 2 and w["profile_cores"] == 1
    assert w["efficiency"] == pytest.approx(full / 2 / 50.0)
    assert d["node"]["core_s"] == pytest.approx(2 * full)  # each replica's work counted once, at its cores
    text = "\n".join(report_lines(d))
    assert "(its 1-core profile spread over the node's 2: it used 1.74)" in text


def test_the_other_work_is_named_by_process_when_the_run_measured_it() -> None:
    """A run with the bench's per-process sampling names who took the node's CPU; a result saved before it keeps
    the generic list."""
    u = {**_u("vlm-r1", "vllm", 0.97, 0.5, 99.0, 60_000, 1_600), "cpu_cores": 1.2, "node_busy_cores": 1.95,
         "node_cpus": 2, "node_others": [{"name": "ray::FrameworkClient", "cores": 0.41},
                                         {"name": "raylet", "cores": 0.12}]}  # fmt: skip
    (r,) = diagnose({"inference_s": 100.0, "e2e_s": 110.0, "replica_usage": [u]},
                    {"vllm": {**PROFILE, "cores": 2}})["replicas"]  # fmt: skip
    assert "0.75 of them other work: ray::FrameworkClient 0.41, raylet 0.12 (by process" in r["cpu_note"]
    assert "clients, framework actors" not in r["cpu_note"]


@pytest.mark.parametrize(("busy", "bound"), [(190.0, True), (120.0, False)])
def test_the_run_cpu_line_calls_a_busy_node_cpu_bound(busy: float, bound: bool) -> None:
    nc = {"span_s": 100.0, "cpus": 2, "busy_core_s": busy,
          "groups": [{"name": f"g{i}", "core_s": 10.0 - i} for i in range(8)]}  # fmt: skip
    d = diagnose({"inference_s": 80.0, "e2e_s": 100.0, "replica_usage": [], "node_cpu": nc}, {})
    (line,) = [x for x in report_lines(d) if x.startswith("node CPU over the run")]
    assert f"= 200 core-s): busy {busy:.0f} core-s ({busy / 2:.0f}%)" in line
    assert ("CPU-bound" in line) is bound
    assert "g0 10.0, g1 9.0" in line and "g5 5.0, the rest 7.0" in line and "g6" not in line
