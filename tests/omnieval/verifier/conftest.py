"""One private local Ray per verifier test module that needs it.

Module scope, not session: a session-wide Ray outlived these tests and made later modules that start their own
(multi-node ``Cluster``) fail with "ray.init twice". Package scope does not help, as tests/ has no ``__init__.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
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
