"""Start-up time of the kvsize CLI beside the bare cost of its CLI framework.

    python benchmarks/startup.py [--runs 15]

Each command runs in a fresh interpreter; the table gives the median and the minimum wall time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

BARE_TYPER_APP = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def main(model: str) -> None:
    pass
app()
"""

COMMANDS = {
    "python -c pass (interpreter only)": [sys.executable, "-c", "pass"],
    "import typer (framework only)": [sys.executable, "-c", "import typer"],
    "bare typer app --help": [sys.executable, "-c", BARE_TYPER_APP, "--help"],
    "kvsize --version": [sys.executable, "-m", "kvsize", "--version"],
    "kvsize --help": [sys.executable, "-m", "kvsize", "--help"],
    "kvsize meta-llama/Llama-3.1-8B --ctx 128k --json": [
        sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "128k", "--json"],
    "kvsize meta-llama/Llama-3.1-8B --ctx 128k --gpu h100": [
        sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "128k", "--gpu", "h100"],
}


def time_command(argv: list[str], runs: int) -> list[float]:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        timings.append(time.perf_counter() - start)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"| command | median ms | min ms |  ({args.runs} runs, Python {sys.version.split()[0]})")
    print("|---|---:|---:|")
    for label, argv in COMMANDS.items():
        timings = time_command(argv, args.runs)
        print(f"| `{label}` | {statistics.median(timings) * 1000:.0f} | {min(timings) * 1000:.0f} |")


if __name__ == "__main__":
    main()
