"""Fast start: --help, --version and registry runs import neither torch, transformers nor huggingface_hub."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "huggingface_hub")
PROBE = f"""
import contextlib, io, json, sys
from kvsize.cli import main
sys.argv = ["kvsize", *json.loads(sys.argv[1])]
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit as exc:
        code = exc.code or 0
    else:
        code = 0
heavy = [m for m in {HEAVY!r} if m in sys.modules]
loaded = {{name: name in sys.modules for name in ("pydantic", "yaml")}}
print(json.dumps({{"code": code, "heavy": heavy, **loaded}}))
"""


def probe(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(list(args))], capture_output=True, text=True,
                          check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_version_stays_light() -> None:
    assert probe("--version") == {"code": 0, "heavy": [], "pydantic": False, "yaml": False}


def test_help_stays_light() -> None:
    # `kvsize --help` shows the sizing command's options, and typer >= 0.29 builds a command's parameters
    # through pydantic; nothing heavier loads.
    result = probe("--help")
    assert result["code"] == 0 and result["heavy"] == []


def test_command_help_stays_light() -> None:
    # typer >= 0.29 coerces parameters through pydantic, so a command's --help loads it; nothing heavier.
    result = probe("size", "--help")
    assert result["code"] == 0 and result["heavy"] == []


@pytest.mark.parametrize("args", [["meta-llama/Llama-3.1-8B", "--ctx", "128k", "--json"],
                                  ["meta-llama/Llama-3.1-8B", "--ctx", "128k", "--gpu", "h100"],
                                  ["deepseek-ai/DeepSeek-V3", "--gpu", "h200", "--kv-dtype", "bf16,fp8"],
                                  ["gpus"], ["models"]])
def test_registry_runs_never_touch_the_hub_or_torch(args: list[str]) -> None:
    result = probe(*args)
    # DeepSeek-V3's weights do not fit one H200: the answer is "no", exit 1 (cli/size.py).
    assert result["code"] in (0, 1) and result["heavy"] == []


@pytest.mark.parametrize("args", [["meta-llama/Llama-3.1-8B", "--ctx", "128k", "--json"],
                                  ["meta-llama/Llama-3.1-8B", "--ctx", "128k"],
                                  ["meta-llama/Llama-3.1-8B", "--ctx", "128k", "--gpu", "h100"],
                                  ["Qwen/Qwen3-8B", "--gpu", "l4", "--engine", "all", "--json"],
                                  ["gpus"]])
def test_sizing_runs_import_neither_pydantic_nor_yaml(args: list[str]) -> None:
    """Issue 12's start-up goal: importing pydantic's BaseModel alone costs more than a run's margin over the
    bare CLI stack, and PyYAML as much again; the records are msgspec Structs (kvsize/record.py) and the GPU
    profiles are read through gpu_profiles/index.json."""
    result = probe(*args)
    assert result["code"] in (0, 1) and result["pydantic"] is False and result["yaml"] is False


@pytest.mark.slow
def test_registry_runs_meet_the_start_up_goal() -> None:
    """Issue 12: a registry sizing run, with and without --gpu, within 1.5x of importing the bare CLI stack
    (median CPU time, interleaved runs: benchmarks/startup.py). Timing depends on the machine's load, hence slow
    (run with -m slow on a quiet machine)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "startup.py"
    spec = importlib.util.spec_from_file_location("startup_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    medians = module.measure(9)
    base = medians[module.BASELINE][0]
    runs = [label for label in medians if label.startswith("kvsize meta-llama")]
    assert len(runs) == 3
    for label in runs:
        assert medians[label][0] <= 1.5 * base, (label, medians[label][0], base)
