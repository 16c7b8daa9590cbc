"""Build the verifier's labelled set, ``omnieval/verifier/data/labelled.jsonl``, from stored inputs only.

    .venv/bin/python scripts/make_verifier_set.py                          # rewrite labelled.jsonl
    .venv/bin/python scripts/make_verifier_set.py --check                  # exit 1 if the committed file differs
    .venv/bin/python scripts/make_verifier_set.py --training-pool 2000 --out /tmp/pool.jsonl [--seed 0]

Three kinds of rows (how each was made and labelled: ``omnieval/verifier/data/README.md``):

* ``labelled_v1.jsonl``: the first 59 hand-labelled real predictions, kept with their ids and labels;
* ``real_records.jsonl`` + ``real_labels.jsonl``: further real predictions of the shipped engines (raw records saved
  from ``omnieval run``) with hand labels and notes; a record without a label is left out;
* constructed variants of benchmark references: deterministic transformations whose label is known by construction
  (``TRANSFORMS``), seeded per question.

Every row gets its split from a hash of its ``group`` (the question's identity), so one question never sits in both
splits, and ``rule_verdict``: the benchmark's own rule-based metric applied to the prediction. The build adds
constructed rows of the under-represented label, per split, until each split is balanced.

``training_pool(n, seed)`` makes more constructed rows for fine-tuning a judge, only from train-split questions.
Nothing heavy is imported at module top: the lead's training script loads this file by path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "omnieval" / "verifier" / "data"
OUT = DATA / "labelled.jsonl"
V1 = DATA / "labelled_v1.jsonl"
REAL_RECORDS = DATA / "real_records.jsonl"
REAL_LABELS = DATA / "real_labels.jsonl"
CUSTOM_SUITE = ROOT / "examples" / "custom_benchmark.yaml"
OMNIASSIST = ROOT / "omnieval" / "benchmarks" / "data" / "omniassist_sample" / "annotations.jsonl"

SEED = 20261203
HELDOUT_PERCENT = 40
"""A group is heldout when ``sha256(group) mod 100 < HELDOUT_PERCENT``."""
CHRF_THRESHOLD = 0.5
"""st rule verdict: sentence chrF (sacrebleu, 0-1) of the prediction against the reference at least this."""
TASK_TYPES = ("mc", "math", "open_qa", "short_answer", "open_answer", "asr", "st")
ROW_KEYS = ("id", "task_type", "modality", "benchmark", "source", "group", "question", "reference", "prediction",
            "label", "note", "split", "rule_verdict")  # fmt: skip
VARIANTS_PER_GROUP = {"asr": 4, "st": 4}
"""Constructed rows per question in the shipped set (default 1): the audio benchmarks have only 11 questions."""


def split_of(group: str) -> str:
    h = int(hashlib.sha256(group.encode()).hexdigest(), 16) % 100
    return "heldout" if h < HELDOUT_PERCENT else "train"


# --------------------------------------------------------------------------------------------------- questions


class Question:
    """One benchmark question the constructed rows are made from (a plain class, not a dataclass, so the module
    also loads by path through importlib without being registered in ``sys.modules``)."""

    def __init__(self, benchmark: str, index: int, task_type: str, modality: str, question: str, reference: str,
                 label: Any, record: Any = None, extra: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.benchmark, self.index, self.task_type, self.modality = benchmark, index, task_type, modality
        self.question, self.reference = question, reference
        self.label = label
        """The benchmark's raw label (letter, number string, alias list, transcript)."""
        self.record = record
        """The benchmark Record (mc needs its options for the letter extractor)."""
        self.extra = extra or {}

    @property
    def group(self) -> str:
        return f"{self.benchmark}/{self.index}"


def _records(spec: Any, prompt: str) -> list[Any]:
    from omnieval import GenerationOptions

    return spec.records(model="verifier-set", generation=GenerationOptions(), prompt=prompt)


@lru_cache(maxsize=1)
def questions() -> tuple[Question, ...]:
    """Every question the constructed rows are made from, in a fixed order."""
    from omnieval import load_suite
    from omnieval.benchmarks import custom_spec, get_benchmark
    from omnieval.verifier._prompt import question_text, reference_text

    out: list[Question] = []
    rng = random.Random(SEED)

    def add(spec: Any, task_type: str, extra_fn: Callable[[Any], dict[str, Any]] | None = None) -> None:
        native, uniform = _records(spec, "native"), _records(spec, "uniform")
        for rn, ru in zip(native, uniform, strict=True):
            rec = rn if rng.random() < 0.5 else ru  # both prompt styles, chosen per question
            out.append(Question(spec.name, rec.index, task_type, spec.modality, question_text(rec),
                                reference_text(rec.label, rec.options), rec.label, rec,
                                extra_fn(rec) if extra_fn else {}))  # fmt: skip

    add(get_benchmark("mmlu_tiny"), "mc")
    add(get_benchmark("asdiv_tiny"), "math", lambda r: {"answer_text": r.meta.get("answer_text")})
    add(get_benchmark("openqa_tiny"), "open_qa")
    add(get_benchmark("asr_tiny"), "asr")
    add(get_benchmark("st_tiny"), "st", lambda r: {"source_text": r.meta.get("source_text")})
    suite = load_suite(CUSTOM_SUITE)
    specs = {b.name: custom_spec(b) for b in suite.benchmarks}
    add(specs["openbookqa"], "mc")
    add(specs["easyvqa"], "short_answer")
    # OpenBookQA as an open question: the question without its options, the correct option's text as the answer and
    # the other options as wrong answers; same group as the mc form (one question, one split).
    from omnieval.benchmarks._spec import UNIFORM

    for rec in _records(specs["openbookqa"], "native"):
        letters = "ABCD"
        k = letters.index(rec.label)
        stem = rec.messages[-1].text_value().split("\n")[0].removeprefix("Question: ")
        out.append(Question("openbookqa", rec.index, "open_answer", "text", UNIFORM + stem, rec.options[k],
                            rec.options[k], None,
                            {"wrong": [o for i, o in enumerate(rec.options) if i != k]}))  # fmt: skip
    # OmniAssistBench sample turns with a spoken/text query and a spoken answer (not [KEEP QUIET]).
    n = 0
    for line in OMNIASSIST.read_text(encoding="utf-8").splitlines():
        inter = json.loads(line)
        for k, turn in enumerate(inter["turns"]):
            if not turn["query"] or turn["answer"] == "[KEEP QUIET]":
                continue
            q = (f"{inter['prior']}\n" if inter["prior"] else "") + turn["query"]
            out.append(Question("omniassist", n, "open_answer", "video", q, turn["answer"], turn["answer"], None,
                                {"turn": f"{inter['id']}/t{k}", "key_points": turn["key_points"]}))  # fmt: skip
            n += 1
    return tuple(out)


# --------------------------------------------------------------------------------------------------- rule verdict


def rule_verdict(task_type: str, prediction: str, label: Any, record: Any = None) -> int:
    """The benchmark's own rule-based metric on ``prediction``: exact match after the task type's postprocessor
    (mc, math, open_qa; short_answer and open_answer are scored as open_qa), WER == 0 for asr, chrF >= the
    threshold for st."""
    from omnieval.metrics import make_metric
    from omnieval.postprocess import get_postprocessor

    if task_type == "asr":
        return int(make_metric("wer").score(prediction, label) == 0.0)
    if task_type == "st":
        pp = get_postprocessor("strip")(prediction, record)
        return int(make_metric("chrf").score(pp, label) >= CHRF_THRESHOLD)
    name = {"mc": "mc_letter", "math": "number"}.get(task_type, "first_line")
    pp = get_postprocessor(name)(prediction, record)
    return int(make_metric("exact_match").score(pp, label) == 1.0)


# --------------------------------------------------------------------------------------------------- transforms

NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                "sixteen seventeen eighteen nineteen twenty").split()  # fmt: skip
STOP = set("""a an the and or but of to in on at for from with by is are was were be been am i you he she it we they
me my your our their this that these those there here what which who how not no yes do did does so then though now
well oh okay also all much at least can say down call know up out too just le la les un une des de du et ou mais je
tu il elle nous vous ils moi toi ce ça que qui ne pas en dans au aux sur par pour est sont c'est j'ai ici alors bien
eh oh tout tant""".split())  # fmt: skip
REFUSALS = (
    "I'm sorry, but I can't answer that question.",
    "I don't know.",
    "I cannot determine the answer from the information given.",
    "As an AI language model, I am unable to help with this request.",
)
REFUSALS_MEDIA = ("I'm sorry, I can't process the audio.", "I can't tell from the video.", "(no answer)")

# A transform takes (question, rng) and returns (prediction, note) or None when it does not apply to this question.
Transform = Callable[["Question", random.Random], "tuple[str, str] | None"]
TRANSFORMS: dict[str, dict[int, dict[str, Transform]]] = {t: {0: {}, 1: {}} for t in TASK_TYPES}


def transform(task_types: str, label: int, name: str) -> Callable[[Transform], Transform]:
    def deco(fn: Transform) -> Transform:
        for t in task_types.split():
            TRANSFORMS[t][label][name] = fn
        return fn

    return deco


def _letter_text(q: Question, letter: str) -> str:
    return q.record.options["ABCDEFGH".index(letter)]


def _other_letter(q: Question, rng: random.Random) -> str:
    return rng.choice([c for c in "ABCDEFGH"[: len(q.record.options)] if c != q.label])


# mc ---------------------------------------------------------------------------------------------------------------
@transform("mc", 1, "letter_only")
def _(q, rng):
    return rng.choice([q.label, f"{q.label}.", f"({q.label})", f"**{q.label}**"]), "the right letter alone"


@transform("mc", 1, "letter_and_text")
def _(q, rng):
    return f"{q.label}. {_letter_text(q, q.label)}", "the right letter with its option text"


@transform("mc", 1, "text_only")
def _(q, rng):
    t = _letter_text(q, q.label)
    return rng.choice([t, f"The answer is {t}.", f"{t[:1].upper()}{t[1:]}."]), "the right option's text, no letter"


@transform("mc", 1, "answer_is")
def _(q, rng):
    return rng.choice(["The answer is {}.", "The correct answer is ({}).", "Answer: {}"]).format(q.label), (
        "the right letter in a sentence"
    )


@transform("mc", 1, "explain_then_answer")
def _(q, rng):
    wrong = _other_letter(q, rng)
    return (f"Let's look at each option. Option {wrong} ({_letter_text(q, wrong)}) does not fit the question. "
            f"Therefore, the correct answer is {q.label}. {_letter_text(q, q.label)}."), (
        "rules out a wrong option, then commits to the right one"
    )  # fmt: skip


@transform("mc", 0, "other_option")
def _(q, rng):
    w = _other_letter(q, rng)
    return rng.choice([w, f"{w}. {_letter_text(q, w)}", f"The answer is {w}."]), "a wrong option"


@transform("mc", 0, "other_option_text")
def _(q, rng):
    return _letter_text(q, _other_letter(q, rng)), "a wrong option's text without its letter"


@transform("mc", 0, "two_answers")
def _(q, rng):
    w = _other_letter(q, rng)
    a, b = rng.sample([q.label, w], 2)
    return f"{a}. {_letter_text(q, a)}\n{b}. {_letter_text(q, b)}", "two different options, no single answer"


@transform("mc", 0, "list_all_options")
def _(q, rng):
    opts = "\n".join(f"{c}. {o}" for c, o in zip("ABCDEFGH", q.record.options, strict=False))
    return f"The options are:\n{opts}", "lists every option without choosing"


# math -------------------------------------------------------------------------------------------------------------
def _num(q: Question) -> int | None:
    try:
        return int(q.label)
    except ValueError:
        return None


@transform("math", 1, "bare_number")
def _(q, rng):
    return rng.choice([q.label, f"{q.label}.", f"{q.label}.0"]), "the number alone"


@transform("math", 1, "number_with_unit")
def _(q, rng):
    at = q.extra.get("answer_text")
    return (f"The answer is {at}.", "the number with the unit of the reference text") if at else None


@transform("math", 1, "number_in_words")
def _(q, rng):
    n = _num(q)
    if n is None or not 0 <= n <= 20:
        return None
    return rng.choice([NUMBER_WORDS[n], f"The answer is {NUMBER_WORDS[n]}."]), "the number in words"


@transform("math", 1, "latex")
def _(q, rng):
    return rng.choice([f"\\( x = {q.label} \\)", f"$\\boxed{{{q.label}}}$", f"So $x = {q.label}$."]), (
        "the number in LaTeX"
    )


@transform("math", 1, "explain_then_answer")
def _(q, rng):
    return f"We read the problem and work it out step by step.\nThe answer is {q.label}.", (
        "working text, then the right final number"
    )


@transform("math", 0, "off_by_one")
def _(q, rng):
    n = _num(q)
    return None if n is None else (f"The answer is {n + rng.choice([-1, 1])}.", "the number off by one")


@transform("math", 0, "swapped_digits")
def _(q, rng):
    s = q.label
    if not s.isdigit() or len(s) < 2 or s[-1] == s[-2]:
        return None
    return s[:-2] + s[-1] + s[-2], "the last two digits swapped"


_INSTRUCTION = re.compile(r"please answer|answer the question|^answer:|solve it step|transcribe|translate", re.I)


def _question_line(q: Question) -> str:
    """The longest line of the prompt that is not an instruction: the question itself."""
    lines = [ln.strip() for ln in q.question.split("\n") if ln.strip() and not _INSTRUCTION.search(ln)]
    return max(lines, key=len) if lines else q.question.strip()


@transform("math", 0, "restate_question")
def _(q, rng):
    return _question_line(q), "restates the problem, no answer"


@transform("math", 0, "two_answers")
def _(q, rng):
    n = _num(q)
    if n is None:
        return None
    a, b = rng.sample([n, n + rng.choice([-2, 2, 10])], 2)
    return f"The answer is {a}. Wait, no, the answer is {b} or {a}.", "two different numbers, no single answer"


@transform("math", 0, "truncated")
def _(q, rng):
    return rng.choice(["Let's solve this step by step.\nFirst, we need to find",
                       "To find the answer, we first look at what the problem gives us. Then"]), (
        "cut off before any answer"
    )  # fmt: skip


# open_qa / short_answer ---------------------------------------------------------------------------------------------
def _alias(q: Question, rng: random.Random) -> str:
    return rng.choice(q.label) if isinstance(q.label, list) else str(q.label)


def _aliases(q: Question) -> list[str]:
    return [str(a) for a in q.label] if isinstance(q.label, list) else [str(q.label)]


EASYVQA_CLASSES = (
    {"red", "green", "blue", "yellow", "black", "gray", "teal", "brown"},
    {"circle", "rectangle", "triangle"},
    {"yes", "no"},
)


def _distractor(q: Question, rng: random.Random) -> str | None:
    """A wrong answer of the same kind: another easy-VQA answer of the same class, another NQ question's alias."""
    if q.benchmark == "easyvqa":
        cls = next((c for c in EASYVQA_CLASSES if q.label in c), None)
        return rng.choice(sorted(cls - {q.label})) if cls else None
    mine = {a.lower() for a in _aliases(q)}
    pool = [a for o in questions() if o.benchmark == q.benchmark and o.index != q.index for a in _aliases(o)]
    # Not one that contains or is contained in a reference alias ("53" for "53-member main roster" would be right).
    pool = [a for a in pool if not any(a.lower() in m or m in a.lower() for m in mine)]
    return rng.choice(pool) if pool else None


@transform("open_qa short_answer", 1, "verbatim")
def _(q, rng):
    a = _alias(q, rng)
    return rng.choice([a, a.lower(), f"{a}."]), "a reference answer verbatim (case/period aside)"


@transform("open_qa short_answer", 1, "answer_sentence")
def _(q, rng):
    a = _alias(q, rng)
    return rng.choice(["The answer is {}.", "I believe it is {}.", "**{}**", "It's {}."]).format(a), (
        "a reference answer wrapped in a sentence"
    )


@transform("open_qa short_answer", 1, "answer_then_explanation")
def _(q, rng):
    return f"{_alias(q, rng)}\n\nThis is the answer to the question asked.", "the answer, then a vacuous comment"


@transform("open_qa short_answer", 0, "distractor")
def _(q, rng):
    d = _distractor(q, rng)
    return None if d is None else (rng.choice([d, f"The answer is {d}."]), "a wrong answer of the same kind")


@transform("open_qa short_answer", 0, "restate_question")
def _(q, rng):
    return _question_line(q), "repeats the question, no answer"


@transform("open_qa short_answer", 0, "refusal")
def _(q, rng):
    return rng.choice(REFUSALS + (REFUSALS_MEDIA[:1] if q.modality != "text" else ())), "refuses / no answer"


@transform("open_qa short_answer", 0, "two_answers")
def _(q, rng):
    d = _distractor(q, rng)
    if d is None:
        return None
    a, b = rng.sample([_alias(q, rng), d], 2)
    return f"It is either {a} or {b}.", "hedges between the right and a wrong answer"


@transform("open_qa short_answer", 0, "truncated")
def _(q, rng):
    return rng.choice(["The answer is", "Well, let me think about this. The", "Answer:"]), "cut off before answering"


# open_answer ---------------------------------------------------------------------------------------------------------
def _other_answer(q: Question, rng: random.Random) -> str:
    if q.extra.get("wrong"):
        return rng.choice(q.extra["wrong"])
    pool = [o.reference for o in questions() if o.benchmark == q.benchmark and o.task_type == q.task_type
            and o.index != q.index and o.reference.lower() != q.reference.lower()]  # fmt: skip
    return rng.choice(pool)


@transform("open_answer", 1, "verbatim")
def _(q, rng):
    return q.reference, "the reference answer verbatim"


@transform("open_answer", 1, "answer_sentence")
def _(q, rng):
    return rng.choice(["Sure! {}", "The answer: {}", "{}"]).format(q.reference.rstrip(".") + "."), (
        "the reference answer with a lead-in and a final period"
    )


@transform("open_answer", 1, "lowercase_no_punct")
def _(q, rng):
    return re.sub(r"[.!?,;:]", "", q.reference).lower(), "the reference lowercased, punctuation dropped"


@transform("open_answer", 0, "other_answer")
def _(q, rng):
    return _other_answer(q, rng), "a different answer (another option, or another turn's answer)"


@transform("open_answer", 0, "refusal")
def _(q, rng):
    return rng.choice(REFUSALS + (REFUSALS_MEDIA[1:] if q.modality != "text" else ())), "refuses / no answer"


@transform("open_answer", 0, "restate_question")
def _(q, rng):
    return _question_line(q), "repeats the question, no answer"


@transform("open_answer", 0, "two_answers")
def _(q, rng):
    a, b = rng.sample([q.reference.rstrip("."), _other_answer(q, rng).rstrip(".")], 2)
    return f"{a}. Or maybe: {b}.", "the right and a wrong answer, no single answer"


# asr / st ----------------------------------------------------------------------------------------------------------
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


def _content_words(text: str) -> list[re.Match[str]]:
    return [m for m in _WORD.finditer(text) if len(m.group()) >= 4 and m.group().lower() not in STOP]


def _vocab(q: Question) -> list[str]:
    mine = {m.group().lower() for m in _content_words(q.reference)}
    words = {m.group() for o in questions() if o.task_type == q.task_type for m in _content_words(o.reference)}
    return sorted(w for w in words if w.lower() not in mine)


def _case_punct(text: str, rng: random.Random) -> str:
    kind = rng.choice(["lower_nopunct", "upper", "punct"])
    if kind == "lower_nopunct":
        return re.sub(r"[^\w\s'’-]", "", text).lower()
    if kind == "upper":
        return text.upper()
    return re.sub(r"[.?!]", lambda m: {".": "!", "?": ".", "!": "."}[m.group()], text).replace(",", "")


_DIGITS_EN = {w: str(i) for i, w in enumerate(NUMBER_WORDS)}
_DIGITS_FR = {w: str(i) for i, w in enumerate("zéro un deux trois quatre cinq six sept huit neuf dix".split())}


@transform("asr st", 1, "case_punctuation")
def _(q, rng):
    return _case_punct(q.reference, rng), "the reference with other casing/punctuation"


@transform("asr st", 1, "numbers_as_digits")
def _(q, rng):
    table = _DIGITS_EN if q.task_type == "asr" else _DIGITS_FR
    words = q.reference.split()
    if sum(w.lower().strip(".,") in table for w in words) < 3:
        return None
    return " ".join(table.get(w.lower().strip(".,"), w) for w in words), "number words written as digits"


@transform("st", 1, "translation_prefix")
def _(q, rng):
    return rng.choice(["Traduction : {}", "Here is the French translation:\n{}", "« {} »"]).format(q.reference), (
        "the reference translation behind a lead-in or in quotes"
    )


@transform("asr", 1, "verbatim")
def _(q, rng):
    return q.reference, "the reference transcript verbatim"


@transform("asr st", 0, "word_substituted")
def _(q, rng):
    words = _content_words(q.reference)
    if not words:
        return None
    m = rng.choice(words)
    new = rng.choice(_vocab(q))
    return q.reference[: m.start()] + new + q.reference[m.end() :], f"content word '{m.group()}' replaced by '{new}'"


@transform("asr st", 0, "word_dropped")
def _(q, rng):
    words = _content_words(q.reference)
    if not words:
        return None
    m = rng.choice(words)
    out = re.sub(r"\s{2,}", " ", q.reference[: m.start()] + q.reference[m.end() :]).strip()
    return out, f"content word '{m.group()}' missing"


@transform("asr st", 0, "truncated")
def _(q, rng):
    words = q.reference.split()
    if len(words) < 3:
        return None
    return " ".join(words[: max(1, len(words) // 2)]), "cut off after half the words"


@transform("asr st", 0, "other_clip")
def _(q, rng):
    return _other_answer(q, rng), "the text of another clip"


@transform("st", 0, "untranslated")
def _(q, rng):
    src = q.extra.get("source_text")
    return (src, "the English source, not translated") if src else None


@transform("asr", 0, "refusal")
def _(q, rng):
    return rng.choice(REFUSALS_MEDIA[:1] + ("[inaudible]", "Transcription:")), "no transcript"


# --------------------------------------------------------------------------------------------------- rows


def constructed_row(q: Question, label: int, name: str, rng: random.Random, tag: str) -> dict[str, Any] | None:
    made = TRANSFORMS[q.task_type][label][name](q, rng)
    if made is None:
        return None
    pred, note = made
    return {
        "id": f"constructed/{q.task_type}/{q.group}/{name}{tag}", "task_type": q.task_type, "modality": q.modality,
        "benchmark": q.benchmark, "source": f"constructed:{name}", "group": q.group, "question": q.question,
        "reference": q.reference, "prediction": pred, "label": label, "note": note, "split": split_of(q.group),
        "rule_verdict": rule_verdict(q.task_type, pred, q.label, q.record),
    }  # fmt: skip


def _candidates(q: Question, label: int, rng: random.Random, tag: str = "") -> list[dict[str, Any]]:
    names = sorted(TRANSFORMS[q.task_type][label])
    rng.shuffle(names)
    rows = [constructed_row(q, label, n, rng, tag) for n in names]
    return [r for r in rows if r is not None and r["prediction"].strip() != ""]


def _question_by_group() -> dict[tuple[str, str], Question]:
    return {(q.group, q.task_type): q for q in questions()}


MODEL_NAMES = {"qwen2.5-coder-0.5b": "qwen-coder-0.5b"}
"""Suite model names -> the names the first 59 rows use for the same model."""


def old_rows() -> list[dict[str, Any]]:
    """The first 59 real rows (labelled_v1.jsonl), in the new schema; their fields are kept."""
    by = _question_by_group()
    rows = []
    for line in V1.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        index = int(r["id"].rsplit("/", 1)[1])
        tt = {"mmlu_tiny": "mc", "asdiv_tiny": "math"}[r["benchmark"]]
        q = by[(f"{r['benchmark']}/{index}", tt)]
        group = q.group
        rows.append({**r, "task_type": tt, "modality": "text", "source": f"real:{r['model']}", "group": group,
                     "split": split_of(group), "rule_verdict": rule_verdict(tt, r["prediction"], q.label, q.record)})  # fmt: skip
    return rows


def real_rows() -> list[dict[str, Any]]:
    """Rows of the saved real records that have a hand label; records without one are skipped."""
    by = _question_by_group()
    labels = {}
    for line in REAL_LABELS.read_text(encoding="utf-8").splitlines():
        if line.strip():
            lab = json.loads(line)
            labels[lab["id"]] = lab
    rows = []
    seen = set()
    for line in REAL_RECORDS.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        lab = labels.get(rec["id"])
        seen.add(rec["id"])
        if lab is None or lab.get("label") is None:
            continue
        q = by[(f"{rec['benchmark']}/{rec['index']}", rec["task_type"])]
        rows.append({
            "id": rec["id"], "task_type": rec["task_type"], "modality": q.modality, "benchmark": rec["benchmark"],
            "source": f"real:{MODEL_NAMES.get(rec['model'], rec['model'])}", "group": q.group, "question": rec["question"],
            "reference": rec["reference"], "prediction": rec["prediction"], "label": int(lab["label"]),
            "note": lab["note"], "split": split_of(q.group),
            "rule_verdict": rule_verdict(rec["task_type"], rec["prediction"], q.label, q.record),
            "prompt": rec["prompt"], "model": MODEL_NAMES.get(rec["model"], rec["model"]),
        })  # fmt: skip
    unknown = sorted(set(labels) - seen)
    if unknown:
        raise ValueError(f"{REAL_LABELS}: labels for ids not in {REAL_RECORDS.name}: {unknown[:5]}")
    return rows


def build() -> list[dict[str, Any]]:
    rows = old_rows() + real_rows()
    rng = random.Random(SEED)
    spare: dict[tuple[str, int], list[dict[str, Any]]] = {("train", 0): [], ("train", 1): [],
                                                           ("heldout", 0): [], ("heldout", 1): []}  # fmt: skip
    for q in questions():
        k = VARIANTS_PER_GROUP.get(q.task_type, 1)
        cands = {y: _candidates(q, y, rng) for y in (0, 1)}
        if k == 1:  # one row per question, its label alternating by a seeded coin
            first = rng.randrange(2)
            rows.append(cands[first].pop(0))
        else:
            for y in (0, 1):
                rows.extend(cands[y][: k // 2])
                del cands[y][: k // 2]
        for y in (0, 1):
            spare[(split_of(q.group), y)].extend(cands[y])
    # Balance each split with spare constructed rows of its minority label, spread over questions.
    for split in ("train", "heldout"):
        pos = sum(r["label"] for r in rows if r["split"] == split)
        neg = sum(1 for r in rows if r["split"] == split) - pos
        need, y = (neg - pos, 1) if neg > pos else (pos - neg, 0)
        pool = spare[(split, y)]
        rng.shuffle(pool)
        if need > len(pool):
            raise RuntimeError(f"cannot balance {split}: {need} more label-{y} rows needed, {len(pool)} available")
        in_split = [r for r in rows if r["split"] == split]
        deficit = {t: sum(1 if r["label"] != y else -1 for r in in_split if r["task_type"] == t) for t in TASK_TYPES}
        used = {g: sum(1 for r in in_split if r["group"] == g) for g in {r["group"] for r in pool}}
        for _ in range(need):  # the task type furthest from balance first, then its least-used question
            pick = min(pool, key=lambda r: (-deficit[r["task_type"]], used[r["group"]]))
            pool.remove(pick)
            rows.append(pick)
            deficit[pick["task_type"]] -= 1
            used[pick["group"]] += 1
    ids = [r["id"] for r in rows]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise RuntimeError(f"duplicate ids: {sorted(dup)[:5]}")
    return rows


def training_pool(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` constructed rows (half label 1, half label 0; ``n`` is rounded down to even), all from questions whose
    group is in the train split, for fine-tuning a judge. Same row schema as the labelled set, ``split: "train"``.

    Rows cycle over (question, label) pairs with the transforms in seeded order; a transform's random choices (which
    wrong option, which word) differ per pass, and duplicate (group, prediction) pairs are dropped. Raises
    ValueError when the train questions cannot yield ``n`` distinct rows.
    """
    rng = random.Random(seed)
    train_qs = [q for q in questions() if split_of(q.group) == "train"]
    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    for y in (1, 0):
        want, got, passes = n // 2, 0, 0
        while got < want:
            passes += 1
            if passes > 50:
                raise ValueError(f"training_pool: only {got} distinct label-{y} rows from the train questions")
            qs = train_qs[:]
            rng.shuffle(qs)
            for q in qs:
                for r in _candidates(q, y, rng, tag=f"/pool{seed}.{passes}"):
                    key = (r["group"], r["task_type"], r["prediction"])
                    if key in seen:
                        continue
                    seen.add(key)
                    out.append(r)
                    got += 1
                    break
                if got >= want:
                    break
    rng.shuffle(out)
    return out


MODEL_TAGS = {"smollm2-135m": "smol", "whisper-tiny-en": "whisper", "qwen2.5-coder-0.5b": "qwen"}
BENCH_TASK = {"mmlu_tiny": "mc", "asdiv_tiny": "math", "openqa_tiny": "open_qa", "asr_tiny": "asr", "st_tiny": "st",
              "openbookqa": "mc", "easyvqa": "short_answer"}  # fmt: skip


def save_records(run_dirs: list[Path], path: Path = REAL_RECORDS) -> int:
    """Append the runs' records to ``path`` as raw rows (question, reference, label, verbatim prediction, the run's
    own metric values); media are not copied. Records already there (same id) and failed ones are skipped."""
    from omnieval import read_records
    from omnieval.verifier._prompt import question_text, reference_text

    have = {json.loads(ln)["id"] for ln in path.read_text(encoding="utf-8").splitlines()} if path.is_file() else set()
    new = []
    for run in run_dirs:
        for rec in read_records(Path(run)):
            if rec.error is not None or rec.prediction is None:
                continue
            bench = rec.benchmark.split("@")[0]
            prompt = rec.meta.get("prompt", "native")
            rid = f"{MODEL_TAGS.get(rec.model, rec.model)}-{prompt}/{bench}/{rec.index}"
            if rid in have:
                continue
            have.add(rid)
            new.append({"id": rid, "run": Path(run).name, "model": rec.model, "benchmark": bench,
                        "task_type": BENCH_TASK[bench], "prompt": prompt, "index": rec.index,
                        "sample_id": rec.sample_id, "question": question_text(rec),
                        "reference": reference_text(rec.label, rec.options), "label": rec.label,
                        "options": rec.options, "prediction": rec.prediction, "metrics": rec.metrics})  # fmt: skip
    with path.open("a", encoding="utf-8") as f:
        f.write(dumps(new))
    return len(new)


def dumps(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    ap.add_argument("--training-pool", type=int, default=None, metavar="N", help="write N training rows to --out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--save-records",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="append these runs' records to real_records.jsonl (then label them in real_labels.jsonl)",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.save_records:
        print(f"appended {save_records(args.save_records)} records to {REAL_RECORDS}")
        return
    if args.training_pool is not None:
        if args.out is None:
            ap.error("--training-pool needs --out")
        args.out.write_text(dumps(training_pool(args.training_pool, args.seed)), encoding="utf-8")
        return
    text = dumps(build())
    out = args.out or OUT
    if args.check:
        same = out.is_file() and out.read_text(encoding="utf-8") == text
        print(f"{out}: {'up to date' if same else 'DIFFERS from a rebuild'}")
        sys.exit(0 if same else 1)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} rows to {out}")


if __name__ == "__main__":
    main()
