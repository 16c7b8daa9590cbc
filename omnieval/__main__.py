from omnieval.cli import entry

entry()
