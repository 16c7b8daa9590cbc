"""The federated bench's checkpoint watch: each Record line counted once, a half-written one when it is whole."""

from __future__ import annotations

import json
from pathlib import Path

from omnieval.perf._federated import _CheckpointWatcher


def test_lines_are_counted_once_and_a_partial_line_waits(tmp_path: Path) -> None:
    ckpt = tmp_path / "run-1" / "records.partial.jsonl"
    w = _CheckpointWatcher(tmp_path)
    w.look()  # no checkpoint yet
    assert w.arrivals == []
    ckpt.parent.mkdir()
    first = json.dumps({"benchmark": "a", "index": 0}) + "\n"
    second = json.dumps({"benchmark": "b", "index": 0})
    ckpt.write_text(first + second[:9])  # the second line is being written
    w.look()
    assert len(w.arrivals) == 1 and set(w.last_by_benchmark) == {"a"}
    with open(ckpt, "a") as f:
        f.write(second[9:] + "\n")
    w.look()
    w.look()  # nothing new: nothing counted twice
    assert len(w.arrivals) == 2 and set(w.last_by_benchmark) == {"a", "b"}
