"""Fit on a GPU: budget, concurrency and context limits, worked out by hand."""

from __future__ import annotations

import pytest

import kvsize
from kvsize.api import Estimate

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

H100_BYTES = 85_520_809_984  # nvidia-smi memory.total of the H100 SXM 80GB (gpu_profiles/h100-sxm.yaml)
LLAMA_8B_WEIGHTS = 16_060_522_496  # model.safetensors.index.json total_size
RESERVE = H100_BYTES - H100_BYTES * 92 // 100  # 8% kept out, as vLLM's gpu_memory_utilization 0.92
BUDGET = H100_BYTES - LLAMA_8B_WEIGHTS - RESERVE


def run(**kwargs: object) -> Estimate:
    kwargs.setdefault("engine", "formula")
    return kvsize.estimate("meta-llama/Llama-3.1-8B", gpu="h100", kv_dtype="bf16", **kwargs)  # type: ignore[arg-type]


# vLLM 0.33.0 on the same card, part by part (kvsize/budget.py):
VISIBLE = H100_BYTES - 494_927_872  # CUDA-visible: nvidia-smi's 79.65 GiB less 0.46 GiB -> 79.19 GiB
REQUESTED = -(-VISIBLE * 92 // 100)  # ceil(visible x 0.92)
# vLLM profile run (budget.vllm_activation_bytes): 1024 seqs x 128,256 vocab x (2 bf16 + 12 fp32) sampler bytes,
# + 132 SMs x vocab x 4 (Triton top-k/top-p buffer) + 8192 tokens x 4096 hidden x 2 held hidden states;
# the dense forward 8192 x (2 x 4096 + 3 x 14,336) x 2 is smaller.
ACTIVATION = 1024 * 128_256 * 14 + 132 * 128_256 * 4 + 8192 * 4096 * 2
# the RoPE table: 131,072 positions x 128 (head_dim) x 2 B (vLLM rotary_embedding/base.py, kvsize/rope_tables.py)
ROPE_TABLE = 131_072 * 128 * 2
VLLM_BUDGET = REQUESTED - LLAMA_8B_WEIGHTS - ROPE_TABLE - ACTIVATION - 268_435_456 - 805_306_368  # non-torch, graphs


def test_seed_rule_of_thumb_formula() -> None:
    """Llama-3.1-8B on an 80 GB H100: about 60 GiB for KV, about 60 requests at 8k, about 3 at 128k."""
    result = run(ctx=["8k", "128k"])
    at_8k, at_128k = (s.gpu for s in result.scenarios)
    assert at_8k is not None and at_128k is not None
    assert at_8k.kv_budget_bytes == BUDGET and 57 * 1024**3 < BUDGET < 61 * 1024**3
    assert at_8k.max_concurrency == BUDGET // (8192 * 131_072) == 58
    assert at_128k.max_concurrency == BUDGET // (131_072 * 131_072) == 3


def test_max_context_for_batch() -> None:
    (scenario,) = run(ctx=32768, batch=16).scenarios
    assert scenario.gpu is not None
    # 16 requests x 131,072 B/token x c <= budget
    assert scenario.gpu.max_context == BUDGET // (16 * 131_072)
    # vLLM: 16 x cdiv(c, 16) x 16 x 131,072 <= budget -> whole blocks only.
    (paged,) = run(ctx=32768, batch=16, engine="vllm").scenarios
    assert paged.gpu is not None and paged.gpu.max_context == VLLM_BUDGET // (16 * 131_072) // 16 * 16
    assert scenario.gpu.fits == (BUDGET >= 16 * 32768 * 131_072)


def test_does_not_fit_when_weights_exceed_card() -> None:
    result = kvsize.estimate("meta-llama/Llama-3.1-70B-Instruct", ctx=8192, gpu="l4", kv_dtype="bf16", engine="vllm")
    fit = result.scenarios[0].gpu
    assert fit is not None and not fit.fits
    assert fit.kv_budget_bytes < 0 and fit.max_concurrency == 0 and fit.max_context == 0


def test_windowed_model_has_no_context_limit() -> None:
    # starcoder2-7b: every layer slides over 4,096 tokens, so per-request bytes stop growing: the memory sets no
    # limit, and the longest context is the model's own maximum (max_position_embeddings 16384).
    fit = kvsize.estimate("bigcode/starcoder2-7b", ctx=4096, gpu="h100", weights_bytes=14 * 10**9).scenarios[0].gpu
    assert fit is not None and fit.max_context_by_memory is None and fit.max_context == 16384


def test_custom_card_and_reserve() -> None:
    (scenario,) = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=8192, gpu_mem=24 * 1024**3, engine="formula",
                                  reserve_bytes=1024**3, weights_bytes=16 * 10**9).scenarios
    assert scenario.gpu is not None
    assert scenario.gpu.kv_budget_bytes == 24 * 1024**3 - 16 * 10**9 - 1024**3
    assert scenario.gpu.max_concurrency == scenario.gpu.kv_budget_bytes // (8192 * 131_072)


def test_seed_rule_of_thumb_vllm() -> None:
    """The same under vLLM 0.33.0's budget: 92% of the CUDA-visible memory less weights, the profile run's
    activation peak, non-torch memory and CUDA graphs."""
    at_8k, at_128k = (s.gpu for s in run(ctx=["8k", "128k"], engine="vllm").scenarios)
    assert at_8k is not None and at_128k is not None
    assert at_8k.kv_budget_bytes == VLLM_BUDGET and 54 * 1024**3 < VLLM_BUDGET < 61 * 1024**3
    # 8192 tokens = 512 blocks of 16; a block holds 16 tokens x 32 layers x 4096 B = 2 MiB.
    assert at_8k.max_concurrency == VLLM_BUDGET // (512 * 2 * 1024**2) == 55
    assert at_128k.max_concurrency == VLLM_BUDGET // (8192 * 2 * 1024**2) == 3
    # The log figures: num_blocks = budget // 2 MiB; concurrency = num_blocks / 8192 blocks per 128k request.
    blocks = VLLM_BUDGET // (2 * 1024**2)
    assert at_128k.kv_pool_tokens == int(blocks / 8192 * 131_072)
    assert at_128k.concurrency == blocks / 8192


def test_kv_memory_given() -> None:
    """--kv-memory: 6.5 GiB for KV; what does it hold?"""
    from kvsize.budget import BudgetSettings

    (scenario,) = run(ctx=8192, engine="vllm", budget=BudgetSettings(kv_memory_bytes=13 * 1024**3 // 2)).scenarios
    assert scenario.gpu is not None and scenario.gpu.kv_budget_bytes == 6_979_321_856
    assert scenario.gpu.kv_pool_tokens == 6_979_321_856 // (2 * 1024**2) * 16  # 3328 blocks of 16 tokens
    assert scenario.gpu.max_concurrency == 6


def test_speed_bounds_by_hand() -> None:
    (s,) = run(ctx=8192, batch=32, engine="vllm").scenarios
    assert s.gpu is not None and s.gpu.speed is not None
    # Decode step >= (weights 16,060,522,496 B + 32 x 1 GiB of KV) / 3.35 TB/s (H100 SXM).
    step = (LLAMA_8B_WEIGHTS + 32 * 1024**3) / 3_350_000_000_000
    assert s.gpu.speed.decode_step_seconds_min == pytest.approx(step, rel=1e-12)
    assert s.gpu.speed.decode_tokens_per_s_max == pytest.approx(32 / step, rel=1e-12)
    # Prefill >= (2 x 8,030,261,248 active params x 8192 x 32 + 2 x 32 layers x 4096 x 8192^2 x 32) / 989e12.
    flops = 2 * 8_030_261_248 * 8192 * 32 + 2 * 32 * 4096 * 8192 * 8192 * 32
    assert s.gpu.speed.prefill_seconds_min == pytest.approx(flops / 989e12, rel=1e-12)


def test_offload_tier_by_hand() -> None:
    (s,) = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=32768, gpu="h100", kv_dtype="bf16",
                           offload=(256 * 1024**3, 450 * 10**9)).scenarios
    assert s.gpu is not None and s.gpu.offload is not None
    # 256 GiB / 131,072 B per token = 2,097,152 tokens = 64 requests of 32k; one request (4 GiB) over 450 GB/s.
    assert (s.gpu.offload.extra_tokens, s.gpu.offload.extra_requests) == (2_097_152, 64)
    assert s.gpu.offload.transfer_seconds_per_request == 4 * 1024**3 / (450 * 10**9)


def test_weights_dtype_reprices_parameters() -> None:
    (s,) = run(ctx=8192, weights_dtype="int4").scenarios
    assert s.gpu is not None and s.gpu.weights_estimated
    # 8,030,261,248 published parameters: AWQ-style int4 with group-128 scales, (4 + (16 + 4) / 128) bits, except
    # embeddings and lm_head (2 x 128,256 x 4096 = 1,050,673,152), which quantized checkpoints keep in bf16.
    kept = 2 * 128_256 * 4096
    assert s.gpu.weights_bytes == -(-((8_030_261_248 - kept) * (4 * 128 + 20) + kept * 16 * 128) // (128 * 8))


def test_tp_splits_weights_and_heads() -> None:
    (one,) = run(ctx=8192, engine="vllm").scenarios
    (two,) = run(ctx=8192, engine="vllm", tp=2).scenarios
    assert two.gpu is not None and one.gpu is not None
    assert two.gpu.weights_bytes == LLAMA_8B_WEIGHTS // 2
    assert two.kv_cache_bytes_per_gpu == one.kv_cache_bytes // 2  # 8 KV heads: 4 per rank
    assert two.kv_cache_bytes == one.kv_cache_bytes
