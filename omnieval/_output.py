"""Where a run's artifact goes, checked before anything is deployed.

Under ``ray job submit --working-dir``, the driver runs inside Ray's temporary unpacked copy of that directory
(``.../runtime_resources/working_dir_files/_ray_pkg_<hash>``), which Ray deletes with the job's runtime env: a
relative ``output.dir`` would put the artifact there and lose it. Such a run is refused with the fix instead.
"""

from __future__ import annotations

import os
from pathlib import Path

from cluster import job_working_dir
from omnieval.core import OmnievalUserError


def resolve_output_dir(cli_dir: str | None, suite_dir: str) -> Path:
    """The parent directory of the run's artifact: ``--output-dir`` over ``output.dir``."""
    chosen, where = (cli_dir, "--output-dir") if cli_dir else (suite_dir, "output.dir")
    if "://" in chosen:
        raise OmnievalUserError(
            f"{where} {chosen!r} is a URI; the artifact is written to a filesystem path: give an absolute path on "
            "storage every reader can see (a shared or mounted volume), e.g. --output-dir /mnt/shared/runs"
        )
    path = Path(chosen).expanduser()
    if not path.is_absolute() and (wd := job_working_dir()) is not None:
        raise OmnievalUserError(
            f"{where} {chosen!r} is relative, and this run is a Ray job with working_dir {wd!r}: its working "
            f"directory ({os.getcwd()}) is Ray's temporary copy, deleted after the job, so the artifact would be "
            f"lost; fix: set {where} to an absolute path, e.g. `--output-dir /shared/omnieval-runs`"
        )
    return path
