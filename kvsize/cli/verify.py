"""`kvsize verify MODEL` and `kvsize MODEL --verify`: run the model with transformers and check kvsize's numbers.

Registered on the app by kvsize/cli/app.py. Module level holds only typer and
the option types: torch, transformers, pydantic and rich load inside the command, so `kvsize --help` stays light.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from kvsize.cli.options import (
    BatchOpt,
    DebugOpt,
    DeviceOpt,
    EncoderLenOpt,
    EngineVersionOpt,
    JsonOpt,
    KvDtypeOpt,
    LayersOpt,
    ModelArg,
    ReportOpt,
    RevisionOpt,
    ToleranceOpt,
    TrustRemoteCodeOpt,
    make_console,
    split_list,
    user_errors,
)
from kvsize.errors import EnvironmentProblem, ExitCode, UsageError

VerifyCtxOpt = Annotated[
    str | None,
    typer.Option(
        "--ctx",
        "--max-model-len",
        help="Tokens in the cache at the end of each run: 4096, 4k, 32k; lists: 4k,32k. Default: 4k (cuda, meta), "
        "256 (cpu).",
        show_default=False,
        metavar="TOKENS",
    ),
]
DecodeStepsOpt = Annotated[
    str,
    typer.Option(
        "--decode-steps",
        help="One-token decode steps after the prefill (the cache ends at ctx tokens).",
        metavar="N",
    ),
]
CacheImplOpt = Annotated[
    str,
    typer.Option(
        "--cache-implementation", help="transformers cache: dynamic (DynamicCache) or static.", metavar="CACHE"
    ),
]
MAX_DECODE_STEPS = 65_536  # one forward pass each: more would run for hours and prove nothing new
MaxCacheLenOpt = Annotated[
    str | None,
    typer.Option("--max-cache-len", help="StaticCache length (default: ctx).", show_default=False, metavar="TOKENS"),
]


VERIFY_EPILOG = (
    "Examples:\n"
    "kvsize verify meta-llama/Llama-3.1-8B --ctx 4k,32k --batch 1,8\n"
    "kvsize verify deepseek-ai/DeepSeek-V3 --device meta --ctx 128k\n"
    "kvsize verify Qwen/Qwen3-8B --device cpu --layers 2 --ctx 512 --json"
)


def verify_command(
    model: ModelArg,
    ctx: VerifyCtxOpt = None,
    batch: BatchOpt = "1",
    kv_dtype: KvDtypeOpt = "auto",
    device: DeviceOpt = None,
    layers: LayersOpt = None,
    tolerance: ToleranceOpt = None,
    decode_steps: DecodeStepsOpt = "4",
    cache_implementation: CacheImplOpt = "dynamic",
    max_cache_len: MaxCacheLenOpt = None,
    engine_version: EngineVersionOpt = None,
    encoder_len: EncoderLenOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
    revision: RevisionOpt = None,
    json_output: JsonOpt = False,
    report: ReportOpt = None,
    debug: DebugOpt = False,
) -> None:
    """Build MODEL with transformers, run it, and compare the cache it holds with --engine hf, layer by layer.

    A prefill and a few decode steps; exit 1 on any difference. Needs the 'verify' extra."""
    run_verify(
        model,
        ctx=ctx,
        batch=batch,
        kv_dtype=kv_dtype,
        device=device,
        layers=layers,
        tolerance=tolerance,
        decode_steps=decode_steps,
        cache_implementation=cache_implementation,
        max_cache_len=max_cache_len,
        engine_version=engine_version,
        encoder_len=encoder_len,
        trust_remote_code=trust_remote_code,
        revision=revision,
        json_output=json_output,
        report=report,
        debug=debug,
    )


def size_verify(model: str, *, verify: bool, **options: Any) -> None:
    """`kvsize MODEL --verify ...`: the verify command; verification options without --verify are an error."""
    with user_errors(options["debug"]):
        if not verify:
            raise UsageError(
                "--device, --layers, --tolerance, --report and --trust-remote-code only apply to a verification",
                hint="Add --verify, or use 'kvsize verify MODEL'.",
            )
    run_verify(model, decode_steps="4", cache_implementation="dynamic", max_cache_len=None, **options)


def run_verify(
    model: str,
    *,
    ctx: str | None,
    batch: str,
    kv_dtype: str,
    device: str | None,
    layers: str | None,
    tolerance: str | None,
    decode_steps: str,
    cache_implementation: str,
    max_cache_len: str | None,
    engine_version: str | None,
    encoder_len: str | None,
    trust_remote_code: bool,
    revision: str | None,
    json_output: bool,
    report: str | None,
    debug: bool,
) -> None:
    with user_errors(debug):
        from kvsize.deployment import from_options
        from kvsize.resolve import load_model_config
        from kvsize.units import parse_count, parse_tokens, parse_tolerance
        from kvsize.verify import DEFAULT_TOLERANCE, VerifyOptions, render_markdown, verify

        if device is not None and device.strip().lower() not in ("cuda", "cpu", "meta"):
            raise UsageError(
                f"unknown device '{device}'" if device.strip() else "empty --device", hint="Choose cuda, cpu or meta."
            )
        settings = from_options(encoder_len=encoder_len, revision=revision)
        options = VerifyOptions(
            contexts=[parse_tokens(c) for c in split_list(ctx)] if ctx else (),
            batches=[parse_count(b, "batch size") for b in split_list(batch)],
            kv_dtypes=split_list(kv_dtype),
            device=device,
            layers=parse_count(layers, "--layers") if layers is not None else None,
            tolerance=DEFAULT_TOLERANCE if tolerance is None else parse_tolerance(tolerance, "--tolerance"),
            decode_steps=parse_count(decode_steps, "--decode-steps", maximum=MAX_DECODE_STEPS, allow_zero=True),
            engine_version=engine_version,
            cache_implementation=cache_implementation.strip().lower(),
            max_cache_len=parse_tokens(max_cache_len) if max_cache_len is not None else None,
            trust_remote_code=trust_remote_code,
            encoder_len=settings.encoder_len,
        )
        with _report_file(report) as write_report:  # checked before the run: a result is never lost to a bad path
            loaded = load_model_config(model, revision=settings.revision)
            with _rich_progress() as progress:
                result = verify(loaded, options, progress)
            write_report(render_markdown(result))
    if json_output:
        from kvsize.record import to_json
        from kvsize.text import json_safe

        typer.echo(json_safe(to_json(result)))
    else:
        _render(result)
    if not result.passed:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


@contextmanager
def _report_file(report: str | None) -> Iterator[Any]:
    """--report: opened for writing before the run (a missing folder, a directory or a read-only place fails
    now, not after minutes of verification); yields the writer. A file created here is removed if the run fails."""
    import os

    if report is None:
        yield lambda text: None
        return
    from kvsize.safe_io import output_path, write_output

    path = output_path(report, "--report")  # a path that cannot be a file: exit 2; refused by the system: exit 3
    existed = path.exists()
    try:
        with path.open("a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise EnvironmentProblem(
            f"--report: cannot write {report} ({exc.strerror or type(exc).__name__})",
            hint="Choose a writable path.",
        ) from None

    def write(text: str) -> None:
        write_output(path, text, "--report")

    try:
        yield write
    except BaseException:
        if not existed and path.is_file() and os.path.getsize(path) == 0:
            path.unlink(missing_ok=True)
        raise


class _RichSteps:
    """Progress.step for the verifier: a spinner per step on stderr (a terminal), one line per finished step."""

    def __init__(self, progress: Any, console: Any) -> None:
        self.progress = progress
        self.console = console

    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        from kvsize.text import markup

        description = markup(description)
        task = self.progress.add_task(description, total=None) if self.progress is not None else None
        start = time.perf_counter()
        try:
            yield
        finally:
            if task is not None:
                self.progress.remove_task(task)
            self.console.print(f"[dim]{description}: {time.perf_counter() - start:.1f} s[/]")


@contextmanager
def _rich_progress() -> Iterator[_RichSteps]:
    """Spinners on a terminal; plain lines when stderr is a file or a pipe (logs stay readable)."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, highlight=False, emoji=False)
    if not console.is_terminal:
        yield _RichSteps(None, console)
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        yield _RichSteps(progress, console)


def _render(result: Any) -> None:
    from kvsize.text import markup as escape  # rich markup escaped, control characters made visible

    console = make_console()
    console.print(f"[bold]{escape(result.model)}[/]  [dim]({escape(result.source)})[/]")
    console.print(
        f"device {escape(result.device)}, {escape(result.weights)} weights, {result.layers_built} of "
        f"{result.layers_total} layers built, transformers {result.transformers_version}, torch {result.torch_version}"
    )
    console.print(f"[dim]hf: {escape(result.engine_rule)}[/]")
    for table in _comparison_tables(result, max(console.width, 40)):
        console.print(table)
    for s in result.scenarios:
        for line in (*s.reasons, *([s.finding] if s.finding else [])):
            console.print(f"[yellow]ctx {s.ctx} x batch {s.batch}:[/] {escape(line)}")
        if s.full_model is not None:
            console.print(f"[dim]ctx {s.ctx} x batch {s.batch}: full model {escape(s.full_model.note)}[/]")
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    verdict = "[green]PASS[/]" if result.passed else "[red]FAIL[/]"
    with_allocator = any(s.allocator_delta_bytes is not None for s in result.scenarios)
    allocator = (
        f"; allocator within {100 * result.tolerance:.2f}%"
        if with_allocator
        else f" (no allocator figure on {escape(result.device)})"
    )
    console.print(f"{verdict}: logical bytes must match exactly{allocator}")


def _comparison_tables(result: Any, width: int) -> list[Any]:
    """The cache held against the prediction, one row per scenario: stacked tables that repeat ctx, batch, dtype and
    the verdict when the console is narrow (report.py's layout rule: never cut a number or a verdict with "…").
    The allocator and full-model columns appear only when some scenario has such a figure (CUDA; --layers)."""
    from kvsize.report import Column, stacked_tables
    from kvsize.text import markup as escape
    from kvsize.units import format_bytes

    verdicts = {"match": "[green]match[/]", "mismatch": "[red]MISMATCH[/]", "oom": "[yellow]OOM[/]"}
    rows: list[list[str]] = []
    for s in result.scenarios:
        full = s.full_model
        full_text = "-"
        if full is not None:
            measured = format_bytes(full.measured_bytes) if full.measured_bytes is not None else "n/a"
            full_text = f"{format_bytes(full.predicted_bytes)} / {measured}"
        alloc = "-"
        if s.allocator_delta_bytes is not None:
            alloc = f"{format_bytes(s.allocator_delta_bytes)} ({s.allocator_difference_pct:+.2f}%)"
        rows.append(
            [
                f"{s.ctx:,}",
                f"{s.batch:,}",
                escape(s.kv_dtype),
                verdicts[s.status],
                f"{s.predicted_bytes:,} B",
                "-" if s.measured_bytes is None else f"{s.measured_bytes:,} B",
                "-" if s.difference_bytes is None else f"{s.difference_bytes:+,} B",
                alloc,
                "-" if s.allocator_peak_bytes is None else format_bytes(s.allocator_peak_bytes),
                full_text,
            ]
        )
    columns = [
        Column("ctx", key=True),
        Column("batch", key=True),
        Column("dtype", "left", key=True),
        Column("result", "left", key=True),
        Column("predicted"),
        Column("measured"),
        Column("diff"),
        Column("allocator delta", priority=1),
        Column("peak", priority=1),
        Column("full model (predicted / measured)", priority=2),
    ]
    optional = {"allocator delta", "peak", "full model (predicted / measured)"}
    shown = [i for i, c in enumerate(columns) if c.header not in optional or any(r[i] != "-" for r in rows)]
    return stacked_tables(
        "Cache held vs kvsize --engine hf", [columns[i] for i in shown], [[r[i] for i in shown] for r in rows], width
    )
