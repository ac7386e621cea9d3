"""`kvsize plan`: rank GPU profiles by the GPUs needed to serve a workload."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kvsize.cli.options import (
    CalibrationOpt,
    CtxOpt,
    DebugOpt,
    EngineOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelArg,
    RevisionOpt,
    user_errors,
)

ConcurrencyOpt = Annotated[str, typer.Option("--concurrency", help="Requests to serve at once.")]
GpusOpt = Annotated[
    str | None, typer.Option("--gpus", help="Only these profiles (comma-separated ids or aliases).", show_default=False)
]


def plan(
    model: ModelArg,
    ctx: CtxOpt = None,
    concurrency: ConcurrencyOpt = "1",
    engine: EngineOpt = "vllm",
    kv_dtype: KvDtypeOpt = "auto",
    gpus: GpusOpt = None,
    revision: RevisionOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
    calibration: CalibrationOpt = None,
) -> None:
    """Rank every GPU profile by the GPUs needed (tp x data-parallel replicas) to serve --concurrency requests
    of --ctx tokens, then by cost per hour where the profile lists a price."""
    with user_errors(debug):
        from kvsize.calibration import read_calibration
        from kvsize.gpu_ranking import plan_gpus
        from kvsize.profiles import resolve_gpu
        from kvsize.resolve import load_model_config
        from kvsize.units import parse_count, parse_tokens

        if ctx is None:
            from kvsize.errors import UsageError

            raise UsageError("kvsize plan needs --ctx", hint="For example --ctx 32k.")
        chosen = [resolve_gpu(g.strip()).id for g in gpus.split(",") if g.strip()] if gpus else None
        plans = plan_gpus(
            load_model_config(model, revision=revision),
            ctx=parse_tokens(ctx),
            concurrency=parse_count(concurrency, "concurrency"),
            engine=engine,
            kv_dtype=kv_dtype,
            gpus=chosen,
            calibration=read_calibration(calibration) if calibration else None,
        )
    if json_output:
        import json

        typer.echo(json.dumps([p.model_dump(mode="json") for p in plans], indent=2))
        return
    from rich.console import Console

    from kvsize.report import render_plan

    render_plan(Console(highlight=False, width=None if sys.stdout.isatty() else 140), plans)
