"""Request-routing and scheduling primitives for the inference pool.

Routing policies rank candidate replicas (the pool filters unhealthy / open-circuit ones first); the circuit breaker
and the adaptive concurrency limiters protect replicas; the sharding helpers balance evaluation items over workers by predicted cost.
"""

from ._circuit import BreakerState, CircuitBreaker
from ._gradient import GradientLimiter, LimitWindow
from ._least_loaded import LeastLoaded
from ._p2c import PowerOfTwoChoices
from ._policy import RoutingPolicy
from ._prefix_aware import PrefixAware
from ._prefix_tree import PrefixTree
from ._registry import DEFAULT_POLICY, ROUTING_POLICIES, make_policy
from ._round_robin import RoundRobin
from ._sharding import estimate_cost, makespan, plan_shards
from ._types import ReplicaView, RoutingRequest

__all__ = [
    "BreakerState",
    "CircuitBreaker",
    "DEFAULT_POLICY",
    "GradientLimiter",
    "LeastLoaded",
    "LimitWindow",
    "PowerOfTwoChoices",
    "PrefixAware",
    "PrefixTree",
    "ROUTING_POLICIES",
    "ReplicaView",
    "RoundRobin",
    "RoutingPolicy",
    "RoutingRequest",
    "estimate_cost",
    "makespan",
    "make_policy",
    "plan_shards",
]
