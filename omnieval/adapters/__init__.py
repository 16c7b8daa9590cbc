"""Framework adapters: lm-eval (and other frameworks) evaluated through the pool, mapped to Records."""

from __future__ import annotations

from omnieval.adapters._base import FrameworkAdapter, FrameworkResult
from omnieval.core import Registry

ADAPTERS: Registry[type[FrameworkAdapter]] = Registry("evaluation framework")
ADAPTERS.register("lmeval", "omnieval.adapters._lmeval:LMEvalAdapter")
ADAPTERS.register("lmms", "omnieval.adapters._lmms:LMMSEvalAdapter")
ADAPTERS.register("vlmeval", "omnieval.adapters._vlmeval:VLMEvalAdapter")

__all__ = ["ADAPTERS", "FrameworkAdapter", "FrameworkResult"]
