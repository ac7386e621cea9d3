"""--plot writes a chart file (matplotlib from the plot extra, installed with the test extra)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvsize.cli import app

runner = CliRunner()


@pytest.mark.parametrize("suffix", [".png", ".svg"])
def test_plot_writes_file(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"chart{suffix}"
    result = runner.invoke(app, ["meta-llama/Llama-3.1-8B", "--ctx", "32k", "--gpu", "h100", "--plot", str(target)])
    assert result.exit_code == 0, result.stderr
    data = target.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == ".png" else b"<svg" in data[:2000]


def test_plot_rejects_other_formats(tmp_path: Path) -> None:
    result = runner.invoke(app, ["meta-llama/Llama-3.1-8B", "--ctx", "8k", "--plot", str(tmp_path / "x.pdf")])
    assert result.exit_code == 2 and "png or .svg" in result.stderr
