"""Every command's --help, as a person sees it in an 80-column pseudo-terminal, with colour and with NO_COLOR=1:
nothing is cut with "…", and every option a user may type is shown in full, alias and `--no-` form included.

The names come from the click command objects kvsize registers, so a new option is covered without a list here.
"""

from __future__ import annotations

import re

import pytest
import typer.main
from test_terminal import assert_uncut, in_terminal

from kvsize.cli import app

GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)  # type: ignore[attr-defined]


def option_names(command: object) -> list[str]:
    """Every name of every visible option or argument registered on a click command, --help included."""
    names = ["--help"]
    for param in command.params:  # type: ignore[attr-defined]
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            names.append(param.metavar or param.name)  # as typer shows it
        else:
            names += [*param.opts, *param.secondary_opts]
    return names


def assert_all_names_shown(screen: str, names: list[str]) -> None:
    for name in names:
        # A whole name: not the start of a longer one (--gpu in --gpu-mem) nor the end (--batch in --no-batch).
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", screen), name


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_root_help_at_80_columns(colour: bool) -> None:
    code, screen = in_terminal("--help", colour=colour)
    assert code == 0
    assert_uncut(screen)
    # `kvsize --help` is the short overview: the group's own options and its commands (the sizing options are
    # `kvsize size --help`, checked below with every command's help).
    assert_all_names_shown(screen, [*option_names(GROUP), "-h"])  # type: ignore[attr-defined]
    for name in COMMANDS:
        assert re.search(rf"^│ {name} ", screen, re.MULTILINE), name
    assert "kvsize size --help" in screen
    # Each example in the epilog is one whole line a user can paste.
    assert "\n kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100 " in screen


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
@pytest.mark.parametrize("name", COMMANDS)
def test_command_help_at_80_columns(name: str, colour: bool) -> None:
    code, screen = in_terminal(name, "--help", colour=colour)
    assert code == 0
    assert_uncut(screen)
    assert_all_names_shown(screen, option_names(GROUP.commands[name]))  # type: ignore[attr-defined]
    for panel in {getattr(p, "rich_help_panel", None) for p in GROUP.commands[name].params} - {None}:  # type: ignore[attr-defined]
        assert f"─ {panel} ─" in screen, panel


def test_two_names_share_one_column() -> None:
    """An option's aliases are listed together, split after ", " (never inside a name) when the column is
    narrow: `--tp, --tensor-parallel-size` at 80 columns rather than typer's `--tp,--tensor-paral…`."""
    code, screen = in_terminal("size", "--help", colour=False)
    assert code == 0
    assert "│ --tp, --tensor-parallel-size " in screen
    # Too wide together beside the help: the `--no-` form goes on the next line, whole.
    assert re.search(r"^│ --enable-prefix-caching, .*\n│ --no-enable-prefix-caching ", screen, re.MULTILINE)
    assert "│ --batch, -b " in screen
