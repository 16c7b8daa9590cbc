"""The bridge tokenizes locally only with the replica's own tokenizer: loaded from the checkpoint folder a replica
publishes, and used only when it tokenizes a probe exactly as the replica's ``/tokenize`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from testlib.tiers import need

need("transformers")

from omnieval.adapters._bridge import PoolBridge  # noqa: E402
from omnieval.core import PoolConfig  # noqa: E402
from serving._types import TokenizeRequest, TokenizeResult  # noqa: E402

pytestmark = [pytest.mark.transformers]


class Replica:
    """The dispatcher surface the bridge uses; its replica tokenizes with ``encode`` and publishes ``folder``."""

    def __init__(self, folder: Path, encode: Any) -> None:
        self.folder, self.encode, self.asked = str(folder), encode, 0

    async def refresh(self, force: bool = False) -> None:
        return None

    def model_identity(self) -> dict[str, Any]:
        return {"fingerprint": "f", "sha256": None, "engine": "vllm", "engine_version": "v"}

    def tokenizer_dir(self) -> str:
        return self.folder

    async def submit(self, req: TokenizeRequest, routing: Any) -> tuple[TokenizeResult, int, float]:
        self.asked += 1
        return TokenizeResult(request_id=req.request_id, tokens=self.encode(req.text)), 1, 0.0

    async def flush(self) -> None:
        return None

    async def close(self) -> None:
        return None


def _bridge(replica: Replica) -> PoolBridge:
    b = PoolBridge("m", None, PoolConfig())
    b.dispatcher = replica  # type: ignore[assignment]
    return b


def test_the_replicas_own_tokenizer_is_used_locally(smollm_gguf: Path) -> None:
    from transformers import AutoTokenizer

    from serving import gguf_to_hf

    ckpt = gguf_to_hf(smollm_gguf, name="smollm2")
    hf = AutoTokenizer.from_pretrained(str(ckpt))
    replica = Replica(ckpt, lambda t: hf.encode(t, add_special_tokens=False))
    b = _bridge(replica)
    texts = [f"Question {i}: what is {i}+{i}?\nAnswer:" for i in range(200)]
    try:
        got = b.tokenize(texts)
    finally:
        b.close()
    assert got == [hf.encode(t, add_special_tokens=False) for t in texts]
    assert b._tok is not None and replica.asked == 3  # only the probe went to the replica


def test_a_tokenizer_that_disagrees_with_the_replica_is_not_used(smollm_gguf: Path) -> None:
    from serving import gguf_to_hf

    replica = Replica(gguf_to_hf(smollm_gguf, name="smollm2"), lambda t: [ord(c) for c in t])  # another tokenizer
    b = _bridge(replica)
    try:
        assert b.tokenize(["ab", "c"]) == [[97, 98], [99]]
    finally:
        b.close()
    assert b._tok is None and replica.asked == 3 + 2  # the probe, then every text
