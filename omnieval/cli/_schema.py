"""``omnieval schema``: the suite JSON Schema, for editors and validators of suite YAMLs."""

from __future__ import annotations

import argparse
import json


def cmd_schema(args: argparse.Namespace) -> int:
    from omnieval._suite import suite_json_schema

    print(json.dumps(suite_json_schema(), indent=2))
    return 0
