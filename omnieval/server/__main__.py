"""``python -m omnieval.server`` = ``omnieval serve`` (used by the tests to start a real server process)."""

import sys

from omnieval.server import cli_main

sys.exit(cli_main(sys.argv[1:]))
