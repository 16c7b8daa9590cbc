"""Build examples/bench/omniassist_clips.jsonl: every OmniAssistBench-sample turn with a spoken or typed query and an
answer as a plain video QA row (question, answer, clip), so `bench federated` has a video benchmark scored by its
metric alone (no judge model in the timed path). Deterministic; the clips stay in the sample's own directory.

    .venv/bin/python scripts/make_bench_samples.py
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "omnieval/benchmarks/data/omniassist_sample/annotations.jsonl"
OUT = ROOT / "examples/bench/omniassist_clips.jsonl"


def main() -> None:
    rows = []
    for line in SRC.read_text().splitlines():
        it = json.loads(line)
        for k, t in enumerate(it["turns"]):
            if t.get("query") and t["answer"] != "[KEEP QUIET]":
                rows.append({"id": f"{it['id']}/t{k}", "question": t["query"], "answer": t["answer"], "video": t["video"]})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{OUT.relative_to(ROOT)}: {len(rows)} rows")


if __name__ == "__main__":
    main()
