"""The job queue: the background task that moves jobs through pending → submitted → running → final.

It sleeps on an event (woken by /add_job and cancel) with a poll timeout only while runner jobs are active, so an
idle server does no work. Runner calls are blocking (HTTP to Ray, process waits) and run in threads with a deadline.
All state writes are compare-and-set in the store and happen under one lock, so a cancel never races a submit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from omnieval.jobserver._executors import JobNotFoundError, JobRunner
from omnieval.jobserver._store import ACTIVE_STATES, FINAL_STATES, Job, JobState, JobStore

log = logging.getLogger("omnieval.jobserver")
T = TypeVar("T")

RUNNER_TO_STATE: dict[str, JobState] = {
    "PENDING": "submitted",
    "RUNNING": "running",
    "SUCCEEDED": "succeeded",
    "FAILED": "failed",
    "STOPPED": "cancelled",
}


class JobConflictError(Exception):
    """The job already finished; carries it so the API can say how."""

    def __init__(self, job: Job) -> None:
        super().__init__(f"job {job.id} already {job.state}; nothing to cancel")
        self.job = job


class JobQueue:
    """Submits pending jobs FIFO with at most ``max_concurrent`` active, and polls active ones to a final state.

    The first tick after start re-attaches to jobs a previous server left submitted/running: their runner ids are in
    the database, so polling them is all re-attaching takes.
    """

    def __init__(
        self,
        store: JobStore,
        runner: JobRunner,
        *,
        max_concurrent: int = 1,
        poll_interval_s: float = 2.0,
        call_timeout_s: float = 60.0,
    ) -> None:
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1, got {max_concurrent}")
        self.store = store
        self.runner = runner
        self.max_concurrent = max_concurrent
        self.poll_interval_s = poll_interval_s
        self.call_timeout_s = call_timeout_s
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.ticks = 0
        """Scheduler passes so far (``/health`` reports it)."""

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="omnieval-job-queue")

    async def stop(self) -> None:
        """Stop the queue; runner jobs keep running and are re-attached by the next server."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def wake(self) -> None:
        self._wake.set()

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.wait_for(asyncio.to_thread(fn, *args), self.call_timeout_s)

    async def _loop(self) -> None:
        while True:
            busy = True
            try:
                busy = await self.tick()
            except Exception:  # never let one bad tick end the queue
                log.exception("job queue tick failed")
            try:
                await asyncio.wait_for(self._wake.wait(), self.poll_interval_s if busy else None)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()

    async def tick(self) -> bool:
        """One pass: poll active jobs, then fill free slots. Returns whether runner jobs are still active."""
        self.ticks += 1
        async with self._lock:
            for job in self.store.in_states(ACTIVE_STATES):
                await self._poll(job)
            active = len(self.store.in_states(ACTIVE_STATES))
            for job in self.store.in_states(("pending",)):
                if active >= self.max_concurrent:
                    break
                if await self._submit(job):
                    active += 1
            return active > 0

    async def _poll(self, job: Job) -> None:
        if job.ray_job_id is None:
            self.store.update(job.id, expect=ACTIVE_STATES, state="failed", message="no runner id recorded")
            return
        try:
            st = await self._call(self.runner.status, job.ray_job_id)
        except JobNotFoundError as e:
            self.store.update(job.id, expect=ACTIVE_STATES, state="failed", message=f"runner lost the job: {e}")
            return
        except Exception as e:  # runner unreachable: keep the job, say why it is not advancing
            note = f"status unavailable: {type(e).__name__}: {e}"
            if job.message != note:
                self.store.update(job.id, expect=ACTIVE_STATES, message=note)
            return
        state = RUNNER_TO_STATE.get(st.state, job.state)
        if state != job.state or st.message != job.message:
            self.store.update(job.id, expect=ACTIVE_STATES, state=state, message=st.message)
            if state in FINAL_STATES:
                log.info("job %s (%s) %s: %s", job.id, job.name, state, st.message)

    async def _submit(self, job: Job) -> bool:
        try:
            ray_job_id = await self._call(self.runner.submit, job)
        except Exception as e:
            msg = f"submission failed: {type(e).__name__}: {e}"
            self.store.update(job.id, expect=("pending",), state="failed", message=msg)
            log.warning("job %s (%s) %s", job.id, job.name, msg)
            return False
        self.store.update(job.id, expect=("pending",), state="submitted", ray_job_id=ray_job_id, message="")
        log.info("job %s (%s) submitted as %s", job.id, job.name, ray_job_id)
        return True

    async def cancel(self, job_id: str) -> Job | None:
        """Cancel a job: None if unknown; idempotent for cancelled; ``JobConflictError`` if it already ended."""
        async with self._lock:
            job = self.store.get(job_id)
            if job is None or job.state == "cancelled":
                return job
            if job.state in FINAL_STATES:
                raise JobConflictError(job)
            if job.state in ACTIVE_STATES and job.ray_job_id is not None:
                await self._poll(job)  # it may have ended since the last tick: report that, do not overwrite it
                fresh = self.store.get(job_id)
                if fresh is not None and fresh.state in FINAL_STATES:
                    if fresh.state == "cancelled":
                        return fresh
                    raise JobConflictError(fresh)
                try:
                    await self._call(self.runner.stop, job.ray_job_id)
                except JobNotFoundError:
                    pass
            updated = self.store.update(
                job_id, expect=("pending", *ACTIVE_STATES), state="cancelled", message="cancelled on request"
            )
        self.wake()  # a slot may have freed up
        return updated or self.store.get(job_id)

    async def logs(self, job: Job) -> str:
        if job.ray_job_id is None:
            return ""
        try:
            return await self._call(self.runner.logs, job.ray_job_id)
        except JobNotFoundError:
            return ""
