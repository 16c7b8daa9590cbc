"""One private local Ray for all verifier tests that need it (each start costs seconds on a 2-core machine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    import ray

    for attempt in range(3):  # Ray's raylet registration has a fixed 30 s deadline that a loaded machine can miss
        try:
            ray.init(address="local", num_cpus=2, include_dashboard=False, namespace="omnieval", log_to_driver=False,
                     logging_level="WARNING")  # fmt: skip
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    try:
        yield
    finally:
        ray.shutdown()
