"""`kvsize` / `kvsize --help`: the one-screen overview, drawn with rich's console, panel and table alone.

typer draws help through typer.rich_utils, whose import loads rich.markdown (markdown-it), rich.traceback and
more: some 130 ms, which made the overview slower than a sizing run (issue 20). The overview shows only plain
text (no markdown, no option types), so it is drawn here in the same layout (typer 0.29 rich_utils
rich_format_help: usage, help text, an Options and a Commands panel, the epilog) from the same click objects.
Each command's own `--help` still goes through typer.
"""

from __future__ import annotations

from typing import Any

# typer.rich_utils's styles, so that the overview looks like every other help screen.
STYLE_OPTION = "bold cyan"
STYLE_SWITCH = "bold green"
STYLE_USAGE = "yellow"
STYLE_BORDER = "dim"


def render_overview(group: Any, ctx: Any, params: list[Any]) -> None:
    """Print `group`'s help for `ctx`; `params` are the group's options as the help shows them (app._help_view)."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    console = Console(emoji=False, highlight=False)
    usage = Text.assemble(("Usage: ", STYLE_USAGE), (group.get_usage(ctx).removeprefix("Usage: "), "bold"))
    console.print(Padding(usage, 1))
    if group.help:
        paragraphs = [" ".join(p.split()) for p in group.help.split("\n\n")]
        console.print(Padding(Text("\n\n".join(paragraphs)), (0, 1, 1, 1)))

    options = Table(show_header=False, expand=True, box=None, pad_edge=False, padding=(0, 1))
    for param in params:
        if getattr(param, "hidden", False) or not getattr(param, "opts", None):
            continue
        spelled = ", ".join([*param.opts, *param.secondary_opts])
        short = spelled.startswith("-") and not spelled.startswith("--")
        shown = Text(spelled, style=STYLE_SWITCH if short else STYLE_OPTION)
        options.add_row(shown, Text(param.help or ""))
    if options.row_count:
        console.print(Panel(options, border_style=STYLE_BORDER, title="Options", title_align="left"))

    names = [name for name in group.list_commands(ctx) if not group.get_command(ctx, name).hidden]
    commands = Table(show_header=False, expand=True, box=None, pad_edge=False, padding=(0, 1))
    commands.add_column(style=STYLE_OPTION, no_wrap=True, width=max(map(len, names), default=0))
    commands.add_column(ratio=10)
    for name in names:
        command = group.get_command(ctx, name)
        commands.add_row(name, Text(command.short_help or command.help or ""))
    if names:
        console.print(Panel(commands, border_style=STYLE_BORDER, title="Commands", title_align="left"))

    if group.epilog:  # one example per line: a command is never broken in two (as typer's rich mode keeps it)
        console.print(Padding(Text(group.epilog), 1))
