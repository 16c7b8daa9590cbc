"""The first program of every engine server process: it asks the kernel to end it with its owner, sets its niceness,
then becomes the server (``exec``).

Why a program and not ``Popen(preexec_fn=...)``: a ``preexec_fn`` makes Python ``fork`` and run code in the child,
and in a Ray worker the fork also runs gRPC's at-fork handlers; their poller thread then met descriptors the child
was closing and aborted it before the server started (CI: ``Epoll1Poller ... epoll_wait error: Bad file descriptor``,
SIGABRT, one replica of two lost). Without a ``preexec_fn`` Python spawns with ``vfork`` and runs nothing of the
owner's in the child; this file runs as a script (``python -I -S``), so it imports only the standard library.

Usage: ``python -I -S _with_parent.py NICE OWNER_PID COMMAND [ARG...]``.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    nice, owner, cmd = int(argv[0]), int(argv[1]), argv[2:]
    try:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:  # not allowed to lower it: keep the owner's
        pass
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not Linux: no parent-death signal
        pass
    if os.getppid() != owner:  # the owner died before the signal was asked for: it will never come
        sys.exit(f"owner process {owner} is gone; not starting {cmd[0]}")
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
