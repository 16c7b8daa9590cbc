"""``omnieval plan SUITE``: what a run would do, worked out with nothing deployed and no run directory.

Every check ``omnieval run`` makes before deploying runs here (config, model files, endpoints, every framework task
resolved in its framework's interpreter, every built-in sample validated), then the plan is printed: models ×
benchmarks × samples, the replicas and the node each would land on (the live cluster's when an address is given,
else this machine as ``omnieval run`` would start it), and what each engine is started with. Exit 2 on any error.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from rich.console import Console
from rich.table import Table

from omnieval.core import SuiteConfig


def _nodes(suite: SuiteConfig) -> tuple[list[Any], str]:
    """The live cluster's nodes when an address is configured, else this machine as a local Ray would be."""
    from cluster import NodeInfo, detect_gpu_resources, inventory

    address = suite.ray.address or os.environ.get("RAY_ADDRESS")
    if address:
        import ray

        from cluster import connect

        connect(suite.ray)
        try:
            return inventory(), f"cluster at {address}"
        finally:
            ray.shutdown()
    cpus = float(suite.ray.num_cpus or os.cpu_count() or 1)
    res = {"CPU": cpus, **detect_gpu_resources()}
    node = NodeInfo(node_id="local", hostname=os.uname().nodename, alive=True, cpus=cpus, gpus=0.0,
                    accelerator_type=None, gpu_memory_gb=None, resources=res, available=dict(res))  # fmt: skip
    return [node], "this machine (a local Ray, as `omnieval run` starts it)"


def placement(suite: SuiteConfig, nodes: list[Any]) -> list[tuple[str, int, str]]:
    """(model, replica number, where) for every replica at start, placed as the pool controller places them."""
    from cluster import check_replicas, choose_node, consumed, demand_of
    from pool import is_inline

    reserved: dict[str, dict[str, float]] = {}
    out = []
    for m in suite.models:
        if is_inline(m):
            out += [(m.name, i, "the pool controller (an external endpoint: no cluster resources)")
                    for i in range(m.replicas)]  # fmt: skip
            continue
        d = demand_of(m)
        check_replicas(d, m.replicas, m.name, nodes)  # PlacementError: never fits
        for i in range(m.replicas):
            node = choose_node(d, nodes, reserved)
            if node is None:
                out.append((m.name, i, f"waits for room ({d.describe()})"))
                continue
            acc = reserved.setdefault(node.node_id, {})
            for k, v in consumed(d, node).items():
                acc[k] = acc.get(k, 0.0) + v
            out.append((m.name, i, f"{node.hostname} (node {node.node_id[:8]}; {d.describe()})"))
    return out


def cmd_plan(args: argparse.Namespace) -> int:
    from omnieval._output import resolve_output_dir
    from omnieval._plan import builtin_specs, iter_records, preflight
    from omnieval._suite import load_suite

    suite = load_suite(args.suite)
    out = resolve_output_dir(None, suite.output.dir)  # a relative dir inside a Ray job's working_dir copy: exit 2
    preflight(suite)  # model files, endpoints, framework tasks: OmnievalUserError → exit 2
    specs = builtin_specs(suite)
    counts: dict[tuple[str, str], int] = {}
    for r in iter_records(suite, specs):  # validates every built-in sample
        counts[(r.model, r.benchmark)] = counts.get((r.model, r.benchmark), 0) + 1
    nodes, where = _nodes(suite)
    console = Console()
    t = Table(title=f"plan: {suite.name} ({args.suite})")
    for col in ("model", "benchmark", "framework", "samples"):
        t.add_column(col, justify="right" if col == "samples" else "left")
    for b in suite.benchmarks:
        for m in suite.models:
            if b.models is not None and m.name not in b.models:
                continue
            if b.framework == "builtin":
                n = str(counts.get((m.name, b.key), 0))
            else:
                n = f"≤ {b.limit} per task" if b.limit else "all (the framework's own count)"
            t.add_row(m.name, b.key, b.framework, n)
    console.print(t)
    p = Table(title=f"replicas on {where}")
    for col in ("model", "replica", "engine", "node", "engine_kwargs"):
        p.add_column(col)
    engines = {m.name: m for m in suite.models}
    for model, i, node in placement(suite, nodes):
        m = engines[model]
        p.add_row(model, str(i), m.engine, node, str(m.engine_kwargs or {}))
    console.print(p)
    total = sum(counts.values())
    print(f"{total} built-in samples, {sum(1 for b in suite.benchmarks if b.framework != 'builtin')} framework "
          f"task(s), {sum(m.replicas for m in suite.models)} replica(s); artifact under {out.uri or out.local.resolve()}; "
          "nothing was deployed")  # fmt: skip
    return 0
