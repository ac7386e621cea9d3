"""The `kvsize` typer app: the default-command group, the version flag, and the registration of every command.

Command modules hold plain functions; this module registers them, so the import graph has no cycle.
"""

from __future__ import annotations

import copy
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

from kvsize.cli import check, evict, listing, plan, size, verify
from kvsize.cli.log import LOG_EPILOG, log_command
from kvsize.cli.options import stderr_line
from kvsize.cli.probe import PROBE_EPILOG, probe_command
from kvsize.errors import ExitCode

SIZE_COMMAND = "size"
HELP_FLAGS = ("--help", "-h")


class DefaultToSizeGroup(TyperGroup):
    """`kvsize MODEL ...` means `kvsize size MODEL ...`: a first word that is no command goes to `size`."""

    def main(  # type: ignore[override]  # standalone_mode is fixed here, so it is no parameter
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any
    ) -> Any:
        """Run with usage errors (unknown option, missing argument) as one `Error:` line on stderr, like every
        other error, instead of click's boxed usage block. Bare `kvsize` is `kvsize --help`: the overview on
        stdout, exit 0 (asking what kvsize does is no error)."""
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
                where = getattr(getattr(exc, "ctx", None), "command_path", None) or "kvsize"
                stderr_line(f"Error: {message}. See '{where} --help'.")
                sys.exit(int(ExitCode.BAD_INPUT))
            raise
        sys.exit(code if isinstance(code, int) else 0)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """`kvsize`, `kvsize --help`: one screen (usage, the commands one line each, examples). The sizing
        command's options are `kvsize size --help` (= `kvsize MODEL --help`), as the overview says."""
        TyperGroup.format_help(_help_view(self, ctx), ctx, formatter)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return ["MODEL [OPTIONS] | COMMAND [ARGS]..."]

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_without_type(super().get_help_option(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in (*HELP_FLAGS, "--version"):
            args = [SIZE_COMMAND, *args]
        if args and args[0] == SIZE_COMMAND:
            args = [SIZE_COMMAND, *_one_query(args[1:])]
        _light_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)


def _one_query(args: list[str]) -> list[str]:
    """`kvsize qwen3 235b --ctx 4k` is `kvsize "qwen3 235b" --ctx 4k`: a first word that is no hub id or path
    (no '/' or '\\', no such file) is a registry search, and takes the words after it, up to the first option.
    A hub id or a path is one word, so `kvsize meta-llama/Llama-3.1-8B 128k` still names its extra word."""
    first = args[0] if args else "-"
    if first.startswith("-") or "/" in first or "\\" in first or os.path.lexists(first):
        return args
    words = next((i for i, arg in enumerate(args) if arg.startswith("-")), len(args))
    return [" ".join(args[:words]), *args[words:]] if words > 1 else args


def _flag_without_type(option: Any) -> Any:
    """--help is a flag: show no `<bool>` beside it."""
    if option is not None and option.metavar is None:
        option.metavar = ""
    return option


def _help_view(command: Any, ctx: Any) -> Any:
    """A copy of `command` for typer's help renderer whose options each show all their names in one column,
    separated by ", " (`--tp, --tensor-parallel-size`; `--flash-attn, --no-flash-attn`; `--batch, -b`).

    typer puts long names, short names and the `--no-` names in three columns and joins aliases with "," alone,
    so an option's names are one unbreakable word: at 80 columns rich cuts `--tp,--tensor-parallel-size` to
    `--tp,--tensor-paral…`. One column whose names break after ", " wraps instead, and leaves the help its room.
    The copy is for display only: the command itself, and the options it parses, are left as they are."""
    params = []
    for param in command.get_params(ctx):
        # A two-way flag whose default typer spells from its first name (`[default: flash-attn]`) keeps its
        # columns: none does today, as every such flag defaults to None, "the engine's".
        spells_default = param.secondary_opts and param.show_default and param.default is not None
        if isinstance(param, TyperOption) and not spells_default:
            shown = copy.copy(param)
            names = [*param.opts, *param.secondary_opts]
            shown.opts = [", ".join(sorted(names, key=lambda name: not name.startswith("--")))]
            shown.secondary_opts = []
            param = shown
        params.append(param)
    view = copy.copy(command)
    view.get_params = lambda ctx: params
    return view


def _light_coercion(params: Sequence[Any]) -> None:
    """Skip typer's per-option pydantic TypeAdapter (about 1 ms each, some 30 options per run) where it adds
    nothing: an option left at None needs no coercion, and a plain `str` option only needs str(value). Any
    other value still gets typer's own coercion. Relies on typer >= 0.29's lazily built `_runtime_param`; on
    another layout it changes nothing."""
    try:
        from typer._coercion import RuntimeParam, build_runtime_param
    except ImportError:  # pragma: no cover - another typer layout: keep its coercion
        return

    class _Light(RuntimeParam):
        descriptor: Any

        def __init__(self, descriptor: Any) -> None:
            object.__setattr__(self, "annotation", descriptor.annotation)
            object.__setattr__(self, "parameter_info", descriptor.parameter_info)
            object.__setattr__(self, "descriptor", descriptor)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info = self.parameter_info
            if self.annotation is str and isinstance(value, str) and info.parser is None and info.callback is None:
                return value
            return build_runtime_param(self.descriptor).coerce(value, param=param, ctx=ctx)

    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is not None and getattr(param, "_runtime_param", False) is None:
            param._runtime_param = _Light(descriptor)


class Command(TyperCommand):
    """A command whose help shows no `<bool>` / `<str>` type placeholders (options carry metavars instead)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _light_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_without_type(super().get_help_option(ctx))

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for param in self.params:
            if isinstance(param, TyperArgument):  # the argument's name is its metavar: MODEL, not MODEL <str>
                setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010
        TyperCommand.format_help(_help_view(self, ctx), ctx, formatter)


app = typer.Typer(
    cls=DefaultToSizeGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="How much GPU memory an LLM's KV cache takes, and whether a deployment fits.\n\n"
    "MODEL: a hub id (org/name), a config.json or its folder, or words to search for (qwen3 235b).",
    # One example per line (typer keeps single newlines in rich markup mode): a command is never broken in two.
    epilog="Examples:\n"
    "kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100\n"
    "kvsize examples/configs/acme-chat-3b --ctx 8k,32k --kv-dtype bf16,fp8 --json\n"
    "kvsize gpus\n\n"
    "Every sizing option: kvsize size --help (or kvsize MODEL --help)\n"
    "Any command's options: kvsize COMMAND --help",
)


def _version(value: bool) -> None:
    if value:
        from kvsize import __version__

        typer.echo(f"kvsize {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.", metavar=""),
    ] = False,
) -> None:
    """How much GPU memory an LLM's KV cache takes, and whether a deployment fits."""


# short_help: the overview (`kvsize --help`) gives each command one line at 80 columns (at most 66 characters).
app.command(
    SIZE_COMMAND,
    cls=Command,
    short_help="KV cache of MODEL per context, batch and dtype (the default)",
    epilog="Example: kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100",
)(size.size)
app.command("gpus", cls=Command, short_help="The GPU profiles --gpu accepts")(listing.gpus)
app.command("models", cls=Command, short_help="The built-in models (offline, no token needed)")(listing.models)
app.command(
    "check",
    cls=Command,
    short_help="Check a capacity file (CI): exit 1 when a deployment stops fitting",
    epilog="Example: kvsize check capacity.yaml --junit kvsize.xml",
)(check.check)
app.command("schema", cls=Command, short_help="The JSON Schema of capacity files")(check.schema)
app.command(
    "plan",
    cls=Command,
    short_help="Rank GPUs by how many serve --concurrency requests, and cost",
    epilog="Example:\nkvsize plan meta-llama/Llama-3.1-70B-Instruct --ctx 32k --concurrency 64",
)(plan.plan)
app.command(
    "verify",
    cls=Command,
    short_help="Run MODEL with transformers; compare its cache with kvsize's",
    epilog=verify.VERIFY_EPILOG,
)(verify.verify_command)
app.command("log", cls=Command, short_help="Check an engine's start-up log against kvsize", epilog=LOG_EPILOG)(
    log_command
)
app.command(
    "probe", cls=Command, short_help="Check a running vLLM or SGLang server against kvsize", epilog=PROBE_EPILOG
)(probe_command)
app.command(
    "evict",
    cls=Command,
    short_help="Blocks an eviction policy (StreamingLLM, H2O, SnapKV) frees",
    epilog="Example: kvsize evict --tokens 16000 --keep 10% --block-size 16",
)(evict.evict)


def app_for(argv: Sequence[str]) -> typer.Typer:
    """The app with only the command `argv` runs registered. Typer builds every registered command's options
    before it dispatches (some 10 ms for all of them), so a run builds its own alone; help (no arguments,
    `--help`) keeps them all, to list them."""
    if not argv or argv[0] in HELP_FLAGS:
        return app
    name = argv[0] if any(c.name == argv[0] for c in app.registered_commands) else SIZE_COMMAND
    lean = copy.copy(app)
    lean.registered_commands = [c for c in app.registered_commands if c.name == name and argv[0] != "--version"]
    return lean


def main() -> None:
    """Console-script entry point. Output that cannot be written (a full disk, a closed stdout) is exit 3."""
    from kvsize.cli.streams import run_checked

    run_checked(app_for(sys.argv[1:]))
