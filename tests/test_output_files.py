"""Every option that writes a file follows one rule (kvsize/safe_io.py output_path / write_output; README
"Exit codes and errors"): a path that cannot be a file as given (its folder missing, a folder) is exit 2, checked
before any work; a path the system refuses (/proc takes no new files, /dev/full is a full disk) is exit 3. Each
as a subprocess: one `Error:` line on stderr naming the option, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CAPACITY = ROOT / "examples" / "capacity.yaml"
LOGS = ROOT / "tests" / "data" / "logs"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args], capture_output=True, text=True, timeout=180, env=env, cwd=ROOT
    )


def one_error(proc: subprocess.CompletedProcess[str], code: int, option: str) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr[-2000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"Error: {option}: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


def sizing(option_path: str) -> list[str]:
    return ["meta-llama/Llama-3.1-8B", "--ctx", "4k", "--gpu", "h100", "--plot", option_path]


def check(option_path: str) -> list[str]:
    return ["check", str(CAPACITY), "--junit", option_path]


def verify(option_path: str) -> list[str]:
    return ["verify", "acme/never-fetched", "--device", "meta", "--report", option_path]


def log(option_path: str) -> list[str]:
    return ["log", str(_vllm_log()), "--gpu", "h100", "--save-calibration", option_path]


def _vllm_log() -> Path:
    return LOGS / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log"  # a vLLM start-up log with overheads


COMMANDS = [
    pytest.param(sizing, "--plot", ".png", id="size --plot"),
    pytest.param(check, "--junit", ".xml", id="check --junit"),
    pytest.param(verify, "--report", ".md", id="verify --report"),
    pytest.param(log, "--save-calibration", ".yaml", id="log --save-calibration"),
]


@pytest.mark.parametrize(("command", "option", "suffix"), COMMANDS)
def test_a_refused_write_is_exit_3(command: object, option: str, suffix: str) -> None:
    if not Path("/proc/self").exists():
        pytest.skip("needs /proc")
    line = one_error(run(*command(f"/proc/kvsize-out{suffix}")), 3, option)  # type: ignore[operator]
    assert "/proc/kvsize-out" in line


@pytest.mark.parametrize(("command", "option", "suffix"), COMMANDS)
def test_a_missing_folder_is_exit_2(tmp_path: Path, command: object, option: str, suffix: str) -> None:
    line = one_error(run(*command(str(tmp_path / "missing" / f"out{suffix}"))), 2, option)  # type: ignore[operator]
    assert "does not exist" in line
    assert not (tmp_path / "missing").exists()


@pytest.mark.parametrize(("command", "option", "suffix"), COMMANDS)
def test_a_folder_is_exit_2(tmp_path: Path, command: object, option: str, suffix: str) -> None:
    folder = tmp_path / f"folder{suffix}"
    folder.mkdir()
    assert "is a folder" in one_error(run(*command(str(folder))), 2, option)  # type: ignore[operator]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_junit_onto_a_full_disk_is_exit_3() -> None:
    line = one_error(run(*check("/dev/full")), 3, "--junit")
    assert "No space left" in line
