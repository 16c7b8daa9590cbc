"""Client actors yield the CPU: every thread of the process, and the threads it starts later, at the niceness."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is Linux's")

_CHILD = textwrap.dedent("""
    import os, threading
    from pool._nice import yield_cpu

    def nice_of(tid):  # field 19 of /proc/self/task/<tid>/stat, after the command name
        return int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[16])

    ready, done, seen = threading.Event(), threading.Event(), {}
    def earlier():
        seen["earlier"] = threading.get_native_id(); ready.set(); done.wait()
    t = threading.Thread(target=earlier); t.start(); ready.wait()
    set_count = yield_cpu(7)
    later = {}
    def after():
        later["nice"] = nice_of(threading.get_native_id())
    u = threading.Thread(target=after); u.start(); u.join()
    print(set_count, nice_of(threading.get_native_id()), nice_of(seen["earlier"]), later["nice"], yield_cpu(3),
          nice_of(threading.get_native_id()))
    done.set(); t.join()
""")


def test_yield_cpu_sets_every_thread_and_never_lowers() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True, timeout=60)
    set_count, main, earlier, later, again, main_after = map(int, out.stdout.split())
    assert set_count >= 2  # this thread and the one already running
    assert (main, earlier, later) == (7, 7, 7)
    assert (again, main_after) == (0, 7)  # a lower niceness is never asked back
