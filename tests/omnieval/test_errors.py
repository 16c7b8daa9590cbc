"""Error helpers."""

from __future__ import annotations

from omnieval.core import PlacementError, clip, user_message


def test_clip_keeps_the_cause_at_the_end() -> None:
    wrapped = (
        "Failed to update the deployments ['EngineReplica']; " + "  File x, line 1\n" * 500 + "ReplicaDead: exit -11"
    )
    out = clip(wrapped, 400)
    assert len(out) < 450 and out.startswith("Failed to update") and out.endswith("ReplicaDead: exit -11")
    assert f"…{len(wrapped) - 400} chars…" in out
    assert clip("short", 400) == "short"


def test_user_message_is_the_cause_not_the_actor_traceback() -> None:
    from ray.exceptions import RayTaskError

    cause = PlacementError("no node can host a replica needing num_gpus=1 (...); lower resources")
    tb = 'Traceback (most recent call last):\n  File "pool/_controller.py", line 1\nPlacementError: no node ...'
    wrapped = RayTaskError("PoolController.ensure_model", tb, cause).as_instanceof_cause()
    assert isinstance(wrapped, PlacementError) and 'File "pool/_controller.py"' in str(wrapped)  # what the CLI printed
    assert user_message(wrapped) == str(cause)
    nested = RayTaskError("EvalClient.run", "Traceback ...", wrapped).as_instanceof_cause()  # an actor calling one
    assert user_message(nested) == str(cause)
    assert user_message(ValueError("plain")) == "plain"
