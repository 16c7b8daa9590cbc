"""The verifier as a stream beside inference (issue 16 item 4): a suite with the verifier on takes barely longer than
without, because the judge works while the pool is still inferring and only the tail after the last chunk is added.

``VerifierStream.start()`` brings the ``VerifierPool`` up on a background thread (in parallel with the pool's model
start-up; nothing waits for it). ``submit(records)`` is called from the runner's sink with each finished chunk: it
builds the judge prompts and queues them, never blocking. The dispatcher thread hands queued prompts in batches of
``parallel`` to the least-loaded worker, with ``2 × workers`` batches in flight (``2 × parallel × workers`` prompts:
each llama-server has its slots busy and a next batch waiting), each batch through ``judge_with_retries`` (so the
retry and failure policy are the phase verifier's: a whole-batch failure is one failed attempt, never a crash).
``finish()`` judges what is left (framework Records arrive only at the end; a resumed run's checkpointed Records)
and shuts the judge down.

Memory: only the queued prompts and one small verdict per judged sample, never the Records. Verdicts are keyed by
``Record.key`` *and* a digest of the prediction, so a sample that came back twice with different outputs (a chunk
retried after a replica was killed) is judged per output, and the verdict applied is the one for the output that
is in the checkpoint.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from omnieval.core import Record, VerifierConfig
from omnieval.verifier._judges import ResolvedJudge, resolve_judge
from omnieval.verifier._prompt import Triple, record_triple
from omnieval.verifier._verify import (
    JudgeReply,
    Verdict,
    VerifierPool,
    apply_verdict,
    attempt_options,
    judge_prompt,
    judge_with_retries,
    unavailable,
    worker_replies,
)

log = logging.getLogger("omnieval.verifier")

Key = tuple[tuple[str, str, int], str]
"""(``Record.key``, digest of the prediction): question and reference are fixed per key, the output is not."""


def _key(record: Record, t: Triple) -> Key:
    return record.key, hashlib.blake2b(t.prediction.encode(), digest_size=8).hexdigest()


class VerifierStream:
    """Judge Records as they are submitted; see the module docstring. ``start`` → ``submit``* → ``finish``."""

    def __init__(self, cfg: VerifierConfig, *, pin: bool = True) -> None:
        self.cfg = cfg
        self.pin = pin
        self.verdicts: dict[Key, Verdict] = {}
        """Every verdict so far (judged, or why not)."""
        self.first_verdict = threading.Event()
        """Set when the first batch has its verdicts (tests wait on it instead of sleeping)."""
        self.first_verdict_at: float | None = None
        """``time.monotonic()`` of the first verdicts."""
        self.started_at = 0.0
        self.ready_at: float | None = None
        """When the judge had started (or failed to)."""
        self.inference_done_at: float | None = None
        """Set by the runner when the last inference chunk came back (``mark_inference_done``)."""
        self.rated_during_inference: int | None = None
        """Verdicts with a rating that were in before inference ended: the judging that overlapped inference."""
        self.finished_at: float | None = None
        self.busy_s = 0.0
        """Time with at least one judge batch in flight."""
        self.unavailable: str | None = None
        """Why the judge could not start; every sample then records it."""
        self._cv = threading.Condition()
        self._pending: deque[tuple[Key, str]] = deque()
        self._queued: set[Key] = set()
        self._inflight = 0
        self._busy_since = 0.0
        self._closed = False
        self._aborted = False
        self._pool: VerifierPool | None = None
        self._load: dict[int, int] = {}
        self._thread: threading.Thread | None = None
        self.judge: ResolvedJudge | None = None
        try:
            self.judge = resolve_judge(cfg)
        except Exception as e:  # noqa: BLE001 - e.g. the adapter is missing: every sample records why
            self.unavailable = unavailable(e)

    # --- producer side (runner thread) ---

    def start(self) -> VerifierStream:
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="verifier-stream", daemon=True)
        self._thread.start()
        return self

    def submit(self, records: Iterable[Record]) -> int:
        """Queue the Records that have something to judge and no verdict yet; returns how many were queued."""
        items = [(_key(r, t), t) for r in records if (t := record_triple(r)) is not None]
        n = 0
        with self._cv:
            for key, t in items:
                if key in self.verdicts or key in self._queued:
                    continue
                if self.unavailable is not None or self.judge is None:
                    self.verdicts[key] = self._unavailable_verdict()
                    continue
                self._queued.add(key)
                self._pending.append((key, judge_prompt(t, self.cfg, self.judge)))
                n += 1
            if n:
                self._cv.notify_all()
        return n

    def mark_inference_done(self) -> None:
        with self._cv:
            self.inference_done_at = time.monotonic()
            self.rated_during_inference = sum(v.rating is not None for v in self.verdicts.values())

    def finish(self) -> dict[Key, Verdict]:
        """Judge what is still queued, shut the judge down, return every verdict."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join()
        self.finished_at = time.monotonic()
        return self.verdicts

    def close(self) -> None:
        """Abandon the stream (the run failed): drop what is queued, stop the judge without waiting for it."""
        with self._cv:
            self._closed = self._aborted = True
            self._pending.clear()
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def verdict_for(self, record: Record) -> Verdict | None:
        """The verdict for this Record's output; None when it has nothing to judge (no prediction, or an error)."""
        t = record_triple(record)
        if t is None:
            return None
        v = self.verdicts.get(_key(record, t))
        return v if v is not None else Verdict(None, "", "", 0, "not judged: submitted after the verifier finished")

    def apply(self, record: Record) -> None:
        v = self.verdict_for(record)
        if v is not None:
            apply_verdict(record, v)

    def timings(self) -> dict[str, float]:
        """``verifier_tail_s``: from the last inference chunk to the last verdict (what the verifier added to the
        run); ``verifier_busy_s``: time the judge had work; ``verifier_startup_s``; ``verifier_s``: start to end;
        ``verifier_rated_during_inference``: verdicts in before the last inference chunk (how much judging overlapped)."""
        end = self.finished_at or time.monotonic()
        out = {"verifier_s": end - self.started_at, "verifier_busy_s": self.busy_s}
        if self.ready_at is not None:
            out["verifier_startup_s"] = self.ready_at - self.started_at
        if self.inference_done_at is not None:
            out["verifier_tail_s"] = max(0.0, end - self.inference_done_at)
        if self.rated_during_inference is not None:
            out["verifier_rated_during_inference"] = float(self.rated_during_inference)
        if self.first_verdict_at is not None:
            out["verifier_first_verdict_s"] = self.first_verdict_at - self.started_at
        return out

    # --- the judge side (dispatcher thread, batch threads) ---

    def _unavailable_verdict(self) -> Verdict:
        return Verdict(None, "", "", 0, self.unavailable or "verifier unavailable")

    def _run(self) -> None:
        try:
            if self.unavailable is not None:
                raise RuntimeError(self.unavailable)
            pool = VerifierPool(self.cfg, pin=self.pin, judge=self.judge)
            pool.__enter__()
        except Exception as e:  # noqa: BLE001 - the verifier never fails the run: every sample records why
            with self._cv:
                self.ready_at = time.monotonic()
                self.unavailable = self.unavailable or unavailable(e)
                while self._pending:
                    key, _ = self._pending.popleft()
                    self.verdicts[key] = self._unavailable_verdict()
                self._queued.clear()
                self.first_verdict.set()
            return
        self._pool = pool
        self._load = {w: 0 for w in range(len(pool.workers))}
        self.ready_at = time.monotonic()
        slots = 2 * max(1, len(pool.workers))
        futures: set[Future[None]] = set()
        ex = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="verifier-batch")
        try:
            while True:
                with self._cv:
                    while (
                        not self._aborted
                        and not (self._pending and self._inflight < slots)
                        and not (self._closed and not self._pending and self._inflight == 0)
                    ):
                        self._cv.wait()
                    if self._aborted or (self._closed and not self._pending and self._inflight == 0):
                        break
                    size = min(self.cfg.parallel, len(self._pending))
                    batch = [self._pending.popleft() for _ in range(size)]
                    if self._inflight == 0:
                        self._busy_since = time.monotonic()
                    self._inflight += 1
                futures.add(ex.submit(self._judge_batch, batch))
                futures = {f for f in futures if not f.done()}
        finally:
            ex.shutdown(wait=not self._aborted, cancel_futures=True)
            pool.__exit__(None, None, None)

    def _judge_batch(self, batch: list[tuple[Key, str]]) -> None:
        try:
            verdicts = judge_with_retries([p for _, p in batch], self._generate, max_retries=self.cfg.max_retries,
                                          threshold=self.judge.threshold if self.judge else None)  # fmt: skip
        except Exception as e:  # noqa: BLE001 - never lose a batch silently: each sample records why
            verdicts = [Verdict(None, "", "", 1, f"verifier failed: {type(e).__name__}: {e}"[:500]) for _ in batch]
        now = time.monotonic()
        with self._cv:
            for (key, _), v in zip(batch, verdicts, strict=True):
                self.verdicts[key] = v
                self._queued.discard(key)
            self._inflight -= 1
            if self._inflight == 0:
                self.busy_s += now - self._busy_since
            if self.first_verdict_at is None:
                self.first_verdict_at = now
            self._cv.notify_all()
        self.first_verdict.set()

    def _generate(self, prompts: list[str], attempt: int) -> Sequence[str | JudgeReply | BaseException | None]:
        """One batch on the least-loaded live worker; a dead worker fails this attempt and is skipped from then on
        (the retry goes to another worker, if any)."""
        import ray

        pool = self._pool
        assert pool is not None
        with self._cv:
            if not pool.alive:
                raise RuntimeError("no verifier worker alive")
            w = min(pool.alive, key=lambda i: self._load[i])
            self._load[w] += len(prompts)
        opts = attempt_options(self.cfg, attempt).model_dump(mode="json")
        try:
            replies = ray.get(pool.workers[w].generate.remote(prompts, opts))
        except ray.exceptions.RayActorError:
            log.warning("verifier worker %d died", w)
            with self._cv:
                if w in pool.alive:
                    pool.alive.remove(w)
            raise
        finally:
            with self._cv:
                self._load[w] -= len(prompts)
        return worker_replies(replies)


def stream_slim(record: Record) -> Record:
    """What ``verifier_rows`` reads of a Record (its key, ``verifier*`` metrics and the verdict), for score rows
    computed after the full Records were written out."""
    meta = {"verifier": record.meta["verifier"]} if "verifier" in record.meta else {}
    metrics = {k: v for k, v in record.metrics.items() if k.startswith("verifier")}
    return Record(benchmark=record.benchmark, index=record.index, model=record.model, messages=[], metrics=metrics,
                  meta=meta)  # fmt: skip


def judge_records(records: Sequence[Record], cfg: VerifierConfig, **kw: Any) -> list[Verdict | None]:
    """Convenience for tests and the bench: stream ``records`` in one go and return each one's verdict."""
    s = VerifierStream(cfg, **kw).start()
    s.submit(records)
    s.finish()
    return [s.verdict_for(r) for r in records]
