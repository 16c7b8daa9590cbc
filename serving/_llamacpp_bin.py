"""Locate (or build once) the llama-server binary; cached per llama.cpp version and CPU architecture."""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
from pathlib import Path

from omnieval.core import OmnievalUserError
from serving._isa import cpu_flags, cpu_info

LLAMACPP_VERSION = "0.3.36"  # llama-cpp-python sdist whose vendored llama.cpp we build
# build flags (no llamafile sgemm, no repacked kernels, no AMX: batch-invariant and AMX-safe); bump when flags change
BUILD_TAG = "det3"
BUILD_SCRIPT = Path(__file__).with_name("build_llama_server.sh")


def cpu_key() -> str:
    """Short hash of the CPU's feature flags.

    The build is ``-march=native``: a binary built on an AVX-512 machine dies with SIGILL on one without, and its
    sums differ from an AVX2 build's. Keying the cache by the flags makes a different CPU build its own binary (and,
    through the engine version, keeps cached responses apart).
    """
    if not cpu_info():
        return "nocpuinfo"
    return hashlib.sha256(" ".join(sorted(cpu_flags())).encode()).hexdigest()[:8]


def cached_binary() -> Path:
    cache = Path(os.environ.get("OMNIEVAL_CACHE", Path.home() / ".cache" / "omnieval"))
    tag = f"{LLAMACPP_VERSION}-{platform.machine()}-{BUILD_TAG}-{cpu_key()}"
    return cache / "llama-server" / tag / "llama-server"


def find_llama_server() -> Path:
    """``OMNIEVAL_LLAMA_SERVER``, then the omnieval cache, then ``PATH``."""
    env = os.environ.get("OMNIEVAL_LLAMA_SERVER")
    if env:
        p = Path(env)
        if not os.access(p, os.X_OK):
            raise OmnievalUserError(f"OMNIEVAL_LLAMA_SERVER={env} is not an executable; unset it or fix the path")
        return p
    cached = cached_binary()
    if os.access(cached, os.X_OK):
        return cached
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise OmnievalUserError(
        "llama-server not found; build it once with `omnieval setup llamacpp` (or `make setup`), "
        "or set OMNIEVAL_LLAMA_SERVER to an existing binary"
    )


def build_llama_server() -> Path:
    """Build once into the cache; the build's own output (cmake's ``[ 42%] Building ...`` lines) goes to stderr as
    it happens, so a first ``make demo`` shows its progress instead of ten silent minutes."""
    env = {**os.environ, "OMNIEVAL_LLAMACPP_VERSION": LLAMACPP_VERSION,
           "OMNIEVAL_LLAMACPP_DEST": str(cached_binary().parent)}  # fmt: skip
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], env=env, check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip().splitlines()[-1])
