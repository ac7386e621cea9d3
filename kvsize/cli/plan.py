"""`kvsize plan`: rank GPU profiles by the GPUs needed to serve a workload."""

from __future__ import annotations

from typing import Annotated

import typer

from kvsize.cli.options import (
    CalibrationOpt,
    DebugOpt,
    EngineVersionOpt,
    JsonOpt,
    ModelArg,
    RevisionOpt,
    emit,
    user_errors,
)

PlanCtxOpt = Annotated[
    str | None,
    typer.Option(
        "--ctx",
        "--max-model-len",
        help="Tokens per request (one value, required): 32k (=32768), 131072, 1M.",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Scenario",
    ),
]
ConcurrencyOpt = Annotated[
    str,
    typer.Option("--concurrency", help="Requests to serve at once.", metavar="N", rich_help_panel="Scenario"),
]
PlanEngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help="Whose allocation and budget rule to apply: vllm, sglang, trtllm, hf, llamacpp or formula.",
        metavar="ENGINE",
        rich_help_panel="Engine",
    ),
]
PlanKvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        "--kv-cache-dtype",
        help="KV storage (one): auto (from the config), bf16, fp16, fp8, fp8_e5m2, int8, nvfp4, ...",
        metavar="DTYPE",
        rich_help_panel="Scenario",
    ),
]
GpusOpt = Annotated[
    str | None,
    typer.Option(
        "--gpus",
        help="Only these profiles (comma-separated ids or aliases, any class).",
        show_default=False,
        metavar="NAMES",
        rich_help_panel="GPU and budget",
    ),
]
AllGpusOpt = Annotated[
    bool,
    typer.Option(
        "--all-gpus",
        help="Also rank workstation, desktop, laptop and edge devices (default: data-centre GPUs only).",
        metavar="",
        rich_help_panel="GPU and budget",
    ),
]


def plan(
    model: ModelArg,
    ctx: PlanCtxOpt = None,
    concurrency: ConcurrencyOpt = "1",
    engine: PlanEngineOpt = "vllm",
    engine_version: EngineVersionOpt = None,
    kv_dtype: PlanKvDtypeOpt = "auto",
    gpus: GpusOpt = None,
    all_gpus: AllGpusOpt = False,
    revision: RevisionOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
    calibration: CalibrationOpt = None,
) -> None:
    """Rank data-centre GPUs by how many (tp x replicas) serve --concurrency requests of --ctx tokens, then by cost.

    --all-gpus adds workstation, desktop, laptop and edge devices; --json prints one object with the plans.
    Exit 1 when no GPU kind serves it (e.g. a --ctx past the model's maximum that the engine refuses)."""
    with user_errors(debug):
        from kvsize.api import resolve_kv_dtypes
        from kvsize.calibration import read_calibration
        from kvsize.config import parse_config
        from kvsize.engines import get_engine
        from kvsize.errors import UsageError
        from kvsize.gpu_ranking import plan_gpus
        from kvsize.profiles import load_profiles, resolve_gpu
        from kvsize.resolve import load_model_config
        from kvsize.units import parse_count, parse_tokens

        if ctx is None:
            raise UsageError("kvsize plan needs --ctx", hint="For example --ctx 32k.")
        if "," in ctx:
            raise UsageError(f"kvsize plan takes one --ctx, got '{ctx}'", hint="For example --ctx 32k.")
        ctx_tokens = parse_tokens(ctx)
        requests = parse_count(concurrency, "concurrency")
        if "," in kv_dtype:
            raise UsageError(f"kvsize plan takes one --kv-dtype, got '{kv_dtype}'", hint="For example --kv-dtype fp8.")
        if engine.strip().lower() == "all" or "," in engine:
            raise UsageError(f"kvsize plan takes one --engine, got '{engine}'", hint="For example --engine vllm.")
        # an unknown engine (or release) is bad input (exit 2), not a row of errors
        rules = get_engine(engine.strip().lower(), engine_version)
        loaded = load_model_config(model, revision=revision)
        spec = parse_config(loaded.raw, source=loaded.location)
        [dtype], _ = resolve_kv_dtypes([kv_dtype], loaded.raw, spec)
        if kv_dtype.strip().lower() != "auto":
            # A dtype the engine lacks (vLLM 0.33 has no q8_0) is bad input, exit 2: one Error line, not a table
            # of rows that each say so. `auto` resolves per engine inside the ranking.
            rules.check_dtype(spec, dtype)
        if gpus:
            chosen = [resolve_gpu(g.strip()).id for g in gpus.split(",") if g.strip()]
        else:
            profiles = load_profiles()
            chosen = sorted(p.id for p in profiles.values() if all_gpus or p.segment == "datacenter")
        plans = plan_gpus(
            loaded,
            ctx=ctx_tokens,
            concurrency=requests,
            engine=engine.strip().lower(),
            engine_version=engine_version,
            kv_dtype=dtype.value,
            gpus=chosen,
            calibration=read_calibration(calibration) if calibration is not None else None,
        )
    engine_name = engine.strip().lower()
    title = (
        f"{loaded.model}: GPUs needed for {requests:,} request{'s' if requests != 1 else ''} of {ctx_tokens:,} tokens"
        f" ({engine_name}, KV {dtype.value}); cheapest layout per GPU kind"
    )

    def render(console: object) -> None:
        from kvsize.report import render_plan

        render_plan(console, plans, title=title)  # type: ignore[arg-type]

    def as_json() -> str:
        import json

        from kvsize.record import to_builtins

        return json.dumps(
            {
                "model": loaded.model,
                "ctx": ctx_tokens,
                "concurrency": requests,
                "engine": engine_name,
                "kv_dtype": dtype.value,
                "plans": [to_builtins(p) for p in plans],
            },
            indent=2,
        )

    emit(render, as_json, json_output)
    if plans and all(p.gpus is None for p in plans):
        from kvsize.errors import ExitCode

        raise typer.Exit(int(ExitCode.CHECK_FAILED))  # the answer is "no": no card serves it (printed above)
