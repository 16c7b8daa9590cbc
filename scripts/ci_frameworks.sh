#!/usr/bin/env bash
# Run the lmms-eval and VLMEvalKit adapter tests, each inside its framework's own venv, then the two-environment suite
# test (lm-eval in the main venv + lmms-eval in its venv) from the main venv.
#
# Why separate venvs: lmms-eval and ms-vlmeval each pull CUDA torch 2.14.1 + torchvision (~7 GB, they run on CPU) and
# pin filelock/transformers; the main venv stays light. scripts/make_framework_venv.sh builds each venv once under
# $OMNIEVAL_CACHE/venv-<framework>-<version> (a .complete stamp marks a finished install) and links the main venv's
# Ray and omnieval into it, so no second Ray is installed.
#
# Usage: scripts/ci_frameworks.sh [lmms] [vlmeval] [-- extra pytest args]     (default: both)
#   --install-only   build the venvs and exit
#   OMNIEVAL_CACHE, OMNIEVAL_MAIN_VENV, OMNIEVAL_LMMS_VERSION, OMNIEVAL_VLMEVAL_VERSION: see make_framework_venv.sh
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MAIN="${OMNIEVAL_MAIN_VENV:-$REPO/.venv}"
FWS=() INSTALL_ONLY=0 EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --install-only) INSTALL_ONLY=1 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) FWS+=("$1") ;;
  esac
  shift
done
[ ${#FWS[@]} -gt 0 ] || FWS=(lmms vlmeval)
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" HF_DATASETS_OFFLINE="${HF_DATASETS_OFFLINE:-1}" RAY_USAGE_STATS_ENABLED=0
cd "$REPO"
declare -A PY
for fw in "${FWS[@]}"; do
  t0=$(date +%s)
  PY[$fw]="$(scripts/make_framework_venv.sh "$fw")"
  echo "$fw venv: ${PY[$fw]} ($(( $(date +%s) - t0 )) s)" >&2
done
[ "$INSTALL_ONLY" = 1 ] && exit 0

# Under CI a skip for a missing framework venv is a failure (tests/testlib/tiers.py).
REQ="$(IFS=,; echo "${FWS[*]}")"
export OMNIEVAL_REQUIRE="${OMNIEVAL_REQUIRE:+$OMNIEVAL_REQUIRE,}$REQ,${REQ/lmms/lmms_eval}"
rc=0
for fw in "${FWS[@]}"; do
  echo "== $fw adapter tests in ${PY[$fw]}" >&2
  "${PY[$fw]}" -m pytest "tests/omnieval/adapters/test_${fw}_adapter.py" -q -W ignore::DeprecationWarning \
    "${EXTRA[@]}" || rc=$?
done
if [ -n "${PY[lmms]:-}" ]; then
  echo "== lm-eval + lmms-eval in one suite, from the main venv" >&2
  OMNIEVAL_LMMS_PYTHON="${PY[lmms]}" "$MAIN/bin/python" -m pytest tests/omnieval/adapters/test_lmms_adapter.py -q \
    -k "own_interpreter or two_environments or bench_lmms" -W ignore::DeprecationWarning "${EXTRA[@]}" || rc=$?
fi
VLLM_VENV="${OMNIEVAL_CACHE:-$HOME/.cache/omnieval}/venv-vllm-${OMNIEVAL_VLLM_VERSION:-0.32.0}"
if [ -n "${PY[lmms]:-}" ] && [ -f "$VLLM_VENV/.complete" ]; then
  echo "== lmms-eval (its venv) through the pool to vLLM (the vLLM venv) with images; lm-eval's and lmms-eval's own model classes (bench federated's conventional baseline); lmms-eval alone (its openai client) vs through omnieval on one vLLM" >&2
  OMNIEVAL_LMMS_PYTHON="${PY[lmms]}" bash scripts/ci_vllm.sh -k "lmms_eval_images or lmms_eval_through_omnieval or framework_runners" "${EXTRA[@]}" || rc=$?
fi
exit $rc
