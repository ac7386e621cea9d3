"""vLLM's paging of Gemma 4 and Gemma 3n, worked by hand from the configs and vLLM's source.

What vLLM builds (read in the 0.19.0, 0.23.0, 0.24.0, 0.29.0-0.33.0 sdists):
- models/gemma4.py Gemma4DecoderLayer: full layers take global_head_dim, and num_global_key_value_heads when
  attention_k_eq_v (0.33: per_layer_config, the same figures); K = V layers still store K and V.
- The last num_kv_shared_layers layers (Gemma 4 E2B, Gemma 3n) name a kv_sharing_target_layer_name, so
  v1/worker/gpu_model_runner.py get_kv_cache_spec gives them no spec: they cost nothing.
- v1/core/kv_cache_utils.py (0.33: kv_cache_planning.py) unify_kv_cache_spec_page_size: a layer whose page is smaller
  than the largest takes block_size x (largest page // its page) tokens per block.
- _get_kv_cache_groups_uniform_page_size: groups of min(layer counts) layers (max when max < 1.5 x min).
- Blocks per request: full cdiv(L, bs); sliding cdiv(min(W - 1 + in-flight, L), bs) + 1 (SlidingWindowSpec).
  In flight on an H100 (kvsize's default card): 8,192 tokens (the server's max_num_batched_tokens) through 0.25,
  2 x 8,192 from 0.26 (the V2 runner's pp + 1 batches; 0.29+ runs every model on it).
- models/config.py Gemma4Config: TRITON_ATTN when the head sizes differ (0.19-0.23); from 0.24 FlashAttention 4 on
  compute capability 9.x-11.x, TRITON_ATTN elsewhere. Both take any multiple of 16 tokens as a kernel block
  (get_supported_kernel_block_sizes: MultipleOf(16)), except FA4's 128-token pages for head size 256 on 10.x/11.x
  (0.29+, flash_attn.py _get_fa4_hd256_block_size) and 64-token pages of an fp8 head-size-512 cache on 9.x
  (0.31+, _get_sm90_fa4_fp8_kv_block_size), which kvsize refuses.
"""

from __future__ import annotations

from typing import Any

import pytest

import kvsize
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext
from kvsize.errors import KvsizeError, UsageError
from tests.test_families_round4 import GEMMA3N
from tests.tiny_configs import registry_config

GEMMA4_31B = registry_config("google/gemma-4-31B-it")
GEMMA4_E2B = registry_config("google/gemma-4-E2B-it")
GEMMA4_26B = registry_config("google/gemma-4-26B-A4B")


def _bytes(config: dict[str, Any], ctx: int, version: str, gpu: str = "h100", kv: str = "bf16", tp: int = 1) -> int:
    """One request's KV bytes on each GPU (weights given, so no parameter count is needed)."""
    s = kvsize.estimate(
        config, ctx=ctx, engine="vllm", engine_version=version, kv_dtype=kv, gpu=gpu, tp=tp, weights_bytes=1 << 30
    )
    return int(s.scenarios[0].kv_cache_bytes_per_gpu)


# --- google/gemma-4-31B-it: 60 layers, full every 6th (10 full, 50 sliding), window 1,024 ----------------------
# sliding: 16 KV heads x 256 x 2 (K, V) x 2 B = 16,384 B per token -> a 16-token page of 262,144 B
# full (attention_k_eq_v, num_global_key_value_heads 4): 4 x 512 x 2 x 2 B = 8,192 B -> 131,072 B, the smaller page:
#   unified to 32 tokens per block (262,144 // 131,072 = 2).
# groups: 50 sliding / 10 full, 50 >= 1.5 x 10, so groups of 10: 5 sliding + 1 full; a block spans a group:
#   10 x 262,144 = 2,621,440 B.
BLOCK_31B = 10 * 262_144
# ctx 32,768 at 0.19: full cdiv(32,768, 32) = 1,024; sliding cdiv(min(1,023 + 8,192, L), 16) + 1 = 576 + 1 = 577
#   per group, x 5 = 2,885; 3,909 blocks.
# ctx 10,000 (no multiple of 16 or 32): full cdiv(10,000, 32) = 313; sliding as above 577 x 5 = 2,885; 3,198 blocks.
#   (The full layers left in 16-token blocks, the near twin, would be 625 blocks of half the page.)
# ctx 32,768 at 0.33: sliding cdiv(1,023 + 16,384, 16) + 1 = 1,088 + 1 = 1,089, x 5 = 5,445; 6,469 blocks.
# ctx 512 (under the window): full cdiv(512, 32) = 16; sliding cdiv(512, 16) + 1 = 33 x 5 = 165; 181 blocks.
CASES_31B = [
    (32_768, "0.19.0", 3_909 * BLOCK_31B),
    (10_000, "0.19.0", 3_198 * BLOCK_31B),
    (512, "0.19.0", 181 * BLOCK_31B),
    (32_768, "0.23.0", 3_909 * BLOCK_31B),
    (32_768, "0.24.0", 3_909 * BLOCK_31B),
    (32_768, "0.33.0", 6_469 * BLOCK_31B),
]


def test_gemma4_31b_on_dgx_spark_as_logged() -> None:
    # vllm#39734 (0.19.1rc1.dev301, DGX Spark, `vllm serve google/gemma-4-31B-it --gpu-memory-utilization 0.8`,
    # L = 262,144): "GPU KV cache size: 37,392 tokens", "Maximum concurrency for 262,144 tokens per request:
    # 1.53x". NVML answers NOT_SUPPORTED for GB10's memory, so the batch defaults read device_memory 0: 2,048
    # tokens a batch. Per request: full cdiv(262,144, 32) = 8,192; sliding cdiv(1,023 + 2,048, 16) + 1 = 193,
    # x 5 = 965; 9,157 blocks. The logged pool (num_blocks // 6 groups x 16 = 37,392) puts num_blocks in
    # 14,022-14,027, and 14,022 / 9,157 = 1.531: the 1.53x. (At 8,192 tokens a batch: 8,192 + 5 x 577 = 11,077
    # blocks, 1.27x.)
    assert _bytes(GEMMA4_31B, 262_144, "0.19.1", gpu="dgx-spark") == 9_157 * BLOCK_31B
    assert 14_022 // 6 * 16 == 37_392 and round(14_022 / 9_157, 2) == 1.53


def test_gemma4_31b_at_tp2_halves_every_page() -> None:
    # tp 2: sliding 8 heads per rank (131,072 B page), full 2 (65,536 B, unified to 32 tokens): blocks as at tp 1.
    assert _bytes(GEMMA4_31B, 32_768, "0.19.0", tp=2) == 3_909 * BLOCK_31B // 2


def test_gemma4_26b_a4b() -> None:
    # 30 layers: 25 sliding of 8 x 256 x 2 x 2 B = 8,192 B per token (131,072 B page), 5 full of 2 x 512 x 2 x 2 B
    # = 4,096 B (65,536 B, unified to 32 tokens). Groups of 5: 5 sliding + 1 full, 5 x 131,072 = 655,360 B a block.
    # ctx 32,768 at 0.19: 1,024 + 5 x 577 = 3,909 blocks.
    assert _bytes(GEMMA4_26B, 32_768, "0.19.0") == 3_909 * 655_360


# --- google/gemma-4-E2B-it: 35 layers, the last 20 KV-shared; cached layers 0-14: full 4, 9, 14, 12 sliding -----
# sliding: 1 KV head x 256 x 2 x 2 B = 1,024 B per token (16,384 B page); full: 1 x 512 x 2 x 2 B = 2,048 B
# (32,768 B page, the largest): here the sliding layers are unified, to 32 tokens per block.
# groups: 12 / 3 -> groups of 3: 4 sliding + 1 full; a block: 3 x 32,768 = 98,304 B. Window 512.
BLOCK_E2B = 3 * 32_768
# ctx 32,768 at 0.19: full cdiv(32,768, 16) = 2,048; sliding cdiv(min(511 + 8,192, L), 32) + 1 = 272 + 1 = 273
#   x 4 = 1,092; 3,140 blocks. (Sliding blocks of 16 tokens, the near twin: 545 each.)
# ctx 10,000: full 625; sliding 273 x 4 = 1,092; 1,717 blocks.
# ctx 32,768 at 0.33: sliding cdiv(511 + 16,384, 32) + 1 = 528 + 1 = 529, x 4 = 2,116; 4,164 blocks.
CASES_E2B = [
    (32_768, "0.19.0", 3_140 * BLOCK_E2B),
    (10_000, "0.19.0", 1_717 * BLOCK_E2B),
    (32_768, "0.33.0", 4_164 * BLOCK_E2B),
]

CASES = [("31B", GEMMA4_31B, *c) for c in CASES_31B] + [
    ("E2B, KV-shared layers cost nothing", GEMMA4_E2B, *c) for c in CASES_E2B
]


@pytest.mark.parametrize(
    ("config", "ctx", "version", "expected"), [c[1:] for c in CASES], ids=[f"{c[0]}-{c[3]}-{c[2]}" for c in CASES]
)
def test_gemma4(config: dict[str, Any], ctx: int, version: str, expected: int) -> None:
    assert _bytes(config, ctx, version) == expected


def test_the_logged_pool_counts_groups_of_the_smallest_block() -> None:
    # 0.19 _report_kv_cache_config: num_blocks // len(groups) x min(group block sizes) = 1,000 // 6 x 16 = 2,656
    # tokens; 0.33 logs int(concurrency x L) = int(1,000 / 6,469 x 32,768) = 5,065.
    spec = parse_config(GEMMA4_31B)
    available = 1_000 * BLOCK_31B + BLOCK_31B - 1
    pool = get_engine("vllm", "0.19.0").pool(
        spec, available_bytes=available, max_model_len=32_768, kv_dtype=KvDtype.BF16
    )
    assert (pool.num_blocks, pool.kv_pool_tokens) == (1_000, 2_656)
    pool = get_engine("vllm", "0.33.0").pool(
        spec, available_bytes=available, max_model_len=32_768, kv_dtype=KvDtype.BF16
    )
    assert (pool.num_blocks, pool.kv_pool_tokens) == (1_000, 5_065)


# --- google/gemma-3n-E4B (tests/data/never_silent): 35 layers, the last 15 KV-shared; cached 0-19: 4 full + 16 sliding
# every layer 2 KV heads x 256 x 2 x 2 B = 2,048 B per token, a 32,768 B page; window 512.
# groups of 4 (16 / 4): 4 sliding + 1 full; a block 4 x 32,768 = 131,072 B.
# ctx 4,096 at 0.19: full 256; sliding cdiv(min(511 + 8,192, 4,096), 16) + 1 = 257, x 4 = 1,028; 1,284 blocks.
# ctx 10,000: full 625; sliding cdiv(8,703, 16) + 1 = 545, x 4 = 2,180; 2,805 blocks.
@pytest.mark.parametrize(("ctx", "blocks"), [(4_096, 1_284), (10_000, 2_805)])
def test_gemma3n(ctx: int, blocks: int) -> None:
    assert _bytes(GEMMA3N, ctx, "0.19.0") == blocks * 131_072


# --- what vLLM does not serve, and the paths kvsize has not read -------------------------------------------------


@pytest.mark.parametrize(
    ("config", "version", "gpu", "kv", "match"),
    [
        (GEMMA4_31B, "0.18.1", "h100", "bf16", "no Gemma4ForCausalLM"),
        (GEMMA3N, "0.9.1", "h100", "bf16", "no Gemma3nForConditionalGeneration"),
        (GEMMA4_31B, "0.24.0", "b200", "bf16", "FlashAttention 4 on NVIDIA B200"),
        (GEMMA4_31B, "0.33.0", "b200", "bf16", "FlashAttention 4"),
        (GEMMA4_31B, "0.31.0", "h100", "fp8_e4m3", "64 tokens"),
        (GEMMA4_31B, "0.33.0", "h100", "fp8_e5m2", "FLASH_ATTN"),
        (GEMMA4_31B, "0.33.0", "a100-80gb", "nvfp4", "TRITON_ATTN"),
        (GEMMA4_31B, "0.33.0", "mi300x", "bf16", "which attention backend Gemma 4 runs on for AMD Instinct MI300X"),
    ],
)
def test_refused(config: dict[str, Any], version: str, gpu: str, kv: str, match: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match=match):
        _bytes(config, 4_096, version, gpu=gpu, kv=kv)


@pytest.mark.parametrize(
    ("version", "gpu", "kv", "in_flight"),
    [
        ("0.23.0", "b200", "bf16", 8_192),  # TRITON_ATTN on every card before 0.24
        ("0.19.0", "mi300x", "bf16", 8_192),
        # capability 8.0: no FA4, so TRITON_ATTN, which has fp8_e5m2. The A100 is kept out of the >= 70 GiB
        # batch tier (get_batch_defaults), so 2,048 tokens a batch, 2 batches in flight at 0.33.
        ("0.33.0", "a100-80gb", "fp8_e5m2", 4_096),
        ("0.30.0", "h100", "fp8_e4m3", 16_384),  # the 64-token fp8 pages arrive in 0.31
        ("0.33.0", "a100-80gb", "fp8_e4m3", 4_096),  # TRITON_ATTN: no FA4 page rule
    ],
)
def test_the_16_token_paths_size_as_the_rest(version: str, gpu: str, kv: str, in_flight: int) -> None:
    # 16-token kernel blocks on each of these paths: the layout is the one worked above; fp8 halves every page.
    scale = 2 if kv.startswith("fp8") else 1
    sliding = -(-(1_023 + in_flight) // 16) + 1
    blocks = 1_024 + 5 * sliding
    assert _bytes(GEMMA4_31B, 32_768, version, gpu=gpu, kv=kv) == blocks * BLOCK_31B // scale


def test_pipeline_parallel() -> None:
    with pytest.raises(UsageError, match="SupportsPP"):
        kvsize.estimate(GEMMA3N, ctx=4_096, engine="vllm", pp=2)
    with pytest.raises(KvsizeError, match="another pipeline stage"):
        kvsize.estimate(GEMMA4_E2B, ctx=4_096, engine="vllm", pp=2)
    # the 31B shares no KV: its stages page as any hybrid model's
    assert kvsize.estimate(GEMMA4_31B, ctx=4_096, engine="vllm", pp=2).scenarios[0].bytes_per_request > 0


def test_other_serving_engines_still_refuse() -> None:
    # SGLang sizes Gemma 4 from 0.5.11 (tests/test_sglang_gemma4.py)
    for engine in ("trtllm", "llamacpp"):
        with pytest.raises(UnsupportedArchitecture, match="has not read how this engine pages"):
            get_engine(engine).check_supported(parse_config(GEMMA4_31B))


def test_the_device_decides_the_backend() -> None:
    spec = parse_config(GEMMA4_31B)
    hopper = EngineContext(device=Device(total_memory_bytes=80 << 30, capability=(9, 0)))
    ada = EngineContext(device=Device(total_memory_bytes=48 << 30, capability=(8, 9)))
    assert get_engine("vllm", "0.33.0", hopper).gemma4_backend(spec) == "flash_attn"
    assert get_engine("vllm", "0.33.0", ada).gemma4_backend(spec) == "triton"
    assert get_engine("vllm", "0.23.0", hopper).gemma4_backend(spec) == "triton"


def _gemma4_heads(head_dim: int, global_head_dim: int) -> dict[str, Any]:
    text = {**GEMMA4_31B["text_config"], "head_dim": head_dim, "global_head_dim": global_head_dim}
    return {**GEMMA4_31B, "text_config": text}


def _backend(config: dict[str, Any], version: str, capability: tuple[int, int] | None, platform: str = "cuda") -> str:
    device = Device(total_memory_bytes=80 << 30, capability=capability, platform=platform)  # type: ignore[arg-type]
    return get_engine("vllm", version, EngineContext(device=device)).gemma4_backend(parse_config(config))


def test_backend_boundaries() -> None:
    # 0.19-0.23 Gemma4Config forces TRITON_ATTN only when the head sizes differ and one exceeds 256.
    assert _backend(_gemma4_heads(128, 256), "0.23.0", (9, 0)) == "default"
    assert _backend(_gemma4_heads(128, 272), "0.23.0", (9, 0)) == "triton"
    assert _backend(_gemma4_heads(128, 257), "0.23.0", (9, 0)) == "triton"  # one past the limit
    assert _backend(_gemma4_heads(256, 256), "0.23.0", (9, 0)) == "default"
    # one head size: Gemma4Config changes nothing, even where FA4 would be forced (10.x)
    assert _backend(_gemma4_heads(256, 256), "0.33.0", (10, 0)) == "default"
    # 0.24+: FA4 on 9.x-11.x for heads up to 512; 11.x is refused like 10.x; 12.x (RTX 50) takes TRITON_ATTN
    assert _backend(_gemma4_heads(256, 576), "0.33.0", (9, 0)) == "triton"
    with pytest.raises(UnsupportedArchitecture, match="compute capability 11.x"):
        _backend(GEMMA4_31B, "0.33.0", (11, 0))
    assert _backend(GEMMA4_31B, "0.33.0", (12, 0)) == "triton"
    with pytest.raises(UnsupportedArchitecture, match="which attention backend"):
        _backend(GEMMA4_31B, "0.33.0", None)  # a CUDA card of unknown capability
    with pytest.raises(UnsupportedArchitecture, match="which attention backend"):
        _backend(GEMMA4_31B, "0.19.0", None, platform="tpu")


@pytest.mark.parametrize(("release", "block"), [("0.33.0", 16), ("0.34.0", 64)])
def test_the_fp8_page_rule_needs_head_size_512(release: str, block: int) -> None:
    # _get_sm90_fa4_fp8_kv_block_size: head_size == 512 only; a 384 full layer keeps the default block (16 through
    # 0.33, 64 from 0.34: config/cache.py DEFAULT_BLOCK_SIZE).
    s = kvsize.estimate(
        _gemma4_heads(256, 384),
        ctx=4_096,
        engine="vllm",
        engine_version=release,
        kv_dtype="fp8_e4m3",
        gpu="h100",
        weights_bytes=1 << 30,
    )
    assert s.scenarios[0].block_size == block


def test_gemma3n_weights_are_not_counted_from_the_config() -> None:
    from kvsize.errors import ConfigError
    from kvsize.params import estimate_parameters

    with pytest.raises(ConfigError, match="cannot count Gemma 3n's weights"):
        estimate_parameters(GEMMA3N)
