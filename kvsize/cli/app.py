"""The `kvsize` typer app: the default-command group, the version flag, and the registration of every command.

Command modules hold plain functions; this module registers them, so the import graph has no cycle.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kvsize.cli import check, listing, plan, size, verify
from kvsize.cli.options import stderr_line
from kvsize.errors import ExitCode

SIZE_COMMAND = "size"


class DefaultToSizeGroup(TyperGroup):
    """`kvsize MODEL ...` means `kvsize size MODEL ...`: a first word that is no command goes to `size`."""

    def main(  # type: ignore[override]  # standalone_mode is fixed here, so it is no parameter
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any
    ) -> Any:
        """Run with usage errors (unknown option, missing argument) as one `Error:` line on stderr, like every
        other error, instead of click's boxed usage block."""
        extra.pop("standalone_mode", None)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(
                args=argv or ["--help"], prog_name=prog_name or "kvsize", standalone_mode=False, **extra
            )
        except KeyboardInterrupt:
            stderr_line("Interrupted.")
            sys.exit(130)
        except Exception as exc:
            # click's UsageError / BadParameter (typer vendors click, so recognise them by their interface).
            if hasattr(exc, "format_message") and getattr(exc, "exit_code", None) == 2:
                message = " ".join(exc.format_message().split()).rstrip(".")
                stderr_line(f"Error: {message}. See 'kvsize --help'.")
                sys.exit(int(ExitCode.BAD_INPUT))
            raise
        sys.exit(code if isinstance(code, int) else 0)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h", "--version"):
            args = [SIZE_COMMAND, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=DefaultToSizeGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="How much GPU memory an LLM's KV cache takes, and whether a deployment fits.",
    epilog="Examples:  kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100   |   "
    "kvsize ./config.json --ctx 8k,32k --batch 1,8 --kv-dtype bf16,fp8 --json   |   kvsize gpus",
)


def _version(value: bool) -> None:
    if value:
        from kvsize import __version__

        typer.echo(f"kvsize {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """How much GPU memory an LLM's KV cache takes, and whether a deployment fits."""


app.command(SIZE_COMMAND, epilog="Example: kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100")(size.size)
app.command("gpus")(listing.gpus)
app.command("models")(listing.models)
app.command("check", epilog="Example: kvsize check capacity.yaml --junit kvsize.xml")(check.check)
app.command("schema")(check.schema)
app.command("plan", epilog="Example: kvsize plan meta-llama/Llama-3.1-70B-Instruct --ctx 32k --concurrency 64")(
    plan.plan
)
app.command("verify", epilog=verify.VERIFY_EPILOG)(verify.verify_command)


def main() -> None:
    """Console-script entry point. Output that cannot be written (a full disk, a closed stdout) is exit 3."""
    from kvsize.cli.streams import run_checked

    run_checked(app)
