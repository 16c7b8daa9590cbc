"""Typed pool state shared between the controller, client actors and the driver."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from omnieval.core import Record
from serving import Endpoint

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
    endpoint: Endpoint | None = None
    """The engine's own OpenAI-compatible server: clients send there over HTTP. None: Serve handle calls."""
    prefix_token_id: int | None = None
    """BOS (else EOS) of the served tokenizer: what an empty context is scored after."""
    tokenizer_dir: str | None = None
    """Checkpoint folder of the served tokenizer (clients that can read it tokenize locally)."""
    log: str | None = None
    """``host:path`` of the engine server's log."""
    load_s: float | None = None
    """The engine's own load time (``EngineStats.load_s``)."""
    prestarted: bool = False
    """Its engine's server was started by the run's driver before Ray and taken over (``EngineStats.prestarted``)."""
    inline: bool = False
    """Held by the pool controller itself, not a Serve application (an external endpoint: ``pool._inline``)."""
    up_s: float | None = None
    """Seconds from the deploy call to healthy: the engine's load plus placement and Serve's deploy."""
    deployed_at: float | None = None
    """Epoch seconds of the deploy call (after placement), by the controller's clock."""
    healthy_at: float | None = None
    """Epoch seconds it turned healthy: the controller's own moments, where a sampler's view lags by its period."""
    limit: int = 1
    """Adaptive concurrency limit of this replica, all clients together (set by the controller)."""
    clients: int = 1
    """Clients currently sending to this model; each takes an equal share of ``limit``."""


class ReplicaLoad(BaseModel):
    """One client's observations of one replica since its last sync (client → controller)."""

    model_config = ConfigDict(extra="forbid")
    replica_id: str
    """Replica observed."""
    in_flight: int = 0
    """The client's requests in flight to it now."""
    peak_in_flight: int = 0
    """The client's most requests in flight to it at once since the last sync."""
    ok: int = 0
    """Successes since the last sync."""
    failed: int = 0
    """Failures since the last sync."""
    latency_sum: float = 0.0
    """Sum of normalised latencies of the successes (seconds per generated token, prefill counted as one)."""
    output_tokens: int = 0
    """Tokens generated for this client since the last sync."""


class SyncRequest(BaseModel):
    """A client's periodic report for one model; the reply is the replica set with current limits."""

    model_config = ConfigDict(extra="forbid")
    model: str
    """Suite model name."""
    client: str
    """Client id (actor id, unique in the cluster)."""
    active: bool = True
    """The client has work for this model (it shares the replicas' limits)."""
    siblings: int = 1
    """Clients its run started for this model: shares are split this many ways from the first sync, before every
    sibling has reported (otherwise the first to arrive would each take the whole limit)."""
    loads: list[ReplicaLoad] = Field(default_factory=list)
    """Per-replica observations."""
    initial_limit: int = 4
    """The client's configured start limit for a replica the controller has not seen load for yet."""
    max_limit: int = 256
    """The client's configured ceiling."""


@dataclass(frozen=True)
class ChunkResult:
    """A client's answer to one chunk (client → driver). The Records travel as the JSON lines the checkpoint stores,
    so the driver appends them as they are, never decoding a Record it does not need; the counts feed progress
    and throughput."""

    lines: bytes
    """One ``Record.model_dump_json()`` per line, newline-terminated."""
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    """Records per (model, benchmark)."""
    output_tokens: int = 0
    """Tokens generated for the chunk (cache hits not counted)."""
    cache_hits: int = 0
    """Records answered from the response cache."""

    def __len__(self) -> int:
        return sum(self.counts.values())

    @classmethod
    def of(cls, records: list[Record], *, lines: bytes = b"") -> ChunkResult:
        """The counts of ``records`` (with their JSON lines when they travel; empty when only counted)."""
        counts: dict[tuple[str, str], int] = {}
        tokens = hits = 0
        for r in records:
            counts[(r.model, r.benchmark)] = counts.get((r.model, r.benchmark), 0) + 1
            if r.meta.get("cache_hit"):
                hits += 1
            elif r.output is not None and r.output.usage is not None:
                tokens += r.output.usage.completion_tokens
        return cls(lines=lines, counts=counts, output_tokens=tokens, cache_hits=hits)


def encode_records(records: list[Record]) -> bytes:
    """Records as JSON lines: several times cheaper to send between processes than pickled pydantic objects."""
    return "".join(r.model_dump_json() + "\n" for r in records).encode()


def decode_records(data: bytes) -> list[Record]:
    return [Record.model_validate_json(line) for line in data.splitlines() if line.strip()]


class ReplicaEvent(BaseModel):
    """A replica went out of rotation or failed to start (controller → drivers, which log it and keep the engine's
    log in their run directory)."""

    model_config = ConfigDict(extra="forbid")
    seq: int
    """Position in the controller's event log (``events(since=seq)`` returns the later ones)."""
    at: float
    """Epoch seconds."""
    replica_id: str
    model: str
    engine: str
    node_id: str | None = None
    """Ray node of the replica."""
    kind: Literal["unhealthy", "start_failed"]
    """``unhealthy``: a health check failed (engine died, hung or stopped answering); ``start_failed``: it never
    became ready."""
    detail: str
    """Why: the engine log's last lines, or the error."""
    log: str | None = None
    """``host:path`` of the engine's whole log (kept after a failure)."""
