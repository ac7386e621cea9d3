"""The decode roofline of an MoE reads the routed share of the weights, not every expert (issue 20 item 4)."""

from __future__ import annotations

import kvsize
from kvsize.fit import Hardware, speed_bound, weights_read_per_step
from kvsize.params import estimate_parameters
from kvsize.resolve import load_model_config


def test_moe_step_reads_the_active_share() -> None:
    result = kvsize.estimate("Qwen/Qwen3-30B-A3B", ctx=8192, batch=1, kv_dtype="bf16", gpu="a100-80gb")
    gpu = result.scenarios[0].gpu
    assert gpu is not None and gpu.speed is not None
    counted = estimate_parameters(load_model_config("Qwen/Qwen3-30B-A3B").raw)
    assert counted.active is not None
    # The model card: 3.3B activated of 30.5B; kvsize's count (checked against transformers elsewhere) agrees.
    assert 0.105 < counted.active / counted.total < 0.112
    # KV: 2 x 48 layers x 4 KV heads x 128 x 2 B = 98,304 B/token; 8,192 tokens in 512 whole blocks of 16.
    kv = 98_304 * 8192
    read = gpu.weights_bytes * counted.active // counted.total
    assert gpu.speed.decode_step_seconds_min == (read + kv) / 2_039_000_000_000  # A100 80GB: 2,039 GB/s
    # About 270 tok/s for one request, where reading all 128 experts of each layer gave about 33.
    assert 250 < gpu.speed.decode_tokens_per_s_per_request_max < 300


def test_dense_step_reads_every_weight() -> None:
    hw = Hardware(bandwidth_bytes_per_s=1000, active_parameters=8, total_parameters=8)
    assert weights_read_per_step(4000, hw) == 4000
    bound = speed_bound(weights_per_gpu=4000, kv_per_gpu=1000, ctx=10, batch=2, tp=1, hw=hw)
    assert bound is not None and bound.decode_step_seconds_min == 5.0 and bound.decode_tokens_per_s_max == 0.4
    # Counts unknown: every weight is read (the bound stays an upper bound).
    assert weights_read_per_step(4000, Hardware(bandwidth_bytes_per_s=1000)) == 4000
    # An MoE of 1/4 active: a quarter of the weights, floored (fewer bytes only raises an upper bound's speed).
    assert weights_read_per_step(4001, Hardware(active_parameters=1, total_parameters=4)) == 1000
