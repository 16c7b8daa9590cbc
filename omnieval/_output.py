"""Where a run's artifact goes, checked before anything is deployed.

``output.dir`` (or ``--output-dir``) is a local path or a URI. A URI (``s3://``, ``gs://``, ``hdfs://``,
``file://``: whatever ``pyarrow.fs`` opens) is for clusters whose drivers have no shared disk: the run writes its
artifact in a local staging directory (``$OMNIEVAL_CACHE/staging/``, where ``--resume`` finds it) and copies it to
``<uri>/<run id>`` when it ends, completed or not.

Under ``ray job submit --working-dir``, the driver runs inside Ray's temporary unpacked copy of that directory
(``.../runtime_resources/working_dir_files/_ray_pkg_<hash>``), which Ray deletes with the job's runtime env: a
relative ``output.dir`` would put the artifact there and lose it. Such a run is refused with the fix instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from omnieval.core import OmnievalUserError, cache_dir


@dataclass(frozen=True)
class OutputTarget:
    local: Path
    """Parent directory the run writes its artifact directory in."""
    uri: str | None = None
    """Where the artifact directory is copied when the run ends (None: it stays where it was written)."""


def resolve_output_dir(cli_dir: str | None, suite_dir: str) -> OutputTarget:
    """The artifact's destination: ``--output-dir`` over ``output.dir``."""
    chosen, where = (cli_dir, "--output-dir") if cli_dir else (suite_dir, "output.dir")
    if "://" in chosen:
        _open(chosen, where)  # an unknown scheme or missing credentials fail here, before any work
        return OutputTarget(local=cache_dir() / "staging", uri=chosen.rstrip("/"))
    path = Path(chosen).expanduser()
    from cluster import job_working_dir  # Ray's; planning a suite needs no Ray (the conventional runner, GPU tests)

    if not path.is_absolute() and (wd := job_working_dir()) is not None:
        raise OmnievalUserError(
            f"{where} {chosen!r} is relative, and this run is a Ray job with working_dir {wd!r}: its working "
            f"directory ({os.getcwd()}) is Ray's temporary copy, deleted after the job, so the artifact would be "
            f"lost; fix: set {where} to an absolute path or a URI, e.g. `--output-dir /shared/omnieval-runs` or "
            "`--output-dir s3://bucket/omnieval-runs`"
        )
    return OutputTarget(local=path)


def _open(uri: str, where: str) -> tuple[object, str]:
    import pyarrow.fs as pafs

    try:
        return pafs.FileSystem.from_uri(uri)  # type: ignore[no-any-return]
    except (ValueError, OSError) as e:  # pyarrow: ArrowInvalid is a ValueError, a missing backend an OSError
        raise OmnievalUserError(
            f"{where} {uri!r} cannot be opened ({e}); give a URI pyarrow.fs supports (s3://, gs://, hdfs://, "
            "file://) with its credentials in the environment, or an absolute path"
        ) from e


def upload_artifact(run_dir: Path, uri: str) -> str:
    """Copy the artifact directory to ``<uri>/<run id>``; returns that URI."""
    import pyarrow.fs as pafs

    fs, base = _open(uri, "output.dir")
    dest = f"{base.rstrip('/')}/{run_dir.name}"
    fs.create_dir(dest, recursive=True)  # type: ignore[attr-defined]
    pafs.copy_files(str(run_dir), dest, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return f"{uri}/{run_dir.name}"
