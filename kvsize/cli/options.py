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
    str,
    typer.Argument(
        help="Hub id (org/name), or a path to a config.json or its folder.", show_default=False, metavar="MODEL"
    ),
]
CtxOpt = Annotated[
    str | None,
    typer.Option(
        "--ctx",
        "--max-model-len",
        help="Tokens per request: 131072, 128k (=131072), 1M; lists: 8k,32k,128k. "
        "Default: a small grid up to the model's maximum.",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Scenario",
    ),
]
BatchOpt = Annotated[
    str,
    typer.Option(
        "--batch", "-b", help="Concurrent requests; lists allowed: 1,8,32.", metavar="N", rich_help_panel="Scenario"
    ),
]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        "--kv-cache-dtype",
        help="KV storage: auto (from the config), fp32, fp16, bf16, fp8 (=fp8_e4m3), "
        "fp8_e5m2, int8, nvfp4 (=fp4), mxfp4, int4, q8_0, q4_0, ...; lists allowed.",
        metavar="DTYPE",
        rich_help_panel="Scenario",
    ),
]
ServedDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        help="The dtype vLLM / SGLang serve the model in, as their --dtype: auto (from the config), half / "
        "float16, bfloat16, float / float32; --kv-dtype auto stores it (--dtype half on a T4 or V100).",
        show_default=False,
        metavar="DTYPE",
        rich_help_panel="Engine",
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Whose allocation rule to apply: vllm, sglang, hf (transformers), trtllm, llamacpp, formula "
        "(engine-independent), or all (side by side).",
        metavar="ENGINE",
        rich_help_panel="Engine",
    ),
]
# The eras --engine-version maps a release to (kept equal to the release tables by tests/test_engine_releases.py;
# not imported here, so `kvsize --help` loads no engine module).
ENGINE_ERAS = {
    "vLLM": "0.8.5, 0.9.0-0.9.0.1, 0.9.1, 0.9.2, 0.10.0, 0.10.1-0.10.1.1, 0.10.2, 0.11.0, 0.11.1-0.11.2, 0.12, 0.13, "
    "0.14-0.15, 0.16, 0.17, 0.18, 0.19, 0.20.0, 0.20.1-0.20.2, 0.21, 0.22-0.23, 0.24, 0.25, 0.26, 0.27, 0.28, 0.29, "
    "0.30, 0.31, 0.32, 0.33, 0.34",
    "SGLang": "0.4.0-0.4.2, 0.4.3-0.4.5, 0.4.6, 0.4.7, 0.4.8, 0.4.9, 0.4.9.post2, 0.4.9.post3-0.4.10.post1, "
    "0.4.10.post2, "
    "0.5.0rc0-0.5.1, 0.5.2, 0.5.3, 0.5.4, 0.5.5-0.5.6, "
    "0.5.7, 0.5.8, 0.5.9, 0.5.10, 0.5.11, 0.5.12, 0.5.13, 0.5.14, 0.5.15, 0.5.16-0.5.17, 0.5.18, 0.5.19, 0.5.20, "
    "0.5.21, 0.5.22, 0.5.23",
    "llama.cpp": "b6209, b7445-b8164, b9665, b11312",
    "TensorRT-LLM": "1.2",
}
EngineVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-version",
        help=(
            "Engine release whose rules to mirror, as the engine prints it (0.19.1, v0.33, 0.29.1rc1.dev17+g..., "
            "0.11.0+nv25.11; llama.cpp b7445 or a llama-cpp-python version). Each maps to its era of identical "
            "rules; newer than the newest read uses the newest (a note says so), older than the oldest is refused. "
            "Eras: " + "; ".join(f"{engine} {eras}" for engine, eras in ENGINE_ERAS.items()) + " (default: the newest)."
        ),
        show_default=False,
        metavar="VERSION",
        rich_help_panel="Engine",
    ),
]
HfOverridesOpt = Annotated[
    str | None,
    typer.Option(
        "--hf-overrides",
        "--json-model-override-args",
        help=(
            "JSON merged into the model's config.json, as vLLM's --hf-overrides and SGLang's "
            "--json-model-override-args take it: a rope_scaling object for YaRN, max_position_embeddings, a "
            'sub-config\'s fields (README: "Long contexts").'
        ),
        show_default=False,
        metavar="JSON",
        rich_help_panel="Engine",
    ),
]
AssumeStandardOpt = Annotated[
    bool,
    typer.Option(
        "--assume-standard-attention",
        help="Size a config whose cache-relevant fields kvsize does not understand (refused otherwise) from its "
        "standard attention fields; every answer names the fields ignored.",
        metavar="",
        rich_help_panel="Model",
    ),
]
TpOpt = Annotated[
    str,
    typer.Option(
        "--tp",
        "--tensor-parallel-size",
        help="Tensor-parallel GPUs per replica; auto (with --gpu auto): the most of this machine's GPUs the engine "
        "splits the model over.",
        metavar="N|auto",
        rich_help_panel="Engine",
    ),
]
PpOpt = Annotated[
    str,
    typer.Option(
        "--pp", "--pipeline-parallel-size", help="Pipeline-parallel stages.", metavar="N", rich_help_panel="Engine"
    ),
]
BlockSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--block-size",
        help="Tokens per KV block (paged engines; default: the engine's).",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Engine",
    ),
]
BatchedTokensOpt = Annotated[
    str | None,
    typer.Option(
        "--max-num-batched-tokens",
        "--max-batched-tokens",
        help="Tokens per scheduler step (vLLM; default: the GPU's scheduler tier, e.g. 8192 on H100, 2048 on L40S).",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Engine",
    ),
]
MaxNumSeqsOpt = Annotated[
    str | None,
    typer.Option(
        "--max-num-seqs",
        help="Most requests the engine runs at once (vLLM; default: the GPU's scheduler tier, 256 or 1024).",
        show_default=False,
        metavar="N",
        rich_help_panel="Engine",
    ),
]
PrefixCachingOpt = Annotated[
    bool | None,
    typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="Prefix caching (vLLM; SGLang radix cache; TRT-LLM block reuse): shares --prefix-len and sets vLLM's "
        "Mamba state blocks. Default: the engine's (vLLM: on for decoders; hybrids on from 0.33).",
        show_default=False,
        metavar="",
        rich_help_panel="Engine",
    ),
]
EnforceEagerOpt = Annotated[
    bool,
    typer.Option(
        "--enforce-eager",
        help="vLLM --enforce-eager: no CUDA graphs, so the budget keeps none back (0.20+ estimates them, 0.34 "
        "captures them before sizing the pool); the launch command says so.",
        metavar="",
        rich_help_panel="Engine",
    ),
]
ExpertParallelOpt = Annotated[
    bool,
    typer.Option(
        "--enable-expert-parallel",
        help="vLLM --enable-expert-parallel: each of the tp ranks holds whole experts (the fused-MoE workspace at "
        "the full expert width; MXFP4 padding per expert).",
        metavar="",
        rich_help_panel="Engine",
    ),
]
LanguageModelOnlyOpt = Annotated[
    bool,
    typer.Option(
        "--language-model-only",
        help="vLLM 0.17+ --language-model-only: a multimodal model served for text: no encoder in the profile "
        "run, and its vision and audio towers not loaded.",
        metavar="",
        rich_help_panel="Engine",
    ),
]
MmLimitsOpt = Annotated[
    str | None,
    typer.Option(
        "--limit-mm-per-prompt",
        help="vLLM --limit-mm-per-prompt, as JSON ('{\"video\": 0}'): the modality its profile run encodes and "
        "how many items; a tower whose modalities are all 0 is not loaded (0.10.1+ for LLaVA, Llama 4, Qwen-VL; "
        "0.16+ for all).",
        show_default=False,
        metavar="JSON",
        rich_help_panel="Engine",
    ),
]
SkipMmProfilingOpt = Annotated[
    bool,
    typer.Option(
        "--skip-mm-profiling",
        help="vLLM 0.10.1+ --skip-mm-profiling: no encoder in the profile run, so the budget keeps nothing back "
        "for it.",
        metavar="",
        rich_help_panel="Engine",
    ),
]
SkipLayersOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-cache-dtype-skip-layers",
        help="vLLM: layers kept in the model dtype, as layer indices (0,2,4) or sliding_window.",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Engine",
    ),
]
KvUnifiedOpt = Annotated[
    bool,
    typer.Option(
        "--kv-unified",
        help="llama.cpp: one KV cache shared by all sequences (llama.cpp's --kv-unified, or llama-server's "
        "-np auto). Default: --batch B is -np B, one stream per sequence.",
        metavar="",
        rich_help_panel="Engine",
    ),
]
UbatchSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--ubatch-size",
        help="llama.cpp physical batch (-ub, default 512); with --batch-size it sizes the sliding-window cache.",
        show_default=False,
        metavar="N",
        rich_help_panel="Engine",
    ),
]
LlamaBatchSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--batch-size",
        help="llama.cpp logical batch (-b, default 2048); caps --ubatch-size.",
        show_default=False,
        metavar="N",
        rich_help_panel="Engine",
    ),
]
FlashAttnOpt = Annotated[
    bool | None,
    typer.Option(
        "--flash-attn/--no-flash-attn",
        help="llama.cpp flash attention (default: on in 2026 builds, off before 2025-05); off pads V rows and, "
        "before 2025-05, pads the context to 32 cells instead of 256.",
        show_default=False,
        metavar="",
        rich_help_panel="Engine",
    ),
]
GpuOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu",
        help="GPU profile id or alias (kvsize gpus): h100, h200, a100-80gb, mi300x, ...; the name nvidia-smi "
        "prints ('NVIDIA H100 80GB HBM3'); or auto: this machine's (NVML, nvidia-smi, amdsmi, rocm-smi or torch).",
        show_default=False,
        metavar="NAME",
        rich_help_panel="GPU and budget",
    ),
]
GpuMemOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu-mem",
        help="Memory of a custom card: 24GiB, 80GB, ...",
        show_default=False,
        metavar="SIZE",
        rich_help_panel="GPU and budget",
    ),
]
ReserveOpt = Annotated[
    str | None,
    typer.Option(
        "--reserve",
        help="Memory kept out of the KV budget besides the weights. Default: 8% of the card, as vLLM's "
        "default gpu_memory_utilization 0.92 leaves.",
        show_default=False,
        metavar="SIZE",
        rich_help_panel="GPU and budget",
    ),
]
WeightsOpt = Annotated[
    str | None,
    typer.Option(
        "--weights-mem",
        "--weights-mem-total",
        help="The whole model's weights, split over tp x pp: 15GiB, ... (default: looked up)",
        show_default=False,
        metavar="SIZE",
        rich_help_panel="GPU and budget",
    ),
]
WeightsPerGpuOpt = Annotated[
    str | None,
    typer.Option(
        "--weights-mem-per-gpu",
        help="The weights on each GPU, as vLLM logs them ('Model loading took 7.51 GiB'): 7.51GiB, ...",
        show_default=False,
        metavar="SIZE",
        rich_help_panel="GPU and budget",
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
        metavar="FRACTION",
        rich_help_panel="GPU and budget",
    ),
]
KvMemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-memory",
        "--kv-cache-memory-bytes",
        help="KV memory per GPU, as given (skips the budget model): 6.5GiB, ...",
        show_default=False,
        metavar="SIZE",
        rich_help_panel="GPU and budget",
    ),
]
WeightsDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--weights-dtype",
        help="Count the weights at this precision instead: bf16, fp8, int4 (AWQ/GPTQ), mxfp4, ...",
        show_default=False,
        metavar="DTYPE",
        rich_help_panel="GPU and budget",
    ),
]
CpuMemOpt = Annotated[
    str | None,
    typer.Option(
        "--cpu-mem",
        help="CPU DRAM (or disk) offload tier size: 512GiB, ...",
        show_default=False,
        metavar="SIZE",
        rich_help_panel="Offload",
    ),
]
LinkOpt = Annotated[
    str | None,
    typer.Option(
        "--link-bandwidth",
        help="GPU<->CPU offload link in GB/s one way (default: the GPU profile's host link: PCIe, NVLink-C2C).",
        show_default=False,
        metavar="GB/S",
        rich_help_panel="Offload",
    ),
]
ItlOpt = Annotated[
    str | None,
    typer.Option(
        "--itl",
        help="Inter-token latency target in ms: print lower bounds on TTFT and ITL per ctx x batch and the most "
        "requests within it (needs --gpu).",
        show_default=False,
        metavar="MS",
        rich_help_panel="Serving workload",
    ),
]
BenchResultOpt = Annotated[
    str | None,
    typer.Option(
        "--bench-result",
        help="A serving benchmark's result (vllm bench serve --save-result JSON, sglang.bench_serving "
        "--output-file JSON lines, or either's printed summary): its measured ITL, TTFT and throughput beside the "
        "bounds of its load (needs --gpu).",
        show_default=False,
        metavar="FILE",
        rich_help_panel="Serving workload",
    ),
]
# --- serving-time memory (kvsize/serving.py) ---
PrefixLenOpt = Annotated[
    str | None,
    typer.Option(
        "--prefix-len",
        help="Tokens every request shares (a system prompt): stored once by engines that share prefixes.",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Serving workload",
    ),
]
PromptLenOpt = Annotated[
    str | None,
    typer.Option(
        "--prompt-len",
        help="Prompt tokens per request (with --output-len; ctx = P + O).",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Serving workload",
    ),
]
OutputLenOpt = Annotated[
    str | None,
    typer.Option(
        "--output-len",
        help="Output tokens per request: steady-state figures over its life.",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Serving workload",
    ),
]
WorkloadOpt = Annotated[
    str | None,
    typer.Option(
        "--workload",
        help="CSV or YAML of (prompt, output) samples or percentiles: p50/p99 residency and concurrency.",
        show_default=False,
        metavar="FILE",
        rich_help_panel="Serving workload",
    ),
]
KvBudgetTokensOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-budget-tokens",
        help="Eviction policy (StreamingLLM, H2O, SnapKV) keeping N tokens per layer per request (lossy).",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Serving workload",
    ),
]
AllocationOpt = Annotated[
    str,
    typer.Option(
        "--allocation",
        help="paged (the engine's blocks) or contiguous (whole ctx reserved per request).",
        metavar="paged|contiguous",
        rich_help_panel="Serving workload",
    ),
]
DiskOpt = Annotated[
    str | None,
    typer.Option(
        "--disk",
        help="Disk offload tier behind --cpu-mem: 2TiB, ...",
        show_default=False,
        metavar="SIZE",
        rich_help_panel="Offload",
    ),
]
DiskBandwidthOpt = Annotated[
    str | None,
    typer.Option(
        "--disk-bandwidth",
        help="Disk tier read bandwidth in GB/s (default: 7, one PCIe Gen4 x4 NVMe).",
        show_default=False,
        metavar="GB/S",
        rich_help_panel="Offload",
    ),
]
PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        help="Write a chart of KV memory and concurrency against context: file.png or .svg (needs matplotlib: "
        'pip install -e ".\\[plot]").',
        show_default=False,
        metavar="FILE",
        rich_help_panel="Output",
    ),
]
EmitOpt = Annotated[
    str | None,
    typer.Option(
        "--emit",
        help="Print the engine's own launch command for the scenario sized (vllm, sglang, llamacpp, trtllm): every "
        "flag one the release's parser accepts; needs one --ctx, --batch and --kv-dtype and a card. Exit 1, "
        "nothing emitted, when it does not fit.",
        show_default=False,
        metavar="ENGINE",
        rich_help_panel="Output",
    ),
]
JsonOpt = Annotated[
    bool,
    typer.Option(
        "--json",
        help="Print one JSON object (bytes as integers) instead of tables.",
        metavar="",
        rich_help_panel="Output",
    ),
]
RevisionOpt = Annotated[
    str | None,
    typer.Option(
        "--revision",
        help="Hub revision (branch, tag or commit).",
        show_default=False,
        metavar="REV",
        rich_help_panel="Model",
    ),
]
EncoderLenOpt = Annotated[
    str | None,
    typer.Option(
        "--encoder-len",
        help="Tokens each cross-attention layer attends to (default: one image).",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Scenario",
    ),
]
ExplainOpt = Annotated[
    bool,
    typer.Option(
        "--explain",
        help="Also print the engine's allocation rule and the budget's rule, with their sources.",
        metavar="",
        rich_help_panel="Output",
    ),
]
DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug", help="Show the full traceback of errors (for bug reports).", metavar="", rich_help_panel="Output"
    ),
]
CalibrationOpt = Annotated[
    str | None,
    typer.Option(
        "--calibration",
        help="A file written by `kvsize log --save-calibration`: use its measured overheads.",
        show_default=False,
        metavar="FILE",
        rich_help_panel="GPU and budget",
    ),
]
# --- verification (kvsize/cli/verify.py; `kvsize verify` takes the same options) ---
VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Build the model with transformers, run it, and compare the cache it holds with --engine hf "
        "(same as 'kvsize verify'; needs the 'verify' extra).",
        metavar="",
        rich_help_panel="Verification",
    ),
]
DeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--device",
        help="Verification device: cuda (default when a GPU is visible), cpu, meta.",
        show_default=False,
        metavar="DEVICE",
        rich_help_panel="Verification",
    ),
]
LayersOpt = Annotated[
    str | None,
    typer.Option(
        "--layers",
        help="Verification: build only the first N decoder layers; per-layer figures are scaled to the full model.",
        show_default=False,
        metavar="N",
        rich_help_panel="Verification",
    ),
]
ToleranceOpt = Annotated[
    str | None,
    typer.Option(
        "--tolerance",
        help="Verification: allowed relative gap between the CUDA allocator's delta and the prediction "
        "(default 0.02). Logical bytes must match exactly.",
        show_default=False,
        metavar="FRACTION",
        rich_help_panel="Verification",
    ),
]
ReportOpt = Annotated[
    str | None,
    typer.Option(
        "--report",
        help="Verification: also write a markdown report here.",
        show_default=False,
        metavar="FILE",
        rich_help_panel="Verification",
    ),
]
TrustRemoteCodeOpt = Annotated[
    bool,
    typer.Option(
        "--trust-remote-code",
        help="Verification: run the custom code a config's auto_map names (only if you trust it).",
        metavar="",
        rich_help_panel="Verification",
    ),
]


def stderr_line(line: str) -> None:
    """One line on stderr, control characters from user text escaped (kvsize.text.clean)."""
    from kvsize.text import clean

    if sys.stderr is None:  # started with stderr closed (2>&-): the exit code still tells
        return
    try:
        sys.stderr.write(clean(line) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # a stderr that cannot be written (2>/dev/full): the exit code still tells
        pass


def serving_kwargs(**options: Any) -> dict[str, Any]:
    """The serving-time options (--prefix-len, --prompt-len, --workload, ...) as estimate keywords."""
    from kvsize.api import serving_options

    return serving_options(**options)


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


def render_estimate(console: Any, result: Any, *, explain: bool = False) -> None:
    from kvsize.report import render_estimate

    render_estimate(console, result, explain=explain)


PIPED_WIDTH = 120  # piped or captured output without COLUMNS: a fixed, wide layout, not rich's 80 fallback


def console_width() -> int | None:
    """The width to lay tables out for: the terminal's, else COLUMNS when set, else PIPED_WIDTH."""
    if sys.stdout.isatty():
        return None  # rich asks the terminal (and honours COLUMNS itself)
    columns = os.environ.get("COLUMNS", "").strip()
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH


def make_console() -> Any:
    from rich.console import Console

    return Console(highlight=False, emoji=False, width=console_width())


def emit(render: Any, json_text: Any, json_output: bool) -> None:
    if json_output:
        from kvsize.text import json_safe

        typer.echo(json_safe(json_text()))
        return
    render(make_console())
