"""Fit on a GPU: budget, concurrency and context limits, worked out by hand."""

from __future__ import annotations

import kvsize
from kvsize.api import Estimate

H100_BYTES = 85_520_809_984  # nvidia-smi memory.total of the H100 SXM 80GB (gpu_profiles/h100-sxm.yaml)
LLAMA_8B_WEIGHTS = 16_060_522_496  # model.safetensors.index.json total_size
RESERVE = H100_BYTES - H100_BYTES * 92 // 100  # 8% kept out, as vLLM's gpu_memory_utilization 0.92
BUDGET = H100_BYTES - LLAMA_8B_WEIGHTS - RESERVE


def run(**kwargs: object) -> Estimate:
    return kvsize.estimate("meta-llama/Llama-3.1-8B", gpu="h100", kv_dtype="bf16", **kwargs)  # type: ignore[arg-type]


def test_seed_rule_of_thumb() -> None:
    """Llama-3.1-8B on an 80 GB H100: about 60 GiB for KV, about 60 requests at 8k, about 3 at 128k."""
    result = run(ctx=["8k", "128k"])
    at_8k, at_128k = (s.gpu for s in result.scenarios)
    assert at_8k is not None and at_128k is not None
    assert at_8k.kv_budget_bytes == BUDGET and 57 * 1024**3 < BUDGET < 61 * 1024**3
    assert at_8k.max_concurrency == BUDGET // (8192 * 131_072) == 58
    assert at_128k.max_concurrency == BUDGET // (131_072 * 131_072) == 3


def test_max_context_for_batch() -> None:
    (scenario,) = run(ctx=32768, batch=16, engine="formula").scenarios
    assert scenario.gpu is not None
    # 16 requests x 131,072 B/token x c <= budget
    assert scenario.gpu.max_context == BUDGET // (16 * 131_072)
    # vLLM: 16 x cdiv(c, 16) x 16 x 131,072 <= budget -> whole blocks only.
    (paged,) = run(ctx=32768, batch=16, engine="vllm").scenarios
    assert paged.gpu is not None and paged.gpu.max_context == BUDGET // (16 * 131_072) // 16 * 16
    assert scenario.gpu.fits == (16 * 32768 * 131_072 <= BUDGET)


def test_does_not_fit_when_weights_exceed_card() -> None:
    result = kvsize.estimate("meta-llama/Llama-3.1-70B-Instruct", ctx=8192, gpu="l4", kv_dtype="bf16")
    fit = result.scenarios[0].gpu
    assert fit is not None and not fit.fits
    assert fit.kv_budget_bytes < 0 and fit.max_concurrency == 0 and fit.max_context == 0


def test_windowed_model_has_no_context_limit() -> None:
    # starcoder2-7b: every layer slides over 4,096 tokens, so per-request bytes stop growing.
    fit = kvsize.estimate("bigcode/starcoder2-7b", ctx=4096, gpu="h100", weights_bytes=14 * 10**9).scenarios[0].gpu
    assert fit is not None and fit.max_context is None


def test_custom_card_and_reserve() -> None:
    (scenario,) = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=8192, gpu_mem=24 * 1024**3,
                                  reserve_bytes=1024**3, weights_bytes=16 * 10**9).scenarios
    assert scenario.gpu is not None
    assert scenario.gpu.kv_budget_bytes == 24 * 1024**3 - 16 * 10**9 - 1024**3
    assert scenario.gpu.max_concurrency == scenario.gpu.kv_budget_bytes // (8192 * 131_072)
