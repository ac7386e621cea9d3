"""Start-up time of the kvsize CLI beside the bare cost of its CLI stack, measured side by side.

    python benchmarks/startup.py [--runs 15]

Each command runs in a fresh interpreter, the commands interleaved run by run so that a busy machine slows
them alike. The table gives the median CPU time (user + system of the child) and wall time, and the ratio of
each median CPU time to that of the bare stack import `import typer, rich, pydantic, yaml` (the goal for a
registry sizing run, with and without --gpu: within 1.5x of it).

kvsize's modules are byte-compiled first (`compileall`, as pip does on install), so that no run pays for
compiling them: with PYTHONDONTWRITEBYTECODE set, as on some CI machines, every run would otherwise
recompile some 40 modules (about 100 ms of CPU) and the table would measure the compiler.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BARE_STACK = "import typer, rich"
# What a sizing run really imports of it: typer's command, rich's console and tables (no pydantic, no yaml: the
# records are msgspec Structs and the GPU profiles come from gpu_profiles/index.json).
USED_STACK = "import typer.main, rich.console, rich.table, msgspec"

COMMANDS = {
    "python -c pass (interpreter only)": [sys.executable, "-c", "pass"],
    f"{BARE_STACK} (bare CLI stack)": [sys.executable, "-c", BARE_STACK],
    "the stack as a run uses it (typer.main, rich.console, rich.table, msgspec)": [sys.executable, "-c", USED_STACK],
    "kvsize --version": [sys.executable, "-m", "kvsize", "--version"],
    "kvsize --help": [sys.executable, "-m", "kvsize", "--help"],
    "kvsize meta-llama/Llama-3.1-8B --ctx 128k --json": [
        sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "128k", "--json"],
    "kvsize meta-llama/Llama-3.1-8B --ctx 128k": [
        sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "128k"],
    "kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100": [
        sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "128k", "--gpu", "h100"],
}  # fmt: skip
BASELINE = f"{BARE_STACK} (bare CLI stack)"
SIZING_TABLE = "kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100"
CHECK = "kvsize check (1,000 deployments of one model)"
GOALS = [  # (what, numerator, denominator, at most)
    ("sizing run --json within 1.3x of import typer, rich", "kvsize meta-llama/Llama-3.1-8B --ctx 128k --json",
     BASELINE, 1.3),
    ("sizing table within 1.3x of import typer, rich", "kvsize meta-llama/Llama-3.1-8B --ctx 128k", BASELINE, 1.3),
    ("sizing table with --gpu within 1.3x of import typer, rich", SIZING_TABLE, BASELINE, 1.3),
    ("--help no slower than a sizing run", "kvsize --help", SIZING_TABLE, 1.0),
    ("check of 1,000 deployments within 2x of one sizing run", CHECK, SIZING_TABLE, 2.0),
]  # fmt: skip


def uncompiled_copy(folder: Path) -> str:
    """A copy of the checkout's kvsize/ (and the gpu_profiles/ beside it) without bytecode; the folder to put
    first on PYTHONPATH."""
    import shutil

    root = Path(__file__).resolve().parent.parent
    target = folder / "uncompiled"
    shutil.copytree(root / "kvsize", target / "kvsize", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(root / "gpu_profiles", target / "gpu_profiles", ignore=shutil.ignore_patterns("__pycache__"))
    return str(target)


def capacity_file(folder: Path) -> Path:
    """1,000 deployments of Llama-3.1-8B on an H100, at 8k, 32k and 128k in turn (the issue's "of one model")."""
    lines = ["deployments:"]
    for i in range(1000):
        ctx = ("8k", "32k", "128k")[i % 3]
        lines += [f"- name: chat-{i}", "  model: meta-llama/Llama-3.1-8B", "  gpu: h100", "  require:",
                  f"    ctx: {ctx}", "    min_concurrency: 2"]  # fmt: skip
    path = folder / "capacity-1000.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


NO_BYTECODE = "kvsize meta-llama/Llama-3.1-8B --ctx 128k --json, kvsize without bytecode (compiled every run)"
# Runs whose environment differs: a copy of kvsize without __pycache__ first on PYTHONPATH, with
# PYTHONDONTWRITEBYTECODE, compiles kvsize's modules on every run (its libraries keep their bytecode): the first
# run of an editable install, or every run where the variable is set and kvsize was never compiled.
ENVIRONMENTS: dict[str, dict[str, str]] = {}


def run_once(argv: list[str], extra: dict[str, str] | None = None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one run in a fresh interpreter."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "COLUMNS": "80", **(extra or {})}
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def measure(runs: int) -> dict[str, tuple[float, float]]:
    """Median (CPU seconds, wall seconds) of each command over `runs` interleaved runs."""
    package = importlib.util.find_spec("kvsize")
    if package is not None and package.submodule_search_locations:
        for folder in package.submodule_search_locations:
            compileall.compile_dir(folder, quiet=1)
    cpu: dict[str, list[float]] = {label: [] for label in COMMANDS}
    wall: dict[str, list[float]] = {label: [] for label in COMMANDS}
    for _ in range(runs):
        for label, argv in COMMANDS.items():
            c, w = run_once(argv, ENVIRONMENTS.get(label))
            cpu[label].append(c)
            wall[label].append(w)
    return {label: (statistics.median(cpu[label]), statistics.median(wall[label])) for label in COMMANDS}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        COMMANDS[CHECK] = [sys.executable, "-m", "kvsize", "check", str(capacity_file(Path(folder)))]
        COMMANDS[NO_BYTECODE] = COMMANDS["kvsize meta-llama/Llama-3.1-8B --ctx 128k --json"]
        ENVIRONMENTS[NO_BYTECODE] = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": uncompiled_copy(Path(folder))}
        medians = measure(args.runs)
    base = medians[BASELINE][0]
    print(f"({args.runs} runs each, interleaved; Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print()
    print("| command | median CPU ms | median wall ms | CPU / bare stack |")
    print("|---|---:|---:|---:|")
    for label, (median_cpu, median_wall) in medians.items():
        print(f"| `{label}` | {median_cpu * 1000:.0f} | {median_wall * 1000:.0f} | {median_cpu / base:.2f}x |")
    print()
    print("| goal | ratio of median CPU | met |")
    print("|---|---:|---|")
    for what, numerator, denominator, most in GOALS:
        ratio = medians[numerator][0] / medians[denominator][0]
        print(f"| {what} | {ratio:.2f}x | {'yes' if ratio <= most else f'no (goal {most:g}x)'} |")


if __name__ == "__main__":
    main()
