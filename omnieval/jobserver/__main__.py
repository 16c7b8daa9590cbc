"""``python -m omnieval.jobserver`` = ``omnieval serve`` (used by the tests to start a real server process)."""

import sys

from omnieval.jobserver import cli_main

sys.exit(cli_main(sys.argv[1:]))
