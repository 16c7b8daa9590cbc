"""CPU accounting from /proc: a process tree's CPU seconds (children included) and the node's busy seconds."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from serving._cpu import node_cpu_s, process_tree_cpu_s

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs Linux /proc")

BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"
LIVE = "print('burnt', flush=True)\nimport sys\nsys.stdin.read()\n"  # says it is done, then lives on its parent's stdin


def test_a_trees_cpu_counts_its_children_live_and_reaped() -> None:
    """A parent that burns nothing itself, a child that burns 0.3 s and exits (reaped: the parent's cutime), and
    one that burns 0.3 s and stays alive."""
    code = ("import subprocess, sys, time\n"
            f"subprocess.run([sys.executable, '-c', {BURN.format(s=0.3)!r}])\n"
            f"p = subprocess.Popen([sys.executable, '-c', {(BURN.format(s=0.3) + LIVE)!r}])\n"
            "sys.stdin.read()\n")  # fmt: skip
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "burnt"  # the live child's line
        cpu = process_tree_cpu_s(parent.pid)
        assert cpu is not None and 0.6 <= cpu < 2.5
    finally:
        parent.kill()
        parent.wait()
        assert parent.stdin is not None
        parent.stdin.close()  # the live child reads the same pipe: EOF ends it
    assert process_tree_cpu_s(parent.pid) is None  # gone


def test_node_busy_seconds_grow_with_work_done() -> None:
    before = node_cpu_s()
    subprocess.run([sys.executable, "-c", BURN.format(s=0.3)], check=True)
    after = node_cpu_s()
    assert before is not None and after is not None and after - before >= 0.3
