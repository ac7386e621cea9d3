"""`kvsize check`, `kvsize schema` and `kvsize plan`: capacity decisions and CI guards.

Registered on the app by importing this module at the end of kvsize/cli.py; heavy imports stay inside the
commands so that `kvsize --help` remains fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from kvsize.cli import (
    CtxOpt,
    DebugOpt,
    EngineOpt,
    JsonOpt,
    KvDtypeOpt,
    ModelArg,
    RevisionOpt,
    _stderr,
    app,
    user_errors,
)
from kvsize.errors import ExitCode

CapacityArg = Annotated[
    Path, typer.Argument(help="YAML file of deployments (see 'kvsize schema').", show_default=False)
]
JunitOpt = Annotated[
    Path | None, typer.Option("--junit", help="Also write a JUnit XML report here.", show_default=False)
]


@app.command("check", epilog="Example: kvsize check capacity.yaml --junit kvsize.xml")
def check(path: CapacityArg, json_output: JsonOpt = False, junit: JunitOpt = None, debug: DebugOpt = False) -> None:
    """Check that every deployment in a capacity file still fits: exit 0 when all pass, 1 when any fails,
    2 for a bad file. Under GitHub Actions (GITHUB_ACTIONS=true) failures are also annotations."""
    with user_errors(debug):
        from kvsize.capacity import check_file, github_annotations, junit_xml

        results = check_file(path)
        if junit is not None:
            try:
                junit.write_text(junit_xml(results), encoding="utf-8")
            except OSError as exc:
                from kvsize.errors import UsageError

                raise UsageError(f"cannot write {junit} ({exc.strerror or type(exc).__name__})") from None
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(results, file=str(path)):
            _stderr(line)  # the runner reads workflow commands from both streams; stdout stays clean for --json
    if json_output:
        import json

        payload = {"deployments": [r.model_dump(mode="json", by_alias=True) for r in results]}
        typer.echo(json.dumps(payload, indent=2))
    else:
        from rich.console import Console

        from kvsize.report import render_check

        render_check(Console(highlight=False, width=None if sys.stdout.isatty() else 140), results)
    if not all(r.passed for r in results):
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


@app.command("schema")
def schema() -> None:
    """Print the JSON Schema of capacity files (for editors and validation in CI)."""
    import json

    from kvsize.capacity import CapacityFile

    typer.echo(json.dumps(CapacityFile.model_json_schema(), indent=2))


ConcurrencyOpt = Annotated[str, typer.Option("--concurrency", help="Requests to serve at once.")]
GpusOpt = Annotated[
    str | None, typer.Option("--gpus", help="Only these profiles (comma-separated ids or aliases).", show_default=False)
]


@app.command("plan", epilog="Example: kvsize plan meta-llama/Llama-3.1-70B-Instruct --ctx 32k --concurrency 64")
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
) -> None:
    """Rank every GPU profile by the GPUs needed (tp x data-parallel replicas) to serve --concurrency requests
    of --ctx tokens, then by cost per hour where the profile lists a price."""
    with user_errors(debug):
        from kvsize.plan import plan_gpus
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
        )
    if json_output:
        import json

        typer.echo(json.dumps([p.model_dump(mode="json") for p in plans], indent=2))
        return
    from rich.console import Console

    from kvsize.report import render_plan

    render_plan(Console(highlight=False, width=None if sys.stdout.isatty() else 140), plans)
