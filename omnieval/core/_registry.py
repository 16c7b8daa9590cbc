"""A generic registry of lazily-imported plugins.

Targets are ``"module:object"`` strings so that a name registered in the driver resolves the same way inside a Ray
worker or a Serve replica (decorator side effects in the driver are invisible there).
"""

from __future__ import annotations

import difflib
import importlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError):
    """An unknown registry name; the message carries did-you-mean suggestions."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable.
        return str(self.args[0])


def import_target(target: str) -> Any:
    """Import ``"package.module:attr.sub"`` and return the object."""
    if ":" not in target:
        raise ValueError(f"target {target!r} must look like 'package.module:object'")
    module_name, _, attr_path = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split("."):
        obj = getattr(obj, part)
    return obj


class Registry(Generic[T]):
    """Thread-safe name → object registry with lazy ``"module:object"`` targets."""

    def __init__(self, kind: str, entries: Mapping[str, str | T] | None = None) -> None:
        self.kind = kind
        self._targets: dict[str, str | T] = {}
        self._resolved: dict[str, T] = {}
        """Imported objects, cached apart so ``target`` keeps the ``"module:object"`` string a Ray worker resolves."""
        self._lock = threading.RLock()
        for name, target in (entries or {}).items():
            self.register(name, target)

    def register(self, name: str, target: str | T, *, replace: bool = False) -> None:
        with self._lock:
            if name in self._targets and not replace and self._targets[name] != target:
                raise ValueError(f"{self.kind} {name!r} is already registered to {self._targets[name]!r}")
            self._targets[name] = target
            self._resolved.pop(name, None)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._targets)

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def target(self, name: str) -> str | T:
        with self._lock:
            if name not in self._targets:
                raise UnknownNameError(self.unknown_message(name))
            return self._targets[name]

    def get(self, name: str) -> T:
        """Resolve ``name``, importing its target on first use."""
        target = self.target(name)
        if not isinstance(target, str):
            return target
        with self._lock:
            if name in self._resolved:
                return self._resolved[name]
        obj: T = import_target(target)
        with self._lock:
            self._resolved[name] = obj
        return obj

    def suggestions(self, name: str) -> list[str]:
        return difflib.get_close_matches(name, self.names(), n=3, cutoff=0.5)

    def unknown_message(self, name: str) -> str:
        msg = f"unknown {self.kind} {name!r}."
        close = self.suggestions(name)
        if close:
            msg += f" Did you mean: {', '.join(close)}?"
        msg += f" Available: {', '.join(self.names()[:20])}"
        return msg
