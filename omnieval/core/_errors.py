"""Error taxonomy: recoverable request failures vs fatal replica death vs user errors.

The dispatcher retries ``RequestFailed`` on another replica, evicts and replaces a replica on ``ReplicaDead``, and
never retries ``OmnievalUserError`` (bad config, missing file): those reach the CLI as one line and exit code 2.
"""

from __future__ import annotations

import sys


class OmnievalError(Exception):
    """Base class."""

    exit_code = 1


class OmnievalUserError(OmnievalError):
    """Bad input the user can fix (config, paths, missing extras); the message says what, where and how."""

    exit_code = 2


class MissingDependencyError(OmnievalUserError):
    """An optional extra is not installed."""

    def __init__(self, feature: str, pip_line: str) -> None:
        super().__init__(f"{feature} needs an optional dependency; install it with: {pip_line}")


class RequestFailed(OmnievalError):
    """One request failed (timeout, HTTP 5xx, bad output); recoverable on this or another replica."""

    def __init__(self, message: str, *, replica_id: str | None = None, timeout: bool = False) -> None:
        super().__init__(message)
        self.replica_id = replica_id
        self.timeout = timeout


class ReplicaDead(OmnievalError):
    """The replica's engine is gone (process exited, actor died); it must be evicted and replaced."""

    def __init__(self, message: str, *, replica_id: str | None = None) -> None:
        super().__init__(message)
        self.replica_id = replica_id


class PlacementError(OmnievalUserError):
    """No node can host a replica; raised at once instead of waiting forever for resources."""


def clip(text: str, limit: int = 2000) -> str:
    """At most ``limit`` characters, keeping the head and the tail.

    Wrapped errors (a Serve deploy failure holding a traceback holding an engine log) put the cause last, so cutting
    only the tail would keep the framing and drop the reason.
    """
    if len(text) <= limit:
        return text
    head = limit // 4
    return f"{text[:head]} […{len(text) - limit} chars…] {text[-(limit - head) :]}"


def user_message(e: BaseException) -> str:
    """The message the CLI prints for ``e``: its own one line, never the remote traceback Ray wraps around it.

    An error raised inside an actor (the pool controller's ``PlacementError``, a framework client's user error)
    reaches the driver as a ``RayTaskError`` that is also an instance of the original class, so it is caught as that
    class; but its ``str()`` is the actor's whole traceback, and the original message is its ``cause``.
    """
    exc = sys.modules.get("ray.exceptions")  # ray is imported already whenever an error can have come through it
    while exc is not None and isinstance(e, exc.RayTaskError) and isinstance(e.cause, BaseException):
        e = e.cause
    return str(e)
