"""Generate the tiny EgoMem and OmniAssistBench samples, each in its benchmark's on-disk schema, with real audio/video.

    apt-get install -y espeak-ng ffmpeg
    PYTHONPATH=. .venv/bin/python scripts/make_media_samples.py              # both
    PYTHONPATH=. .venv/bin/python scripts/make_media_samples.py egomem       # or: omniassist

Speech is synthesised with espeak-ng (Mandarin for EgoMem, English for OmniAssistBench); video is drawn with ffmpeg's
lavfi ``color`` source, ``drawbox`` and ``drawtext`` (DejaVu Sans). Single-threaded, bit-exact encoders: reruns give
the same bytes. The content is ours (Apache-2.0); only the layouts follow the EgoMem card / OmniAssistBench paper.
Sizes are kept small on purpose: EgoMem waveforms are 8 kHz with amplitudes on a 1/127 grid (still float32, as the
card requires) so parquet's dictionary encoding shrinks them; OmniAssistBench clips are 128x72 at 4 fps, 8 kbps mp3.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omnieval.benchmarks._spec import DATA_DIR  # noqa: E402
from omnieval.benchmarks.egomem._schema import ARROW_SCHEMA, EgoMemSample  # noqa: E402
from omnieval.benchmarks.omniassist._schema import KEEP_QUIET, SUB_TASK_PARENT, Interaction  # noqa: E402

# The data tables below read better hand-aligned.
# fmt: off
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
EGO_SR, OA_SR = 8000, 8000
FF = ["ffmpeg", "-v", "error", "-y", "-threads", "1"]
EXACT = ["-map_metadata", "-1", "-fflags", "+bitexact", "-flags", "+bitexact"]


def tts(text: str, *, voice: str, speed: int = 230, pitch: int = 50, sr: int = EGO_SR) -> np.ndarray:
    """espeak-ng speech resampled to ``sr``, leading/trailing silence trimmed, float32 in [-1, 1]."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "s.wav"
        subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", str(wav), text], check=True)
        trim = "silenceremove=start_periods=1:start_threshold=-45dB"
        af = f"{trim},areverse,{trim},areverse"
        raw = subprocess.run([*FF, "-i", str(wav), "-af", af, *f"-ar {sr} -ac 1 -f s16le -".split()],
                             check=True, capture_output=True).stdout
    return np.frombuffer(raw, dtype="<i2").astype(np.float32) / 32768.0


def quantise(x: np.ndarray) -> np.ndarray:
    """Round to a 1/63 amplitude grid (7-bit resolution) but keep float32, the card's dtype."""
    return (np.round(np.clip(x, -1.0, 1.0) * 63.0) / 63.0).astype(np.float32)


# ----------------------------------------------------------------------------------------------------------- EgoMem
# (sample meta, [(session meta, profile (person, fact, profile, summary), relation graph, turns)]);
# a turn is (user_txt, bot_txt, speaker, fact_kwd, relation_kwd, names of the support_dict people).
XIAOHONG = ("小红", "女儿", ["下周六过生日", "喜欢草莓"])
ZHANGWEI = ("张伟", "丈夫", ["喜欢钓鱼"])
EGO_DIALOGS: list[tuple[int, list[Any]]] = [
    (0, [
        ("0-0", ("unknown_speaker", "", "", ""), [], [
            ("我叫李明，是厨师。", "李明你好！", "李明", ["李明", "厨师"], [], []),
            ("我女儿下周六生日。", "提前祝她生日快乐！", "李明", [], ["女儿"], []),
        ]),
        ("0-1", ("李明", "李明是厨师。", "中年男性，厨师，有一个女儿。", "李明说女儿小红下周六过生日。"), [XIAOHONG], [
            ("我女儿哪天生日？", "小红下周六生日。", "李明", [], ["女儿", "生日"], ["小红"]),
            ("做什么蛋糕好？", "她爱草莓，做草莓蛋糕吧。", "李明", [], ["小红"], ["小红"]),
        ]),
    ]),
    (1, [
        ("1-0", ("王芳", "王芳喜欢跑步，在准备马拉松。", "三十岁左右的女性，程序员。", "王芳上次说在为马拉松训练。"), [ZHANGWEI], [
            ("周末和老公去哪玩？", "张伟爱钓鱼，去湖边吧。", "王芳", [], ["老公"], ["张伟"]),
        ]),
    ]),
]


def _person(p: tuple[str, str, list[str]]) -> dict[str, Any]:
    return {"person": p[0], "person_fact": list(p[2]), "person_relation": p[1]}


def make_egomem(out: Path) -> None:
    """Both splits as ``data/<split>-00000-of-00001.parquet``; ``with_noise`` differs only in ``user_wav``."""
    shutil.rmtree(out / "data", ignore_errors=True)
    (out / "data").mkdir(parents=True)
    gap, sgap, rng = int(0.15 * EGO_SR), int(0.3 * EGO_SR), np.random.default_rng(0)
    rows: dict[str, list[dict[str, Any]]] = {"original": [], "with_noise": []}
    for meta, sessions in EGO_DIALOGS:
        user, bot, t, records = [np.zeros(gap, np.float32)], [np.zeros(gap, np.float32)], gap, []
        for smeta, (person, fact, profile, summary), graph, turns in sessions:
            start, contents = t, []
            for user_txt, bot_txt, speaker, fact_kwd, rel_kwd, support in turns:
                u = tts(user_txt, voice="cmn", speed=300, pitch=35)
                b = tts(bot_txt, voice="cmn+f3", speed=320, pitch=65)
                user_stamp, bot_stamp = t, t + len(u) + gap
                end_audio = bot_stamp + len(b)
                user += [u, np.zeros(gap + len(b) + gap, np.float32)]
                bot += [np.zeros(len(u) + gap, np.float32), b, np.zeros(gap, np.float32)]
                t = end_audio + gap
                people = {p[0]: p for p in graph}
                contents.append({
                    "bot_stamp": bot_stamp, "bot_stamp_end": bot_stamp + int(0.8 * len(b)),  # text stream ends first
                    "bot_stamp_end_audio": end_audio, "bot_txt": bot_txt, "fact_kwd": fact_kwd,
                    "relation_kwd": rel_kwd, "speaker": speaker,
                    "support_dict": [_person(people[n]) for n in support], "user_stamp": user_stamp,
                    "user_txt": user_txt,
                })
            records.append({
                "dialog_span": [start, t], "dialog_span_in_seconds": [start / EGO_SR, t / EGO_SR],
                "dialog_turn_contents": contents, "meta": smeta,
                "profile_summary": {"person": person, "person_fact": fact, "person_profile": profile,
                                    "person_summary": summary},
                "relation_graph": [_person(p) for p in graph],
            })
            user.append(np.zeros(sgap, np.float32))
            bot.append(np.zeros(sgap, np.float32))
            t += sgap
        uw, bw = np.concatenate(user), np.concatenate(bot)
        noisy, rms = uw.copy(), float(np.sqrt(np.mean(uw[uw != 0] ** 2)))
        for c in (c for r in records for c in r["dialog_turn_contents"]):  # white noise, 20 dB SNR, over each
            a, b = c["user_stamp"], c["bot_stamp"]  # question window: the only user audio a record uses
            noisy[a:b] += rng.standard_normal(b - a).astype(np.float32) * rms * 10 ** (-20 / 20)
        EgoMemSample.model_validate({"meta": meta, "sampling_rate": EGO_SR, "dialog_records": records})
        for split, wav in (("original", uw), ("with_noise", noisy)):
            rows[split].append({"meta": meta, "user_wav": quantise(wav), "bot_wav": quantise(bw),
                                "sampling_rate": EGO_SR, "dialog_records": records})
    for split, rs in rows.items():
        table = pa.table({f.name: pa.array([r[f.name] for r in rs], type=f.type) for f in ARROW_SCHEMA},
                         schema=ARROW_SCHEMA)
        pq.write_table(table, out / "data" / f"{split}-00000-of-00001.parquet", compression="zstd",
                       compression_level=19)


# ------------------------------------------------------------------------------------------------- OmniAssistBench
def T(text: str, x: int | str, y: int | str, size: int = 12, color: str = "white",
      on: tuple[float, float] | None = None) -> str:
    """drawtext element; texts avoid ':' ',' and quotes so no escaping is needed."""
    en = f":enable='between(t,{on[0]},{on[1]})'" if on else ""
    return f"drawtext=fontfile={FONT}:expansion=none:text='{text}':x={x}:y={y}:fontsize={size}:fontcolor={color}{en}"


def B(x: int, y: int, w: int, h: int, color: str, on: tuple[float, float] | None = None) -> str:
    en = f":enable='between(t,{on[0]},{on[1]})'" if on else ""
    return f"drawbox=x={x}:y={y}:w={w}:h={h}:color={color}:t=fill{en}"


def turn(bg: str, els: list[str], answer: str, query: str | None = None, src: str | None = None,
         say: str | None = None, kp: tuple[str, ...] = (), dur: float = 2.0) -> dict[str, Any]:
    """A turn spec: scene (background, elements, seconds), audio (scene speech ``say`` + spoken query), labels."""
    return {"bg": bg, "els": els, "dur": dur, "say": say, "query": query, "src": src, "answer": answer, "kp": list(kp)}


KQ = KEEP_QUIET
C = "(w-text_w)/2"
# (id, sub_task, topic, prior, reference images {name: lines}, turns)
OA: list[tuple[str, str, str, str | None, dict[str, list[str]], list[dict[str, Any]]]] = [
    ("II_000", "II", "movie", "The woman in red is Anna. The man in blue is Ben.", {}, [
        turn("gray", [B(16, 14, 24, 40, "red"), B(88, 14, 24, 40, "blue"), B(86, 56, 28, 3, "yellow"),
                      T("I will drive.", C, 60, 10)], "Ben, the man in blue, said it.", "Who said I will drive?",
             "speech", say="I will drive.", kp=("Ben",))]),
    ("AI_000", "AI", "movie", None, {}, [
        turn("gray", [B(8, 20, 20, 34, "red"), B(54, 20, 20, 34, "green"), B(100, 20, 20, 34, "blue"),
                      T("A", 14, 6), T("B", 60, 6), T("C", 106, 6), B(28, 56, 72, 2, "yellow"),
                      T("A - Pass me the salt.", C, 60, 9)], "Person A is talking to C, the person in blue.",
             "Who is person A talking to?", "speech", say="Pass me the salt.", kp=("C",))]),
    ("CE_000", "CE", "movie", None, {}, [
        turn("black", [T(">_<", C, 8, 28, "orange"), T("Oh great. Just great.", C, 54, 10)],
             "Sarcastic frustration: the words sound positive but the face shows annoyance.",
             "What attitude is the person expressing?", "speech", say="Oh great. Just great.",
             kp=("sarcasm", "frustration or annoyance"))]),
    ("ER_000", "ER", "street", None, {}, [
        turn("gray", [B(4, 30, 18, 18, "green", (0, 0.7)), B(55, 30, 18, 18, "green", (0.7, 1.4)),
                      B(106, 30, 18, 18, "green", (1.4, 2)), B(55, 30, 18, 18, "red", (1.5, 2)),
                      T("HELLO", C, 6, 14, "white", (0.7, 1.4))], "Green.",
             "When the word HELLO appeared, what color was the box passing behind it?", "speech", kp=("green",))]),
    ("AO_000", "AO", "fashion", None, {}, [
        turn("black", [B(0, 0, 128, 72, "red", (0, 0.7)), B(0, 0, 128, 72, "yellow", (0.75, 1.45)),
                       B(0, 0, 128, 72, "blue", (1.5, 2.25))], "Red, then yellow, then blue.",
             "Which colors appeared, in order?", "speech", kp=("red", "yellow", "blue", "in this order"), dur=2.25)]),
    ("DC_000", "DC", "sports", None, {}, [
        turn("black", [B(20, 24, 24, 24, "white", (a, a + 0.2)) for a in (0.25, 0.75, 1.25)]
             + [B(84, 24, 24, 24, "gray", (1.0, 1.2))], "Three times.",
             "How many times did the white square flash?", "speech", kp=("three",))]),
    ("AR_000", "AR", "home", None, {}, [
        turn("gray", [B(16, 30, 26, 26, "red"), B(86, 30, 26, 26, "blue"), T("v", 93, 8, 18, "yellow")],
             "Blue.", "What color is the box the arrow points to?", "speech", kp=("blue",))]),
    ("LR_000", "LR", "street", None, {}, [
        turn("gray", [B(4, 4, 40, 16, "green"), T("OPEN", 8, 6, 11), B(84, 52, 40, 16, "red"), T("EXIT", 90, 54, 11)],
             "It says OPEN.", "What does the sign in the top left corner say?", "speech", kp=("OPEN",))]),
    ("GPF_000", "GPF", "home", None, {}, [
        turn("gray", [T("\u261e", 6, 22, 30, "yellow"), T("?", 8, 4, 16, "yellow"), B(70, 24, 40, 28, "white"),
                      T("MUG", 76, 30, 12, "black")], "That is a mug.",
             "The user points at an object with a questioning gesture (what is this?).", "visual", kp=("mug",)),
        turn("gray", [T("\u261e", 6, 22, 30, "yellow"), T("?", 8, 4, 16, "yellow"), B(70, 24, 46, 28, "orange"),
                      T("KEYS", 75, 30, 12, "black")], "Those are keys.",
             "The user points at another object with the same questioning gesture.", "visual", kp=("keys",))]),
    ("OPF_000", "OPF", "home", None, {}, [
        turn("gray", [B(8, 16, 112, 40, "white"), T("TRANSLATE", C, 20, 12, "black"), T("BONJOUR", C, 36, 12, "black")],
             "Bonjour means hello.", "The user holds up a note that reads TRANSLATE BONJOUR.", "visual", kp=("hello",)),
        turn("gray", [B(8, 16, 112, 40, "white"), T("12 + 7 = ?", C, 28, 14, "black")], "19.",
             "The user holds up a note that reads 12 + 7 = ?", "visual", kp=("19",))]),
    ("CR_000", "CR", "computer", None, {}, [
        turn("white", [T("ffmpeg.org/download", C, 10, 11, "black"), B(0, 58, 128, 14, "navy"),
                       T("Windows 11", 4, 60, 10, "white")],
             "You are on Windows, so get a Windows build: click the Windows logo under Get packages, download a build "
             "such as the gyan.dev zip, unzip it and add its bin folder to PATH.",
             "How can I download FFmpeg for this computer?", "speech",
             kp=("tailored to Windows only", "download a Windows build", "unzip and add bin to PATH"), dur=2.5)]),
    ("SER_000", "SER", "street", None, {}, [
        turn("gray", [B(10, 36, 30, 14, "silver"), B(80, 36, 30, 14, "silver")], KQ,
             "When the next taxi comes, tell me its license plate.", "speech", dur=2.5),
        turn("gray", [B(40, 36, 36, 16, "silver"), T("CAR", 46, 38, 10, "black")], KQ),
        turn("gray", [B(36, 30, 56, 24, "yellow"), T("TAXI", C, 32, 10, "black"), T("AB 123", C, 42, 10, "black")],
             "The taxi's license plate is AB 123.", kp=("AB 123",))]),
    ("MER_000", "MER", "lecture", None, {}, [
        turn("white", [T("INTRO", C, 28, 14, "black")], KQ,
             "Whenever the professor flips to a new slide, tell me its title.", "speech", dur=2.5),
        turn("white", [T("METHODS", C, 28, 14, "black")], "New slide: Methods.", kp=("Methods",)),
        turn("white", [T("METHODS", C, 28, 14, "black"), B(20, 50, 88, 3, "gray")], KQ),
        turn("white", [T("RESULTS", C, 28, 14, "black")], "New slide: Results.", kp=("Results",))]),
    ("ST_000", "ST", "cooking", None, {"recipe": ["OMELETTE", "1 Crack eggs", "2 Whisk", "3 Pour in pan", "4 Flip"]}, [
        turn("black", [B(40, 30, 48, 26, "white"), T("EGGS CRACKED", C, 8, 10)], "Next, whisk the eggs.",
             "I want to follow this recipe exactly. What should I do next?", "speech", kp=("whisk",), dur=2.5),
        turn("black", [B(40, 30, 48, 26, "yellow"), T("WHISKING", C, 8, 10)],
             "Keep whisking until smooth, then pour the eggs into the pan.", "What now?", "speech",
             kp=("finish whisking", "then pour into the pan")),
        turn("black", [B(30, 34, 68, 20, "gray"), B(44, 38, 40, 12, "yellow"), T("IN THE PAN", C, 8, 10)],
             "Flip the omelette.", "And next?", "speech", kp=("flip",))]),
    ("CT_000", "CT", "shopping", None, {"list": ["SHOPPING LIST", "milk", "bread", "apples"]}, [
        turn("gray", [B(30, 24, 68, 34, "white"), T("BREAD", C, 34, 12, "black")], "Milk and apples.",
             "This is my shopping list. Which items have I not bought yet?", "speech", kp=("milk", "apples"), dur=2.5),
        turn("gray", [B(30, 24, 68, 34, "white"), T("APPLES", C, 34, 12, "black")], "Only milk.",
             "What is still missing?", "speech", kp=("milk",)),
        turn("gray", [B(30, 24, 68, 34, "white"), T("MILK", C, 34, 12, "black")],
             "Yes, you have everything on the list.", "Am I done?", "speech", kp=("everything bought",))]),
    ("MT_000", "MT", "housework", None, {"todo": ["TODO", "Laundry - wash > dry", "Tea - boil > steep"]}, [
        turn("gray", [T("WASHER ON", C, 28, 12)], "The laundry is washing; the tea is not started yet.",
             "Here is my to-do list. What is the progress of everything now?", "speech",
             kp=("laundry washing", "tea not started"), dur=2.5),
        turn("gray", [T("KETTLE ON", C, 28, 12)], "The laundry is still washing and the tea water is boiling; steep "
             "the tea once it boils.", "And now?", "speech", kp=("laundry still washing", "tea water boiling")),
        turn("gray", [T("WASHER DONE", C, 28, 12)], "The wash is done: move the laundry to the dryer, then steep the tea.",
             "What should I do now?", "speech", kp=("move laundry to dryer", "steep the tea"))]),
    ("Ms_000", "Ms", "furniture", "The desk has four legs.", {}, [
        turn("gray", [T("LEG 1 ON", C, 28, 12)], "Three legs are left.", "How many legs are left to attach?",
             "speech", kp=("three",)),
        turn("gray", [T("LEG 4 ON", C, 28, 12)], "Yes, all four legs are attached.", "Am I done with the legs?",
             "speech", kp=("yes", "all four"))]),
    ("Ht_000", "Ht", "plants", None, {}, [
        turn("olive", [T("SOIL DRY", C, 28, 12)], "Yes, the soil is dry, so water it.", "Should I water this plant?",
             "speech", kp=("yes", "soil is dry")),
        turn("olive", [T("WATER IN TRAY", C, 28, 11)], "Yes, water is reaching the tray, you can stop now.",
             "Is that enough water?", "speech", kp=("enough", "stop"))]),
    ("Ba_000", "Ba", "baking", "The cake bakes for 20 minutes at 180 degrees.", {}, [
        turn("maroon", [T("OVEN 180", C, 20, 12), T("TIMER 0 MIN", C, 40, 10)], KQ,
             "Tell me when it is time to take the cake out.", "speech"),
        turn("maroon", [T("OVEN 180", C, 20, 12), T("TIMER 20 MIN", C, 40, 10)],
             "Twenty minutes are up: take the cake out now.", kp=("take the cake out",))]),
]


def _video(path: Path, bg: str, els: list[str], dur: float) -> None:
    vf = ",".join(els) if els else "null"
    subprocess.run([*FF, "-f", "lavfi", "-i", f"color=c={bg}:s=128x72:r=4:d={dur}", "-vf", vf,
                    *"-c:v libx264 -preset veryslow -crf 32 -pix_fmt yuv420p -an".split(), *EXACT,
                    "-movflags", "+faststart", str(path)], check=True)


def _image(path: Path, lines: list[str]) -> None:
    els = [T(s, 6, 6 + 16 * i, 11 if i else 12, "black") for i, s in enumerate(lines)]
    subprocess.run([*FF, "-f", "lavfi", "-i", f"color=c=white:s=128x{12 + 16 * len(lines)}:d=1",
                    "-vf", ",".join(els), "-frames:v", "1", *EXACT, str(path)], check=True)


def _audio(path: Path, t: dict[str, Any], rng: np.random.Generator) -> None:
    parts = [tts(t["say"], voice="en-gb+m3", speed=190, sr=OA_SR)] if t["say"] else []
    if t["src"] == "speech":
        parts.append(tts(t["query"], voice="en-us+f3", speed=210, sr=OA_SR))
    speech = np.concatenate([np.zeros(int(0.1 * OA_SR), np.float32)] + parts) if parts else np.zeros(0, np.float32)
    n = max(len(speech), int(t["dur"] * OA_SR))
    clip = np.zeros(n, np.float32)
    clip[: len(speech)] = speech
    clip += rng.standard_normal(n).astype(np.float32) * 0.003  # room tone
    pcm = (np.clip(clip, -1, 1) * 32767).astype("<i2").tobytes()
    subprocess.run([*FF, *f"-f s16le -ar {OA_SR} -ac 1 -i -".split(),
                    *"-c:a libmp3lame -b:a 8k -id3v2_version 0 -write_xing 0".split(), *EXACT, str(path)],
                   input=pcm, check=True)
    t["dur"] = max(t["dur"], round(n / OA_SR, 2))


def make_omniassist(out: Path) -> None:
    """``annotations.jsonl`` (one interaction per line) and ``media/<id>/`` (t<k>.mp4, t<k>.mp3, reference PNGs)."""
    shutil.rmtree(out / "media", ignore_errors=True)
    rng, lines = np.random.default_rng(0), []
    for iid, sub, topic, prior, refs, turns in OA:
        media = out / "media" / iid
        media.mkdir(parents=True)
        reference = []
        for name, text in refs.items():
            _image(media / f"{name}.png", text)
            reference.append({"type": "image", "path": f"media/{iid}/{name}.png"})
        rows, t0 = [], 0.0
        for k, t in enumerate(turns):
            _audio(media / f"t{k}.mp3", t, rng)  # first: it may lengthen the clip to fit the speech
            _video(media / f"t{k}.mp4", t["bg"], t["els"], t["dur"])
            rows.append({"video": f"media/{iid}/t{k}.mp4", "audio": f"media/{iid}/t{k}.mp3", "query": t["query"],
                         "query_source": t["src"], "answer": t["answer"], "key_points": t["kp"],
                         "span": [round(t0, 2), round(t0 + t["dur"], 2)]})
            t0 += t["dur"]
        tier, major = SUB_TASK_PARENT[sub]
        row = {"id": iid, "tier": tier, "major_task": major, "sub_task": sub, "topic": topic, "prior": prior,
               "reference": reference, "turns": rows}
        Interaction.model_validate(row)
        lines.append(json.dumps(row, ensure_ascii=False))
    (out / "annotations.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(which: list[str]) -> None:
    if "egomem" in which:
        make_egomem(DATA_DIR / "egomem_sample")
    if "omniassist" in which:
        make_omniassist(DATA_DIR / "omniassist_sample")
    for d in ("egomem_sample", "omniassist_sample"):
        files = [p for p in (DATA_DIR / d).rglob("*") if p.is_file()]
        print(f"{d}: {len(files)} files, {sum(p.stat().st_size for p in files) / 1024:.1f} KiB")


if __name__ == "__main__":
    main(sys.argv[1:] or ["egomem", "omniassist"])
