"""``PoolBridge``: a framework's blocking batch over the async dispatcher, response cache included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnieval.adapters._bridge import PoolBridge
from omnieval.core import GenerationOptions, PoolConfig
from pool import ResponseCache
from serving._types import GenerationRequest, GenerationResult

IDENTITY = {"fingerprint": "f", "sha256": "0" * 64, "engine": "llamacpp", "engine_version": "v"}


class FakeDispatcher:
    """The dispatcher's surface the bridge uses: one healthy replica's identity and an answering ``submit``."""

    def __init__(self) -> None:
        self.submitted: list[str] = []

    async def refresh(self) -> None:
        return None

    def model_identity(self) -> dict[str, Any]:
        return IDENTITY

    async def submit(self, req: GenerationRequest, routing: Any) -> tuple[GenerationResult, int, float]:
        self.submitted.append(req.request_id)
        return GenerationResult(request_id=req.request_id, text="9", completion_tokens=2, replica_id="m/0"), 1, 0.0

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


def test_a_cache_hit_comes_back_marked_and_the_mark_is_never_stored(tmp_path: Path) -> None:
    bridge = PoolBridge("m", None, PoolConfig(), cache_path=str(tmp_path / "responses.sqlite"))
    fake = FakeDispatcher()
    bridge.dispatcher = fake  # type: ignore[assignment]
    req = GenerationRequest(
        request_id="q1", messages=[{"role": "user", "content": "2+7?"}], options=GenerationOptions()
    )
    try:
        (first,) = bridge.generate([req])
        (again,) = bridge.generate([req.model_copy(update={"request_id": "q2"})])
    finally:
        bridge.close()
    assert isinstance(first, GenerationResult) and not first.from_cache and fake.submitted == ["q1"]
    assert isinstance(again, GenerationResult) and again.from_cache and again.text == "9"  # no second inference
    assert (bridge.sent, bridge.cache_hits) == (1, 1)
    stored = ResponseCache(tmp_path / "responses.sqlite")
    assert '"from_cache"' not in stored._conn().execute("SELECT value FROM responses").fetchone()[0]
