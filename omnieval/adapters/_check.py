"""Pre-deploy checks of a suite's framework tasks, run in each framework's own interpreter.

A framework configured with its own venv (``frameworks.<name>.python``) is checked there, in a short subprocess, so
the driver never needs that framework installed; the rest are checked in the driver. Either way nothing is
deployed until every task name, option and local file is known good.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from omnieval.core import OmnievalUserError

CheckItem = dict[str, Any]
"""``{"framework", "task", "options", "where", "scorers"}`` (scorers: model -> [engine, scoring or None])."""


def check_here(items: list[CheckItem]) -> list[str]:
    """Error lines of the items that fail, checked in this interpreter."""
    from omnieval.adapters import ADAPTERS

    errors = []
    for it in items:
        try:
            scorers = {m: (str(v[0]), v[1]) for m, v in (it.get("scorers") or {}).items()}
            ADAPTERS.get(it["framework"])().check(it["task"], it["options"], it["where"], scorers)
        except OmnievalUserError as e:
            errors.append(str(e))
        except ImportError as e:
            errors.append(f"{it['where']}: {it['framework']} cannot be imported here ({e})")
    return errors


def check_in(python: str | None, items: list[CheckItem], env: dict[str, str] | None = None) -> list[str]:
    """Error lines of the items, checked in ``python`` (None: this interpreter)."""
    if not items:
        return []
    if python is None or python == sys.executable:
        return check_here(items)
    import os

    proc = subprocess.run([python, "-m", "omnieval.adapters._check"], input=json.dumps(items), text=True,
                          capture_output=True, timeout=600, env={**os.environ, **(env or {})})  # fmt: skip
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["no output"]
        return [f"{items[0]['where']}: checking {items[0]['framework']} tasks with {python} failed: {tail[0]}"]
    errors: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return errors


if __name__ == "__main__":
    print(json.dumps(check_here(json.loads(sys.stdin.read()))))
