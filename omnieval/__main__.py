import sys

from omnieval.cli import main

sys.exit(main())
