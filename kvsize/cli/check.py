"""`kvsize check` and `kvsize schema`: capacity files as CI guards. Heavy imports stay inside the commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from kvsize.cli.options import (
    CalibrationOpt,
    DebugOpt,
    JsonOpt,
    make_console,
    user_errors,
)
from kvsize.cli.streams import workflow_command
from kvsize.errors import ExitCode

CapacityArg = Annotated[
    Path, typer.Argument(help="YAML file of deployments (see 'kvsize schema').", show_default=False, metavar="FILE")
]
JunitOpt = Annotated[
    str | None, typer.Option("--junit", help="Also write a JUnit XML report here.", show_default=False, metavar="FILE")
]


def check(
    path: CapacityArg,
    json_output: JsonOpt = False,
    junit: JunitOpt = None,
    debug: DebugOpt = False,
    calibration: CalibrationOpt = None,
) -> None:
    """Check that every deployment in a capacity file still fits: exit 0 all pass, 1 any fails, 2 a bad file.

    Under GitHub Actions (GITHUB_ACTIONS=true) failures are also annotations on the deployment's line."""
    with user_errors(debug):
        from kvsize.capacity_file import check_file, github_annotations, github_error_annotation, junit_xml
        from kvsize.errors import KvsizeError
        from kvsize.safe_io import output_path, write_output

        inputs = (path, calibration)  # never overwrite what is being read
        junit_target = output_path(junit, "--junit", inputs=inputs) if junit is not None else None  # before any work
        try:
            results = check_file(path, calibration)
        except KvsizeError as exc:  # exit 2 (or 3): the runner still shows it on the file, and the line if known
            if os.environ.get("GITHUB_ACTIONS") == "true":
                workflow_command(github_error_annotation(exc, file=str(path)))
            raise
        if junit_target is not None:
            write_output(junit_target, junit_xml(results), "--junit")  # refused now: exit 3
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(results, file=str(path)):
            workflow_command(line)  # the runner reads both streams; stdout stays clean for --json
    if json_output:
        import json

        payload = {"deployments": [r.model_dump(mode="json", by_alias=True) for r in results]}
        from kvsize.text import json_safe

        typer.echo(json_safe(json.dumps(payload, indent=2)))
    else:
        from kvsize.report import render_check

        render_check(make_console(), results)
    if not all(r.passed for r in results):
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def schema() -> None:
    """Print the JSON Schema of capacity files (for editors and validation in CI)."""
    import json

    from kvsize.capacity_file import CapacityFile

    typer.echo(json.dumps(CapacityFile.model_json_schema(), indent=2))
