"""The many-to-many pool: replica registry and health (controller), client actors and dispatch."""

from __future__ import annotations

from pool._cache import CacheLookup, ResponseCache, cache_key, default_cache_path, lookup_response, lookup_scores
from pool._client import EvalClient
from pool._controller import (
    CONTROLLER_NAME,
    NAMESPACE,
    PoolController,
    engine_kwargs_with_tp,
    fingerprint,
    get_controller,
    start_serve_early,
)
from pool._dispatch import Dispatcher, NoReplicaAvailable
from pool._inline import InlineReplicas, is_inline
from pool._nice import yield_cpu
from pool._starts import ModelStarts
from pool._types import ChunkResult, ReplicaEvent, ReplicaInfo, ReplicaState, decode_records, encode_records

__all__ = [
    "CONTROLLER_NAME",
    "CacheLookup",
    "ChunkResult",
    "NAMESPACE",
    "Dispatcher",
    "EvalClient",
    "InlineReplicas",
    "NoReplicaAvailable",
    "PoolController",
    "ResponseCache",
    "ReplicaEvent",
    "ReplicaInfo",
    "ModelStarts",
    "ReplicaState",
    "cache_key",
    "decode_records",
    "default_cache_path",
    "encode_records",
    "engine_kwargs_with_tp",
    "fingerprint",
    "get_controller",
    "is_inline",
    "start_serve_early",
    "lookup_response",
    "lookup_scores",
    "yield_cpu",
]
