"""`kvsize log FILE|-`: an engine's start-up log against kvsize's model, figure by figure."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import msgspec
import typer

from kvsize.cli.options import (
    CalibrationOpt,
    DebugOpt,
    EngineVersionOpt,
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

MIB = 1024 * 1024
MAX_LOG_BYTES = 64 * MIB
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


def _stdin_bytes(limit: int) -> bytes:
    """At most `limit` + 1 bytes of standard input, as bytes (the log's own encoding is decided by `decode_log`,
    not by the locale's)."""
    from kvsize.errors import UsageError

    stream = sys.stdin
    if stream is None:  # started with standard input closed (<&-)
        raise UsageError("there is no standard input to read the log from", hint="Pipe a log in, or give a file.")
    source: Any = getattr(stream, "buffer", stream)
    chunks: list[bytes] = []
    total = 0
    try:
        while total <= limit:  # bounded: stops one chunk past the cap, never reads a stream to its end
            chunk = source.read(min(MIB, limit + 1 - total))
            if not chunk:
                break
            if isinstance(chunk, str):  # a text-only stream (no .buffer)
                chunk = chunk.encode("utf-8", "surrogateescape")
            chunks.append(chunk)
            total += len(chunk)
    except (OSError, ValueError) as exc:  # ValueError: a closed stream
        raise UsageError(f"cannot read standard input ({exc})", hint="Pipe a log in, or give a file.") from None
    return b"".join(chunks)


def decode_log(data: bytes, name: str) -> tuple[str, list[str]]:
    """The log's text and a note when some bytes were not UTF-8.

    Engines write UTF-8, but a log is a capture: a progress bar or a `head -c` cut mid-character, a path or a
    model name in Latin-1, a terminal's stray bytes. The figures kvsize reads are ASCII, so refusing a whole log
    for one odd byte would lose them: undecodable bytes become U+FFFD, and a note says how many. A file that is
    not text at all (compressed, binary, over 1% undecodable or NUL) is refused, exit 2; a UTF-16 capture
    (PowerShell's `>` and Tee-Object write one, with a byte-order mark) is decoded as such."""
    from kvsize.errors import UsageError

    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16"), []
        except UnicodeDecodeError:
            raise UsageError(f"{name} is not a text log (a broken UTF-16 file)", hint=_TEXT_HINT) from None
    if data.startswith((b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd", b"PK\x03\x04")):
        raise UsageError(f"{name} is compressed, not a text log", hint="Decompress it first (gunzip, unzstd, unzip).")
    text = data.decode("utf-8-sig", errors="replace")
    bad = text.count("\ufffd") - data.count("\ufffd".encode())  # replacement characters the log really holds
    nul = data.count(b"\x00")
    if bad + nul > max(16, len(data) // 100):
        what = f"{bad:,} byte sequences are not UTF-8" if bad > nul else f"{nul:,} NUL bytes: UTF-16 without a BOM?"
        raise UsageError(f"{name} is not a text log ({what})", hint=_TEXT_HINT)
    notes = (
        [f"{bad:,} byte sequence{'s' if bad > 1 else ''} in the log that are not UTF-8 read as U+FFFD"] if bad else []
    )
    return text, notes


_TEXT_HINT = "Give the engine's start-up log as text (UTF-8), as the engine wrote it."


def read_log(path: str) -> tuple[str, list[str]]:
    """The log at `path` (- for standard input) as text, and notes on its decoding. A file is read through
    kvsize.safe_io (a regular file only: a FIFO or a device is refused without blocking); either is capped at
    MAX_LOG_BYTES."""
    from kvsize.errors import ConfigError, UsageError
    from kvsize.resolve import printable
    from kvsize.safe_io import read_small_file

    if path == "-":
        data = _stdin_bytes(MAX_LOG_BYTES)
        if len(data) > MAX_LOG_BYTES:
            raise UsageError(
                f"standard input is over {MAX_LOG_BYTES // MIB} MiB", hint="Give the start-up part of the log only."
            )
        return decode_log(data, "standard input")
    try:
        data = read_small_file(Path(path).expanduser(), max_bytes=MAX_LOG_BYTES, what="log")
    except ConfigError as exc:  # missing, unreadable, a folder, a FIFO, a device, over the cap: exit 2
        raise UsageError(f"cannot read log: {exc}", hint=exc.hint or "Give a log file, or -.") from None
    return decode_log(data, printable(path))


def _stdin_is(path: Path) -> bool:
    """Whether standard input (`kvsize log - < vllm.log`) is the file `path`: the same inode."""
    import os

    try:
        read, written = os.fstat(sys.stdin.fileno()), os.stat(path)
    except (OSError, ValueError, AttributeError):  # no such file yet, no real stdin (a test runner's)
        return False
    return (read.st_dev, read.st_ino) == (written.st_dev, written.st_ino)


def write_calibration(target: Path, calibration: Any) -> None:
    import yaml

    from kvsize.safe_io import write_output

    how = "a running server" if getattr(calibration, "overhead_bytes", None) is not None else "one engine start-up"
    command = "kvsize probe" if how == "a running server" else "kvsize log"
    text = f"# kvsize calibration: overheads {how} measured ({command} --save-calibration)\n"
    text += yaml.safe_dump(calibration.as_dict(), sort_keys=False)
    write_output(target, text, "--save-calibration")  # refused: exit 3


def measured_deployment(
    spec: Any,
    loaded: Any,
    *,
    gpu: str | None,
    tp: str,
    pp: str,
    ctx: str | None,
    gpu_util: str | None,
    kv_dtype: str,
    weights_mem: str | None,
    weights_dtype: str | None,
    calibration: str | None,
    served_dtype: str | None = None,
) -> Any:
    """The deployment a log or a running server is checked against (kvsize log, kvsize probe): the card from
    --gpu, the weights from --weights-mem or kvsize's own figure (at `served_dtype`, the dtype the log says the
    engine ran the checkpoint in), the layout and settings the user states."""
    from kvsize.calibration import Deployment, read_calibration
    from kvsize.engines.context import Device
    from kvsize.units import parse_count, parse_fraction, parse_size

    profile = None
    if gpu is not None:
        from kvsize.profiles import resolve_gpu

        profile = resolve_gpu(gpu)
    weights = None
    if weights_mem is not None:
        weights = parse_size(weights_mem)
    elif loaded is not None and spec is not None:
        from kvsize.weights import find_weights

        cast = served_dtype if served_dtype not in (None, spec.model_dtype) else None
        weights = find_weights(
            loaded, model_dtype=spec.model_dtype, weights_dtype=weights_dtype, served_dtype=cast
        ).bytes
    towers = audio = 0
    if loaded is not None and spec is not None and weights_mem is None:
        from kvsize.weights import tower_bytes

        towers = tower_bytes(loaded.raw, spec.model_dtype)
        audio = tower_bytes(loaded.raw, spec.model_dtype, ("audio",))
    return Deployment(
        spec=spec,
        tower_bytes=towers,
        audio_tower_bytes=audio,
        memory_bytes=profile.memory_bytes if profile is not None else None,
        device=Device.from_profile(profile) if profile is not None else None,
        weights_bytes=weights,
        tp=parse_count(tp, "tensor-parallel size") if tp else None,
        pp=parse_count(pp, "pipeline-parallel size") if pp else None,
        max_model_len=parse_count(ctx, "max_model_len") if ctx else None,
        gpu_util=parse_fraction(gpu_util, "--gpu-util") if gpu_util is not None else None,
        kv_dtype=kv_dtype or None,
        calibration=read_calibration(calibration) if calibration is not None else None,
        gpu_id=profile.id if profile is not None else None,
        model_id=loaded.model if loaded is not None else None,
    )


def _resolve_model(log: Any, config: str | None, notes: list[str]) -> Any:
    """(spec, loaded config) of the log's model, or (None, None) when kvsize cannot find it (llama.cpp logs name
    a GGUF file, not a config: only --config)."""
    from kvsize.calibration import resolve_measured_model

    if log.engine == "llamacpp" and config is None:
        return None, None
    return resolve_measured_model(log.model, config, notes)


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
    engine_version: EngineVersionOpt = None,
    calibration: CalibrationOpt = None,
    save_calibration: SaveCalibrationOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Compare each figure in an engine's start-up log (vLLM, SGLang, llama.cpp, TensorRT-LLM) with kvsize's prediction.

    The figures: KV memory, pool tokens/blocks, concurrency, weights, llama.cpp cache sizes.

    Exit 0: every figure within --tolerance; 1: some are not, or the start-up failed; 2: not an engine log, or
    nothing to predict."""
    with user_errors(debug):
        from kvsize.calibration import calibration_from_log, check_log, model_spec, unversioned_vllm_release
        from kvsize.engine_log import parse_log
        from kvsize.errors import UsageError
        from kvsize.resolve import printable

        if not math.isfinite(tolerance) or tolerance < 0:  # inf would pass an infinite error, nan fail every figure
            raise UsageError(f"--tolerance must be a number >= 0, got {tolerance}")
        name = "standard input" if file == "-" else printable(file)
        cal_target = None
        if save_calibration is not None:  # '' too: output_path refuses an empty path (a mistyped variable)
            from kvsize.safe_io import output_path

            # Before any work: exit 2 or 3 now; never the log itself (safe_io compares paths and inodes).
            cal_target = output_path(save_calibration, "--save-calibration", inputs=(None if file == "-" else file,))
            if file == "-" and _stdin_is(cal_target):
                raise UsageError(
                    f"--save-calibration would overwrite the log it reads ({name})",
                    hint="Give --save-calibration another file.",
                )
        text, read_notes = read_log(file)
        log = parse_log(text)
        del text  # up to MAX_LOG_BYTES: not kept while the model loads
        if log is None:
            raise UsageError(
                f"{name} is not an engine start-up log kvsize can place",
                hint="kvsize reads vLLM, SGLang, llama.cpp and TensorRT-LLM start-up logs.",
            )
        notes: list[str] = [*read_notes, *log.notes]
        if engine_version is not None:  # the release the user says ran: its era's rules, over what the log says
            if log.engine_version and log.engine_version != engine_version.strip():
                notes.append(
                    f"release {engine_version.strip()} from --engine-version (the log says {log.engine_version})"
                )
            log = msgspec.structs.replace(log, engine_version=engine_version.strip())
        elif (release := unversioned_vllm_release(log)) is not None:
            notes.append(
                f"the log prints no release: sized with the rules of vLLM {release}, the newest kvsize has read "
                + ("that sizes its pool after warm-up, as this log does" if log.settings.get("kv_sizing") else
                   "that sizes its pool by profiling, as this log's lines do")
                + " (pass --engine-version to name the one that ran)"
            )  # fmt: skip
        elif not log.engine_version and log.engine in ("sglang", "trtllm"):
            notes.append(
                "the log prints no release: sized with the rules of the newest release kvsize has read "
                "(pass --engine-version to name the one that ran)"
            )
        spec, loaded = _resolve_model(log, config, notes)
        dep = measured_deployment(
            spec,
            loaded,
            gpu=gpu,
            tp=tp,
            pp=pp,
            ctx=ctx,
            gpu_util=gpu_util,
            kv_dtype=kv_dtype,
            weights_mem=weights_mem,
            weights_dtype=weights_dtype,
            calibration=calibration,
            served_dtype=served.model_dtype if (served := model_spec(log, spec)) is not None else None,
        )
        result = check_log(log, dep)
        result.notes[:0] = notes
        if log.failure is None and not result.figures:
            raise UsageError(
                f"nothing in {name} that kvsize can predict"
                + (f" ({'; '.join(result.notes[:MAX_MESSAGE_NOTES])})" if result.notes else ""),
            )
        if log.failure is None and not any(f.name != WEIGHTS_FIGURE for f in result.figures):
            # Only the weights compared: within tolerance, but the KV cache, the point of the check, was not.
            result.notes.append(
                "no KV cache figure compared: the log printed none (it may end before the engine sized its KV cache)"
                if not log.has_kv_figure()
                else "no KV cache figure compared: kvsize predicted none of those the log printed"
            )
        if cal_target is not None:
            if log.failure is not None:
                result.notes.append(f"--save-calibration: nothing written, the start-up failed ({name})")
            else:
                measured = calibration_from_log(log, gpu=dep.gpu_id, source=name)
                if measured is None:
                    raise UsageError(f"{name} prints no overheads to calibrate from", hint="Use a vLLM start-up log.")
                write_calibration(cal_target, measured)
    passed = log.failure is None and result.passed(tolerance)
    emit(
        lambda console: render_log_check(console, result, tolerance, failure=log.failure),
        lambda: json_document(result, tolerance, failure=log.failure),
        json_output,
    )
    if not passed:
        raise typer.Exit(1)


WEIGHTS_FIGURE = "weights per rank"  # kvsize.calibration's one figure that is not about the KV cache
MAX_MESSAGE_NOTES = 5  # an error message quotes at most this many notes


def _finite(value: Any) -> Any:
    """`value` with every non-finite float replaced by None: JSON has no Infinity or NaN."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def json_document(result: Any, tolerance: float, *, failure: str | None) -> str:
    """The --json document: LogCheck.as_dict, "pass" false when the start-up failed, and "startup_failed" (the
    reason, or null). Strict JSON (allow_nan=False): an error against a logged 0 is null, never Infinity."""
    import json

    data = result.as_dict(tolerance)
    data["pass"] = bool(data["pass"]) and failure is None
    data["startup_failed"] = failure
    return json.dumps(_finite(data), indent=2, allow_nan=False)


def render_log_check(
    console: Any,
    result: Any,
    tolerance: float,
    *,
    failure: str | None = None,
    source: str = "log",
    measured: str = "logged",
) -> None:
    """The figures, one row each with an ok/off word; `source` names what was read (`log`, `at URL` for
    kvsize probe) and `measured` the column of its figures."""
    from rich.table import Table

    from kvsize.text import from_markup, markup

    # Model names, notes and the failure line come from the log: escaped, never read as rich markup.
    version = f" {markup(result.engine_version)}" if result.engine_version else ""
    title = f"{markup(result.engine)}{version} {source}" + (f": {markup(result.model)}" if result.model else "")
    if result.figures:
        table = Table(title=from_markup(title), title_justify="left")
        for column in ("figure", measured, "kvsize", "error", "result", "unit", "kvsize given"):
            table.add_column(column, justify="right" if column in (measured, "kvsize", "error") else "left")
        for f in result.figures:
            ok = f.within(tolerance)
            # a budget part that differs is a pointer, not a verdict: "differs" in yellow, not "off" in red
            style = "green" if ok else ("yellow" if f.part else "bold red")
            word = "ok" if ok else ("differs" if f.part else "off")
            error = f"{f.error_pct:+.2f}%" if math.isfinite(f.error_pct) else "n/a"  # against a logged 0
            table.add_row(
                markup(f"-\u00a0{f.name}" if f.part else f.name),  # no break after the dash
                f"{f.logged:,.2f}".rstrip("0").rstrip("."),
                f"{f.predicted:,.2f}".rstrip("0").rstrip("."),
                from_markup(f"[{style}]{error}[/{style}]"),
                # A word as well as a colour: without colour (NO_COLOR, a CI log) the row still says it is off.
                from_markup(f"[{style}]{word}[/{style}]"),
                markup(f.unit),
                markup(f.basis),
            )
        console.print(table)
    else:
        console.print(from_markup(title))
    for note in result.notes:
        console.print(from_markup(f"note: {markup(note)}"))
    if failure is not None:
        console.print(from_markup(f"[bold red]start-up failed[/bold red]: {markup(failure)}"))
        return
    judged = [f for f in result.figures if not f.part]
    off = sum(not f.within(tolerance) for f in judged)
    if off:
        count = f"{off} of {len(judged)} figure{'s' if len(judged) != 1 else ''} off"
        console.print(from_markup(f"[bold red]{count}[/bold red]: outside {tolerance:g}%"))
    else:
        console.print(from_markup(f"[green]all within[/green] {tolerance:g}%"))
    differing = [f for f in result.figures if f.part and not f.within(tolerance)]
    if differing:
        listed = ", ".join(f"{f.name} {f.error_pct:+.1f}%" for f in differing if math.isfinite(f.error_pct))
        console.print(
            from_markup(f"[dim]budget parts (- rows) that differ, where to calibrate: {markup(listed)}[/dim]")
        )
