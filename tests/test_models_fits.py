"""`kvsize models --fits GPU --ctx TOKENS`: the built-in models that fit one card, most requests first, each sized
by kvsize's own API (estimate_loaded), so a row says what `kvsize MODEL --gpu GPU --ctx TOKENS` says.

KV bytes per request are worked by hand from the configs; the budget is the sizing command's (its own tests
work it out), and each row is checked against that command's answer for the same scenario.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvsize import local_gpu
from kvsize.cli import app
from kvsize.registry import registry_entries

runner = CliRunner()
DATA = Path(__file__).parent / "data" / "local_gpu"
CAT = shutil.which("cat")
H100_MEMORY = 85_520_809_984  # h100-sxm: nvidia-smi 81559 MiB
# Llama 3.1 8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B (bf16) = 131,072 B per token
LLAMA_8B_PER_TOKEN = 32 * 8 * 128 * 2 * 2
# Llama 3.1 70B: 80 layers x 8 KV heads x 128 x 2 x 2 B = 327,680 B per token; tp 2 halves the KV heads per GPU
LLAMA_70B_PER_TOKEN_TP2 = 80 * (8 // 2) * 128 * 2 * 2


def fits(*args: str, code: int = 0) -> dict[str, Any]:
    result = runner.invoke(app, ["models", "--fits", *args, "--json"])
    assert result.exit_code == code, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def by_id(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["hub_id"]: row for row in data["models"]}


def sized(model: str, *args: str) -> dict[str, Any]:
    result = runner.invoke(app, [model, *args, "--json"])
    assert result.exit_code in (0, 1), result.stderr
    gpu: dict[str, Any] = json.loads(result.stdout)["scenarios"][0]["gpu"]
    return gpu


def test_ranked_by_requests_and_each_row_is_the_sizing_commands_answer() -> None:
    data = fits("h100", "--ctx", "32k")
    assert data["gpu"] == "h100-sxm" and data["memory_bytes"] == H100_MEMORY and data["ctx"] == 32768
    rows = data["models"]
    assert [r["max_requests"] for r in rows] == sorted((r["max_requests"] for r in rows), reverse=True)
    assert {r["hub_id"] for r in rows} <= {e.hub_id for e in registry_entries().values()}
    llama = by_id(data)["meta-llama/Llama-3.1-8B"]
    # 131,072 B x 32,768 tokens = 4 GiB per request (32768 / 16 = 2048 whole vLLM blocks)
    assert llama["kv_bytes_per_request"] == LLAMA_8B_PER_TOKEN * 32768 == 4 * 2**30
    assert llama["max_requests"] == llama["kv_budget_bytes"] // (4 * 2**30)  # whole requests the budget holds
    gpu = sized("meta-llama/Llama-3.1-8B", "--ctx", "32k", "--gpu", "h100")
    assert (llama["max_requests"], llama["kv_budget_bytes"]) == (gpu["max_concurrency"], gpu["kv_budget_bytes"])


def test_a_model_whose_weights_do_not_fit_is_left_out_until_tp_splits_them() -> None:
    # Llama 3.1 70B: ~131 GiB of bf16 weights > one H100's 79.65 GiB; over tp 2, ~65.7 GiB each
    one = by_id(fits("h100", "--ctx", "8k", "--family", "llama 3.1"))
    assert "meta-llama/Llama-3.1-70B-Instruct" not in one and "meta-llama/Llama-3.1-8B" in one
    two = by_id(fits("h100", "--ctx", "8k", "--family", "llama 3.1", "--tp", "2"))
    row = two["meta-llama/Llama-3.1-70B-Instruct"]
    # 4 KV heads per GPU: 163,840 B x 8,192 tokens = 1,342,177,280 B (1.25 GiB) per request on each GPU
    assert row["tp"] == 2 and row["kv_bytes_per_request"] == LLAMA_70B_PER_TOKEN_TP2 * 8192 == 1_342_177_280


def test_concurrency_keeps_the_models_that_serve_that_many() -> None:
    one = by_id(fits("h100", "--ctx", "32k", "--family", "llama 3.1"))
    most = one["meta-llama/Llama-3.1-8B"]["max_requests"]
    at_most = by_id(fits("h100", "--ctx", "32k", "--family", "llama 3.1", "--concurrency", str(most)))
    assert "meta-llama/Llama-3.1-8B" in at_most
    past = fits("h100", "--ctx", "32k", "--family", "llama 3.1", "--concurrency", str(most + 1), code=1)
    assert "meta-llama/Llama-3.1-8B" not in by_id(past)


def test_kv_dtype_fp8_halves_the_bytes_per_request() -> None:
    row = by_id(fits("h100", "--ctx", "32k", "--kv-dtype", "fp8", "--family", "llama 3.1"))["meta-llama/Llama-3.1-8B"]
    # fp8_e4m3: 1 B per element, 65,536 B per token x 32,768 = 2 GiB
    assert row["kv_dtype"] == "fp8_e4m3" and row["kv_bytes_per_request"] == 2 * 2**30


def test_models_the_engine_refuses_are_listed_as_skipped_with_why() -> None:
    data = fits("h100", "--ctx", "8k", "--family", "t5", code=1)  # none fits: exit 1
    assert data["models"] == [] and data["skipped"]
    assert all("Whisper" in s["reason"] for s in data["skipped"])  # vLLM v1 serves no other encoder-decoder


def test_a_driver_name_is_the_profile() -> None:
    assert fits("NVIDIA H100 80GB HBM3", "--ctx", "8k", "--family", "llama 3.1")["gpu"] == "h100-sxm"


def test_none_fits_is_exit_1() -> None:
    # Llama 3.2 1B at 128k: 16 layers x 8 KV heads x 64 x 2 x 2 B = 32,768 B/token x 131,072 = 4 GiB each; 64 of
    # them (256 GiB) fit no 16 GiB T4, nor does any larger Llama.
    data = fits("t4", "--ctx", "128k", "--concurrency", "64", "--family", "llama", code=1)
    assert data["models"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["models", "--fits", "h100"], "kvsize models --fits needs --ctx"),
        (["models", "--concurrency", "4"], "--concurrency goes with --fits GPU"),
        (["models", "--fits", "h100", "--ctx", "8k,32k"], "takes one --ctx"),
        (["models", "--fits", "h100", "--ctx", "8k", "--engine", "all"], "takes one --engine"),
        (["models", "--fits", "h100", "--ctx", "8k", "--tp", "auto"], "--tp auto needs --fits auto"),
        (["models", "--fits", "h1000", "--ctx", "8k"], "unknown GPU profile 'h1000'"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_fits_auto_with_tp_auto_splits_each_model_over_this_machines_gpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tools = tmp_path / "bin"
    tools.mkdir()
    smi = tools / "nvidia-smi"  # 8 x H100 SXM (tests/data/local_gpu/SOURCES.md)
    smi.write_text(f"#!/bin/sh\n'{CAT}' '{DATA / 'nvidia-smi_h100x8.txt'}'\n", encoding="utf-8")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tools))
    for module in ("pynvml", "amdsmi", "torch"):
        monkeypatch.setitem(sys.modules, module, None)
    local_gpu.detect.cache_clear()
    try:
        rows = by_id(fits("auto", "--ctx", "8k", "--tp", "auto", "--family", "qwen 2.5"))
        llama_data = fits("auto", "--ctx", "8k", "--tp", "auto", "--family", "llama 3.1")
    finally:
        local_gpu.detect.cache_clear()
    assert "--gpu auto: 8 x NVIDIA H100 80GB HBM3 (nvidia-smi) is h100-sxm" in llama_data["notes"]
    # Qwen2.5-7B: 28 heads, 4 KV heads: 8 and 7 GPUs are refused by vLLM (28 % 8; 7 % 4 KV heads), 4 is taken
    assert rows["Qwen/Qwen2.5-7B"]["tp"] == 4
    # Llama 3.1 70B: 64 heads, 8 KV heads: all 8 GPUs
    assert by_id(llama_data)["meta-llama/Llama-3.1-70B-Instruct"]["tp"] == 8
