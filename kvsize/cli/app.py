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
COMPLETION_FLAGS = ("--install-completion", "--show-completion")
COMPLETE_VAR = "_KVSIZE_COMPLETE"
"""Set by the completion script when the shell asks for words (typer's spelling: `_KVSIZE_COMPLETE=source_bash`)."""
SUGGESTIONS = 3  # at most this many options are offered for a mistyped one


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
        if os.environ.get(COMPLETE_VAR):  # the shell asks for completions: typer's bash, zsh, fish answers
            from typer._completion_classes import completion_init

            completion_init()
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
                where = getattr(getattr(exc, "ctx", None), "command_path", None) or "kvsize"
                stderr_line(_usage_error_line(exc, where, argv))
                sys.exit(int(ExitCode.BAD_INPUT))
            raise
        sys.exit(code if isinstance(code, int) else 0)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """`kvsize`, `kvsize --help`: one screen (usage, the commands one line each, examples). The sizing
        command's options are `kvsize size --help` (= `kvsize MODEL --help`), as the overview says. Drawn by
        kvsize.cli.overview in typer's layout, without typer's help renderer and its imports."""
        from kvsize.cli.overview import render_overview

        render_overview(self, ctx, _help_view(self, ctx).get_params(ctx))

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return ["MODEL [OPTIONS] | COMMAND [ARGS]..."]

    def get_help_option(self, ctx: Any) -> Any:
        return _flag_without_type(super().get_help_option(ctx))

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in (*HELP_FLAGS, "--version", *COMPLETION_FLAGS):
            args = [SIZE_COMMAND, *args]
        if args and args[0] == SIZE_COMMAND:
            args = [SIZE_COMMAND, *_one_query(args[1:])]
        _light_coercion(self.get_params(ctx))
        return super().parse_args(ctx, args)


def _usage_error_line(exc: Any, where: str, argv: Sequence[str]) -> str:
    """click's usage error as one line. An unknown option is offered only the options it plausibly mistypes
    (click offers difflib's loose matches: `--install-completion` -> `--allocation`); the completion flags,
    given to a command, say where they belong."""
    name = getattr(exc, "option_name", None)
    if name is None or not hasattr(exc, "possibilities"):  # not click's NoSuchOption
        message = " ".join(exc.format_message().split()).rstrip(".")
        return f"Error: {message}. See '{where} --help'."
    if name in COMPLETION_FLAGS:
        return f"Error: {name} is an option of kvsize itself, not of a command: run 'kvsize {name}'."
    command = getattr(getattr(exc, "ctx", None), "command", None)
    names = [
        opt
        for param in (command.get_params(exc.ctx) if command is not None else ())
        if not getattr(param, "hidden", False)
        for opt in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ()))
        if opt.startswith("-")
    ]
    # `-ctx` reaches click as the short option -c: the word typed is what to match.
    typed = next((a for a in argv if not a.startswith("--") and a.startswith(name) and len(a) > 2), name)
    typed = typed.split("=", 1)[0]
    close = close_options(typed, names)
    shown = " ".join(typed.split())
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return f"Error: No such option: {shown}.{hint} See '{where} --help'."


def close_options(typed: str, names: Sequence[str]) -> list[str]:
    """The option names `typed` plausibly mistypes, the closest first, at most SUGGESTIONS: one edit away (a
    letter added, dropped, changed, or two neighbours swapped: --emitt, --alocation, --emit-dri, --jsn; two
    edits for a name over 6 letters), or a name `typed` begins (--gp: --gpu, --gpu-mem, --gpu-util). `_` is
    `-`. Anything further is no typo of it, and gets no suggestion."""

    def core(option: str) -> str:
        return option.lstrip("-").lower().replace("_", "-")

    word = core(typed)
    if not word:
        return []
    ranked = []
    for name in dict.fromkeys(names):
        other = core(name)
        begins = other.startswith(word) and other != word
        # 0: the same name spelt another way (--kv_dtype, --JSON); two letters match only as a beginning
        distance = 1 if begins else _edit_distance(word, other) if len(word) > 2 else 99
        if distance <= (2 if len(word) > 6 else 1):
            ranked.append((distance, not begins, abs(len(other) - len(word)), name))
    return [name for *_, name in sorted(ranked)[:SUGGESTIONS]]


def _edit_distance(a: str, b: str) -> int:
    """Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`: optimal string alignment."""
    before: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        current = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            current[j] = min(row[j] + 1, current[j - 1] + 1, row[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                current[j] = min(current[j], before[j - 2] + 1)
        before, row = row, current
    return row[-1]


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
    # Completion is the group's own --install-completion / --show-completion (below): typer's, but with $SHELL
    # where the parent shell cannot be found, and shown on the overview in one line each.
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


def _install_completion(value: bool) -> None:
    if value:
        from typer._completion_shared import install

        shell, path = install(shell=_shell(), prog_name="kvsize", complete_var=COMPLETE_VAR)
        typer.echo(f"{shell} completion installed in {path}: a new terminal completes kvsize's commands and options")
        raise typer.Exit()


def _show_completion(value: bool) -> None:
    if value:
        from typer._completion_shared import get_completion_script

        typer.echo(get_completion_script(prog_name="kvsize", complete_var=COMPLETE_VAR, shell=_shell()))
        raise typer.Exit()


def _shell() -> str:
    """The shell kvsize runs in, as typer finds it (shellingham reads the parent processes), else the login
    shell ($SHELL): the first of them typer writes completion for (a script's `sh` parent is none)."""
    from typer._completion_shared import Shells, _get_shell_name

    found = [_get_shell_name(), os.path.basename(os.environ.get("SHELL", ""))]
    shell = next((name for name in found if name in {s.value for s in Shells}), None)
    if shell is None:
        raise typer.BadParameter(
            f"no completion for {found[0] or 'an unknown shell'}: run it from bash, zsh, fish or PowerShell"
        )
    return shell


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.", metavar=""),
    ] = False,
    install_completion: Annotated[
        bool,
        typer.Option(
            COMPLETION_FLAGS[0],
            callback=_install_completion,
            is_eager=True,
            help="Install tab completion for this shell.",
            metavar="",
        ),
    ] = False,
    show_completion: Annotated[
        bool,
        typer.Option(
            COMPLETION_FLAGS[1],
            callback=_show_completion,
            is_eager=True,
            help="Print the completion script of this shell.",
            metavar="",
        ),
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
    own = argv[0] in ("--version", *COMPLETION_FLAGS)  # the group's own flags, which exit: no command to build
    lean.registered_commands = [c for c in app.registered_commands if c.name == name and not own]
    if not own:  # the group's flags come first or not at all: a command's run builds none of them
        lean.callback()(_command_run)
    return lean


def _command_run() -> None:
    """The group's callback in a command's run: no options of its own."""


def main() -> None:
    """Console-script entry point. Output that cannot be written (a full disk, a closed stdout) is exit 3."""
    from kvsize.cli.streams import run_checked

    run_checked(app_for(sys.argv[1:]))
