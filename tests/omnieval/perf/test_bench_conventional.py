"""`bench federated --config`: how the conventional jobs are planned, and how modes are summarised and compared.

The runners themselves load real models (torch): tests/serving/test_conventional_baseline.py, in the vLLM tier.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from omnieval.perf._conventional import ConventionalJob, _compat_processor, _union, plan_jobs
from omnieval.perf._omni import FederatedBenchConfig, load_config, report, summarise

REPO = Path(__file__).resolve().parents[3]
CONFIG = REPO / "examples/bench_federated.yaml"


def _job(bench: str, runner: str = "builtin") -> ConventionalJob:
    return ConventionalJob(benchmark=bench, runner=runner, model_class="transformers", pretrained="/m")  # type: ignore[arg-type]


def test_union_counts_overlaps_once() -> None:
    assert _union([(0, 10), (20, 25)]) == 15  # sequential: the sum
    assert _union([(0, 10), (5, 12), (11, 13), (20, 21)]) == 14  # concurrent: overlaps once
    assert _union([(0, 10), (2, 3)]) == 10


def test_shipped_config_covers_every_suite_benchmark_with_the_right_task() -> None:
    cfg, suite, same = load_config(CONFIG)
    assert suite == (REPO / "examples/bench_omni.yaml").resolve() and same is not None and same.exists()
    jobs = plan_jobs(list(cfg.conventional), suite, cpus=2, concurrent=False)
    by = {j["benchmark"]: j for j in jobs}
    assert set(by) == {"gsm8k", "tiny_shapes", "clip_qa", "asr_tiny"}
    assert {j.modality for j in cfg.conventional} == {"text", "image", "video", "audio"}
    # framework jobs resolve to the suite's framework task, with its offline data files and token budget
    assert by["gsm8k"]["key"] == "lmeval:gsm8k" and by["gsm8k"]["framework"] == "lmeval"
    assert by["gsm8k"]["options"]["data_files"]["test"].endswith("gsm8k_format_asdiv.jsonl")
    assert by["asr_tiny"]["generation"]["max_tokens"] == 48 and by["gsm8k"]["generation"]["max_tokens"] == 64
    assert all(j["cores"] == [0, 1] and not j["pin"] for j in jobs)  # sequential: every core, unpinned


def test_concurrent_jobs_get_disjoint_core_shares() -> None:
    suite = REPO / "examples/bench_omni.yaml"
    four = [_job(b) for b in ("gsm8k", "tiny_shapes", "clip_qa", "asr_tiny")]
    assert [j["cores"] for j in plan_jobs(four, suite, cpus=2, concurrent=True)] == [[0], [1], [0], [1]]
    two = [_job("clip_qa"), _job("asr_tiny")]
    planned = plan_jobs(two, suite, cpus=4, concurrent=True)
    assert [j["cores"] for j in planned] == [[0, 1], [2, 3]] and all(j["pin"] for j in planned)


def test_unknown_benchmark_and_unknown_keys_are_errors() -> None:
    with pytest.raises(ValueError, match=r"'nope' is not in .*asr_tiny"):
        plan_jobs([_job("nope")], REPO / "examples/bench_omni.yaml", cpus=2, concurrent=False)
    with pytest.raises(ValidationError, match="extra"):
        FederatedBenchConfig.model_validate({"suite": "s.yaml", "conventional": [], "oops": 1})


def _row(mode: str, rep: int, e2e: float, inf: float, video_e2e: float) -> dict[str, Any]:
    return {"mode": mode, "repeat": rep, "e2e_s": e2e, "inference_s": inf, "output_tokens": 100,
            "output_tokens_per_s": 100 / inf, "engine_utilisation": inf / e2e,
            "by_modality": {"video": {"e2e_s": video_e2e, "inference_s": inf / 2, "output_tokens": 40, "records": 4}}}  # fmt: skip


def test_summary_is_the_ratio_of_medians_with_the_paired_range() -> None:
    rows = [
        _row("conventional_sequential", 0, 300, 200, 100), _row("conventional_concurrent", 0, 240, 180, 90),
        _row("federated", 0, 100, 40, 50),
        _row("conventional_sequential", 1, 330, 220, 120), _row("conventional_concurrent", 1, 250, 190, 95),
        _row("federated", 1, 150, 50, 40),
        _row("conventional_sequential", 2, 360, 210, 110), _row("conventional_concurrent", 2, 260, 185, 92),
        _row("federated", 2, 110, 45, 45),
    ]  # fmt: skip
    s = summarise(rows)
    sp = s["overall"]["speedup_vs_conventional_sequential"]["e2e_s"]
    assert sp["ratio_of_medians"] == pytest.approx(330 / 110)
    assert sp["per_repeat"] == pytest.approx([3.0, 2.2, 360 / 110])
    assert sp["range"] == pytest.approx([2.2, 360 / 110])
    v = s["modalities"]["video"]
    assert v["speedup_vs_conventional_concurrent"]["e2e_s"]["ratio_of_medians"] == pytest.approx(92 / 45)
    assert v["federated"]["output_tokens_per_s"] == pytest.approx(40 / 22.5)
    lines = report({"summary": s, "engine_batching": {"engine": "vllm", "model": "m", "tok_s_1": 30.0,
                                                      "tok_s_saturated": 300.0, "concurrency": 16, "ratio": 10.0}})  # fmt: skip
    assert any(ln.startswith("overall") and "3.00x (2.20-3.27) vs sequential" in ln for ln in lines)
    assert lines[-1].endswith("-> 10.00x")


def test_a_subset_of_modes_is_summarised_without_speedups() -> None:
    """``--modes federated``: the pool's own run and its diagnosis, no ratio against a baseline that was not run."""
    s = summarise([_row("federated", 0, 100, 40, 50), _row("federated", 1, 120, 44, 60)])
    assert "speedup_vs_conventional_sequential" not in s["overall"]
    assert s["overall"]["federated"]["e2e_s"] == pytest.approx(110)
    lines = report({"summary": s})
    assert any(ln.startswith("overall") and "federated e2e 110.0 s" in ln for ln in lines)
    assert not any("vs sequential" in ln for ln in lines)


def test_same_engine_against_sequential_alone_is_reported_without_the_concurrent_ratio() -> None:
    """``--modes conventional_sequential,federated_same_engine``: the pooling-alone rows against the one baseline
    that ran (the report raised KeyError on the missing concurrent ratio and lost the run's printout)."""
    rows = [_row("conventional_sequential", 0, 300, 200, 100), _row("federated_same_engine", 0, 150, 120, 80)]
    s = summarise(rows)
    assert "same_engine_speedup_vs_conventional_concurrent" not in s["overall"]
    lines = report({"summary": s})
    video = next(ln for ln in lines if ln.startswith("video") and "federated same engine" in ln)
    assert "1.25x" in video and "vs sequential;" in video and "vs concurrent" not in video


def test_lmms_processor_shim_renames_audios_and_drops_empty_media() -> None:
    seen: dict[str, Any] = {}

    class Proc:
        tokenizer = "tok"

        def __call__(self, **kw: Any) -> str:
            seen.update(kw)
            return "ok"

    class LM:
        processor = Proc()

    lm = LM()
    _compat_processor(lm)
    assert lm.processor(text=["t"], images=["i"], videos=[], audios=[]) == "ok"
    assert seen == {"text": ["t"], "images": ["i"]} and lm.processor.tokenizer == "tok"
    seen.clear()
    lm.processor(text=["t"], images=[], videos=[], audios=["a"])
    assert seen == {"text": ["t"], "audio": ["a"]}


def test_same_engine_runs_each_modality_alone_and_sums_them(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Pooling alone is compared per modality as the conventional jobs run: one federated run per modality with
    only its benchmarks; the overall row is the sum, like the sequential baseline's."""
    import omnieval.perf._federated as fed
    from omnieval._suite import load_suite
    from omnieval.perf._omni import _same_engine_row

    calls: list[list[str]] = []

    def fake_run(suite, keys, probe=None, own_ray=False):  # type: ignore[no-untyped-def]
        calls.append(list(keys))
        n = len(calls)
        return {"e2e_s": 10.0 * n, "wall_s": 6.0 * n, "by_benchmark": {k: {"output_tokens": 5, "records": 2} for k in keys},
                "done_at": {k: 100.0 + n for k in keys}, "t_start": 100.0, "t_inference_start": 100.0,
                "engines": [], "output_tokens": 5 * len(keys), "records": 2 * len(keys), "errors": 0,
                "pool_up_s": 1.0, "ray_inside": own_ray, "ray_init_s": 3.0 if own_ray else None}  # fmt: skip

    monkeypatch.setattr(fed, "run_federated", fake_run)
    suite = load_suite("examples/bench_omni_transformers.yaml")
    modality = {b.key: m for b, m in zip(suite.benchmarks, ("text", "image", "video", "audio"), strict=True)}
    row = _same_engine_row(suite, 0, 2.0, modality, lambda m: None)
    assert calls == [[b.key] for b in suite.benchmarks] and calls[0] == ["lmeval:gsm8k"]
    assert row["by_modality"]["text"]["e2e_s"] == 12.0 and row["by_modality"]["audio"]["e2e_s"] == 42.0
    assert row["e2e_s"] == pytest.approx(sum(2.0 + 10.0 * n for n in range(1, 5)))
    assert row["inference_s"] == pytest.approx(60.0) and set(row["runs"]) == {"text", "image", "video", "audio"}
    # runs that start their own Ray (as `omnieval run` does) have its start in their times: nothing is added
    calls.clear()
    own = _same_engine_row(suite, 0, 0.0, modality, lambda m: None, own_ray=True)
    assert own["e2e_s"] == pytest.approx(sum(10.0 * n for n in range(1, 5))) and own["ray_init_s"] == 3.0
    assert own["by_modality"]["text"]["e2e_s"] == 10.0 and all(r["ray_init_s"] == 3.0 for r in own["runs"].values())


def test_same_engine_time_is_split_into_start_up_and_engine_time() -> None:
    """Each same-engine modality's medians: the conventional job's start and inference against Ray, the replica's
    deploy, its engine's busy time and the rest; the verdict names which side lost."""
    from omnieval.perf._omni import same_engine_why

    def conv(rep: int, e2e: dict[str, float], inf: dict[str, float]) -> dict[str, Any]:
        return {"mode": "conventional_sequential", "repeat": rep,
                "by_modality": {m: {"e2e_s": e2e[m], "inference_s": inf[m]} for m in e2e}}  # fmt: skip

    def run(e2e: float, up: float, *busy: float) -> dict[str, Any]:
        return {"e2e_s": e2e, "ray_init_s": 3.0, "pool_up_s": up, "engines": [{"busy_s": b} for b in busy]}

    rows = [conv(r, {"text": 80.0, "image": 18.0, "video": 60.0, "audio": 40.0},
                 {"text": 70.0, "image": 8.0, "video": 50.0, "audio": 33.0}) for r in range(3)]  # fmt: skip
    rows += [{"mode": "federated_same_engine", "repeat": r, "runs": {
        "text": run(45.0, 8.0, 33.0), "image": run(20.0 + r, 8.0, 7.0), "video": run(66.0, 9.0, 52.0),
        "audio": run(32.0, 8.0, 20.0, 16.0)}}
        for r in range(3)]  # fmt: skip
    lines = same_engine_why({"rows": rows})
    text, image, video, audio = lines[1:]
    assert "text   conventional 80.0 s = start 10.0 + inference 70.0 | same engine 45.0 s" in text
    assert "engine busy 33.0 + rest 1.0" in text and text.endswith("the pool is faster")
    assert "same engine 21.0 s" in image  # the median of 20, 21, 22
    assert "start-up +1.0 s, engine time -1.0 s (1.14x): the pool's start-up outweighs" in image
    assert "engine time +2.0 s (0.96x)" in video and "nothing wins back the start-up" in video
    # two replicas side by side: their work covers at least the busiest one's time, not the sum of both
    assert "engine busy 20.0 (the busiest of 2 replicas) + rest 1.0" in audio and "engine time -13.0 s" in audio
    one_did_all = {**rows[-1]["runs"]["audio"], "e2e_s": 50.0,
                   "replica_usage": [{"requests": 11}, {"requests": 0}]}  # fmt: skip
    slow = [{**r, "runs": {"audio": one_did_all}} for r in rows if r["mode"] == "federated_same_engine"]
    (line,) = same_engine_why({"rows": rows[:3] + slow})[1:]
    assert "1 of its 2 replicas served no request" in line
    assert same_engine_why({"rows": rows[:3]}) == []  # no same-engine rows: nothing to split


def test_same_engine_cpu_is_compared_and_too_much_work_is_called_out() -> None:
    """Per modality, the in-process job's CPU seconds against the pool's run's whole node: on 2 cores 44 core-s
    cannot end within the job's 20 s, whatever the schedule; 30 core-s can."""
    from omnieval.perf._omni import same_engine_why

    conv = [{"mode": "conventional_sequential", "repeat": r, "by_modality": {
        "video": {"e2e_s": 20.0, "inference_s": 14.0, "cpu_s": 32.0},
        "text": {"e2e_s": 70.0, "inference_s": 65.0, "cpu_s": 120.0}}} for r in range(3)]  # fmt: skip
    same = [{"mode": "federated_same_engine", "repeat": r, "runs": {
        "video": {"e2e_s": 22.0, "ray_init_s": 4.0, "pool_up_s": 2.0, "engines": [{"busy_s": 15.0}], "cpu_s": 44.0 + r},
        "text": {"e2e_s": 23.0, "ray_init_s": 4.0, "pool_up_s": 2.0, "engines": [{"busy_s": 15.0}], "cpu_s": 30.0}}}
        for r in range(3)]  # fmt: skip
    lines = same_engine_why({"rows": conv + same, "cpus": 2})
    video = next(x for x in lines if "CPU: the in-process job 32.0" in x)
    assert "the pool's run 45.0 core-s over the node (+13.0)" in video and "alone takes 22.5 s" in video
    assert "more than the job's whole 20.0 s" in video
    text = next(x for x in lines if "CPU: the in-process job 120.0" in x)
    assert "(-90.0)" in text and "more than" not in text
    assert not any("CPU:" in x for x in same_engine_why({"rows": conv + same}))  # the node's cores unknown


def test_report_reprints_a_saved_result_as_the_readme_quotes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``bench federated --report JSON`` prints the saved run's report without running anything; on the shipped
    result it prints the figures the README's performance table quotes from it."""
    import shutil

    from omnieval.perf import cli_main

    saved = shutil.copy(REPO / "docs/bench-federated.json", tmp_path / "r.json")
    assert cli_main(["federated", "--report", str(saved)]) == 0
    out = capsys.readouterr().out
    overall = next(ln for ln in out.splitlines() if ln.startswith("overall") and "federated" in ln)
    readme = (REPO / "README.md").read_text()
    ratio = overall.split("-> ")[1].split(" vs sequential")[0]  # e.g. "1.85x (1.78-1.86)"
    assert ratio.replace("x", "×", 1).replace("-", "–") in readme.replace("**", "")
    assert "same engine, where the time goes" in out and "ceiling: the federated run cannot end before" in out


def test_the_readmes_same_engine_rows_are_the_saved_same_engine_run(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """The README quotes the same-engine rows (one 2-thread replica per model) from the saved Xeon run (the same
    invocation as its cross-engine row): every modality's ratio and the overall one, as ``--report`` prints them."""
    import shutil

    from omnieval.perf import cli_main

    saved = shutil.copy(REPO / "docs/bench-federated-xeon.json", tmp_path / "r.json")
    assert cli_main(["federated", "--report", str(saved)]) == 0
    out = capsys.readouterr().out
    readme = (REPO / "README.md").read_text().replace("**", "")
    rows = [ln for ln in out.splitlines() if "federated same engine" in ln and "-> " in ln]
    assert {ln.split()[0] for ln in rows} == {"text", "image", "video", "audio", "overall"}
    for ln in rows:
        ratio = ln.split("-> ")[1].split(" vs sequential")[0]
        assert f"{ln.split()[0]} {ratio.replace('x', '×', 1).replace('-', '–')}" in readme, ln


def test_a_job_interpreter_without_its_framework_is_named_before_any_mode_runs(tmp_path: Path) -> None:
    """A framework venv linked to another checkout lacks lm-eval; the bench must say so at once, not minutes in."""
    import subprocess
    import sys

    from omnieval.core import OmnievalUserError
    from omnieval.perf._conventional import check_interpreters

    venv = tmp_path / "venv-lmms-9.9"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # nothing installed
    jobs = [ConventionalJob(benchmark="gsm8k", runner="lmeval", model_class="hf", pretrained="/m",
                            python=str(venv / "bin" / "python")),
            ConventionalJob(benchmark="mmlu", runner="lmeval", model_class="hf", pretrained="/m")]  # fmt: skip
    with pytest.raises(OmnievalUserError) as e:
        check_interpreters(jobs, "bench.yaml")
    (line,) = str(e.value).splitlines()  # this interpreter (the default) has lm-eval
    assert line == (f"bench.yaml: conventional[0] (gsm8k, lmeval) runs in {venv}/bin/python, which lacks lm_eval; "
                    "fix: scripts/make_framework_venv.sh lmms (builds the venv, or relinks it to this "
                    "checkout)")  # fmt: skip


def test_same_engine_floor_says_whether_any_pool_could_beat_the_in_process_job(tmp_path: Path) -> None:
    """Ray's start, the replica's load (no faster than the built-in job loading the same weights alone) and the
    node roofline of the work: above the conventional job's end to end, no pool wins on this machine."""
    from types import SimpleNamespace

    from omnieval.perf._omni import ConventionalEntry, floor_line, same_engine_floor

    w = str(tmp_path / "vlm")
    suite = SimpleNamespace(
        models=[SimpleNamespace(name="vlm", engine="transformers", source=SimpleNamespace(kind="path", path=w))],
        benchmarks=[SimpleNamespace(key="clip_qa", models=["vlm"]), SimpleNamespace(key="shapes", models=None)])
    conventional = [ConventionalEntry(benchmark="clip_qa", modality="video", runner="builtin", model_class="transformers",
                                      pretrained=w),
                    ConventionalEntry(benchmark="shapes", modality="image", runner="lmms", model_class="huggingface",
                                      pretrained=w)]  # fmt: skip

    def conv(rep: int, load: float) -> dict[str, Any]:
        return {"mode": "conventional_sequential", "repeat": rep,
                "jobs": [{"benchmark": "clip_qa", "load_s": load}, {"benchmark": "shapes", "load_s": 9.0}],
                "by_modality": {"video": {"e2e_s": 50.0, "inference_s": 44.0},
                                "image": {"e2e_s": 20.0, "inference_s": 8.0}}}  # fmt: skip

    def run(key: str, node: float, e2e: float) -> dict[str, Any]:
        return {"benchmarks": [key], "ray_init_s": 4.0, "e2e_s": e2e, "diagnosis": {"node": {"bound_s": node}}}

    rows = [conv(r, 5.0 + r) for r in range(3)] + [
        {"mode": "federated_same_engine", "repeat": r,
         "runs": {"video": run("clip_qa", 43.0, 58.0), "image": run("shapes", 5.0, 25.0)}} for r in range(3)]  # fmt: skip
    fl = same_engine_floor(rows, conventional, suite, {"vlm": w}, {"transformers": {"startup_s": 1.0}})
    v, i = fl["video"], fl["image"]
    # the lmms job's 9 s load is its framework's imports too: the built-in job's median 6 s stands for the replica
    assert (v["load_s"], i["load_s"]) == (6.0, 6.0) and "built-in conventional job" in v["load_from"][0]
    assert v["floor_s"] == pytest.approx(4.0 + 6.0 + 43.0) and not v["possible"]
    assert v["conventional_efficiency"] == pytest.approx(43.0 / 44.0)
    assert i["floor_s"] == pytest.approx(15.0) and i["possible"]
    assert "no pool comes out ahead of it on this machine" in floor_line(v)
    assert "1x is possible in principle" in floor_line(i) and "took 10.0 s over its floor" in floor_line(i)
    # without a built-in job on the weights, the engine's construction after its imports (a lower bound still)
    fl = same_engine_floor(rows[3:] + [{**conv(0, 5.0), "jobs": []}], conventional, suite, {"vlm": w},
                           {"transformers": {"startup_s": 1.0}})
    assert fl["video"]["load_s"] == 1.0 and "construction in process" in fl["video"]["load_from"][0]


def test_the_readmes_xeon_row_is_the_saved_xeon_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The README's Intel Xeon row quotes its own saved run (no concurrent mode): the cross-engine ratio, printed
    beside its sequential baseline, and the ceiling, as ``--report`` prints them."""
    import shutil

    from omnieval.perf import cli_main

    saved = shutil.copy(REPO / "docs/bench-federated-xeon.json", tmp_path / "r.json")
    assert cli_main(["federated", "--report", str(saved)]) == 0
    out = capsys.readouterr().out
    readme = (REPO / "README.md").read_text().replace("**", "")
    cross = next(ln for ln in out.splitlines() if ln.startswith("overall") and "| federated " in ln)
    ratio = cross.split("-> ")[1].split(" vs sequential")[0].replace("x", "×", 1).replace("-", "–")
    assert f"{ratio} vs sequential" in readme and "concurrent" not in cross
    ceiling = next(ln for ln in out.splitlines() if ln.startswith("ceiling:"))
    assert f"at most {ceiling.split('at most ')[1].split('x')[0]}×" in readme
    lines = out.splitlines()
    node = next(ln for ln in lines[lines.index("median federated repeat:"):] if ln.startswith("node CPU over the run"))
    avail, busy = node.split(" = ")[1].split(" core-s")[0], node.split("busy ")[1].split(" core-s")[0]
    share = node.split("core-s (")[1].split("%")[0]
    assert f"busy {busy} of its {avail} core-seconds ({share} %)" in readme, node


@pytest.mark.parametrize("concurrent", [False, True])
def test_each_jobs_cpu_seconds_are_the_kernels_count_of_it_and_its_children(tmp_path: Path, concurrent: bool) -> None:
    """A job's ``cpu_s`` is what the kernel charged its process and the children it reaped: a worker that computes
    for ~0.4 s itself and ~0.4 s in a child, and one that sleeps 0.5 s."""
    import sys

    from omnieval.perf._conventional import run_jobs

    worker = tmp_path / "worker"  # stands in for a framework venv's interpreter: `worker -m MODULE JOB RESULT`
    worker.write_text(f"""#!{sys.executable}
import json, subprocess, sys, time
job = json.load(open(sys.argv[3]))
burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4: pass"
t0 = time.time()
if job["burn"]:
    exec(burn)
    subprocess.run([sys.executable, "-c", burn], check=True)
else:
    time.sleep(0.5)
json.dump({{"benchmark": job["benchmark"], "runner": "builtin", "model_class": "x", "inference_s": 0.1,
           "output_tokens": 0, "t_inf0": t0, "t_inf1": time.time()}}, open(sys.argv[4], "w"))
""")
    worker.chmod(0o755)
    jobs = [{"benchmark": b, "python": str(worker), "cores": [0], "burn": burn} for b, burn in (("a", True), ("b", False))]
    out = run_jobs(jobs, concurrent=concurrent, log=lambda *_: None)
    cpu = {j["benchmark"]: j["cpu_s"] for j in out["jobs"]}
    assert 0.75 <= cpu["a"] <= out["e2e_s"] * 2  # its own 0.4 s and its child's 0.4 s
    assert cpu["b"] < 0.3  # half a second asleep is no CPU work
