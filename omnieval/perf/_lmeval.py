"""``omnieval bench lmeval``: one generative lm-eval task, ``lm_eval`` alone vs the same task in an ``omnieval run``.

Both whole processes are timed from spawn to exit against one INSTANT server (it answers at once, so what is measured
is each tool's own overhead: imports, task indexing, request building, dispatch, scoring, Ray and the pool). Both run
the same task file (lm-eval's bundled gsm8k prompt, filters and metric on N local rows), with lm-eval's own
``local-completions`` client at ``num_concurrent`` for the baseline. Repeats alternate the order; the summary is the
ratio of medians with the per-repeat range (``_alone``).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from omnieval.perf._alone import compare, ratio_line
from omnieval.perf._alone import plot as _plot

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "lmeval" / "gsm8k_format_asdiv.jsonl"
TASK = "gsm8k_bench"


def _write_task(tmp: Path, rows: int) -> Path:
    """``rows`` distinct GSM8K-schema rows (the shipped ASDiv rows, numbered) and a task file that includes lm-eval's
    bundled gsm8k YAML over them."""
    from omnieval.adapters._lmeval_tasks import _tasks_root

    base = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    data = tmp / "rows.jsonl"
    with data.open("w") as f:
        for k in range(rows):
            r = base[k % len(base)]
            f.write(json.dumps({"question": f"{r['question']} (item {k})", "answer": r["answer"]}) + "\n")
    tasks = tmp / "tasks"
    tasks.mkdir()
    (tasks / f"{TASK}.yaml").write_text(
        f"include: {_tasks_root() / 'gsm8k' / 'gsm8k.yaml'}\ntask: {TASK}\ntag: []\ndataset_path: json\n"
        f"dataset_name: null\ndataset_kwargs:\n  data_files: {{test: {data}}}\ntraining_split: null\n"
        "fewshot_split: null\nnum_fewshot: 0\n"
    )
    return tasks


def bench_lmeval(rows: int = 4000, repeats: int = 3, num_concurrent: int = 64) -> dict[str, Any]:
    def lm_cmd(base: str) -> list[str]:
        return [sys.executable, "-m", "lm_eval", "run", "--model", "local-completions", "--model_args",
                f"model=instant,base_url={base}/completions,num_concurrent={num_concurrent},tokenizer_backend=None",
                "--tasks", TASK, "--include_path", str(tasks)]  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="omnieval-bench-lmeval-") as d:
        tmp = Path(d)
        tasks = _write_task(tmp, rows)
        res = compare("lm_eval", "lmeval", TASK, tasks, tmp, lm_cmd, fw_env={}, repeats=repeats)
    return {"task": TASK, "rows": rows, "repeats": repeats, "num_concurrent": num_concurrent, **res}


def report(res: dict[str, Any]) -> list[str]:
    s = res["summary"]
    return [
        f"lm-eval task {res['task']} ({res['rows']} requests, INSTANT server), whole process, median of {res['repeats']}:",
        f"  lm_eval alone (local-completions, num_concurrent {res['num_concurrent']}): {s['lm_eval_s']:.1f} s",
        f"  omnieval run (same task through the pool): {s['omnieval_s']:.1f} s",
        ratio_line("lm_eval", res),
    ]


plot = _plot("lm_eval", "{task}: {rows} requests, INSTANT server")
