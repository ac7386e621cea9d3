"""Every file in examples/ runs (shell scripts with bash -euo pipefail, Python with this interpreter) and
prints what it promises. The venv's bin folder goes first on PATH, so `kvsize` and `python3` are this install's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# Text each example must print; an example missing here fails test_every_example_has_expectations.
EXPECTED: dict[str, list[str]] = {
    "quickstart.sh": [
        "131,072 B",  # Llama-3.1-8B per token
        "16.00 GiB",  # ... at 128k
        "h100-sxm",
        # vLLM 0.34.0 (the newest): 63,685,020,754 B of budget // 1 GiB per 8k request = 59 (tests/test_vllm_034.py)
        "requests of 8k tokens that fit on an H100: 59",
        "54 GPU profiles",
    ],
    "api_example.py": ["seed check passed", "fp8_e4m3", "17179869184"],
    "check_capacity.sh": [
        "3 deployments: 3 pass, 0 fail",
        "junit test cases: 3",
        "chat-8b pass",
        "in-house-3b pass",
        "GPUs needed",
    ],
    "capacity_from_config.py": ["source: local:", "per-token check passed: 57344 B", "469,762,048 B KV"],
}


def _examples() -> list[Path]:
    return sorted(p for p in EXAMPLES.iterdir() if p.suffix in (".sh", ".py"))


def test_every_example_has_expectations() -> None:
    assert {p.name for p in _examples()} == set(EXPECTED)


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.name)
def test_example_runs(path: Path, tmp_path: Path) -> None:
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("KVSIZE_DEBUG", "HF_TOKEN")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", HF_HUB_OFFLINE="1",
               HF_HOME=str(tmp_path / "hf-home"))
    command = ["bash", "-euo", "pipefail", str(path)] if path.suffix == ".sh" else [sys.executable, str(path)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    for text in EXPECTED[path.name]:
        assert text in proc.stdout, text
