"""Response cache: content-addressed keys and safety under concurrent writers in separate processes."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from pool import ResponseCache, cache_key
from serving._types import GenerationResult

MSGS = [{"role": "user", "content": "2+2?"}]
MODEL = {"fingerprint": "f", "sha256": "abc", "engine": "llamacpp", "engine_version": "v1"}


def test_key_changes_with_every_input() -> None:
    base = cache_key(model_id=MODEL, messages=MSGS, options={"temperature": 0.0})
    assert base == cache_key(model_id=dict(MODEL), messages=list(MSGS), options={"temperature": 0.0})
    assert base != cache_key(model_id={**MODEL, "sha256": "other"}, messages=MSGS, options={"temperature": 0.0})
    assert base != cache_key(model_id={**MODEL, "engine_version": "v2"}, messages=MSGS, options={"temperature": 0.0})
    assert base != cache_key(model_id=MODEL, messages=[{"role": "user", "content": "2+3?"}], options={"temperature": 0.0})
    assert base != cache_key(model_id=MODEL, messages=MSGS, options={"temperature": 0.5})


def _writer(path: str, worker: int, n: int) -> None:
    cache = ResponseCache(path)
    for i in range(n):
        # overlapping keys across workers: first writer wins, nobody errors
        cache.put(f"k{i}", GenerationResult(request_id=f"{worker}-{i}", text=f"text {i}"))


def test_concurrent_writers_in_processes(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    ResponseCache(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 200)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    cache = ResponseCache(path)
    assert len(cache) == 200
    for i in range(200):
        hit = cache.get(f"k{i}")
        assert hit is not None and hit.text == f"text {i}"
    assert cache.get("missing") is None


def test_default_path_moves_with_env_but_models_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from omnieval.core import cache_dir
    from pool import default_cache_path

    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path / "root"))
    monkeypatch.delenv("OMNIEVAL_RESPONSE_CACHE", raising=False)
    assert default_cache_path() == tmp_path / "root" / "responses.sqlite"
    monkeypatch.setenv("OMNIEVAL_RESPONSE_CACHE", str(tmp_path / "mine.sqlite"))
    assert default_cache_path() == tmp_path / "mine.sqlite" and cache_dir() == tmp_path / "root"


class _Identity:
    """The dispatcher's surface the look-up uses: refresh, then the model's identity (None until one is healthy)."""

    def __init__(self, ident: dict[str, str | None] | None) -> None:
        self.ident, self.refreshed = ident, 0

    async def refresh(self) -> None:
        self.refreshed += 1

    def model_identity(self) -> dict[str, str | None] | None:
        return self.ident


def test_one_lookup_for_every_pool_user(tmp_path: Path) -> None:
    import asyncio

    from omnieval.core import GenerationOptions
    from pool import lookup_response

    cache, opts = ResponseCache(tmp_path / "c.sqlite"), GenerationOptions()
    res = GenerationResult(request_id="r", text="4")

    async def look(c: ResponseCache | None, ident: dict[str, str | None] | None):  # type: ignore[no-untyped-def]
        return await lookup_response(c, _Identity(ident), MSGS, opts)  # type: ignore[arg-type]

    assert asyncio.run(look(None, MODEL)).key is None  # no cache: nothing looked up
    for ident in (None, {**MODEL, "sha256": None}):  # no weights digest yet: not cacheable, storing is a no-op
        miss = asyncio.run(look(cache, ident))
        assert (miss.key, miss.hit) == (None, None)
        miss.store(res)
        assert len(cache) == 0
    first = asyncio.run(look(cache, MODEL))
    assert first.key == cache_key(model_id=MODEL, messages=MSGS, options=opts.model_dump()) and first.hit is None
    first.store(res)
    again = asyncio.run(look(cache, MODEL))
    assert again.hit is not None and again.hit.text == "4"
