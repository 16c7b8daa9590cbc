"""Fixture artifact dirs written with the real ``write_manifest``/``write_records``, plus a live uvicorn helper."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from omnieval._artifacts import (
    BenchmarkProvenance,
    ModelProvenance,
    RunManifest,
    ScoreRow,
    write_manifest,
    write_records,
)
from omnieval.core import ImageContent, Message, Output, Record, RecordError, TextContent, TextOutput

# name -> (modality, framework, native metric)
BENCHES: dict[str, tuple[str, str, str]] = {
    "mmlu_mini": ("text", "builtin", "accuracy"),
    "gsm8k_mini": ("text", "lmeval", "exact_match"),
    "mmmu_mini": ("image", "vlmeval", "accuracy"),
    "asr_mini": ("audio", "builtin", "wer_score"),
}
MODEL_ENGINES = {"alpha": "llamacpp", "beta": "vllm", "gamma": "transformers", "delta": "sglang"}


def _records(model: str, bench: str, n: int, skip: set[int]) -> list[Record]:
    modality, _, metric = BENCHES[bench]
    out = []
    for i in range(n):
        if i in skip:
            continue
        content: list[Any] = [TextContent(value=f"Question {i} of {bench}?")]
        if modality == "image":
            content.insert(0, ImageContent(value=f"/data/img_{i}.png"))
        correct = (i + len(model)) % 2 == 0
        err = RecordError(kind="timeout", message="no reply in 60 s") if (model == "beta" and i == 3) else None
        out.append(
            Record(
                benchmark=bench,
                index=i,
                model=model,
                messages=[Message.text("system", "Answer with a letter."), Message(role="user", content=content)],
                label="A",
                options=["yes", "no"],
                output=None
                if err
                else Output(
                    text=TextOutput(
                        prediction=[f"answer {'A' if correct else 'B'}"],
                        prediction_postprocessed=["A" if correct else "B"],
                    )
                ),
                error=err,
                metrics={metric: 1.0 if correct else 0.0, "verifier": 1.0 if correct else 0.0},
                latency=0.25,
            )
        )
    return out


def make_run(
    runs_dir: Path,
    run_id: str,
    created: str,
    scores: dict[tuple[str, str], tuple[float | None, float | None]],
    status: str = "completed",
    records: bool = True,
    n: int = 5,
    skip: dict[tuple[str, str], set[int]] | None = None,
) -> Path:
    """One run dir; ``scores`` maps (model, benchmark) to (native value, verifier value)."""
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    models = sorted({m for m, _ in scores})
    benches = sorted({b for _, b in scores})
    rows: list[ScoreRow] = []
    for (m, b), (native, ver) in scores.items():
        modality, framework, metric = BENCHES[b]
        common: dict[str, Any] = dict(
            model=m,
            benchmark=b,
            num_samples=n,
            num_errors=1 if m == "beta" else 0,
            engine=MODEL_ENGINES[m],
            framework=framework,
            modality=modality,
        )
        se = None if native is None else 4.0 + len(m) + len(b) % 3  # distinct per cell, for the error bars
        rows.append(ScoreRow(metric=metric, value=native, stderr=se, stderr_method="mean", **common))
        if ver is not None:
            rows.append(ScoreRow(metric="verifier", value=ver, stderr=3.0 + len(m), stderr_method="mean", **common))
    manifest = RunManifest(
        run_id=run_id,
        suite_name=f"suite-{run_id}",
        status=status,  # type: ignore[arg-type]
        created=created,
        config={"models": models, "benchmarks": benches},
        models=[ModelProvenance(name=m, engine=MODEL_ENGINES[m]) for m in models],
        benchmarks=[
            BenchmarkProvenance(
                name=b,
                version="1",
                framework=BENCHES[b][1],
                modality=BENCHES[b][0],
                num_samples=n,
                metrics=[{"name": BENCHES[b][2]}, {"name": "verifier"}],
            )
            for b in benches
        ],
        scores=rows,
    )
    write_manifest(run_dir, manifest)
    if records:
        recs = [r for (m, b) in scores for r in _records(m, b, n, (skip or {}).get((m, b), set()))]
        write_records(run_dir, recs)
    return run_dir


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    """Three models on three engines, four benchmarks over three modalities and frameworks, four coverage gaps.

    alpha/mmlu_mini is scored by r1 (old), r2 (newer, wins) and r3 (newest but failed, ignored).
    Gaps: alpha×{mmmu_mini, asr_mini}, beta×asr_mini, gamma×gsm8k_mini.
    """
    d = tmp_path / "runs"
    d.mkdir()
    make_run(
        d, "r1", "2025-01-01T00:00:00", {("alpha", "mmlu_mini"): (50.0, 48.0), ("alpha", "gsm8k_mini"): (30.0, 31.0)}
    )
    make_run(d, "r2", "2025-02-01T00:00:00", {("alpha", "mmlu_mini"): (60.0, 58.0)})
    make_run(d, "r3", "2025-03-01T00:00:00", {("alpha", "mmlu_mini"): (99.0, 99.0)}, status="failed", records=False)
    make_run(
        d,
        "r4",
        "2025-02-15T00:00:00+00:00",
        {
            ("beta", "mmlu_mini"): (70.0, 72.0),
            ("beta", "gsm8k_mini"): (40.0, 42.0),
            ("beta", "mmmu_mini"): (55.0, 50.0),
        },
        skip={("beta", "mmlu_mini"): {4}},
    )
    make_run(
        d,
        "r5",
        "2025-02-20T00:00:00Z",
        {
            ("gamma", "mmlu_mini"): (45.0, 44.0),
            ("gamma", "mmmu_mini"): (65.0, 66.0),
            ("gamma", "asr_mini"): (80.0, 79.0),
        },
    )
    return d


@contextmanager
def serve(app: Any, timeout: float = 15.0) -> Iterator[str]:
    """Real uvicorn on a kernel-chosen 127.0.0.1 port in a thread; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:  # bounded readiness wait for server start only
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"uvicorn did not start within {timeout} s")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()


@pytest.fixture
def live_server() -> Callable[[Any], Any]:
    return serve


@pytest.fixture
def run_factory() -> Callable[..., Path]:
    return make_run
