"""The `kvsize` command: parse, call the pipeline, render, map errors to exit codes.

Only typer, the stdlib, kvsize.dtypes and kvsize.errors are imported at module level, so that `--help` and
`--version` stay fast; everything else loads inside the commands.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kvsize.errors import ExitCode, KvsizeError

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
            _stderr("Interrupted.")
            sys.exit(130)
        except Exception as exc:
            # click's UsageError / BadParameter (typer vendors click, so recognise them by their interface).
            if hasattr(exc, "format_message") and getattr(exc, "exit_code", None) == 2:
                message = " ".join(exc.format_message().split()).rstrip(".")
                _stderr(f"Error: {message}. See 'kvsize --help'.")
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

ModelArg = Annotated[
    str, typer.Argument(help="Hub id (org/name), or a path to a config.json or its folder.", show_default=False)
]
CtxOpt = Annotated[
    str | None,
    typer.Option(
        "--ctx",
        "--max-model-len",
        help="Tokens per request: 131072, 128k (=131072), 1M; lists: 8k,32k,128k. "
        "Default: a small grid up to the model's maximum.",
        show_default=False,
    ),
]
BatchOpt = Annotated[str, typer.Option("--batch", "-b", help="Concurrent requests; lists allowed: 1,8,32.")]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        "--kv-cache-dtype",
        help="KV storage: auto (from the config), fp32, fp16, bf16, fp8 (=fp8_e4m3), "
        "fp8_e5m2, int8, nvfp4 (=fp4), mxfp4, int4, q8_0, q4_0, ...; lists allowed.",
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Whose allocation rule to apply: vllm, sglang, hf (transformers), trtllm, llamacpp, formula "
        "(engine-independent), or all (side by side).",
    ),
]
EngineVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-version",
        help="Engine release whose rule to mirror (default: the newest modelled).",
        show_default=False,
    ),
]
TpOpt = Annotated[str, typer.Option("--tp", "--tensor-parallel-size", help="Tensor-parallel GPUs per replica.")]
PpOpt = Annotated[str, typer.Option("--pp", "--pipeline-parallel-size", help="Pipeline-parallel stages.")]
BlockSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--block-size", help="Tokens per KV block (paged engines; default: the engine's).", show_default=False
    ),
]
BatchedTokensOpt = Annotated[
    str | None,
    typer.Option(
        "--max-num-batched-tokens",
        "--max-batched-tokens",
        help="Tokens per scheduler step (vLLM sliding-window bound; default 8192).",
        show_default=False,
    ),
]
GpuOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu", help="GPU profile id or alias (kvsize gpus): h100, h200, a100-80gb, mi300x, ...", show_default=False
    ),
]
GpuMemOpt = Annotated[
    str | None, typer.Option("--gpu-mem", help="Memory of a custom card: 24GiB, 80GB, ...", show_default=False)
]
ReserveOpt = Annotated[
    str | None,
    typer.Option(
        "--reserve",
        help="Memory kept out of the KV budget besides the weights. Default: 8% of the card, as vLLM's "
        "default gpu_memory_utilization 0.92 leaves.",
        show_default=False,
    ),
]
WeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--weights-mem", help="Override the weights' size: 15GiB, ... (default: looked up)", show_default=False
    ),
]
GpuUtilOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu-util",
        "--gpu-memory-utilization",
        "--mem-fraction-static",
        help="Share of the card the engine may use (vLLM default 0.92; SGLang from its reserve rule; TRT-LLM 0.9 "
        "of what is free after warm-up).",
        show_default=False,
    ),
]
KvMemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-memory",
        "--kv-cache-memory-bytes",
        help="KV memory per GPU, as given (skips the budget model): 6.5GiB, ...",
        show_default=False,
    ),
]
WeightsDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--weights-dtype",
        help="Count the weights at this precision instead: bf16, fp8, int4 (AWQ/GPTQ), mxfp4, ...",
        show_default=False,
    ),
]
CpuMemOpt = Annotated[
    str | None,
    typer.Option("--cpu-mem", help="CPU DRAM (or disk) offload tier size: 512GiB, ...", show_default=False),
]
LinkOpt = Annotated[
    str | None,
    typer.Option(
        "--link-bandwidth",
        help="GPU<->offload link in GB/s (default: the GPU's PCIe, 64 for Gen5 x16).",
        show_default=False,
    ),
]
PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        help="Write a chart of KV memory and concurrency against context: file.png or .svg (needs kvsize[plot]).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object (bytes as integers) instead of tables.")]
RevisionOpt = Annotated[
    str | None, typer.Option("--revision", help="Hub revision (branch, tag or commit).", show_default=False)
]
EncoderLenOpt = Annotated[
    int | None,
    typer.Option(
        "--encoder-len",
        min=0,
        help="Tokens each cross-attention layer attends to (default: one image).",
        show_default=False,
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the full traceback of errors (for bug reports).")]
# --- verification (kvsize/cli_verify.py; `kvsize verify` takes the same options) ---
VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Build the model with transformers, run it, and compare the cache it holds with --engine hf "
        "(same as 'kvsize verify'; needs the 'verify' extra).",
    ),
]
DeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--device", help="Verification device: cuda (default when a GPU is visible), cpu, meta.", show_default=False
    ),
]
LayersOpt = Annotated[
    int | None,
    typer.Option(
        "--layers",
        min=1,
        help="Verification: build only the first N decoder layers; per-layer figures are scaled to the full model.",
        show_default=False,
    ),
]
ToleranceOpt = Annotated[
    float | None,
    typer.Option(
        "--tolerance",
        min=0.0,
        help="Verification: allowed relative gap between the CUDA allocator's delta and the prediction "
        "(default 0.02). Logical bytes must match exactly.",
        show_default=False,
    ),
]
ReportOpt = Annotated[
    str | None, typer.Option("--report", help="Verification: also write a markdown report here.", show_default=False)
]
TrustRemoteCodeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Verification: run the custom code a config's auto_map names (only if you trust it).",
    ),
]


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")


@contextmanager
def user_errors(debug: bool = False) -> Iterator[None]:
    """The only place expected errors become output: one line on stderr, and the error's exit code."""
    try:
        yield
    except KvsizeError as exc:
        if debug or os.environ.get("KVSIZE_DEBUG"):
            raise
        message = " ".join(str(exc).split())
        hint = f" {' '.join(exc.hint.split())}" if exc.hint else ""
        _stderr(
            f"Error: {message}.{hint}" if not message.endswith((".", "?", ")")) or hint else f"Error: {message}{hint}"
        )
        raise typer.Exit(int(exc.exit_code)) from None


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


def _split(text: str) -> list[str]:
    """'8k,32k' -> ['8k', '32k']; empty items are dropped, and an empty option stays [''] so that parsing it
    reports the empty value instead of silently taking the default."""
    return [part for part in (p.strip() for p in text.split(",")) if part] or [text]


@app.command(SIZE_COMMAND, epilog="Example: kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100")
def size(
    model: ModelArg,
    ctx: CtxOpt = None,
    batch: BatchOpt = "1",
    kv_dtype: KvDtypeOpt = "auto",
    engine: EngineOpt = "vllm",
    engine_version: EngineVersionOpt = None,
    tp: TpOpt = "1",
    pp: PpOpt = "1",
    block_size: BlockSizeOpt = None,
    max_num_batched_tokens: BatchedTokensOpt = None,
    gpu: GpuOpt = None,
    gpu_mem: GpuMemOpt = None,
    gpu_util: GpuUtilOpt = None,
    kv_memory: KvMemoryOpt = None,
    reserve: ReserveOpt = None,
    weights_mem: WeightsOpt = None,
    weights_dtype: WeightsDtypeOpt = None,
    cpu_mem: CpuMemOpt = None,
    link_bandwidth: LinkOpt = None,
    plot: PlotOpt = None,
    encoder_len: EncoderLenOpt = None,
    revision: RevisionOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
    verify: VerifyOpt = False,
    device: DeviceOpt = None,
    layers: LayersOpt = None,
    tolerance: ToleranceOpt = None,
    report: ReportOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
) -> None:
    """Size the KV cache of MODEL over a grid of contexts, batch sizes and dtypes (the default command)."""
    if verify or device or layers or tolerance is not None or report or trust_remote_code:
        from kvsize.cli_verify import size_verify

        size_verify(
            model,
            verify=verify,
            ctx=ctx,
            batch=batch,
            kv_dtype=kv_dtype,
            engine_version=engine_version,
            device=device,
            layers=layers,
            tolerance=tolerance,
            report=report,
            trust_remote_code=trust_remote_code,
            encoder_len=encoder_len,
            revision=revision,
            json_output=json_output,
            debug=debug,
        )
        return
    with user_errors(debug):
        from kvsize.api import estimate_loaded, offload_settings
        from kvsize.budget import BudgetSettings
        from kvsize.resolve import load_model_config
        from kvsize.units import parse_count, parse_fraction, parse_size

        loaded = load_model_config(model, revision=revision)
        result = estimate_loaded(
            loaded,
            ctx=_split(ctx) if ctx is not None else None,
            batch=_split(batch),
            kv_dtype=_split(kv_dtype),
            engine=_split(engine),
            engine_version=engine_version,
            tp=parse_count(tp, "tensor-parallel size"),
            pp=parse_count(pp, "pipeline-parallel size"),
            engine_options={
                "block_size": parse_count(block_size, "block size") if block_size is not None else None,
                "max_num_batched_tokens": (
                    parse_count(max_num_batched_tokens, "batched-token budget")
                    if max_num_batched_tokens is not None
                    else None
                ),
            },
            gpu=gpu,
            gpu_mem=parse_size(gpu_mem) if gpu_mem is not None else None,
            reserve_bytes=parse_size(reserve, allow_zero=True) if reserve is not None else None,
            weights_bytes=parse_size(weights_mem) if weights_mem is not None else None,
            weights_dtype=weights_dtype,
            encoder_len=encoder_len,
            budget=BudgetSettings(
                gpu_util=parse_fraction(gpu_util, "--gpu-util") if gpu_util is not None else None,
                kv_memory_bytes=parse_size(kv_memory) if kv_memory is not None else None,
            ),
            offload=offload_settings(cpu_mem, link_bandwidth),
        )
        if plot:
            from kvsize.config import parse_config
            from kvsize.plot import write_plot

            write_plot(result, plot, spec=parse_config(loaded.raw, source=loaded.location))
    _emit(lambda console: _render_estimate(console, result), lambda: result.model_dump_json(indent=2), json_output)


def _render_estimate(console: Any, result: Any) -> None:
    from kvsize.report import render_estimate

    render_estimate(console, result)


def _emit(render: Any, json_text: Any, json_output: bool) -> None:
    if json_output:
        typer.echo(json_text())
        return
    from rich.console import Console

    # Piped or captured output gets a fixed, wide layout instead of rich's 80-column fallback.
    render(Console(highlight=False, width=None if sys.stdout.isatty() else 120))


@app.command("gpus")
def gpus(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """List the GPU profiles --gpu accepts, with memory, bandwidth and low-precision support."""
    with user_errors(debug):
        from kvsize.profiles import load_profiles

        profiles = sorted(load_profiles().values(), key=lambda p: (p.vendor, -p.memory_bytes, p.id))
    if json_output:
        import json

        typer.echo(json.dumps([p.model_dump(mode="json") for p in profiles], indent=2))
        return
    from rich.console import Console

    from kvsize.report import render_gpus

    render_gpus(Console(highlight=False, width=None if sys.stdout.isatty() else 160), profiles)


@app.command("models")
def models(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """List the built-in models: their configs ship with kvsize, so they work offline and without a token."""
    with user_errors(debug):
        from kvsize.config import parse_config
        from kvsize.registry import load_registry_config, registry_entries

        rows = []
        for entry in registry_entries().values():
            spec = parse_config(load_registry_config(entry), source=entry.hub_id)
            kinds = ", ".join(f"{n} {layer.kind}" for layer, n in spec.layer_groups())
            rows.append((entry, f"{spec.model_type}: {spec.attention_label} ({kinds})"))
    if json_output:
        import json

        typer.echo(json.dumps([{"hub_id": e.hub_id, "summary": s} for e, s in rows], indent=2))
        return
    from rich.console import Console

    from kvsize.report import render_models

    render_models(Console(highlight=False, width=None if sys.stdout.isatty() else 160), rows)


def main() -> None:
    """Console-script entry point."""
    app()


from kvsize import cli_check, cli_verify  # noqa: E402,F401
