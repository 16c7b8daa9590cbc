"""Live progress: per-benchmark bars with samples done, tokens/s and ETA on a terminal (rich); without one (``ray job
logs``, a CI log, a pipe) a plain line per benchmark every ``LINE_PERIOD_S`` seconds: done/total, req/s, tok/s, ETA."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from omnieval.core import Record

LINE_PERIOD_S = 5.0
"""Seconds between progress lines when stderr is not a terminal."""


def _eta(done: int, total: int, elapsed: float) -> str:
    if done <= 0 or done >= total:
        return "-" if done < total else "0s"
    return f"{(total - done) * elapsed / done:.0f}s"


class RunProgress:
    def __init__(self, totals: dict[tuple[str, str], int], *, enabled: bool | None = None,
                 line_period_s: float = LINE_PERIOD_S) -> None:  # fmt: skip
        tty = sys.stderr.isatty()
        self.enabled = tty if enabled is None else enabled
        self.lines = self.enabled and not tty
        """No terminal: plain lines instead of bars (bars would print nothing until the end)."""
        self.line_period_s = line_period_s
        self.totals = totals
        self.done = {k: 0 for k in totals}
        self.started_done = dict(self.done)
        self.tokens = 0
        self.t0 = time.monotonic()
        self._last_line = self.t0
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[tps]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=Console(stderr=True),
            disable=not self.enabled or self.lines,
        )  # fmt: skip
        self._tasks = {}
        for (model, bench), n in totals.items():
            self._tasks[(model, bench)] = self._progress.add_task(f"{model} · {bench}", total=n, tps="")

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self._progress.stop()
        if self.lines and et is None:
            self.print_lines()

    def print_lines(self) -> None:
        """One line per benchmark: done/total, its request rate this run, the run's tok/s, its ETA."""
        elapsed = max(time.monotonic() - self.t0, 1e-9)
        for (model, bench), total in self.totals.items():
            done = self.done.get((model, bench), 0)
            now = done - self.started_done.get((model, bench), 0)
            print(f"progress: {model} · {bench} {done}/{total} ({100 * done / max(total, 1):.0f}%) · "
                  f"{now / elapsed:.1f} req/s · {self.tokens_per_s:.1f} tok/s · ETA {_eta(now, total - self.started_done.get((model, bench), 0), elapsed)}",
                  file=sys.stderr, flush=True)  # fmt: skip
        self._last_line = time.monotonic()

    def _maybe_lines(self) -> None:
        if self.lines and time.monotonic() - self._last_line >= self.line_period_s:
            self.print_lines()

    def advance(self, records: list[Record], already_done: bool = False) -> None:
        for r in records:
            key = (r.model, r.benchmark)
            self.done[key] = self.done.get(key, 0) + 1
            if not already_done and r.output is not None and r.output.usage is not None:
                self.tokens += r.output.usage.completion_tokens
        tps = f"{self.tokens_per_s:.1f} tok/s"
        for key, task in self._tasks.items():
            self._progress.update(task, completed=self.done[key], tps=tps)

    def expect(self, key: tuple[str, str], n: int) -> None:
        """``n`` more samples of ``key`` are coming (a framework task once it has built its requests)."""
        self.totals[key] = self.totals.get(key, 0) + n
        self.done.setdefault(key, 0)
        self.started_done.setdefault(key, 0)
        if key not in self._tasks:
            self._tasks[key] = self._progress.add_task(f"{key[0]} · {key[1]}", total=self.totals[key], tps="")
        else:
            self._progress.update(self._tasks[key], total=self.totals[key])
        self._maybe_lines()

    def preload(self, counts: dict[tuple[str, str], int]) -> None:
        """Samples done before this attempt (a resumed run): shown as done, not counted in its rates and ETA."""
        for key, n in counts.items():
            self.started_done[key] = self.started_done.get(key, 0) + n
        self.advance_counts(counts)

    def advance_counts(self, counts: dict[tuple[str, str], int], tokens: int = 0) -> None:
        """Samples done per (model, benchmark), and the tokens they generated (0: done before this run started)."""
        for key, n in counts.items():
            self.done[key] = self.done.get(key, 0) + n
        self.tokens += tokens
        tps = f"{self.tokens_per_s:.1f} tok/s"
        for key, task in self._tasks.items():
            self._progress.update(task, completed=self.done[key], tps=tps)
        self._maybe_lines()

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / max(time.monotonic() - self.t0, 1e-9)
