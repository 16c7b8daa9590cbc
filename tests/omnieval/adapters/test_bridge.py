"""``PoolBridge``: a framework's blocking batch over the async dispatcher, response cache included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omnieval.adapters._bridge import PoolBridge
from omnieval.core import GenerationOptions, PoolConfig
from pool import ResponseCache
from serving._types import (
    ChoiceLogprob,
    GenerationRequest,
    GenerationResult,
    ScoreRequest,
    ScoreResult,
    TokenizeRequest,
    TokenizeResult,
)

IDENTITY = {"fingerprint": "f", "sha256": "0" * 64, "engine": "llamacpp", "engine_version": "v"}


class FakeDispatcher:
    """The dispatcher's surface the bridge uses: one healthy replica's identity and an answering ``submit``."""

    def __init__(self, not_ready_for: int = 0) -> None:
        self.submitted: list[str] = []
        self.refreshes = 0
        self.not_ready_for = not_ready_for
        self.tok_dir: str | None = None
        self.up_waits = 0

    async def refresh(self, force: bool = False) -> None:
        self.refreshes += 1

    async def replica_up(self, timeout_s: float) -> None:  # the controller's answer: a replica is up
        self.up_waits += 1

    def model_identity(self) -> dict[str, Any] | None:
        return None if self.refreshes <= self.not_ready_for else IDENTITY

    async def submit(self, req: Any, routing: Any) -> tuple[Any, int, float]:
        self.submitted.append(req.request_id)
        if isinstance(req, ScoreRequest):
            choices = [ChoiceLogprob(logprob=-float(len(c)), n_tokens=len(c), is_greedy=True) for c in req.continuations]
            return ScoreResult(request_id=req.request_id, choices=choices, replica_id="m/0"), 1, 0.0
        if isinstance(req, TokenizeRequest):
            return TokenizeResult(request_id=req.request_id, tokens=[ord(c) for c in req.text]), 1, 0.0
        return GenerationResult(request_id=req.request_id, text="9", completion_tokens=2, replica_id="m/0"), 1, 0.0

    def tokenizer_dir(self) -> str | None:
        return self.tok_dir

    def prefix_token_id(self) -> int | None:
        return 0

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


def test_requests_wait_until_the_model_has_a_replica(tmp_path: Path) -> None:
    """A framework actor starts while engines load: its first batch waits for a replica instead of being sent (and
    cached) nowhere; raw-prompt and chat requests of the same text are cached apart."""
    bridge = PoolBridge("m", None, PoolConfig(), cache_path=str(tmp_path / "responses.sqlite"))
    fake = FakeDispatcher(not_ready_for=2)
    bridge.dispatcher = fake  # type: ignore[assignment]
    chat = GenerationRequest(request_id="c", messages=[{"role": "user", "content": "2+7?"}], options=GenerationOptions())
    raw = GenerationRequest(request_id="r", messages=[], prompt="2+7?", options=GenerationOptions())
    try:
        bridge.generate([chat])
        assert fake.refreshes >= 3 and fake.submitted == ["c"]  # sent only once the replica reported
        assert fake.up_waits == 2  # between re-reads it waited on the controller, not a timer
        (again,) = bridge.generate([raw])
    finally:
        bridge.close()
    assert isinstance(again, GenerationResult) and not again.from_cache and fake.submitted == ["c", "r"]


def test_scores_are_cached_by_their_token_ids(tmp_path: Path) -> None:
    """A scoring request is answered from the response cache when the same model scored the same ids before; other
    ids (another choice set) are not."""
    bridge = PoolBridge("m", None, PoolConfig(), cache_path=str(tmp_path / "responses.sqlite"))
    fake = FakeDispatcher()
    bridge.dispatcher = fake  # type: ignore[assignment]
    a = ScoreRequest(request_id="a", context=[1, 2, 3], continuations=[[4], [5, 6]])
    try:
        (first,) = bridge.score([(a, "ctx")])
        (again,) = bridge.score([(a.model_copy(update={"request_id": "a2"}), "ctx")])
        (other,) = bridge.score([(a.model_copy(update={"request_id": "b", "continuations": [[4]]}), "ctx")])
    finally:
        bridge.close()
    assert isinstance(first, ScoreResult) and not first.from_cache
    assert isinstance(again, ScoreResult) and again.from_cache and again.choices == first.choices
    assert isinstance(other, ScoreResult) and not other.from_cache
    assert fake.submitted == ["a", "b"] and (bridge.sent, bridge.cache_hits) == (2, 1)

