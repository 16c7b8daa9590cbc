"""Live progress: per-benchmark bars with samples done and tokens/s (rich), silent when not a terminal."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from omnieval.core import Record


class RunProgress:
    def __init__(self, totals: dict[tuple[str, str], int], *, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.totals = totals
        self.done = {k: 0 for k in totals}
        self.tokens = 0
        self.t0 = time.monotonic()
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[tps]}"),
            TimeElapsedColumn(), console=Console(stderr=True), disable=not self.enabled,
        )  # fmt: skip
        self._tasks = {}
        for (model, bench), n in totals.items():
            self._tasks[(model, bench)] = self._progress.add_task(f"{model} · {bench}", total=n, tps="")

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._progress.stop()

    def advance(self, records: list[Record], already_done: bool = False) -> None:
        for r in records:
            key = (r.model, r.benchmark)
            self.done[key] = self.done.get(key, 0) + 1
            if not already_done and r.output is not None and r.output.usage is not None:
                self.tokens += r.output.usage.completion_tokens
        tps = f"{self.tokens_per_s:.1f} tok/s"
        for key, task in self._tasks.items():
            self._progress.update(task, completed=self.done[key], tps=tps)

    def advance_counts(self, counts: dict[tuple[str, str], int], tokens: int = 0) -> None:
        """Samples done per (model, benchmark), and the tokens they generated (0: done before this run started)."""
        for key, n in counts.items():
            self.done[key] = self.done.get(key, 0) + n
        self.tokens += tokens
        tps = f"{self.tokens_per_s:.1f} tok/s"
        for key, task in self._tasks.items():
            self._progress.update(task, completed=self.done[key], tps=tps)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(time.monotonic() - self.t0, 1e-9)
