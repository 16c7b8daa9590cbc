"""CPU engines that leave their threads unset share the node's cores in proportion to the CPUs they reserve."""

from __future__ import annotations

from typing import Any

import pytest

from omnieval import _cpu_share
from omnieval._cpu_share import share_cores
from omnieval._defaults import DEFAULT_MODEL_SOURCE
from omnieval.core import SuiteConfig


def _model(name: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "source": DEFAULT_MODEL_SOURCE.model_dump(mode="json"), "engine": "llamacpp", **kw}


def _suite(*models: dict[str, Any], **extra: Any) -> SuiteConfig:
    return SuiteConfig.model_validate({"name": "s", "models": list(models),
                                       "benchmarks": [{"name": "mmlu_tiny"}], **extra})  # fmt: skip


@pytest.fixture
def local_node(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A run about to start its own Ray on this machine, with ``cores`` cores."""
    import ray

    import cluster

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # not connected yet, whatever an earlier test left

    def with_cores(n: int) -> None:
        monkeypatch.setattr(_cpu_share, "_local_cores", lambda: n)

    monkeypatch.setattr(cluster, "starts_local_ray", lambda cfg=None: True)
    with_cores(2)
    return with_cores


def _threads(suite: SuiteConfig) -> dict[str, Any]:
    return {m.name: m.engine_kwargs.get("threads") for m in suite.models}


def test_two_engines_on_two_cores_get_one_each_and_a_lone_one_gets_both(local_node: Any) -> None:
    two = _suite(_model("a"), _model("b"))
    assert _threads(share_cores(two, {"a", "b"}, keep_pool=False)) == {"a": 1, "b": 1}
    assert _threads(share_cores(two, {"a"}, keep_pool=False)) == {"a": 2, "b": None}  # b starts no replica
    assert _threads(share_cores(_suite(_model("a")), {"a"}, keep_pool=False)) == {"a": 2}


def test_shares_follow_reserved_cpus_and_replicas_and_a_set_value_stays(local_node: Any) -> None:
    local_node(4)
    s = _suite(_model("a", replicas=2), _model("b", resources={"num_cpus": 2}))
    assert _threads(share_cores(s, {"a", "b"}, keep_pool=False)) == {"a": 1, "b": 2}
    s = _suite(_model("a", engine_kwargs={"threads": 3}), _model("b"))
    assert _threads(share_cores(s, {"a", "b"}, keep_pool=False)) == {"a": 3, "b": 2}  # a's reservation still counts


def test_engines_that_do_not_compute_here_take_no_share(local_node: Any) -> None:
    s = _suite(_model("a"), _model("gpu", engine="vllm", resources={"num_gpus": 1}), _model("sim", engine="simulated"))
    assert _threads(share_cores(s, {"a", "gpu", "sim"}, keep_pool=False))["a"] == 2
    s = _suite(_model("a"), _model("v", engine="vllm"))  # vLLM on CPU computes on the same cores
    assert _threads(share_cores(s, {"a", "v"}, keep_pool=False)) == {"a": 1, "v": None}  # vLLM sizes itself


def test_a_private_ray_with_fewer_cpus_bounds_the_share(local_node: Any) -> None:
    s = _suite(_model("a"), ray={"num_cpus": 1})
    assert _threads(share_cores(s, {"a"}, keep_pool=False)) == {"a": 1}


def test_left_to_the_engine_where_the_run_cannot_see_every_engine_on_the_node(
    local_node: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _suite(_model("a"), _model("b"))
    assert share_cores(s, {"a", "b"}, keep_pool=True) is s  # a kept pool serves other suites' engines too
    import cluster

    monkeypatch.setattr(cluster, "starts_local_ray", lambda cfg=None: False)  # joins a cluster (not yet connected)
    assert share_cores(s, {"a", "b"}, keep_pool=False) is s
