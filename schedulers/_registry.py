"""Name → routing-policy registry.

Targets are lazy ``"module:object"`` strings (see :class:`omnieval.core.Registry`) so a policy registered by name
resolves identically in the driver and inside Ray actors.
"""

from __future__ import annotations

from typing import Any

from omnieval.core import ROUTING_POLICIES as _ROUTING_POLICIES
from omnieval.core import Registry

from ._policy import RoutingPolicy

DEFAULT_POLICY = "p2c"

ROUTING_POLICIES: Registry[type[RoutingPolicy]] = _ROUTING_POLICIES  # table in the kernel: configs validate names


def make_policy(name: str = DEFAULT_POLICY, seed: int | None = None, **kwargs: Any) -> RoutingPolicy:
    """Instantiate the policy registered as ``name``; unknown names raise ``UnknownNameError`` with suggestions.

    Every built-in policy takes ``seed`` (ignored by deterministic ones), so callers can pass it unconditionally.
    """
    cls = ROUTING_POLICIES.get(name)
    if not (isinstance(cls, type) and issubclass(cls, RoutingPolicy)):
        raise TypeError(f"routing policy {name!r} resolved to {cls!r}, not a RoutingPolicy subclass")
    return cls(seed=seed, **kwargs)  # type: ignore[call-arg]
