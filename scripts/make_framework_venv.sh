#!/usr/bin/env bash
# Build (once) the private venv of an evaluation framework and print its python path.
#
# Why: lmms-eval and VLMEvalKit pin torch/transformers/filelock differently from each other and from the main venv,
# so their framework client actors run in an interpreter of their own (suite `frameworks: {<name>: {python: ...}}`).
# Ray is NOT installed there: Ray needs the identical version on driver and workers, so a .pth file appends the main
# venv's site-packages and the repo root AFTER the venv's own site-packages — the framework's own pins win, and
# ray/omnieval come from the driver's environment. The .pth is rewritten on every call, so a cached venv follows the
# current checkout (CI clones into a fresh folder).
# Ray's and omnieval's own requirements (ray[serve] minus ray itself) ARE resolved into the venv together with the
# framework: a framework pin would otherwise shadow a package Ray imports with a version Ray cannot use (lmms-eval's
# wandb pins protobuf<7, and the main venv's grpcio-reflection needs protobuf>=7.35, which breaks `from ray import
# serve`). pip then picks versions that satisfy both, e.g. an older grpcio-reflection. A `.ray-<version>` stamp
# redoes only this step when the driver's Ray changes.
#
# Usage: scripts/make_framework_venv.sh lmms|vlmeval|lmeval     -> prints <venv>/bin/python on stdout
#   OMNIEVAL_CACHE        cache root (default ~/.cache/omnieval); the venv is venv-<framework>-<version>
#   OMNIEVAL_MAIN_VENV    the driver's venv (default <repo>/.venv): its interpreter and site-packages are reused
#   OMNIEVAL_LMMS_VERSION / OMNIEVAL_VLMEVAL_VERSION / OMNIEVAL_LMEVAL_VERSION   framework versions
set -euo pipefail
FW="${1:?usage: make_framework_venv.sh lmms|vlmeval|lmeval}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${OMNIEVAL_CACHE:-$HOME/.cache/omnieval}"
MAIN="${OMNIEVAL_MAIN_VENV:-$REPO/.venv}"
# torch 2.14.1 + torchvision 0.29.1: the only torchvision wheels here are CUDA builds, and they run on CPU; CPU torch
# 2.13 breaks `import torchvision` (operator torchvision::nms does not exist).
TORCH=("torch==2.14.1" "torchvision==0.29.1")
case "$FW" in
  lmms) VERSION="${OMNIEVAL_LMMS_VERSION:-0.7.3}"
        PKGS=("lmms-eval==$VERSION" "filelock<4" "${TORCH[@]}") ;;  # filelock 4 breaks simple_evaluate (filelock._api)
  vlmeval) VERSION="${OMNIEVAL_VLMEVAL_VERSION:-0.0.20}"
        PKGS=("ms-vlmeval==$VERSION" "${TORCH[@]}") ;;
  lmeval) VERSION="${OMNIEVAL_LMEVAL_VERSION:-0.4.13}"
        PKGS=("lm-eval[api]==$VERSION") ;;
  *) echo "unknown framework '$FW' (lmms, vlmeval, lmeval)" >&2; exit 2 ;;
esac
VENV="$CACHE/venv-$FW-$VERSION"
[ -x "$MAIN/bin/python" ] || { echo "no main venv at $MAIN (set OMNIEVAL_MAIN_VENV)" >&2; exit 2; }
# Same interpreter build as the driver: the main venv's compiled wheels (ray, pydantic-core) must load here.
BASE_PY="$("$MAIN/bin/python" -c 'import sys; print(sys._base_executable)')"
MAIN_SITE="$("$MAIN/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"

RAY_VERSION="$("$MAIN/bin/python" -c 'import ray; print(ray.__version__)')"
# ray[serve]'s and omnieval's requirement specifiers as the driver's metadata states them, markers evaluated, ray dropped
DRIVER_REQS="$("$MAIN/bin/python" - <<'PY'
import importlib.metadata as md
from packaging.requirements import Requirement
out = set()
for dist, extras in (("ray", {"serve"}), ("omnieval", set())):
    for line in md.requires(dist) or []:
        req = Requirement(line)
        if req.name.lower() == "ray" or (req.marker and not any(req.marker.evaluate({"extra": e}) for e in extras | {""})):
            continue
        req.marker = None
        out.add(str(req))
print("\n".join(sorted(out)))
PY
)"
install() {  # framework pins and the driver's requirements in ONE resolution, so neither silently breaks the other
  local site
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  rm -f "$site/zz_omnieval_main.pth"  # pip must not count the main venv's copies as installed here
  printf '%s\n' "$DRIVER_REQS" > "$VENV/driver-requirements.txt"
  "$VENV/bin/pip" install "${PKGS[@]}" -r "$VENV/driver-requirements.txt" >&2
  # a framework that pulled Ray in would shadow the driver's; drop it so the main venv's Ray is the one imported
  if [ -d "$site/ray" ]; then "$VENV/bin/pip" uninstall -y ray >&2; fi
  rm -f "$VENV"/.ray-*
  touch "$VENV/.ray-$RAY_VERSION"
}
if [ ! -f "$VENV/.complete" ]; then
  t0=$(date +%s)
  echo "creating $VENV (one-off; lmms/vlmeval are ~7 GB and take minutes)" >&2
  rm -rf "$VENV"
  "$BASE_PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip >&2
  install
  touch "$VENV/.complete"
  echo "venv $VENV ready in $(( $(date +%s) - t0 )) s" >&2
elif [ ! -f "$VENV/.ray-$RAY_VERSION" ]; then
  t0=$(date +%s)
  echo "re-resolving $VENV against the driver's Ray $RAY_VERSION" >&2
  install
  echo "done in $(( $(date +%s) - t0 )) s" >&2
fi
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '%s\n%s\n' "$MAIN_SITE" "$REPO" > "$SITE/zz_omnieval_main.pth"

# Ray must be the driver's own (same version, same files), not a second copy, and usable with the venv's packages:
# client actors import ray.serve (replica handles) and omnieval's pool client.
got="$("$VENV/bin/python" -c 'import ray, os; print(ray.__version__, os.path.realpath(ray.__file__))')"
case "$got" in
  "$RAY_VERSION $(realpath "$MAIN_SITE")"/*) ;;
  *) echo "ray in $VENV is '$got', the driver's is $RAY_VERSION from $MAIN_SITE" >&2; exit 1 ;;
esac
"$VENV/bin/python" -c 'from ray import serve; import omnieval.adapters._bridge' \
  || { echo "ray.serve / omnieval do not import in $VENV" >&2; exit 1; }
# The framework itself, on every call: a cached venv that no longer imports it must fail here, not skip its tests.
case "$FW" in lmms) MOD=lmms_eval ;; vlmeval) MOD=vlmeval ;; lmeval) MOD=lm_eval ;; esac
"$VENV/bin/python" -c "import $MOD" >&2 \
  || { echo "$MOD does not import in $VENV: rm -rf $VENV and rerun scripts/make_framework_venv.sh $FW" >&2; exit 1; }
echo "$VENV/bin/python"
