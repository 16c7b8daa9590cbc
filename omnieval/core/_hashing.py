"""Content hashes of weights and data, the identity every artifact and cache key is built on."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def file_sha256(path: Path) -> str:
    """sha256 memoised in a sidecar keyed by size+mtime (hashing a multi-GB file on every run is wasteful)."""
    st = path.stat()
    side = path.with_name(path.name + ".sha256.json")
    key = {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        data = json.loads(side.read_text())
        if data.get("key") == key:
            return str(data["sha256"])
    except (OSError, ValueError):
        pass
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    digest = h.hexdigest()
    try:
        side.write_text(json.dumps({"key": key, "sha256": digest}))
    except OSError:
        pass  # read-only location: the hash is still returned
    return digest


def path_sha256(path: Path) -> str:
    """sha256 of a weights file, or of a checkpoint directory (over each file's relative path and sha256)."""
    if path.is_file():
        return file_sha256(path)
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.endswith(".sha256.json")):
        h.update(f"{f.relative_to(path).as_posix()}\0{file_sha256(f)}\n".encode())
    return h.hexdigest()
