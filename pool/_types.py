"""Typed pool state shared between the controller, client actors and the driver."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

ReplicaState = Literal["starting", "healthy", "unhealthy", "dead", "draining"]


class ReplicaInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")
    replica_id: str
    """Pool-unique id; also the Serve application name."""
    model: str
    """Suite model name."""
    fingerprint: str
    """Hash of (source, engine, engine_kwargs): replicas are shared only between identical model specs."""
    engine: str
    """Engine backend."""
    state: ReplicaState = "starting"
    """Lifecycle state; only ``healthy`` replicas are routed to."""
    node_id: str | None = None
    """Ray node hosting it."""
    queue_depth: int = 0
    """Last reported engine queue depth."""
    in_flight: int = 0
    """Last reported in-flight requests."""
    slots: int = 1
    """Engine batch slots."""
    engine_version: str | None = None
    """Engine version."""
    model_path: str | None = None
    """Weights file."""
    model_sha256: str | None = None
    """Weights sha256."""
    failures: int = 0
    """Consecutive failed health checks."""
