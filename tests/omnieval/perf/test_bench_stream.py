"""Streaming dispatch: bounded in-flight window, lazy consumption, every record to the sink exactly once."""

from __future__ import annotations

import gc
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from omnieval._stream import LocalChunkRunner, lazy_chunks, stream_dispatch
from omnieval.core import Record
from omnieval.perf._stream_probe import echo_chunk, synthetic_records


class _FakeRunner:
    """Completes chunks in a scrambled order and tracks how many are in flight."""

    def __init__(self, n_workers: int) -> None:
        self.n_workers = n_workers
        self.inflight: dict[int, list[Record]] = {}
        self.max_inflight = 0
        self._next = 0

    def submit(self, worker: int, chunk: list[Record]) -> int:
        h = self._next
        self._next += 1
        self.inflight[h] = chunk
        self.max_inflight = max(self.max_inflight, len(self.inflight))
        return h

    def wait_any(self, pending: list[int]) -> tuple[int, list[Record]]:
        h = pending[len(pending) // 2]
        return h, echo_chunk(self.inflight.pop(h))


def test_lazy_chunks_split_on_size_and_key() -> None:
    items = [("a", i) for i in range(5)] + [("b", i) for i in range(3)]
    out = list(lazy_chunks(items, 2, key=lambda x: x[0]))
    assert [len(c) for c in out] == [2, 2, 1, 2, 1]
    assert all(len({k for k, _ in c}) == 1 for c in out)
    with pytest.raises(ValueError):
        list(lazy_chunks(items, 0))


@pytest.mark.parametrize("window", [1, 3, 8])
def test_window_respected_and_sink_gets_each_record_once(window: int) -> None:
    runner = _FakeRunner(n_workers=3)
    seen: list[int] = []
    st = stream_dispatch(synthetic_records(1000), runner, lambda recs: seen.extend(r.index for r in recs),
                         chunk_size=7, window=window)  # fmt: skip
    assert runner.max_inflight <= window and st.max_inflight_chunks <= window
    assert sorted(seen) == list(range(1000))
    assert st.records == 1000 and st.chunks == -(-1000 // 7)
    assert st.max_inflight_records <= window * 7


def test_input_is_consumed_lazily() -> None:
    pulled = 0
    sunk = 0
    worst = 0

    def source() -> Iterator[Record]:
        nonlocal pulled
        for r in synthetic_records(5000):
            pulled += 1
            yield r

    def sink(recs: list[Record]) -> None:
        nonlocal sunk, worst
        sunk += len(recs)
        worst = max(worst, pulled - sunk)

    stream_dispatch(source(), _FakeRunner(2), sink, chunk_size=10, window=4)
    assert sunk == 5000
    assert worst <= 4 * 10 + 10  # in flight plus the one chunk being assembled: never the whole benchmark


def test_completed_records_are_not_retained() -> None:
    refs: list[weakref.ref[Record]] = []
    lock = threading.Lock()

    def sink(recs: list[Record]) -> None:
        with lock:
            refs.extend(weakref.ref(r) for r in recs)

    with LocalChunkRunner(echo_chunk, n_workers=2) as runner:
        st = stream_dispatch(synthetic_records(3000), runner, sink, chunk_size=50, window=4)
    gc.collect()
    assert st.records == 3000 and len(refs) == 3000
    alive = sum(1 for r in refs if r() is not None)
    assert alive == 0


def test_local_runner_fills_outputs_and_propagates_errors() -> None:
    got: list[Any] = []
    with LocalChunkRunner(echo_chunk, n_workers=2) as runner:
        stream_dispatch(synthetic_records(40), runner, got.extend, chunk_size=8)
    assert len(got) == 40 and all(r.prediction and r.prediction.startswith("[SIMULATED") for r in got)

    def boom(chunk: list[Record]) -> list[Record]:
        raise RuntimeError("worker failed")

    with LocalChunkRunner(boom, n_workers=1) as runner, pytest.raises(RuntimeError, match="worker failed"):
        stream_dispatch(synthetic_records(10), runner, got.extend, chunk_size=5)


def test_rejects_bad_window() -> None:
    with pytest.raises(ValueError):
        stream_dispatch(synthetic_records(1), _FakeRunner(1), lambda r: None, window=-1)
