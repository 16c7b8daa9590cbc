"""Content-addressed response cache: re-scoring with another metric, or resuming, costs zero inference.

Key = sha256 over (model weights sha256 / revision, engine name + version, engine kwargs, rendered chat messages,
generation options). SQLite in WAL mode with ``INSERT OR IGNORE`` is safe under many concurrent writers (client
actors in several processes); a value is immutable once written, so readers never see a torn entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from serving import GenerationResult, ScoreRequest, ScoreResult

if TYPE_CHECKING:
    from omnieval.core import GenerationOptions
    from pool._dispatch import Dispatcher


def cache_key(*, model_id: dict[str, Any], messages: list[dict[str, Any]], options: dict[str, Any],
              prompt: str | None = None) -> str:  # fmt: skip
    if "grammar" in options and options["grammar"] is None:  # unconstrained: the key it had before the field existed
        options = {k: v for k, v in options.items() if k != "grammar"}
    parts: dict[str, Any] = {"model": model_id, "messages": messages, "options": options}
    if prompt is not None:  # a raw-prompt completion; chat keys stay as they were
        parts["prompt"] = prompt
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as c:
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL)")

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=60000")
            self._local.conn = conn
        return conn

    def get(self, key: str, kind: type[Any] = GenerationResult) -> Any:
        """The stored answer under ``key`` as ``kind`` (a generation, or a ``ScoreResult``), or None."""
        row = self._conn().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return kind.model_validate_json(row[0]) if row else None

    def put(self, key: str, result: GenerationResult | ScoreResult) -> None:
        import time

        self._conn().execute(
            "INSERT OR IGNORE INTO responses (key, value, created) VALUES (?, ?, ?)",
            (key, result.model_dump_json(), time.time()),
        )

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM responses").fetchone()[0])


@dataclass(frozen=True)
class CacheLookup:
    """One request's look-up: its key (None: not cacheable here) and the cached answer, if there was one."""

    cache: ResponseCache | None = None
    key: str | None = None
    hit: Any = None

    def store(self, result: GenerationResult | ScoreResult) -> None:
        """Keep a freshly inferred answer under this request's key (nothing when the request is not cacheable)."""
        if self.cache is not None and self.key is not None:
            self.cache.put(self.key, result)


async def lookup_response(
    cache: ResponseCache | None,
    dispatcher: Dispatcher,
    messages: list[dict[str, Any]],
    options: GenerationOptions,
    prompt: str | None = None,
) -> CacheLookup:
    """The response cache's answer to ``messages`` on the dispatcher's model, for every pool user (client actors,
    the framework bridge): keyed on the model's identity, so a request is cacheable only once a healthy replica has
    reported its weights sha256 and engine version."""
    ident = await _cacheable_identity(cache, dispatcher)
    if cache is None or ident is None:
        return CacheLookup()
    key = cache_key(model_id=ident, messages=messages, options=options.model_dump(), prompt=prompt)
    return CacheLookup(cache, key, cache.get(key))


async def _cacheable_identity(cache: ResponseCache | None, dispatcher: Dispatcher) -> dict[str, Any] | None:
    """The model identity answers are keyed on; None when there is no cache or no replica has reported weights."""
    if cache is None:
        return None
    await dispatcher.refresh()
    ident = dispatcher.model_identity()
    return None if ident is None or ident["sha256"] is None else ident


async def lookup_scores(cache: ResponseCache | None, dispatcher: Dispatcher, request: ScoreRequest) -> CacheLookup:
    """``lookup_response`` for a scoring request: keyed on the model's identity and the exact token ids."""
    ident = await _cacheable_identity(cache, dispatcher)
    if cache is None or ident is None:
        return CacheLookup()
    blob = json.dumps({"model": ident, "score": [request.context, request.continuations]}, sort_keys=True)
    key = hashlib.sha256(blob.encode()).hexdigest()
    return CacheLookup(cache, key, cache.get(key, ScoreResult))


def default_cache_path() -> Path:
    """``$OMNIEVAL_RESPONSE_CACHE`` if set, else ``<cache dir>/responses.sqlite``.

    The variable moves only the responses, not the models and engine builds beside them: a test session (or a user
    comparing engine builds) gets a cache of its own without rebuilding llama-server or refetching weights.
    """
    if env := os.environ.get("OMNIEVAL_RESPONSE_CACHE"):
        return Path(env)
    from omnieval.core import cache_dir

    return cache_dir() / "responses.sqlite"
