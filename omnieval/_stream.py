"""Streaming dispatch: driver memory O(in-flight), not O(suite size).

``run_suite`` dispatches with it: Records come from an iterator and are chunked lazily, at most ``window`` chunks
are in flight to client actors at any time, and each completed chunk is handed to ``sink`` (checkpoint writer,
progress, throughput tally) and dropped. Only the in-flight chunks are ever referenced.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from omnieval.core import Record

T = TypeVar("T")


def lazy_chunks(items: Iterable[T], size: int, key: Callable[[T], Hashable] | None = None) -> Iterator[list[T]]:
    """Consecutive items in chunks of ``size``; a new chunk also starts when ``key`` changes (one benchmark per
    chunk, as ``make_chunks`` does), without reading ahead more than one chunk."""
    if size < 1:
        raise ValueError("chunk size must be >= 1")
    buf: list[T] = []
    last: Hashable = object()
    for it in items:
        k = key(it) if key is not None else None
        if buf and (len(buf) >= size or k != last):
            yield buf
            buf = []
        buf.append(it)
        last = k
    if buf:
        yield buf


def record_key(r: Record) -> tuple[str, str]:
    return (r.model, r.benchmark)


class ChunkRunner(Protocol):
    """Where chunks run: ``submit`` returns a handle; ``wait_any`` blocks for one finished handle and its results."""

    n_workers: int

    def submit(self, worker: int, chunk: list[Record]) -> Any: ...

    def wait_any(self, pending: list[Any]) -> tuple[Any, list[Record]]: ...


@dataclass
class StreamStats:
    records: int = 0
    chunks: int = 0
    max_inflight_chunks: int = 0
    max_inflight_records: int = 0


def stream_dispatch(
    records: Iterable[Record],
    runner: ChunkRunner,
    sink: Callable[[Any], None],
    *,
    chunk_size: int = 16,
    window: int | None = None,
    key: Callable[[Record], Hashable] | None = record_key,
) -> StreamStats:
    """Dispatch lazily with at most ``window`` chunks in flight (default 2 per worker); returns counts.

    Chunks go to the worker with the fewest in flight (no per-client shard lists to hold in memory); a worker that
    finishes early simply gets the next chunk, which is what work stealing achieves for a materialised plan.
    """
    n = runner.n_workers
    window = window or 2 * n
    if window < 1:
        raise ValueError("window must be >= 1")
    chunks = lazy_chunks(records, chunk_size, key)
    pending: dict[Any, tuple[int, int]] = {}  # handle -> (worker, size)
    per_worker = [0] * n
    st = StreamStats()
    inflight_records = 0
    exhausted = False
    while True:
        while not exhausted and len(pending) < window:
            chunk = next(chunks, None)
            if chunk is None:
                exhausted = True
                break
            w = min(range(n), key=per_worker.__getitem__)
            pending[runner.submit(w, chunk)] = (w, len(chunk))
            per_worker[w] += 1
            inflight_records += len(chunk)
            st.chunks += 1
            st.max_inflight_chunks = max(st.max_inflight_chunks, len(pending))
            st.max_inflight_records = max(st.max_inflight_records, inflight_records)
        if not pending:
            return st
        handle, done = runner.wait_any(list(pending))
        w, size = pending.pop(handle)
        per_worker[w] -= 1
        inflight_records -= size
        st.records += len(done)
        sink(done)


def ray_wait_one(pending: list[Any], poll_s: float = 0.5) -> Any:
    """The first of ``pending`` to finish. Polled, never one unbounded ``ray.wait``: a signal's Python handler runs
    only when the blocking call returns, so ``ray job stop``'s SIGTERM would wait for the next chunk — longer than the
    3 s Ray grants before its SIGKILL — and the run could never say it was cancelled."""
    import ray

    while True:
        ready, _ = ray.wait(pending, num_returns=1, timeout=poll_s)
        if ready:
            return ready[0]


class RayChunkRunner:
    """Chunks to ``EvalClient`` actors (``client.run.remote(chunk)``), completions via ``ray.wait``."""

    def __init__(self, clients: list[Any]) -> None:
        self.clients = clients
        self.n_workers = len(clients)

    def submit(self, worker: int, chunk: list[Record]) -> Any:
        return self.clients[worker].run.remote(chunk)

    def wait_any(self, pending: list[Any]) -> tuple[Any, list[Record]]:
        import ray

        ready = ray_wait_one(pending)
        return ready, ray.get(ready)


class RayLinesRunner:
    """Chunks to ``EvalClient.run_lines`` as JSON lines; results come back as ``ChunkResult`` (JSON lines + counts)
    for a sink that appends them to the checkpoint without decoding."""

    def __init__(self, clients: list[Any]) -> None:
        self.clients = clients
        self.n_workers = len(clients)

    def submit(self, worker: int, chunk: list[Record]) -> Any:
        from pool import encode_records

        return self.clients[worker].run_lines.remote(encode_records(chunk))

    def wait_any(self, pending: list[Any]) -> tuple[Any, Any]:
        import ray

        ready = ray_wait_one(pending)
        return ready, ray.get(ready)


class LocalChunkRunner:
    """Chunks to an in-process function on a thread pool: the same dispatch loop without Ray (tests, probes)."""

    def __init__(self, fn: Callable[[list[Record]], list[Record]], n_workers: int = 2) -> None:
        self.fn = fn
        self.n_workers = n_workers
        self._pool = ThreadPoolExecutor(max_workers=n_workers, thread_name_prefix="stream-worker")

    def submit(self, worker: int, chunk: list[Record]) -> Future[list[Record]]:
        return self._pool.submit(self.fn, chunk)

    def wait_any(self, pending: list[Future[list[Record]]]) -> tuple[Future[list[Record]], list[Record]]:
        done, _ = wait(pending, return_when=FIRST_COMPLETED)
        f = next(iter(done))
        return f, f.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def __enter__(self) -> LocalChunkRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
