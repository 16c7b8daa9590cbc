"""The one way an engine is made from (engine, model source, engine_kwargs): a pool replica (the Serve deployment)
and the verifier's judge workers both build theirs here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnieval.core import ENGINES, ModelSource, import_target
from serving._engine import Engine
from serving._models import resolve_model
from serving._process_engine import ProcessEngine, own_process


def build_engine(
    engine: str, *, replica_id: str, model: str, source: ModelSource, engine_kwargs: dict[str, Any] | None = None
) -> tuple[Engine, Path | None]:
    """The engine, not yet started, and its local weights path (None for an endpoint).

    ``engine`` is a name in ``serving.ENGINES`` or its ``"module:Class"`` target (what a Ray worker resolves without
    the driver's registrations). An engine that runs in its replica's process runs in one of its own with
    ``engine_kwargs.process: own`` (``serving._process_engine``). Resolving the source may fetch weights
    (blocking): a local model reaches the engine as ``model_path``, an endpoint as its ``base_url``,
    ``served_model_name`` and ``api_key_env``.
    """
    engine_cls: type[Engine] = import_target(engine) if ":" in engine else ENGINES.get(engine)
    kwargs = dict(engine_kwargs or {})
    path = resolve_model(source)
    if source.kind == "endpoint":
        kwargs.update(
            base_url=source.base_url, served_model_name=source.served_model_name, api_key_env=source.api_key_env
        )
    else:
        kwargs["model_path"] = str(path)
    if own_process(engine, engine_cls, kwargs):
        t = engine if ":" in engine else ENGINES.target(engine)
        target = t if isinstance(t, str) else f"{engine_cls.__module__}:{engine_cls.__qualname__}"
        return ProcessEngine(replica_id=replica_id, model=model, target=target, **kwargs), path
    return engine_cls(replica_id=replica_id, model=model, **kwargs), path
