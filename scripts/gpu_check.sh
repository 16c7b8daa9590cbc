#!/usr/bin/env bash
# The one command a user with CUDA runs to check the GPU paths this CPU-only CI cannot: vLLM and SGLang replicas in
# Ray Serve at tensor parallel 1 and 2 (one node-pinned bundle, the engine's server process sees its GPUs), each
# answering an image and an audio request through the pool's HTTP path, plus the engines' plain CUDA tests.
#
# Usage: scripts/gpu_check.sh [extra pytest args]
#   Needs: a CUDA GPU (2 for the TP-2 cases, skipped otherwise), network access to the HF hub, and the engines:
#     pip install -e '.[vllm,dev]'      (vLLM, CUDA build)
#     pip install -e '.[sglang,dev]'    (SGLang; a separate venv if its torch pin clashes with vLLM's)
#   A missing engine is skipped by name, never failed.
#   OMNIEVAL_GPU_IMAGE_MODEL (default Qwen/Qwen2.5-VL-3B-Instruct), OMNIEVAL_GPU_AUDIO_MODEL (default
#   Qwen/Qwen2-Audio-7B-Instruct): hub repos to test with.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY="${PYTHON:-python}"
"$PY" - <<'PYEOF'
import sys
try:
    import torch
except ImportError:
    sys.exit("gpu_check: torch is not installed; pip install -e '.[vllm,dev]' first")
if not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA device visible (nvidia-smi, CUDA_VISIBLE_DEVICES)")
print(f"gpu_check: {torch.cuda.device_count()} CUDA device(s): {torch.cuda.get_device_name(0)}")
PYEOF
exec "$PY" -m pytest tests/serving/test_serving_gpu_engines.py -m gpu -v -rs -W ignore::DeprecationWarning "$@"
