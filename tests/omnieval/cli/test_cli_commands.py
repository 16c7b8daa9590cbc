"""Every ``omnieval`` subcommand reaches a handler: the command table holds import strings, which nothing else checks."""

from __future__ import annotations

import argparse

import pytest

from omnieval import cli
from omnieval.core import import_target


def _subcommands() -> set[str]:
    actions = [a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return set(actions[0].choices)


def test_each_subcommand_has_exactly_one_handler() -> None:
    assert not set(cli._COMMANDS) & set(cli._PASSTHROUGH)
    assert _subcommands() == set(cli._COMMANDS) | set(cli._PASSTHROUGH)


@pytest.mark.parametrize("target", sorted({**cli._COMMANDS, **cli._PASSTHROUGH}.values()))
def test_handler_imports(target: str) -> None:
    assert callable(import_target(target))


def test_schema_and_list_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["schema"]) == 0
    assert '"properties"' in capsys.readouterr().out
    assert cli.main(["list"]) == 0
    assert "routing policies:" in capsys.readouterr().out
