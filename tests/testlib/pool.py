"""Tearing down a test's in-process pool: the detached controller with its replicas, Serve, then Ray."""

from __future__ import annotations

from typing import Any


def stop_pool(controller: Any) -> None:
    import ray
    from ray import serve

    ray.get(controller.shutdown.remote(), timeout=60)
    serve.shutdown()
    ray.shutdown()
