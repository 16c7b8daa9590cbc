"""Artifacts: lossless records.parquet, versioned manifest, crash-safe checkpoint."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from omnieval import Message, Output, Record, RecordError, TextOutput
from omnieval._artifacts import (
    CHECKPOINT,
    SCHEMA_VERSION,
    CheckpointWriter,
    RunManifest,
    read_checkpoint,
    read_manifest,
    read_records,
    write_manifest,
    write_records,
)


def rec(i: int, *, error: bool = False) -> Record:
    return Record(
        benchmark="b", index=i, model="m", messages=[Message.text("user", f"q{i} ünïcode")], label=str(i),
        output=None if error else Output(text=TextOutput(prediction=[f"p{i}"], prediction_postprocessed=[str(i)])),
        error=RecordError(kind="timeout", message="t") if error else None, metrics={"exact_match": 1.0},
    )  # fmt: skip


def test_records_round_trip_and_flat_columns(tmp_path: Path) -> None:
    records = [rec(2), rec(0), rec(1, error=True)]
    write_records(tmp_path, records)
    back = read_records(tmp_path)
    assert [r.index for r in back] == [0, 1, 2]
    assert {r.index: r for r in back} == {r.index: r for r in records}
    t = pq.read_table(tmp_path / "records.parquet")
    assert t.column("error_kind").to_pylist() == [None, "timeout", None]
    assert t.column("prediction").to_pylist() == ["p0", None, "p2"]


def test_manifest_versioned_and_atomic(tmp_path: Path) -> None:
    m = RunManifest(run_id="r", suite_name="s", created="now", config={"name": "s"})
    write_manifest(tmp_path, m)
    assert not (tmp_path / "manifest.json.tmp").exists()
    assert read_manifest(tmp_path).schema_version == SCHEMA_VERSION
    with pytest.raises(FileNotFoundError, match="no manifest.json"):
        read_manifest(tmp_path / "nope")


def test_checkpoint_skips_torn_final_line_only(tmp_path: Path) -> None:
    w = CheckpointWriter(tmp_path)
    w.write([rec(0), rec(1)])
    w.close()
    with open(tmp_path / CHECKPOINT, "a") as f:
        f.write('{"benchmark": "b", "ind')  # crash mid-write
    assert [r.index for r in read_checkpoint(tmp_path)] == [0, 1]
    lines = (tmp_path / CHECKPOINT).read_text().splitlines()
    (tmp_path / CHECKPOINT).write_text("\n".join([lines[0], "garbage", lines[1]]) + "\n")
    with pytest.raises(ValueError):  # corruption in the middle is not silently dropped
        read_checkpoint(tmp_path)
