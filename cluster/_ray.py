"""Ray bring-up: a local ``ray.init()`` as the embedded default, or join an existing cluster."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import ray

from cluster._inventory import detect_gpu_resources
from omnieval.core import OmnievalUserError, RayConfig

log = logging.getLogger("omnieval.cluster")
_JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # set by Ray's job supervisor for the entrypoint process


def job_working_dir() -> str | None:
    """The ``working_dir`` of the Ray job this driver was submitted as, if any."""
    raw = os.environ.get(_JOB_CONFIG_ENV)
    if not raw:
        return None
    try:
        env = json.loads(raw).get("runtime_env") or {}
    except (ValueError, AttributeError):
        return None
    wd = env.get("working_dir") if isinstance(env, dict) else None
    return str(wd) if wd else None


def runtime_env_of(cfg: RayConfig) -> dict[str, Any]:
    """The suite's ``ray.runtime_env`` as Ray's dict, ``forward_env`` resolved from this process's environment."""
    r = cfg.runtime_env
    env_vars = dict(r.env_vars)
    missing = [n for n in r.forward_env if n not in os.environ]
    if missing:
        raise OmnievalUserError(
            f"ray.runtime_env.forward_env names {', '.join(missing)}, which the driver's environment does not have; "
            "set them where `omnieval run` (or `ray job submit`) starts, or drop them from forward_env"
        )
    env_vars.update({n: os.environ[n] for n in r.forward_env})
    out: dict[str, Any] = {}
    if env_vars:
        out["env_vars"] = env_vars
    if r.working_dir:
        if (job_wd := job_working_dir()) is not None:
            raise OmnievalUserError(
                f"ray.runtime_env.working_dir {r.working_dir!r} and the Ray job's own working_dir {job_wd!r} both "
                "set one; keep one: drop ray.runtime_env.working_dir (the job's is shipped to every actor already)"
            )
        out["working_dir"] = r.working_dir
    if r.py_modules:
        out["py_modules"] = list(r.py_modules)
    return out


def replica_runtime_env() -> dict[str, Any]:
    """What engine replicas need of the job's runtime env (Serve deployments run in Serve's own job and would not
    inherit it): its env vars, working_dir and py_modules, as Ray resolved them (uploaded URIs)."""
    env = dict(ray.get_runtime_context().runtime_env or {})
    return {k: env[k] for k in ("env_vars", "working_dir", "py_modules") if env.get(k)}


def starts_local_ray(cfg: RayConfig | None = None) -> bool:
    """Whether ``connect(cfg)`` will start a private local Ray rather than join one: no address given, none in
    ``RAY_ADDRESS``, and no cluster on this machine from ``ray start`` (which ``ray.init()`` joins by itself)."""
    if ray.is_initialized() or (cfg is not None and cfg.address) or os.environ.get("RAY_ADDRESS"):
        return False
    from ray._private.services import canonicalize_bootstrap_address

    try:
        return canonicalize_bootstrap_address(None) is None  # type: ignore[arg-type]  # None: what ray.init() passes
    except Exception:  # noqa: BLE001 - cannot tell: assume a cluster to join (the conservative answer)
        return False


def connect(cfg: RayConfig | None = None, *, log_to_driver: bool = False) -> dict[str, Any]:
    """Join ``cfg.address`` / ``RAY_ADDRESS`` (as under ``ray job submit``) or start a private local instance; the
    suite's ``ray.runtime_env`` is added to the job's own (every actor of this driver inherits it)."""
    cfg = cfg or RayConfig()
    if ray.is_initialized():
        return {"address": "existing", "started": False}
    address = cfg.address or os.environ.get("RAY_ADDRESS")
    kwargs: dict[str, Any] = {"namespace": "omnieval", "log_to_driver": log_to_driver, "logging_level": "WARNING"}
    if env := runtime_env_of(cfg):
        kwargs["runtime_env"] = env
    if address:
        ray.init(address=address, **kwargs)
        return {"address": address, "started": False}
    if not starts_local_ray(cfg):
        # a ``ray start`` cluster on this machine, which ``ray.init()`` joins by itself: it keeps its own resources
        # (Ray refuses num_cpus when joining) and is not this run's to shut down
        if cfg.num_cpus:
            log.warning("ray.num_cpus %d is not applied: joining the Ray cluster already running on this machine "
                        "(`ray start`), which keeps its own CPUs; `ray stop` it to run on a private local Ray",
                        cfg.num_cpus)  # fmt: skip
        ray.init(**kwargs)
        return {"address": "auto", "started": False}
    if cfg.num_cpus:
        kwargs["num_cpus"] = cfg.num_cpus
    kwargs["include_dashboard"] = False
    # Ray runs workers at niceness 15; here the workers *are* the workload (in-process engines), so normal priority.
    os.environ.setdefault("RAY_worker_niceness", "0")
    if gpu := detect_gpu_resources():  # declare free GPU memory so placement can check memory estimates
        kwargs["resources"] = gpu
    ray.init(**kwargs)
    return {"address": "local", "started": True}
