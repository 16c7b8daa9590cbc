#!/usr/bin/env bash
# Build llama-server (real continuous batching via --parallel N) from the llama.cpp sources vendored in the
# llama-cpp-python sdist on PyPI. Debian 12 has no llama.cpp package and prebuilt binaries cannot be fetched here.
# GGML_LLAMAFILE=OFF and GGML_CPU_REPACK=OFF keep every matmul on the row-independent vec_dot path (the tinyBLAS and
# repacked gemm/gemv kernels sum in an order that depends on how many rows share the batch), so that a sequence's
# greedy decode does not depend on what else continuous batching put beside it. AMX is switched off too: -march=native
# enables it on Sapphire Rapids, where this version's AMX mul_mat segfaults at the first decode (seen in a VM), and its
# tiles are another repacked, batch-shaped path.
# Called by `omnieval setup llamacpp`, which names the cache folder DEST
# (~/.cache/omnieval/llama-server/<version>-<arch>-<tag>-<cpu flags hash>/) so CI and later runs reuse the binary.
set -euo pipefail
VERSION="${OMNIEVAL_LLAMACPP_VERSION:-0.3.36}"
DEST="${OMNIEVAL_LLAMACPP_DEST:?set OMNIEVAL_LLAMACPP_DEST (omnieval setup llamacpp does)}"
if [ -x "$DEST/llama-server" ]; then echo "$DEST/llama-server"; exit 0; fi
PY="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/omnieval-llama-build.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
echo "building llama-server $VERSION in $WORK (one-off, ~10-15 min on 2 cores)" >&2
"$PY" -m pip download --no-deps --no-binary llama-cpp-python -d "$WORK/src" "llama-cpp-python==$VERSION" >&2
tar xzf "$WORK/src/llama_cpp_python-$VERSION.tar.gz" -C "$WORK/src"
cd "$WORK/src/llama_cpp_python-$VERSION/vendor/llama.cpp"
NO_AMX=()
[ "$(uname -m)" = x86_64 ] && NO_AMX=(-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
  -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
cmake -B build -DCMAKE_BUILD_TYPE=Release "${NO_AMX[@]}" -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_LLAMAFILE=OFF -DGGML_CPU_REPACK=OFF >&2
cmake --build build --target llama-server -j"$(nproc)" >&2
mkdir -p "$DEST.tmp"
cp build/bin/llama-server "$DEST.tmp/"
rm -rf "$DEST"; mv "$DEST.tmp" "$DEST"
echo "$DEST/llama-server"
