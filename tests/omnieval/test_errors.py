"""Error helpers."""

from __future__ import annotations

from omnieval.errors import clip


def test_clip_keeps_the_cause_at_the_end() -> None:
    wrapped = "Failed to update the deployments ['EngineReplica']; " + "  File x, line 1\n" * 500 + "ReplicaDead: exit -11"
    out = clip(wrapped, 400)
    assert len(out) < 450 and out.startswith("Failed to update") and out.endswith("ReplicaDead: exit -11")
    assert f"…{len(wrapped) - 400} chars…" in out
    assert clip("short", 400) == "short"
