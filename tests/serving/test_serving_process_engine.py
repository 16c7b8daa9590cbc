"""The transformers engine in a process of its own (``engine_kwargs.process: own``) answers as it does in-process
(generation with media, scoring, tokenizing; through the replica and straight over HTTP as clients send it), reports
the engine's own counters, and a SIGKILLed process is a dead replica. Through ``omnieval run``: the driver starts
the processes before Ray, the replicas take them over, and one killed mid-run loses and duplicates nothing.

Needs torch+transformers (scripts/ci_vllm.sh runs it in the vLLM venv)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from testlib.tiers import need

need("torch")
need("transformers")

from omnieval.core import GenerationOptions, PathModelSource, ReplicaDead  # noqa: E402
from serving import ScoreRequest, TokenizeRequest, build_engine  # noqa: E402
from serving._process_engine import ProcessEngine  # noqa: E402
from serving._transformers import TransformersEngine  # noqa: E402
from serving._types import GenerationRequest  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.transformers]
ROOT = Path(__file__).resolve().parents[2]
CLIP = ROOT / "omnieval/benchmarks/data/omniassist_sample/media/II_000/t0.mp4"
KW = {"max_batch_size": 1, "dtype": "float32", "threads": 1}  # one request at a time: nothing depends on batching


def _requests() -> list[GenerationRequest]:
    from PIL import Image

    from omnieval.core import ImageContent, Message, TextContent, VideoContent
    from serving._messages import to_openai

    buf = io.BytesIO()
    Image.new("RGB", (256, 128), (30, 120, 200)).save(buf, format="PNG")
    png = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    q = TextContent(value="What is shown here?")
    contents = [[TextContent(value="What is the capital of France?")], [ImageContent(value=png), q],
                [VideoContent(value=str(CLIP), num_frames=2, sampling_strategy="uniform"), q]]  # fmt: skip
    return [GenerationRequest(request_id=f"p-{i}", options=GenerationOptions(max_tokens=10, seed=0),
                              messages=to_openai([Message(role="user", content=c)], video_input="frames"))
            for i, c in enumerate(contents)]  # fmt: skip


@pytest.mark.timeout(900)
def test_own_process_answers_as_in_process_and_dies_as_a_replica(plumbing_models: dict[str, Path], tmp_root: Path) -> None:
    from pool._http import HttpTransport

    path = plumbing_models["image"]
    score = ScoreRequest(request_id="s", context=[1, 2, 3, 4], continuations=[[5, 6], [7]])

    async def answers(eng: object) -> tuple[list[tuple[str, int, int]], list[float], list[int]]:
        gens = [await eng.generate(r) for r in _requests()]  # type: ignore[attr-defined]
        scored = await eng.score(score)  # type: ignore[attr-defined]
        toks = await eng.tokenize(TokenizeRequest(request_id="t", text="The capital of France"))  # type: ignore[attr-defined]
        return ([(g.text, g.prompt_tokens, g.completion_tokens) for g in gens], [c.logprob for c in scored.choices],
                toks.tokens)  # fmt: skip

    async def main() -> None:
        inproc = TransformersEngine(replica_id="in", model="vlm", model_path=str(path), **KW)
        await inproc.start()
        try:
            want = await answers(inproc)
        finally:
            await inproc.shutdown()
        assert "paris" in want[0][0][0].lower()  # the language model is real

        own, _ = build_engine("transformers", replica_id="own-r1", model="vlm",
                              source=PathModelSource(kind="path", path=str(path)), engine_kwargs={**KW, "process": "own"})  # fmt: skip
        assert isinstance(own, ProcessEngine) and own.slots == 1
        await own.start()
        try:
            assert own.pid != os.getpid() and await own.check_health()
            assert await answers(own) == want  # through the replica's own client
            ep = own.endpoint()
            assert ep is not None and ep.dialect == "omnieval"
            http = HttpTransport(60.0, None)  # straight to the process, as a pool client sends
            try:
                direct = [await http.chat(ep, r, "own-r1") for r in _requests()]
                assert [(g.text, g.prompt_tokens, g.completion_tokens) for g in direct] == want[0]
                assert all(g.replica_id == "own-r1" for g in direct)
                scored = await http.score(ep, score, "own-r1")
                assert [c.logprob for c in scored.choices] == want[1]
            finally:
                await http.close()
            s = await own.poll_stats()  # the engine's own counters, under the replica's name
            assert (s.replica_id, s.engine) == ("own-r1", "transformers")
            assert s.completed >= 8 and s.busy_s > 0 and s.media_items >= 2, s
            assert own.version() and own.version().startswith("transformers")

            os.kill(own.pid, signal.SIGKILL)  # type: ignore[arg-type]
            with pytest.raises(ReplicaDead, match="exited with -9"):
                for _ in range(100):  # the kernel reaps it within moments; no answer can come meanwhile
                    await own.generate(_requests()[0])
                    await asyncio.sleep(0.05)
            assert not await own.check_health()
            where = own.log_location()
            assert where is not None and "/failed/" in where and Path(where.split(":", 1)[1]).exists()
        finally:
            await own.shutdown()

    asyncio.run(main())


def _suite(tmp: Path, path: Path, process: str) -> Path:
    cfg = {
        "name": f"own-{process}",
        "models": [{"name": "vlm", "source": {"kind": "path", "path": str(path)}, "engine": "transformers",
                    "replicas": 2, "resources": {"num_cpus": 1}, "engine_kwargs": {**KW, "process": process}}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": 8, "generation": {"max_tokens": 12}},
                       {"name": "asdiv_tiny", "limit": 8, "generation": {"max_tokens": 12}}],
        "pool": {"clients": 2, "max_inflight_per_replica": 1, "chunk_size": 2, "max_retries": 3,
                 "health_check_period_s": 1},
        "cache": {"enabled": False},
        "ray": {"num_cpus": 2},
    }  # fmt: skip
    out = tmp / f"suite-{process}.yaml"
    out.write_text(yaml.safe_dump(cfg))
    return out


def _run(suite: Path, out: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray, so it pre-starts
    return subprocess.Popen([sys.executable, "-m", "omnieval", "run", str(suite), "--output-dir", str(out)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _engines_of(pid: int) -> list[int]:
    """Engine processes whose parent is ``pid`` (the driver that pre-started them)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (d / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"serving._process_server" in cmd:
            out.append(int(d.name))
    return out


@pytest.mark.ray
@pytest.mark.timeout(1200)
def test_prestarted_engine_processes_are_taken_over_and_a_killed_one_loses_nothing(
    plumbing_models: dict[str, Path], tmp_path: Path
) -> None:
    from testlib.ray_head import wait_until

    from omnieval import read_records
    from omnieval._artifacts import CHECKPOINT

    path = plumbing_models["image"]
    base = _run(_suite(tmp_path, path, "replica"), tmp_path / "base")
    base_out, _ = base.communicate(timeout=900)
    assert base.returncode == 0, base_out[-3000:]
    (base_dir,) = (tmp_path / "base").iterdir()

    proc = _run(_suite(tmp_path, path, "own"), tmp_path / "own")
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    wait_until(lambda: len(_engines_of(proc.pid)) == 2, 120, "two engine processes started by the driver")
    engines = _engines_of(proc.pid)
    wait_until(lambda: any((tmp_path / "own").glob(f"*/{CHECKPOINT}")), 300, "the run's checkpoint")
    ckpt = next((tmp_path / "own").glob(f"*/{CHECKPOINT}"))
    wait_until(lambda: len(ckpt.read_text().splitlines()) >= 1, 300, "the first record", interval=0.05)
    os.kill(engines[0], signal.SIGKILL)  # a taken-over engine process dies mid-run
    assert len(ckpt.read_text().splitlines()) < 16, "the run finished before the kill"
    proc.wait(timeout=900)
    reader.join(timeout=60)
    assert proc.returncode == 0, out[0][-3000:] if out else ""
    (own_dir,) = (tmp_path / "own").iterdir()

    manifest = json.loads((own_dir / "manifest.json").read_text())
    assert any(u["prestarted"] for u in manifest["replica_usage"]), manifest["replica_usage"]
    lines = [json.loads(x) for x in ckpt.read_text().splitlines()]
    keys = [(x["model"], x["benchmark"], x["index"]) for x in lines]
    assert len(keys) == len(set(keys)) == 16, "a sample was lost or written twice"
    events = [json.loads(x) for x in (own_dir / "replica-events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "unhealthy" for e in events), events  # the kill was seen, not slept through
    recs, before = read_records(own_dir), read_records(base_dir)
    assert all(r.error is None for r in recs)
    # the same engine, one request at a time: which process it ran in changes nothing it produced
    assert {r.key: r.prediction for r in recs} == {r.key: r.prediction for r in before}
    scores = {(s["benchmark"], s["metric"], s["value"]) for s in manifest["scores"]}
    assert scores == {(s["benchmark"], s["metric"], s["value"]) for s in
                      json.loads((base_dir / "manifest.json").read_text())["scores"]}  # fmt: skip
    assert not any(Path(f"/proc/{pid}").exists() for pid in engines)  # nothing the driver started outlives the run
