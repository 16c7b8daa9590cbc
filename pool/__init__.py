"""The many-to-many pool: replica registry and health (controller), client actors and dispatch."""

from __future__ import annotations

from pool._client import EvalClient
from pool._controller import CONTROLLER_NAME, NAMESPACE, PoolController, fingerprint, get_controller
from pool._dispatch import Dispatcher, NoReplicaAvailable
from pool._types import ReplicaInfo, ReplicaState

__all__ = [
    "CONTROLLER_NAME",
    "NAMESPACE",
    "Dispatcher",
    "EvalClient",
    "NoReplicaAvailable",
    "PoolController",
    "ReplicaInfo",
    "ReplicaState",
    "fingerprint",
    "get_controller",
]
