"""`kvsize check` and `kvsize schema`: capacity files as CI guards. Heavy imports stay inside the commands."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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

if TYPE_CHECKING:
    from kvsize.capacity_file import CapacityFile, CheckResult

CapacityArg = Annotated[
    Path, typer.Argument(help="YAML file of deployments (see 'kvsize schema').", show_default=False, metavar="FILE")
]
JunitOpt = Annotated[
    str | None, typer.Option("--junit", help="Also write a JUnit XML report here.", show_default=False, metavar="FILE")
]

EmitDirOpt = Annotated[
    str | None,
    typer.Option(
        "--emit-dir",
        help="Also write, for each deployment that passes, the engine's launch command (as 'kvsize MODEL --emit' "
        "prints it) to DIR/NAME.sh, NAME the deployment's name in letters, digits, - and _; DIR is created if "
        "missing, an existing file is refused.",
        show_default=False,
        metavar="DIR",
    ),
]
SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 120  # characters of a file name taken from a deployment's name (file systems allow 255 bytes)


def check(
    path: CapacityArg,
    json_output: JsonOpt = False,
    junit: JunitOpt = None,
    emit_dir: EmitDirOpt = None,
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
        folder = _emit_folder(emit_dir) if emit_dir is not None else None
        try:
            from kvsize.capacity_file import load_capacity

            files = _launch_files(load_capacity(path), folder, inputs) if folder is not None else None
            results = check_file(path, calibration, emit=files is not None, with_max_context=json_output)
        except KvsizeError as exc:  # exit 2 (or 3): the runner still shows it on the file, and the line if known
            if os.environ.get("GITHUB_ACTIONS") == "true":
                workflow_command(github_error_annotation(exc, file=str(path)))
            raise
        if junit_target is not None:
            write_output(junit_target, junit_xml(results), "--junit")  # refused now: exit 3
        written = _write_launches(results, files) if files is not None else None
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(results, file=str(path)):
            workflow_command(line)  # the runner reads both streams; stdout stays clean for --json
    if json_output:
        import json

        payload: dict[str, object] = {"deployments": [r.model_dump(mode="json", by_alias=True) for r in results]}
        if written is not None:
            payload["launch_files"] = [{"name": r.name, "file": f, "reason": why} for r, (f, why) in written]
        from kvsize.text import json_safe

        typer.echo(json_safe(json.dumps(payload, indent=2)))
    else:
        from kvsize.report import render_check

        console = make_console()
        render_check(console, results)
        for r, (file, why) in written or ():
            console.print(f"wrote {file}" if file is not None else f"no launch file for {r.name}: {why}", markup=False)
    if not all(r.passed for r in results):
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _emit_folder(given: str) -> Path:
    """--emit-dir's folder, checked before any work: a path that is not a folder is bad input (exit 2)."""
    from kvsize.errors import UsageError
    from kvsize.resolve import printable

    shown = printable(given)
    try:
        folder = Path(given).expanduser()
    except RuntimeError:  # '~unknown-user'
        raise UsageError(f"--emit-dir: cannot expand '{shown}'", hint="Give an absolute or relative path.") from None
    if not given.strip():
        raise UsageError("--emit-dir: empty path", hint="Give --emit-dir a folder to write the commands in.")
    if folder.exists() and not folder.is_dir():
        raise UsageError(
            f"--emit-dir: '{shown}' is not a folder", hint="Give --emit-dir a folder (it is created if missing)."
        )
    return folder


def _launch_files(capacity: CapacityFile, folder: Path, inputs: Sequence[str | os.PathLike[str] | None]) -> list[Path]:
    """Each deployment's launch file, in the file's order: its name made safe (ASCII letters, digits, - and _),
    checked (through output_path) before any work. Two names that make one file (case aside: some file systems
    ignore it) and a file already there are refused (exit 2)."""
    from kvsize.errors import EnvironmentProblem, UsageError
    from kvsize.resolve import printable
    from kvsize.safe_io import output_path

    names: dict[str, str] = {}
    for d in capacity.deployments:
        stem = SAFE_NAME.sub("_", d.name)[:MAX_NAME]
        other = names.setdefault(stem.casefold(), d.name)
        if other is not d.name:
            raise UsageError(
                f"--emit-dir: deployments '{printable(other)[:80]}' and '{printable(d.name)[:80]}' would both be "
                f"written to {stem}.sh",
                hint="Rename one: file names keep ASCII letters, digits, - and _, and ignore case.",
            )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a part of the path is a file
        raise UsageError(
            f"--emit-dir: cannot make the folder '{printable(str(folder))}': a part of it is a file",
            hint="Give --emit-dir another folder.",
        ) from None
    except OSError as exc:
        raise EnvironmentProblem(
            f"--emit-dir: cannot make the folder '{printable(str(folder))}' ({exc.strerror or type(exc).__name__})",
            hint="Choose a writable folder.",
        ) from None
    files = []
    for d in capacity.deployments:
        target = output_path(folder / f"{SAFE_NAME.sub('_', d.name)[:MAX_NAME]}.sh", "--emit-dir", inputs=inputs)
        if os.path.lexists(target):
            raise UsageError(
                f"--emit-dir: {printable(str(target))} already exists",
                hint="Remove it, or give --emit-dir another folder.",
            )
        files.append(target)
    return files


def _write_launches(
    results: list[CheckResult], files: list[Path]
) -> list[tuple[CheckResult, tuple[str | None, str | None]]]:
    """Write each passing deployment's launch command (Launch.text(), as --emit prints it) to its file: each
    result with the file written, or why none was."""
    from kvsize.resolve import printable
    from kvsize.safe_io import write_output

    written: list[tuple[CheckResult, tuple[str | None, str | None]]] = []
    for r, file in zip(results, files, strict=True):
        launch = r.launch
        if not r.passed:
            written.append((r, (None, "it fails the check")))
        elif isinstance(launch, str) or launch is None:
            written.append((r, (None, launch or "no launch command")))
        else:
            write_output(file, launch.text() + "\n", "--emit-dir")  # refused now: exit 3
            written.append((r, (printable(str(file)), None)))
    return written


def schema() -> None:
    """Print the JSON Schema of capacity files (for editors and validation in CI)."""
    import json

    from kvsize.capacity_file import CapacityFile

    typer.echo(json.dumps(CapacityFile.model_json_schema(), indent=2))
