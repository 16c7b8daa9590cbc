"""``omnieval bench``: federated vs per-process, pool vs engine ceiling, streaming memory, SIMULATED scale study,
verifier overhead (streaming vs a phase after inference).

Subcommands write ``<out>/<name>.json`` (and a PNG when matplotlib is installed) and print a summary; see
docs/bench.md for how each is measured and docs/scale-study.md for the simulated study.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["cli_main"]


def _parser() -> argparse.ArgumentParser:
    from omnieval.perf._common import DEFAULT_OUT

    p = argparse.ArgumentParser(prog="omnieval bench", description=__doc__)
    sub = p.add_subparsers(dest="what", required=True)

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: bench-results)")
        sp.add_argument("--name", help="file stem of the JSON/PNG (default: the subcommand)")

    f = sub.add_parser("federated", help="federated vs conventional (--config), or per-process vs federated (--suite)")
    f.add_argument("--config", help="federated vs conventional per modality (examples/bench_federated.yaml); "
                                    "run it in the vLLM venv")
    f.add_argument("--suite", default="examples/bench.yaml", help="without --config: the same-engine comparison")
    f.add_argument("--threads", type=int, help="total engine threads for each mode (default: this machine's CPUs)")
    f.add_argument("--repeats", type=int, default=1, help="side-by-side repeats (order alternates); medians reported")
    f.add_argument("--modes", help="with --config: a comma-separated subset of conventional_sequential, "
                                   "conventional_concurrent, federated, federated_same_engine (default: all); the "
                                   "speedups need both sides")  # fmt: skip
    f.add_argument("--calibrate", action="store_true",
                   help="with --config: first measure each engine's roofline profile on this machine, on the suite's "
                        "own models (into --out), instead of the config's calibration files")  # fmt: skip
    f.add_argument("--report", type=Path,
                   help="print the report of a saved --config result (its JSON) and redraw its PNGs, without running")
    common(f)

    pl = sub.add_parser("pool", help="pool throughput vs the engine's own saturated ceiling; per-request overhead")
    pl.add_argument("--suite", default="examples/bench.yaml")
    pl.add_argument("--repeats", type=int, default=3)
    pl.add_argument("--line-requests", type=int, default=20000, help="requests per saturated line-rate run")
    pl.add_argument("--seq-requests", type=int, default=2000, help="requests per concurrency-1 line-rate run")
    common(pl)

    s = sub.add_parser("stream", help="run_suite's driver peak RSS for 10k/100k/1M samples (INSTANT server)")
    s.add_argument("--sizes", default="10000,100000,1000000", help="run_suite end to end, one fresh process per size")
    s.add_argument("--local-sizes", default="", help="the dispatch loop alone with an in-process echo worker")
    s.add_argument("--materialised-sizes", default="", help="every Record held in lists, for contrast")
    s.add_argument("--ray-sizes", default="", help="the dispatch loop alone into real EvalClient actors")
    s.add_argument("--chunk-size", type=int, default=256)
    s.add_argument("--window", type=int, default=8, help="max chunks in flight")
    common(s)

    c = sub.add_parser("calibrate", help="measure llama-server, vLLM or transformers: the SIMULATED engine's profile "
                                         "and the federated bench's roofline")  # fmt: skip
    c.add_argument("--engine", choices=["llama-server", "vllm", "transformers"], default="llama-server",
                   help="engine measured (vllm, transformers: run in a venv with them, see docs/scale-study.md)")  # fmt: skip
    c.add_argument("--model-dir", help="vllm, transformers: HF checkpoint directory (default: SmolLM2 converted from "
                                       "its GGUF)")  # fmt: skip
    c.add_argument("--threads", type=int, default=1, help="llama-server -t / transformers torch threads (1: see "
                                                          "docs/scale-study.md)")  # fmt: skip
    c.add_argument("--parallel", help="llama-server --parallel / vLLM concurrencies / transformers batches "
                                      "(default 1,2,4,8 / 1,2,4,8,16 / 1,2,4,8)")  # fmt: skip
    c.add_argument("--out-tokens", type=int, help="output tokens per request (default 24 / 64)")
    c.add_argument("--repeats", type=int, help="repeats of every point (default 3 / 1)")
    common(c)

    sc = sub.add_parser("scale", help="SIMULATED scale study: routing policies at 256 replicas x 64 clients")
    sc.add_argument("--replicas", type=int, default=256)
    sc.add_argument("--clients", type=int, default=64)
    sc.add_argument("--requests", type=int, default=8192, help="requests per workload")
    sc.add_argument("--workloads", default="uniform,skewed,prefix_heavy")
    sc.add_argument("--policies", default="p2c,round_robin,least_loaded,prefix_aware")
    sc.add_argument("--calibration", help="JSON from `omnieval bench calibrate` (default: the shipped profile)")
    sc.add_argument("--rpc-ms", type=float, default=2.0, help="one-way client-replica hop (from `bench pool`)")
    sc.add_argument("--seed", type=int, default=0)
    common(sc)
    fs = sub.add_parser("federated-sim", help="SIMULATED: federated vs conventional in the paper's Table 7 setting "
                                              "(GPUs of two kinds, four models, three modalities)")  # fmt: skip
    fs.add_argument("--calibration", default="docs/calibration-vllm.json",
                    help="JSON from `omnieval bench calibrate` (its profile and measured start-up)")  # fmt: skip
    fs.add_argument("--fast", type=int, default=1, help="GPUs of the fast kind (the profile's speed)")
    fs.add_argument("--slow", type=int, default=2, help="GPUs of the slow kind")
    fs.add_argument("--slow-factor", type=float, default=2.0, help="how many times slower a slow GPU is")
    fs.add_argument("--clients", type=int, default=4)
    fs.add_argument("--policy", default="p2c")
    common(fs)
    le = sub.add_parser("lmeval", help="one lm-eval task: lm_eval alone vs the same task in an omnieval run")
    le.add_argument("--rows", type=int, default=4000, help="requests (distinct gsm8k-schema rows)")
    le.add_argument("--repeats", type=int, default=3)
    le.add_argument("--num-concurrent", type=int, default=64, help="lm_eval's local-completions concurrency")
    common(le)
    lm = sub.add_parser("lmms", help="one image lmms-eval task: lmms_eval alone vs the same task in an omnieval run")
    lm.add_argument("--rows", type=int, default=1000, help="image requests (numbered tiny_shapes rows)")
    lm.add_argument("--repeats", type=int, default=3)
    lm.add_argument("--num-concurrent", type=int, default=32, help="lmms-eval's openai client concurrency (its default)")
    lm.add_argument("--python", help="the lmms-eval venv's interpreter (default: the one "
                                     "scripts/make_framework_venv.sh lmms builds)")
    common(lm)
    mc = sub.add_parser("lmeval-mc", help="MMLU-sized multiple-choice lm-eval task through the pool vs lm_eval "
                                          "alone on vLLM (--server vllm) or vs the raw line rate (--server instant)")
    mc.add_argument("--server", choices=["instant", "vllm"], default="instant")
    mc.add_argument("--rows", type=int, default=2850, help="MMLU documents (4 choices each; at most 2850)")
    mc.add_argument("--repeats", type=int, default=3)
    mc.add_argument("--num-concurrent", type=int, default=64, help="lm_eval's / the raw client's concurrency")
    common(mc)
    va = sub.add_parser("verifier", help="judges vs always-correct and the rule-based metric on the heldout split")
    va.add_argument("--judges", default="trained,untrained", help="comma-separated: trained, untrained")
    va.add_argument("--split", default="heldout", choices=["heldout", "train"])
    va.add_argument("--limit", type=int, help="first N items of the split (default: all)")
    va.add_argument("--parallel", type=int, default=4, help="llama-server slots of the judge")
    common(va)
    v = sub.add_parser("verifier-overhead", help="suite wall with the verifier off / streaming / as a phase after")
    v.add_argument("--suite", default="examples/quickstart.yaml")
    v.add_argument("--limit", type=int, default=10, help="samples per benchmark (default 10)")
    v.add_argument("--repeats", type=int, default=3, help="repeats of all three modes, order alternating")
    v.add_argument("--judge-max-tokens", type=int, help="judge tokens (default: the suite's or VerifierConfig's)")
    common(v)
    return p


def _csv(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def _save(args: argparse.Namespace, data: dict[str, Any], plotter: Any) -> None:
    from omnieval.perf._common import machine_context, write_json

    data = {"bench": args.what, "context": machine_context(), **data}
    stem = args.name or args.what
    path = write_json(args.out / f"{stem}.json", data)
    print(f"wrote {path}")
    png = plotter(data, args.out / f"{stem}.png") if plotter else None
    if png:
        print(f"wrote {png}")


def _print_omni(res: dict[str, Any]) -> None:
    """A ``--config`` result's report, and its same-engine llama.cpp comparison when it ran one."""
    import omnieval.perf._omni as omni

    for line in omni.report(res):
        print(line)
    if res.get("same_engine"):
        _print_same_engine(res["same_engine"]["summary"], res["repeats"])


def _cmd_federated(args: argparse.Namespace) -> int:
    import omnieval.perf._federated as fed
    from omnieval._suite import load_suite
    from omnieval.perf._common import cpu_count

    if args.report:
        import json

        import omnieval.perf._omni as omni

        res = json.loads(args.report.read_text())
        _print_omni(res)
        png = omni.plot(res, args.report.with_suffix(".png"))
        if png:
            print(f"wrote {png}")
        return 0
    if args.config:
        import omnieval.perf._omni as omni

        res = omni.bench_omni(args.config, repeats=args.repeats, cpus=args.threads or cpu_count(),
                              modes=_csv(args.modes) if args.modes else None,
                              calibrate_to=args.out if args.calibrate else None)  # fmt: skip
        _save(args, res, omni.plot)  # saved first: a report that fails loses no measured run (--report reprints it)
        _print_omni(res)
        return 0
    suite = load_suite(args.suite)
    threads = args.threads or cpu_count()
    res = fed.bench_federated(suite, threads_total=threads, repeats=args.repeats)
    res = {"suite": args.suite, "threads_total": threads, "repeats": args.repeats, **res}
    _print_same_engine(res["summary"], args.repeats)
    _save(args, res, fed.plot)
    return 0


def _print_same_engine(summary: dict[str, Any], repeats: int) -> None:
    for modality, s in summary.items():
        pp, fd = s["per_process"], s["federated"]
        print(
            f"same engine, {modality}: per-process {pp['wall_s']:.1f} s ({pp['output_tokens_per_s']:.1f} tok/s, util "
            f"{pp['engine_utilisation']:.2f}) | federated {fd['wall_s']:.1f} s ({fd['output_tokens_per_s']:.1f} tok/s, "
            f"util {fd['engine_utilisation']:.2f}) | speedup {s['speedup']:.2f}x (ratio of medians over {repeats}; "
            f"median of paired ratios {s['speedup_median_of_pairs']:.2f}x, range {s['speedup_min_max']}; "
            f"first-request-to-last-response {s['speedup_active']:.2f}x, end-to-end {s['speedup_e2e']:.2f}x)"
        )


def _cmd_pool(args: argparse.Namespace) -> int:
    import omnieval.perf._poolbench as pb
    from omnieval._suite import load_suite

    res = pb.bench_pool(load_suite(args.suite), repeats=args.repeats, line_requests=args.line_requests,
                        seq_requests=args.seq_requests)  # fmt: skip
    lr = res["line_rate"]

    def rate(k: str) -> str:
        lo, hi = lr[k]["requests_per_s_range"]
        return f"{lr[k]['requests_per_s']:,.0f} req/s ({lo:,.0f}-{hi:,.0f})"

    print(f"line rate (INSTANT server, no model; medians of {args.repeats}, range):")
    print(f"  raw aiohttp c64 {rate('raw_c64')} | pool, external endpoint {rate('pool_external_saturated')} | "
          f"pool, managed replica {rate('pool_managed_saturated')}")  # fmt: skip
    lo, hi = lr["pool_over_raw_paired_range"] or [0.0, 0.0]
    print(
        f"  pool/raw {lr['pool_over_raw']:.2f} (per repeat {lo:.2f}-{hi:.2f}); managed/raw {lr['managed_over_raw']:.2f}"
    )
    print(f"  concurrency 1: raw p50 {lr['raw_c1']['p50_ms']:.2f} ms, pool p50 {lr['pool_external_c1']['p50_ms']:.2f} ms "
          f"-> added {lr['added_p50_ms_c1']:+.2f} ms")  # fmt: skip
    lo, hi = res["pool_over_ceiling_paired_range"] or [0.0, 0.0]
    print(
        f"ceiling (real llama-server): direct {res['median_ceiling_tokens_per_s']:.1f} tok/s, pool "
        f"{res['median_pool_tokens_per_s']:.1f} tok/s -> pool/ceiling {res['pool_over_ceiling']:.2f} "
        f"(per repeat {lo:.2f}-{hi:.2f})"
    )
    d = res["matched_latency_delta"]
    print(f"matched-request latency delta vs direct (llama-server): p50 {d['p50_ms']:.0f} ms, p99 {d['p99_ms']:.0f} ms")
    _save(args, {"suite": args.suite, **res}, pb.plot)
    return 0


def _cmd_stream(args: argparse.Namespace) -> int:
    import omnieval.perf._stream_bench as sb

    plan = [("run-suite", int(n)) for n in _csv(args.sizes)]
    plan += [("stream-local", int(n)) for n in _csv(args.local_sizes)]
    plan += [("materialised", int(n)) for n in _csv(args.materialised_sizes)]
    plan += [("stream-ray", int(n)) for n in _csv(args.ray_sizes)]
    res = sb.bench_stream(plan, chunk_size=args.chunk_size, window=args.window)
    for mode, g in res["growth"].items():
        print(f"{mode}: {g['mib_per_100k_records']:+.1f} MiB per 100k records ({g['from_n']:,} -> {g['to_n']:,})")
    _save(args, res, sb.plot)
    return 0


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from omnieval.perf._calibrate import measure_engine
    from omnieval.perf._common import default_model_path

    def log(m: str) -> None:
        print(m, flush=True)

    model_dir = args.model_dir
    if model_dir is None and args.engine != "llama-server":
        from serving import gguf_to_hf

        model_dir = gguf_to_hf(default_model_path(), name="smollm2")
    res = measure_engine(args.engine, model_dir, threads=args.threads,
                         parallel=[int(x) for x in _csv(args.parallel)] if args.parallel else None,
                         out_tokens=args.out_tokens, repeats=args.repeats, log=log)  # fmt: skip
    p = res["profile"]
    print(
        f"fit: step = {p['step_base_s'] * 1e3:.2f} ms + {p['step_per_seq_s'] * 1e3:.2f} ms x batch + "
        f"{p['step_per_kv_token_s'] * 1e6:.3f} us x kv_tokens; prefill = {p['prefill_base_s'] * 1e3:.1f} ms + "
        f"{p['prefill_per_token_s'] * 1e3:.3f} ms x uncached tokens; {p['chars_per_token']:.2f} chars/token"
    )
    if "batching_gain" in res:
        g = res["batching_gain"]
        print(f"batching gain: {g['tok_s_1']:.1f} tok/s at 1 request, {g['tok_s_saturated']:.1f} tok/s at "
              f"{g['concurrency']} -> {g['ratio']:.2f}x")  # fmt: skip
    _save(args, res, None)
    return 0


def _cmd_scale(args: argparse.Namespace) -> int:
    import omnieval.perf._scale as sc

    profile = sc.load_profile(args.calibration)
    print(sc.label(profile))
    print(f"profile: {profile.source}")
    res = sc.scale_study(replicas=args.replicas, clients=args.clients, requests=args.requests,
                         workloads=tuple(_csv(args.workloads)), policies=tuple(_csv(args.policies)),
                         profile=profile, seed=args.seed, rpc_s=args.rpc_ms / 1000)  # fmt: skip
    print(sc.markdown_table(res))
    _save(args, res, sc.plot)
    return 0


def _cmd_federated_sim(args: argparse.Namespace) -> int:
    import omnieval.perf._federated_sim as fs

    profile, engine, startup = fs.load(args.calibration)
    print(fs.LABEL.format(engine=engine))
    print(f"profile: {profile.source}")
    res = fs.paper_setting(profile, engine=engine, fast=args.fast, slow=args.slow, slow_factor=args.slow_factor,
                           load_s=startup or 30.0, clients=args.clients, policy=args.policy)  # fmt: skip
    print(fs.markdown_table(res))
    _save(args, res, None)
    return 0


def _cmd_verifier_overhead(args: argparse.Namespace) -> int:
    import omnieval.perf._verifier_overhead as vo
    from omnieval._suite import load_suite

    res = vo.bench_verifier_overhead(load_suite(args.suite), repeats=args.repeats, limit=args.limit,
                                     judge_max_tokens=args.judge_max_tokens)  # fmt: skip
    print(vo.table(res["summary"]))
    _save(args, {"suite": args.suite, **res}, None)
    return 0


def _cmd_verifier(args: argparse.Namespace) -> int:
    import omnieval.perf._verifier_accuracy as va

    res = va.bench_verifier_accuracy(_csv(args.judges), split=args.split, limit=args.limit, parallel=args.parallel)
    print(va.table(res))
    _save(args, res, None)
    return 0


def _cmd_lmeval(args: argparse.Namespace) -> int:
    import omnieval.perf._lmeval as le

    res = le.bench_lmeval(rows=args.rows, repeats=args.repeats, num_concurrent=args.num_concurrent)
    for line in le.report(res):
        print(line)
    _save(args, res, le.plot)
    return 0


def _cmd_lmms(args: argparse.Namespace) -> int:
    import omnieval.perf._lmms as lm

    res = lm.bench_lmms(rows=args.rows, repeats=args.repeats, num_concurrent=args.num_concurrent, python=args.python)
    for line in lm.report(res):
        print(line)
    _save(args, res, lm.plot)
    return 0


def _cmd_lmeval_mc(args: argparse.Namespace) -> int:
    import omnieval.perf._lmeval_mc as mc

    res = mc.bench_lmeval_mc(server=args.server, rows=args.rows, repeats=args.repeats, num_concurrent=args.num_concurrent)
    for line in mc.report(res):
        print(line)
    _save(args, res, mc.plot)
    return 0


def cli_main(argv: Sequence[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(list(argv))
    handlers = {
        "federated": _cmd_federated,
        "pool": _cmd_pool,
        "stream": _cmd_stream,
        "calibrate": _cmd_calibrate,
        "scale": _cmd_scale,
        "federated-sim": _cmd_federated_sim,
        "verifier-overhead": _cmd_verifier_overhead,
        "verifier": _cmd_verifier,
        "lmeval": _cmd_lmeval,
        "lmms": _cmd_lmms,
        "lmeval-mc": _cmd_lmeval_mc,
    }
    return handlers[args.what](args)
