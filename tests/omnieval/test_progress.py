"""Progress without a terminal (``ray job logs``, CI): plain lines with done/total, rates and an ETA."""

from __future__ import annotations

import re

import pytest

from omnieval._progress import RunProgress


def test_lines_without_a_terminal_say_done_total_rate_and_eta(capsys: pytest.CaptureFixture[str]) -> None:
    totals = {("m", "mmlu_tiny"): 10, ("m", "asdiv_tiny"): 4}
    with RunProgress(totals, enabled=True, line_period_s=0.0) as p:  # pytest's stderr is not a terminal
        assert p.lines
        p.preload({("m", "asdiv_tiny"): 2})  # a resumed run's earlier samples
        p.advance_counts({("m", "mmlu_tiny"): 5}, tokens=50)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("progress: m · mmlu_tiny")]
    assert lines and "5/10 (50%)" in lines[-1] and "req/s" in lines[-1] and "tok/s" in lines[-1]
    assert re.search(r"ETA \d+s$", lines[-1])  # half done: an estimate
    asdiv = [x for x in err.splitlines() if "asdiv_tiny" in x]
    assert "2/4 (50%)" in asdiv[-1] and "ETA -" in asdiv[-1]  # nothing done this attempt yet: no estimate


def test_disabled_prints_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with RunProgress({("m", "b"): 3}, enabled=False, line_period_s=0.0) as p:
        p.advance_counts({("m", "b"): 3}, tokens=3)
    assert "progress:" not in capsys.readouterr().err
