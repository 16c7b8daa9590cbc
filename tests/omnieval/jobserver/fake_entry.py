"""Stand-in for `omnieval run SUITE --output-dir OUT` in server tests: behaviour is chosen by the suite name.

ok-*: write OUT/result.json, exit 0. fail-*: exit 3. sleep-*: sleep (bounded, 30 s) then exit 0.
slow-*: sleep seed/10 s then behave like ok.
"""

import json
import pathlib
import sys
import time

import yaml

suite = yaml.safe_load(pathlib.Path(sys.argv[1]).read_text())
out = pathlib.Path(sys.argv[2])
mode = suite["name"].split("-")[0]
print(f"fake run of {suite['name']}", flush=True)
if mode == "fail":
    print("failing on purpose", file=sys.stderr)
    sys.exit(3)
if mode == "sleep":
    time.sleep(30)
if mode == "slow":
    time.sleep(suite["seed"] / 10)
(out / "result.json").write_text(json.dumps({"suite": suite["name"]}))
