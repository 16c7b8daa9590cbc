"""``omnieval run`` starting its own Ray starts the engines' servers before Ray and the replicas take them over; a
pre-started server killed with SIGKILL mid-run loses and duplicates nothing, and the run's records and scores
equal a run whose replicas launched their own servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml
from testlib.ray_head import wait_until

from omnieval import read_records
from omnieval._artifacts import CHECKPOINT
from omnieval._defaults import DEFAULT_MODEL_SOURCE
from omnieval.core import Record
from omnieval.perf._node_cpu import snapshot
from serving._prestart import _socket_root

pytestmark = [pytest.mark.slow, pytest.mark.ray]
ROOT = Path(__file__).resolve().parents[2]


def _suite(tmp: Path, prestart: bool) -> Path:
    cfg = {
        "name": "prestart",
        "models": [{"name": "smol", "source": DEFAULT_MODEL_SOURCE.model_dump(mode="json"), "replicas": 2,
                    "resources": {"num_cpus": 1}, "engine_kwargs": {"parallel": 2, "ctx_per_slot": 1024, "threads": 1}}],
        "benchmarks": [{"name": "mmlu_tiny", "limit": 8, "generation": {"max_tokens": 24}},
                       {"name": "asdiv_tiny", "limit": 8, "generation": {"max_tokens": 24}}],
        "pool": {"clients": 2, "max_inflight_per_replica": 2, "chunk_size": 2, "max_retries": 3,
                 "health_check_period_s": 1, "prestart": prestart},
        "cache": {"enabled": False},
    }  # fmt: skip
    path = tmp / f"suite-{prestart}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(suite: Path, out: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # its own local Ray
    return subprocess.Popen([sys.executable, "-m", "omnieval", "run", str(suite), "--output-dir", str(out)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _servers_of(pid: int) -> list[int]:
    """llama-server processes whose parent is ``pid`` (the kernel's process table, as the bench reads it)."""
    return [p for p, info in snapshot().items() if info.ppid == pid and info.title.startswith("llama-server")]


def _by_key(run_dir: Path) -> dict[tuple[str, str, int], Record]:
    recs = read_records(run_dir)
    out = {r.key: r for r in recs}
    assert len(out) == len(recs), "duplicate sample keys in the records"
    return out


def test_prestarted_servers_are_taken_over_and_a_killed_one_loses_nothing(tmp_path: Path) -> None:
    base = _run(_suite(tmp_path, prestart=False), tmp_path / "base")
    base_out, _ = base.communicate(timeout=900)
    assert base.returncode == 0, base_out[-3000:]
    (base_dir,) = (tmp_path / "base").iterdir()
    base_usage = json.loads((base_dir / "manifest.json").read_text())["replica_usage"]
    assert base_usage and not any(u["prestarted"] for u in base_usage)

    proc = _run(_suite(tmp_path, prestart=True), tmp_path / "hit")
    out: list[str] = []
    reader = threading.Thread(target=lambda: out.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    # the driver launches both servers itself, right after planning (before Ray's first process)
    wait_until(lambda: len(_servers_of(proc.pid)) == 2, 120, "two llama-servers started by the driver")
    servers = _servers_of(proc.pid)
    wait_until(lambda: any((tmp_path / "hit").glob(f"*/{CHECKPOINT}")), 300, "the run's checkpoint")
    ckpt = next((tmp_path / "hit").glob(f"*/{CHECKPOINT}"))
    wait_until(lambda: len(ckpt.read_text().splitlines()) >= 1, 300, "the first record", interval=0.05)
    os.kill(servers[0], signal.SIGKILL)  # a taken-over engine dies mid-run
    assert len(ckpt.read_text().splitlines()) < 16, "the run finished before the kill"
    proc.wait(timeout=900)
    reader.join(timeout=60)
    assert proc.returncode == 0, out[0][-3000:] if out else ""
    (hit_dir,) = (tmp_path / "hit").iterdir()

    manifest = json.loads((hit_dir / "manifest.json").read_text())
    assert any(u["prestarted"] for u in manifest["replica_usage"]), manifest["replica_usage"]
    lines = [json.loads(x) for x in ckpt.read_text().splitlines()]
    keys = [(x["model"], x["benchmark"], x["index"]) for x in lines]
    assert len(keys) == len(set(keys)) == 16, "a sample was lost or written twice"
    recs, before = _by_key(hit_dir), _by_key(base_dir)
    assert recs.keys() == before.keys() and all(r.error is None for r in recs.values())
    events = [json.loads(x) for x in (hit_dir / "replica-events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "unhealthy" for e in events), events  # the kill was seen, not slept through
    # greedy decoding on the same weights: who started the server changes nothing in what it produced
    assert {k: r.prediction for k, r in recs.items()} == {k: r.prediction for k, r in before.items()}
    scores = {(s["benchmark"], s["metric"], s["value"]) for s in manifest["scores"]}
    assert scores == {(s["benchmark"], s["metric"], s["value"]) for s in
                      json.loads((base_dir / "manifest.json").read_text())["scores"]}  # fmt: skip
    # nothing the driver started outlives the run
    assert not any(Path(f"/proc/{pid}").exists() for pid in servers)
    assert not list(Path(_socket_root()).glob(f"omnieval-prestart-{proc.pid}-*"))  # its sockets' dir
