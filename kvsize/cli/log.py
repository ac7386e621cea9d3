"""`kvsize log FILE|-`: an engine's start-up log against kvsize's model, figure by figure."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from kvsize.cli.options import (
    CalibrationOpt,
    DebugOpt,
    GpuOpt,
    GpuUtilOpt,
    JsonOpt,
    KvDtypeOpt,
    PpOpt,
    TpOpt,
    WeightsDtypeOpt,
    emit,
    user_errors,
)

MAX_LOG_BYTES = 64 * 1024 * 1024
LOG_EPILOG = "Example: vllm serve ... 2>&1 | tee vllm.log; kvsize log vllm.log --gpu h100"

LogFileArg = Annotated[
    str, typer.Argument(help="An engine's start-up log, or - for standard input.", show_default=False, metavar="FILE")
]
ConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--config",
        help="The model's config.json (or its folder), when the log names a model kvsize cannot look up.",
        show_default=False,
        metavar="PATH",
    ),
]
LogToleranceOpt = Annotated[
    float,
    typer.Option("--tolerance", help="Largest error, in percent, a figure may have and still pass.", metavar="PERCENT"),
]
SaveCalibrationOpt = Annotated[
    str | None,
    typer.Option(
        "--save-calibration",
        help="Write the overheads this start-up measured (activation peak, non-torch, CUDA graphs, weights per "
        "rank) to a file for --calibration.",
        show_default=False,
        metavar="FILE",
    ),
]
WholeWeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--weights-mem",
        help="The whole model's weights, split over tp x pp (default: looked up).",
        show_default=False,
        metavar="SIZE",
    ),
]
MaxModelLenOpt = Annotated[
    str | None,
    typer.Option(
        "--ctx",
        "--max-model-len",
        help="max_model_len where the log does not say.",
        show_default=False,
        metavar="TOKENS",
    ),
]


def read_log(path: str) -> str:
    from kvsize.errors import UsageError

    if path == "-":
        return sys.stdin.read(MAX_LOG_BYTES)
    try:
        with Path(path).open("rb") as fh:
            data = fh.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read log '{path}': {exc.strerror or exc}", hint="Give a log file, or -.") from None
    if len(data) > MAX_LOG_BYTES:
        raise UsageError(f"log '{path}' is over {MAX_LOG_BYTES // 1024**2} MiB", hint="Give the start-up part only.")
    return data.decode("utf-8", errors="replace")


def write_calibration(path: str, calibration: Any) -> None:
    import yaml

    from kvsize.safe_io import output_path, write_output

    text = "# kvsize calibration: overheads one engine start-up measured (kvsize log --save-calibration)\n"
    text += yaml.safe_dump(calibration.as_dict(), sort_keys=False)
    write_output(output_path(path, "--save-calibration"), text, "--save-calibration")  # refused: exit 3


def _resolve_model(log: Any, config: str | None, notes: list[str]) -> Any:
    """(spec, loaded config) of the log's model, or (None, None) when kvsize cannot find it."""
    from kvsize.config import parse_config
    from kvsize.errors import EnvironmentProblem, KvsizeError
    from kvsize.resolve import load_model_config

    ref = config or log.model
    if not ref or log.engine == "llamacpp" and config is None:
        return None, None
    try:
        loaded = load_model_config(ref)
        return parse_config(loaded.raw, source=loaded.location), loaded
    except EnvironmentProblem as exc:
        notes.append(f"model '{ref}' not loaded ({exc}); pass --config")
    except KvsizeError as exc:
        if config is not None:
            raise
        notes.append(f"model '{ref}' not found ({exc}); pass --config")
    return None, None


def log_command(
    file: LogFileArg,
    gpu: GpuOpt = None,
    config: ConfigOpt = None,
    tp: TpOpt = "",
    pp: PpOpt = "",
    ctx: MaxModelLenOpt = None,
    gpu_util: GpuUtilOpt = None,
    kv_dtype: KvDtypeOpt = "",
    weights_mem: WholeWeightsOpt = None,
    weights_dtype: WeightsDtypeOpt = None,
    tolerance: LogToleranceOpt = 1.0,
    calibration: CalibrationOpt = None,
    save_calibration: SaveCalibrationOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare each figure in an engine's start-up log (vLLM, SGLang, llama.cpp, TensorRT-LLM) with kvsize's prediction.

    The figures: KV memory, pool tokens/blocks, concurrency, weights, llama.cpp cache sizes.

    Exit 0: every figure within --tolerance; 1: some are not; 2: not an engine log, or nothing to predict."""
    with user_errors(debug):
        from kvsize.calibration import Deployment, calibration_from_log, check_log, read_calibration
        from kvsize.engine_log import parse_log
        from kvsize.engines.context import Device
        from kvsize.errors import UsageError
        from kvsize.units import parse_count, parse_fraction, parse_size

        if tolerance < 0:
            raise UsageError(f"--tolerance must be >= 0, got {tolerance}")
        if save_calibration:
            from kvsize.safe_io import output_path

            output_path(save_calibration, "--save-calibration")  # before any work: exit 2 or 3 now
        text = read_log(file)
        log = parse_log(text)
        name = "standard input" if file == "-" else file
        if log is None:
            raise UsageError(
                f"{name} is not an engine start-up log kvsize can place",
                hint="kvsize reads vLLM, SGLang, llama.cpp and TensorRT-LLM start-up logs.",
            )
        notes: list[str] = []
        spec, loaded = _resolve_model(log, config, notes)
        profile = None
        if gpu is not None:
            from kvsize.profiles import resolve_gpu

            profile = resolve_gpu(gpu)
        cal = read_calibration(calibration) if calibration else None
        weights = None
        if weights_mem is not None:
            weights = parse_size(weights_mem)
        elif loaded is not None and spec is not None:
            from kvsize.weights import find_weights

            weights = find_weights(loaded, model_dtype=spec.model_dtype, weights_dtype=weights_dtype).bytes
        dep = Deployment(
            spec=spec,
            memory_bytes=profile.memory_bytes if profile is not None else None,
            device=Device.from_profile(profile) if profile is not None else None,
            weights_bytes=weights,
            tp=parse_count(tp, "tensor-parallel size") if tp else None,
            pp=parse_count(pp, "pipeline-parallel size") if pp else None,
            max_model_len=parse_count(ctx, "max_model_len") if ctx else None,
            gpu_util=parse_fraction(gpu_util, "--gpu-util") if gpu_util is not None else None,
            kv_dtype=kv_dtype or None,
            calibration=cal,
        )
        result = check_log(log, dep)
        result.notes[:0] = notes
        if save_calibration:
            measured = calibration_from_log(log, gpu=profile.id if profile is not None else None, source=name)
            if measured is None:
                raise UsageError(f"{name} prints no overheads to calibrate from", hint="Use a vLLM start-up log.")
            write_calibration(save_calibration, measured)
        if not result.figures:
            raise UsageError(
                f"nothing in {name} that kvsize can predict"
                + (f" ({'; '.join(result.notes)})" if result.notes else ""),
            )
    import json

    emit(
        lambda console: render_log_check(console, result, tolerance),
        lambda: json.dumps(result.as_dict(tolerance), indent=2),
        json_output,
    )
    if not result.passed(tolerance):
        raise typer.Exit(1)


def render_log_check(console: Any, result: Any, tolerance: float) -> None:
    from rich.table import Table

    version = f" {result.engine_version}" if result.engine_version else ""
    title = f"{result.engine}{version} log" + (f": {result.model}" if result.model else "")
    table = Table(title=title, title_justify="left")
    for column in ("figure", "logged", "kvsize", "error", "unit", "kvsize given"):
        table.add_column(column, justify="right" if column in ("logged", "kvsize", "error") else "left")
    for f in result.figures:
        ok = f.within(tolerance)
        style = "green" if ok else "bold red"
        table.add_row(
            f.name,
            f"{f.logged:,.2f}".rstrip("0").rstrip("."),
            f"{f.predicted:,.2f}".rstrip("0").rstrip("."),
            f"[{style}]{f.error_pct:+.2f}%[/{style}]",
            f.unit,
            f.basis,
        )
    console.print(table)
    for note in result.notes:
        console.print(f"note: {note}")
    verdict = "[green]all within[/green]" if result.passed(tolerance) else "[bold red]outside[/bold red]"
    console.print(f"{verdict} {tolerance:g}%")
