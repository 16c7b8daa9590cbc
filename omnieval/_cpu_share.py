"""How many cores each CPU engine of a run computes on, when its ``engine_kwargs`` leave it to omnieval.

llama.cpp defaults to one thread per core, and its threads spin at every barrier waiting for each other (OpenMP's
active wait). Two such servers on one 2-core node took 174 s for 32 short answers that one thread each did in 26 s:
each server's spinning threads held the cores the other's were waiting for. Ray's own convention (an actor's
``OMP_NUM_THREADS`` is its ``num_cpus``) would give the quickstart's lone replica one core of two: 12-35 % slower
in runs on a 2-core Xeon.
So the cores are shared out instead: each engine replica on the node gets cores in proportion to the CPUs it
reserves, out of the cores the node really has (a private Ray may count more logical CPUs than that).

Only where the run knows every engine replica's node: a single-node cluster, and a pool that ends with the run (a
kept pool's replicas are shared with other suites, whose engines this one cannot see). Elsewhere, and for any
model that sets the option itself, the engine's own default stands. The resolved value is part of the replica's
spec (its fingerprint, the command a pre-started server runs, the response cache's key: a CPU model added to a
suite changes the others' shares, and their cached answers are recomputed once); the run's recorded suite keeps
what the user wrote, so a rerun on another machine shares that machine's cores.
"""

from __future__ import annotations

import logging
import math

from omnieval.core import ModelConfig, SuiteConfig

log = logging.getLogger("omnieval")


def _local_cores() -> int:
    from serving import usable_cores

    return usable_cores()


def _node_cores(suite: SuiteConfig) -> int | None:
    """The cores of the run's only node, or None where it may have several (or they are elsewhere)."""
    import ray

    from cluster import starts_local_ray

    if not ray.is_initialized():
        if not starts_local_ray(suite.ray):
            return None  # joining a cluster not yet connected to: asked again once connected
        return min(suite.ray.num_cpus or _local_cores(), _local_cores())
    from cluster import inventory

    nodes = [n for n in inventory() if n.alive]
    here = ray.get_runtime_context().get_node_id()
    if len(nodes) != 1 or nodes[0].node_id != here:
        return None
    return max(1, min(int(nodes[0].cpus), _local_cores()))


def _computes_on_cpu(m: ModelConfig) -> bool:
    from serving import ENGINES

    return m.source.kind != "endpoint" and not m.resources.num_gpus and ENGINES.get(m.engine).cpu_bound


def _threads_option(m: ModelConfig) -> str | None:
    from serving import ENGINES

    return ENGINES.get(m.engine).cpu_threads_option


def share_cores(suite: SuiteConfig, needed: set[str], *, keep_pool: bool) -> SuiteConfig:
    """``suite`` with the threads of the ``needed`` CPU engines that leave them unset filled in (see the module)."""
    if keep_pool:
        return suite
    cpu = [m for m in suite.models if m.name in needed and _computes_on_cpu(m)]
    unset = {m.name: opt for m in cpu if (opt := _threads_option(m)) is not None and m.engine_kwargs.get(opt) is None}
    if not unset:
        return suite
    cores = _node_cores(suite)
    if cores is None:
        return suite

    def cpus(m: ModelConfig) -> float:  # what one replica reserves
        return m.resources.num_cpus or 1.0

    total = sum(cpus(m) * m.replicas for m in cpu)
    shares = {m.name: max(1, math.floor(cores * cpus(m) / total + 1e-9)) for m in cpu if m.name in unset}
    if len(cpu) > 1 or any(m.replicas > 1 for m in cpu):
        log.info("CPU engines share this node's %d cores: %s threads", cores,
                 ", ".join(f"{k} {v}" for k, v in shares.items()))  # fmt: skip
    models = [
        m.model_copy(update={"engine_kwargs": {**m.engine_kwargs, unset[m.name]: shares[m.name]}})
        if m.name in shares else m
        for m in suite.models
    ]  # fmt: skip
    return suite.model_copy(update={"models": models})
