"""``omnieval bench lmms``: one image lmms-eval task, ``lmms_eval`` alone vs the same task in an ``omnieval run``.

The counterpart of ``bench lmeval`` for the image framework. Both whole processes are timed from spawn to exit
against one INSTANT server (it answers at once, so what is measured is each tool's own overhead: imports, task
loading, image encoding, dispatch, scoring, Ray and the pool). Both run the same task file: the shipped
``tiny_shapes`` task (its prompt, ``doc_to_visual`` and metric) over N numbered rows of its images, lmms-eval in
its own venv with its own ``openai`` chat client at ``num_concurrent`` for the baseline, and that venv as
``frameworks.lmms.python`` for omnieval. Repeats alternate the order; the summary is the ratio of medians with the
per-repeat range.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from omnieval.perf._alone import compare, ratio_line
from omnieval.perf._alone import plot as _plot
from omnieval.perf._common import median

TASK = "shapes_bench"
DEFAULT_PYTHON = "~/.cache/omnieval/venv-lmms-0.7.3/bin/python"
"""The lmms venv ``scripts/make_framework_venv.sh lmms`` builds."""


def _write_task(tmp: Path, rows: int) -> Path:
    """``rows`` distinct rows (the shipped tiny_shapes rows, numbered, their images by absolute path) and tiny_shapes'
    own YAML and hooks over them."""
    from omnieval.adapters._lmms import TASK_DIR

    src = TASK_DIR / "tiny_shapes"
    base = [json.loads(line) for line in (src / "test.jsonl").read_text().splitlines() if line.strip()]
    tasks = tmp / "tasks"
    tasks.mkdir()
    data = tasks / "rows.jsonl"
    with data.open("w") as f:
        for k in range(rows):
            r = dict(base[k % len(base)])
            r.update(id=f"shape_{k}", image=str(src / r["image"]), question=f"{r['question']} (item {k})")
            f.write(json.dumps(r) + "\n")
    yml = (src / "tiny_shapes.yaml").read_text()
    if "task: tiny_shapes" not in yml or "test.jsonl" not in yml:
        raise RuntimeError(f"{src / 'tiny_shapes.yaml'} changed: bench lmms rewrites its task name and data file")
    (tasks / f"{TASK}.yaml").write_text(yml.replace("task: tiny_shapes", f"task: {TASK}").replace("test.jsonl", str(data)))
    shutil.copy(src / "utils.py", tasks / "utils.py")
    return tasks


def bench_lmms(rows: int = 1000, repeats: int = 3, num_concurrent: int = 32,
               python: str | None = None) -> dict[str, Any]:  # fmt: skip
    py = Path(python or DEFAULT_PYTHON).expanduser()
    if not py.is_file():
        raise SystemExit(f"bench lmms: no lmms-eval interpreter at {py}; build it with "
                         "bash scripts/make_framework_venv.sh lmms, or pass --python")  # fmt: skip

    def lmms_cmd(base: str) -> list[str]:
        return [str(py), "-m", "lmms_eval", "--model", "openai", "--model_args",
                f"model_version=instant,base_url={base},api_key=EMPTY,num_concurrent={num_concurrent}",
                "--tasks", TASK, "--include_path", str(tasks)]  # fmt: skip

    with tempfile.TemporaryDirectory(prefix="omnieval-bench-lmms-") as d:
        tmp = Path(d)
        tasks = _write_task(tmp, rows)
        res = compare("lmms_eval", "lmms", TASK, tasks, tmp, lmms_cmd, fw_env={"python": str(py)}, repeats=repeats)
    return {"task": TASK, "rows": rows, "repeats": repeats, "num_concurrent": num_concurrent, "python": str(py), **res}


def report(res: dict[str, Any]) -> list[str]:
    s = res["summary"]
    timings = [r["omnieval_manifest"]["timings"] for r in res["runs"]]
    total = median([t["total_s"] for t in timings])
    inference = median([t["inference_s"] for t in timings])
    return [
        f"lmms-eval task {res['task']} ({res['rows']} image requests, INSTANT server), whole process, median of "
        f"{res['repeats']}:",
        f"  lmms_eval alone (its openai chat client, num_concurrent {res['num_concurrent']}): {s['lmms_eval_s']:.1f} s",
        f"  omnieval run (same task through the pool, lmms-eval in a process of its venv): {s['omnieval_s']:.1f} s; "
        f"its run {total:.1f} s, of which the inference phase {inference:.1f} s",
        ratio_line("lmms_eval", res),
    ]


plot = _plot("lmms_eval", "{task}: {rows} image requests, INSTANT server")
