"""Where a run's own actors go on a multi-node cluster: client actors on nodes that see the samples' media,
framework actors on nodes that have their interpreter (``cluster.nodes_with_paths`` asks each node)."""

from __future__ import annotations

import logging
from typing import Any

import ray

from omnieval.core import OmnievalUserError

log = logging.getLogger("omnieval")


def client_spots(media_dirs: set[str], n: int) -> list[dict[str, Any]]:
    """Placement of ``n`` client actors: anywhere, unless the samples name local media, which every client reads;
    then only on nodes that see every media directory (on one node, the driver's: nothing to check)."""
    live = [nd for nd in ray.nodes() if nd.get("Alive")]
    if not n or not media_dirs or len(live) < 2:
        return [{} for _ in range(n)]
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from cluster import nodes_with_paths

    have, lack = nodes_with_paths(sorted(media_dirs))
    if not have:
        raise OmnievalUserError(
            f"the samples' media ({len(media_dirs)} directories, e.g. {sorted(media_dirs)[0]}) are not visible on any "
            f"node of the cluster ({'; '.join(lack)}); put them on storage every node mounts at the same path"
        )
    if lack:
        log.warning("media not visible on %s: client actors run on the %d other node(s)", "; ".join(lack), len(have))
    return [{"scheduling_strategy": NodeAffinitySchedulingStrategy(have[i % len(have)], soft=False)} for i in range(n)]


def interpreter_nodes(framework: str, python: str) -> list[str]:
    """The nodes whose filesystem has ``frameworks.<framework>.python``; none is an error naming every node."""
    from cluster import nodes_with_executable

    have, lack = nodes_with_executable(python)
    if not have:
        raise OmnievalUserError(
            f"frameworks.{framework}.python: {python} is not an executable on any node of the cluster "
            f"({', '.join(lack)}); build that venv at the same path on the nodes that should run {framework} "
            f"(scripts/make_framework_venv.sh {framework}), or point python at one they have"
        )
    if lack:
        log.warning("frameworks.%s.python %s is missing on %s: its actors run on the other nodes", framework, python,
                    ", ".join(lack))  # fmt: skip
    return have
