"""Framework adapters: lm-eval (and other frameworks) evaluated through the pool, mapped to Records."""

from __future__ import annotations

from omnieval.adapters._base import FrameworkAdapter, FrameworkResult
from omnieval.core import FRAMEWORKS, Registry

ADAPTERS: Registry[type[FrameworkAdapter]] = FRAMEWORKS  # table in the kernel: configs validate framework names

__all__ = ["ADAPTERS", "FrameworkAdapter", "FrameworkResult"]
