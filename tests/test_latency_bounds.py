"""Latency bounds that hold (issue 21): a decode step reads the weights it routes to and the batch's KV."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

import kvsize
from kvsize.cli.app import app
from kvsize.errors import UsageError
from kvsize.fit import Hardware, expected_distinct_experts, latency_bounds, weights_read_for_tokens

H100_BANDWIDTH = 3_350_000_000_000  # gpu_profiles/h100-sxm.yaml memory_bandwidth_bytes_per_s (3.35 TB/s)
H100_BF16 = 989e12  # gpu_profiles/h100-sxm.yaml dense_tflops bf16: 989


def test_llama_8b_bf16_h100_batch_1_ctx_8192() -> None:
    result = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=8192, batch=1, kv_dtype="bf16", gpu="h100", itl_ms=50)
    (row,) = result.latency
    # Weights: 8,030,261,248 parameters x 2 B (bf16) = 16,060,522,496 B, all read by a dense step.
    # KV per token: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B = 131,072 B; 8,192 tokens = 1,073,741,824 B.
    assert row.experts_read_per_layer is None
    assert row.weights_read_bytes == 16_060_522_496
    assert row.kv_read_bytes == 8192 * 131_072
    assert row.bandwidth_bytes_per_s == H100_BANDWIDTH
    assert row.itl_seconds_min == (16_060_522_496 + 8192 * 131_072) / H100_BANDWIDTH  # ~5.11 ms
    # Prefill: 2 x 8,030,261,248 x 8,192 / 989e12 = 0.1330 s, above the weights' read (16.06e9 / 3.35e12 = 4.8 ms).
    assert row.ttft_seconds_min == pytest.approx(2 * 8_030_261_248 * 8192 / H100_BF16, rel=1e-12)
    # 50 ms x 3.35 TB/s = 167,500,000,000 B; less the weights: 151,439,477,504 B; / 1,073,741,824 = 141.04.
    assert row.max_requests_under_itl == 141


def test_kv_read_grows_with_the_batch() -> None:
    result = kvsize.estimate(
        "meta-llama/Llama-3.1-8B", ctx=[8192, 32768], batch=[1, 64], kv_dtype="bf16", gpu="h100", itl_ms=50
    )
    rows = {(r.ctx, r.batch): r for r in result.latency}
    assert rows[8192, 64].kv_read_bytes == 64 * 8192 * 131_072
    assert rows[32768, 1].kv_read_bytes == 32768 * 131_072
    # (167.5e9 - 16,060,522,496) / (32,768 x 131,072 = 4,294,967,296) = 35.26 -> 35.
    assert rows[32768, 1].max_requests_under_itl == 35


def test_expected_distinct_experts() -> None:
    # Qwen3-30B-A3B: 128 experts, 8 routed. One token: 128 x (1 - 15/16) = 8.
    assert expected_distinct_experts(128, 8, 1) == 8
    # 64 tokens: 128 x (1 - (15/16)^64) = 128 x (1 - 0.016077) = 125.94.
    assert expected_distinct_experts(128, 8, 64) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 64))
    assert 125.9 < expected_distinct_experts(128, 8, 64) < 126.0


def test_qwen3_moe_reads_the_routed_experts() -> None:
    result = kvsize.estimate("Qwen/Qwen3-30B-A3B", ctx=8192, batch=[1, 64], kv_dtype="bf16", gpu="h100", itl_ms=50)
    one, many = result.latency
    assert one.experts_read_per_layer == 8
    assert many.experts_read_per_layer == pytest.approx(128 * (1 - (1 - 8 / 128) ** 64))
    # KV: 48 layers x 2 x 4 KV heads x 128 x 2 B = 98,304 B/token.
    assert one.kv_read_bytes == 8192 * 98_304 and many.kv_read_bytes == 64 * 8192 * 98_304
    weights = result.scenarios[0].gpu.weights_bytes if result.scenarios[0].gpu else 0
    # At batch 1 the step reads the active share; at 64 nearly every expert, still not all 128.
    assert one.weights_read_bytes < 0.12 * weights
    assert 0.95 * weights < many.weights_read_bytes < weights


def test_moe_weights_between_active_and_total() -> None:
    # 10 parameters, 2 active; 4 experts, top 1: one routed expert skipped by a token holds (10 - 2) / 3.
    hw = Hardware(
        bandwidth_bytes_per_s=100, active_parameters=2, total_parameters=10, num_experts=4, experts_per_token=1
    )
    # 2 tokens: 4 x (1 - (3/4)^2) = 1.75 experts; 2 + (1.75 - 1) / 3 x 8 = 4 of 10 parameters -> 400 of 1000 B.
    assert weights_read_for_tokens(1000, hw, 2) == (400, 1.75)
    assert weights_read_for_tokens(1000, hw, 1) == (200, 1)
    rows = latency_bounds(
        weights_per_gpu=1000, kv_per_request=lambda ctx: ctx, hardware=hw, contexts=[10], batches=[2], itl_ms=9_000
    )
    # (400 + 2 x 10) / 100 = 4.2 s. 9 s holds batch b while 100 x params(b) + 10b <= 900, params(b) =
    # 2 + (4(1 - 0.75^b) - 1) x 8/3: b = 6: 3.28809 experts, 8.10156 params -> 810.16 + 60 = 870.16 B (holds);
    # b = 7: 3.46606 experts, 8.57617 params -> 857.62 + 70 = 927.62 B (does not).
    assert rows[0].max_requests_under_itl == 6
    assert rows[0].itl_seconds_min == pytest.approx(4.2)
    assert rows[0].ttft_seconds_min is None  # no peak FLOP/s given


def test_max_requests_hand_worked() -> None:
    hw = Hardware(bandwidth_bytes_per_s=1000)  # dense: every weight read
    rows = latency_bounds(
        weights_per_gpu=2000, kv_per_request=lambda ctx: ctx, hardware=hw, contexts=[100], batches=[1], itl_ms=10_000
    )
    # 10 s x 1000 B/s = 10,000 B; less 2,000 B of weights: 8,000 B / 100 B per request = 80.
    assert rows[0].max_requests_under_itl == 80
    # Not even one: 2000 B alone take 2 s > 1 s.
    one_second = latency_bounds(
        weights_per_gpu=2000, kv_per_request=lambda ctx: ctx, hardware=hw, contexts=[100], batches=[1], itl_ms=1000
    )
    assert one_second[0].max_requests_under_itl == 0


def test_itl_needs_a_card() -> None:
    with pytest.raises(UsageError):
        kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=8192, itl_ms=50)


def test_cli_table_and_json() -> None:
    runner = CliRunner()
    args = ["meta-llama/Llama-3.1-8B", "--ctx", "8k", "--gpu", "h100", "--kv-dtype", "bf16", "--itl", "50"]
    out = runner.invoke(app, args, env={"COLUMNS": "80", "HF_HUB_OFFLINE": "1"})
    assert "latency bounds" in out.output and "bandwidth 3.35 TB/s" in out.output
    assert max(len(line) for line in out.output.splitlines()) <= 80
    data = json.loads(runner.invoke(app, [*args, "--json"], env={"HF_HUB_OFFLINE": "1"}).output)
    assert data["latency"][0]["max_requests_under_itl"] == 141
    assert math.isclose(data["latency"][0]["itl_seconds_min"], 17_134_264_320 / H100_BANDWIDTH)
    bad = runner.invoke(app, [*args[:-1], "0"])
    assert bad.exit_code == 2
