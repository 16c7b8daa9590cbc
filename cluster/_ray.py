"""Ray bring-up: a local ``ray.init()`` as the embedded default, or join an existing cluster."""

from __future__ import annotations

import os
from typing import Any

import ray

from cluster._inventory import detect_gpu_resources
from omnieval.core import RayConfig


def connect(cfg: RayConfig | None = None, *, log_to_driver: bool = False) -> dict[str, Any]:
    """Join ``cfg.address`` / ``RAY_ADDRESS`` (as under ``ray job submit``) or start a private local instance."""
    cfg = cfg or RayConfig()
    if ray.is_initialized():
        return {"address": "existing", "started": False}
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"namespace": "omnieval", "log_to_driver": log_to_driver, "logging_level": "WARNING"}
    if address:
        ray.init(address=address, **kwargs)
        return {"address": address, "started": False}
    if cfg.num_cpus:
        kwargs["num_cpus"] = cfg.num_cpus
    kwargs["include_dashboard"] = False
    # Ray runs workers at niceness 15; here the workers *are* the workload (in-process engines), so normal priority.
    os.environ.setdefault("RAY_worker_niceness", "0")
    if gpu := detect_gpu_resources():  # declare free GPU memory so placement can check memory estimates
        kwargs["resources"] = gpu
    ray.init(**kwargs)
    return {"address": "local", "started": True}
