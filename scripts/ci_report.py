"""The end of ``make test``: each CI step's wall time and the 30 slowest tests across every pytest run of it.

Reads ``<report>/steps.tsv`` (written by scripts/ci_test.sh) and ``<report>/durations.jsonl`` (appended by
tests/conftest.py in each pytest process, whatever its venv). Stdlib only: it runs even when a step broke the venv.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def main(report: Path, top: int = 30) -> int:
    steps = [ln.split("\t") for ln in (report / "steps.tsv").read_text().splitlines() if ln.strip()] \
        if (report / "steps.tsv").exists() else []  # fmt: skip
    print("\nCI steps (wall time):")
    total = 0
    for name, secs, rc in steps:
        total += int(secs)
        print(f"  {name:<18} {int(secs) // 60:3d}:{int(secs) % 60:02d}  {'ok' if rc == '0' else 'FAILED (exit ' + rc + ')'}")
    print(f"  {'total':<18} {total // 60:3d}:{total % 60:02d}")
    per_test: dict[tuple[str, str], float] = defaultdict(float)
    path = report / "durations.jsonl"
    for ln in path.read_text().splitlines() if path.exists() else []:
        d = json.loads(ln)
        per_test[(d["step"], d["test"])] += d["seconds"]
    slowest = sorted(per_test.items(), key=lambda kv: -kv[1])[:top]
    if slowest:
        print(f"\nthe {len(slowest)} slowest tests (setup + call + teardown):")
        for (step, test), secs in slowest:
            print(f"  {secs:8.1f} s  [{step}] {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".ci-report")))
