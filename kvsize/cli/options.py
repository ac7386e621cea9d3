"""Shared option types and error handling for every `kvsize` command.

Only typer and the stdlib load here, so `kvsize --help` stays fast; command modules import from this one and
`kvsize.cli.app` registers them, so no command module imports another.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from kvsize.errors import KvsizeError

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
    str | None,
    typer.Option(
        "--encoder-len",
        help="Tokens each cross-attention layer attends to (default: one image).",
        show_default=False,
    ),
]
DebugOpt = Annotated[bool, typer.Option("--debug", help="Show the full traceback of errors (for bug reports).")]
# --- verification (kvsize/cli/verify.py; `kvsize verify` takes the same options) ---
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
    str | None,
    typer.Option(
        "--layers",
        help="Verification: build only the first N decoder layers; per-layer figures are scaled to the full model.",
        show_default=False,
    ),
]
ToleranceOpt = Annotated[
    str | None,
    typer.Option(
        "--tolerance",
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


def stderr_line(line: str) -> None:
    """One line on stderr, control characters from user text escaped (kvsize.text.clean)."""
    from kvsize.text import clean

    if sys.stderr is not None:  # started with stderr closed (2>&-): the exit code still tells
        sys.stderr.write(clean(line) + "\n")


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
        stderr_line(
            f"Error: {message}.{hint}" if not message.endswith((".", "?", ")")) or hint else f"Error: {message}{hint}"
        )
        raise typer.Exit(int(exc.exit_code)) from None


def split_list(text: str) -> list[str]:
    """'8k,32k' -> ['8k', '32k']; empty items are dropped, and an empty option stays [''] so that parsing it
    reports the empty value instead of silently taking the default."""
    return [part for part in (p.strip() for p in text.split(",")) if part] or [text]


def render_estimate(console: Any, result: Any) -> None:
    from kvsize.report import render_estimate

    render_estimate(console, result)


def emit(render: Any, json_text: Any, json_output: bool) -> None:
    if json_output:
        from kvsize.text import json_safe

        typer.echo(json_safe(json_text()))
        return
    from rich.console import Console

    # Piped or captured output gets a fixed, wide layout instead of rich's 80-column fallback.
    render(Console(highlight=False, width=None if sys.stdout.isatty() else 120))
