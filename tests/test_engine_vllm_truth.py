"""vLLM rules per GPU, version and family, each worked by hand from the release's source (file:function and
version beside each case; the sources are the sdists of vLLM 0.33.0, 0.19.0 and 0.11.0)."""

from __future__ import annotations

import pytest

from kvsize.engines.context import Device, UsageContext, compute_capability
from kvsize.engines.vllm_scheduler import batch_defaults, max_concurrent_batches, scheduler_settings
from kvsize.profiles import resolve_gpu

GIB = 1024**3
API, LLM = UsageContext.API_SERVER, UsageContext.LLM_CLASS


def device(gpu_id: str) -> Device:
    return Device.from_profile(resolve_gpu(gpu_id))


# --- 1. scheduler defaults: vllm/engine/arg_utils.py EngineArgs.get_batch_defaults ------------------------------

# (gpu, version, usage, (max_num_batched_tokens, max_num_seqs)), read off the tier tables:
# 0.33: >= 160 GiB -> 16384/1024 both contexts; >= 70 GiB, not "a100" in the name, not capability (12, 1)
#       -> API 8192 / LLM 16384, 1024 seqs; else API 2048 / LLM 8192, 256 seqs.
# 0.19 and 0.11 (EngineArgs._set_default_args): no 160 GiB tier, no GB10 check.
TIERS = [
    ("h100-sxm", "0.33", API, (8192, 1024)),  # 79.65 GiB >= 70, not A100
    ("h100-sxm", "0.33", LLM, (16384, 1024)),
    ("h200", "0.33", API, (8192, 1024)),  # 140.4 GiB < 160
    ("b200", "0.33", API, (16384, 1024)),  # 179.06 GiB >= 160
    ("b200", "0.19", API, (8192, 1024)),  # 0.19 has no 16384 tier
    ("b200", "0.11", LLM, (16384, 1024)),
    ("mi300x", "0.33", API, (16384, 1024)),  # 191.98 GiB (ROCm, same table)
    ("a100-80gb", "0.33", API, (2048, 256)),  # "a100" in the device name: small tier despite 80 GiB
    ("a100-80gb", "0.19", LLM, (8192, 256)),
    ("dgx-spark", "0.33", API, (2048, 256)),  # GB10, capability (12, 1): small tier in 0.33
    ("dgx-spark", "0.19", API, (8192, 1024)),  # 119.71 GiB, no GB10 check in 0.19
    ("l40s", "0.33", API, (2048, 256)),  # 44.99 GiB < 70
    ("l4", "0.11", API, (2048, 256)),
    ("rtx-pro-6000-blackwell", "0.33", API, (8192, 1024)),  # 95.59 GiB, capability (12, 0) is not GB10
    ("tpu-v6e", "0.33", API, (1024, 256)),  # TPU chip override of the tokens only (V6E: 1024 API)
]


@pytest.mark.parametrize(
    ("gpu", "version", "usage", "expected"), TIERS, ids=[f"{t[0]}-{t[1]}-{t[2].name}" for t in TIERS]
)
def test_batch_defaults_by_gpu_and_version(
    gpu: str, version: str, usage: UsageContext, expected: tuple[int, int]
) -> None:
    assert batch_defaults(version, device(gpu), usage) == expected


def test_no_device_is_the_small_tier() -> None:
    # get_batch_defaults: device_memory = 0 when the platform cannot be queried -> the small tier.
    assert batch_defaults("0.33", None, API) == (2048, 256)


def test_custom_card_by_memory_only() -> None:
    # --gpu-mem 96GiB: no name, no capability -> the >= 70 GiB tier (8192 / 1024); 200 GiB -> 16384 in 0.33.
    assert batch_defaults("0.33", Device(96 * GIB), API) == (8192, 1024)
    assert batch_defaults("0.33", Device(200 * GIB), API) == (16384, 1024)
    assert batch_defaults("0.19", Device(200 * GIB), API) == (8192, 1024)


def test_compute_capability_from_profiles() -> None:
    assert device("dgx-spark").capability == (12, 1)
    assert device("b300").capability == (10, 3)
    assert compute_capability("CDNA 3, gfx942") is None


def test_concurrent_batches_and_in_flight() -> None:
    # 0.33 vllm/config/vllm.py VllmConfig.max_concurrent_batches: async scheduling + V2 runner -> pp + 1;
    # max_in_flight_tokens = batches x max_num_batched_tokens.
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=32768, pp=2)
    assert (s.max_concurrent_batches, s.in_flight_tokens) == (3, 3 * 8192)
    s = scheduler_settings("0.33", device("l40s"), max_model_len=32768)
    assert (s.max_concurrent_batches, s.in_flight_tokens) == (2, 2 * 2048)
    # 0.19 multiproc_executor.py max_concurrent_batches: 2 at pp 1 (async on by default), pp otherwise; the
    # sliding-window reserve (SlidingWindowSpec.max_memory_usage_bytes) is one max_num_batched_tokens.
    s = scheduler_settings("0.19", device("h100-sxm"), max_model_len=32768, pp=4)
    assert (s.max_concurrent_batches, s.in_flight_tokens) == (4, 8192)
    # 0.11: async scheduling off by default (config/scheduler.py) -> pp batches.
    assert max_concurrent_batches("0.11", 1) == 1 and max_concurrent_batches("0.11", 3) == 3


def test_clamps_of_the_defaults() -> None:
    # 0.33 _set_default_max_num_seqs_and_batched_tokens_args: min(max_num_seqs x max_model_len, default);
    # then max_num_seqs = min(max_num_seqs, max_num_batched_tokens). H100 API, max_model_len 4:
    # min(1024 x 4, 8192) = 4096 tokens; min(1024, 4096) = 1024 seqs.
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=4)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (4096, 1024)
    # Without chunked prefill (encoder-decoder): max(max_model_len, default) first: max(32768, 2048) = 32768,
    # then min(256 x 32768, 32768) = 32768 (L40S, API).
    s = scheduler_settings("0.33", device("l40s"), max_model_len=32768, chunked_prefill=False)
    assert s.max_num_batched_tokens == 32768 and s.max_num_encoder_input_tokens == 32768
    # 0.11 EngineArgs._set_default_args: no max_num_seqs x max_model_len clamp (max_model_len 4 keeps 8192), and
    # without chunked prefill max_num_batched_tokens = max_model_len.
    assert scheduler_settings("0.11", device("h100-sxm"), max_model_len=4).max_num_batched_tokens == 8192
    s = scheduler_settings("0.11", device("h100-sxm"), max_model_len=448, chunked_prefill=False)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (448, 448)  # min(1024, 448)
    # --performance-mode throughput (0.19+): both defaults doubled before the clamps.
    s = scheduler_settings("0.19", device("h100-sxm"), max_model_len=32768, throughput_mode=True)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (16384, 2048)


def test_explicit_overrides_are_kept() -> None:
    # A value the user gives is never clamped; the other default is still clamped by it:
    # --max-num-batched-tokens 100 -> max_num_seqs = min(1024, 100) = 100.
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=32768, max_num_batched_tokens=100)
    assert (s.max_num_batched_tokens, s.max_num_seqs, s.in_flight_tokens) == (100, 100, 200)
    s = scheduler_settings("0.33", device("h100-sxm"), max_model_len=32768, max_num_seqs=64)
    assert (s.max_num_batched_tokens, s.max_num_seqs) == (8192, 64)
