"""vLLM's paging of MiMo-V2-Flash, worked by hand from the config and vLLM's source.

What vLLM builds (read in the 0.13.0, 0.14.0, 0.19.0-0.24.0 and 0.28.0-0.33.0 sdists):
- model_executor/models/mimo_v2_flash.py (0.14-0.20; mimo_v2.py from 0.21) MiMoV2FlashDecoderLayer: a layer with
  hybrid_layer_pattern 1 is sliding (swa_num_key_value_heads 8, swa_head_dim 192, swa_v_head_dim 128, window
  config.sliding_window_size = 128); a 0 is full attention (num_key_value_heads 4, head_dim 192, v_head_dim 128).
  MiMo-V2-Flash's pattern: 9 full layers (0, 5, 11, ..., 47), 39 sliding.
- 0.14-0.19 MiMoV2Attention.forward pads V to 192 (torch.nn.functional.pad) and builds Attention(head_size=192):
  the cache holds K and V at 192. 0.20+ passes head_size_v = 128 (FullAttentionSpec / SlidingWindowSpec
  page = block x heads x (192 + 128) x dtype) on FLASH_ATTN_DIFFKV (forced, 0.20-0.23), or from 0.24 on
  FLASH_ATTN_DIFFKV where FlashAttention 3/4 runs (9.x, 10.x) and TRITON_ATTN_DIFFKV elsewhere.
- Before 0.32 the decoder layer hands MiMoV2Attention no cache config, so Attention keeps kv_cache_dtype "auto":
  the cache is bf16 whatever --kv-cache-dtype says.
- Pages (16 tokens, bf16, tp 1): 0.19 sliding 16 x 8 x 384 x 2 = 98,304 B, full 16 x 4 x 384 x 2 = 49,152 B;
  0.20+ sliding 16 x 8 x 320 x 2 = 81,920 B, full 40,960 B. unify_kv_cache_spec_page_size: the full layers take
  32-token blocks. Groups of min(9, 39) = 9 layers (39 >= 1.5 x 9): 1 full + cdiv(39, 9) = 5 sliding groups; a
  block spans a group: 9 pages of the largest size.
- Blocks per request: full cdiv(L, 32); sliding cdiv(min(128 - 1 + in-flight, L), 16) + 1 per group.
"""

from __future__ import annotations

from typing import Any

import pytest

import kvsize
from kvsize.config import parse_config
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.errors import UsageError
from tests.tiny_configs import registry_config

MIMO = registry_config("XiaomiMiMo/MiMo-V2-Flash")


def _bytes(ctx: int, version: str, gpu: str = "h100", kv: str = "auto", tp: int = 1, **engine_options: Any) -> int:
    s = kvsize.estimate(
        MIMO,
        ctx=ctx,
        engine="vllm",
        engine_version=version,
        kv_dtype=kv,
        gpu=gpu,
        tp=tp,
        weights_bytes=1 << 30,
        engine_options=engine_options or None,
    )
    return int(s.scenarios[0].kv_cache_bytes_per_gpu)


PADDED_BLOCK = 9 * 98_304  # 0.14-0.19: K and V both 192
DIFFKV_BLOCK = 9 * 81_920  # 0.20+: K 192 + V 128

# ctx 32,768 on an H100 (8,192 tokens a batch): full cdiv(32,768, 32) = 1,024; sliding cdiv(127 + 8,192, 16) + 1
# = 520 + 1 = 521, x 5 = 2,605; 3,629 blocks. 0.26+ reserve 2 x 8,192 in flight: cdiv(127 + 16,384, 16) + 1 =
# 1,032 + 1 = 1,033, x 5 = 5,165; 6,189 blocks.
CASES = [
    ("0.14.0", 3_629 * PADDED_BLOCK),
    ("0.19.0", 3_629 * PADDED_BLOCK),
    ("0.20.0", 3_629 * DIFFKV_BLOCK),
    ("0.24.0", 3_629 * DIFFKV_BLOCK),
    ("0.25.1", 3_629 * DIFFKV_BLOCK),
    ("0.26.0", 6_189 * DIFFKV_BLOCK),
    ("0.33.0", 6_189 * DIFFKV_BLOCK),
]


@pytest.mark.parametrize(("version", "expected"), CASES, ids=[c[0] for c in CASES])
def test_mimo_v2_flash_at_32k(version: str, expected: int) -> None:
    assert _bytes(32_768, version) == expected


def test_the_window_is_sliding_window_size() -> None:
    # vLLM's window is sliding_window_size = 128 (transformers' 129 counts the query). At 2,049 tokens a batch:
    # cdiv(127 + 2,049, 16) + 1 = 136 + 1 = 137 per sliding group (129 would give cdiv(2,177, 16) + 1 = 138).
    # 1,024 + 5 x 137 = 1,709 blocks.
    assert _bytes(32_768, "0.19.0", max_num_batched_tokens=2_049) == 1_709 * PADDED_BLOCK


def test_tensor_parallel_pages() -> None:
    # tp 4: full 4 // 4 = 1 KV head (10,240 B page at 0.20), sliding 2 (20,480 B): the full layers still take
    # 32-token blocks: 3,629 blocks of 9 x 20,480 B.
    assert _bytes(32_768, "0.20.0", tp=4) == 3_629 * 9 * 20_480
    # tp 8: one KV head on every layer (max(1, 4 // 8) = 1 replicated), equal 10,240 B pages: nothing to unify,
    # so full layers keep 16-token blocks: 2,048 + 2,605 = 4,653 blocks of 9 x 10,240 B.
    assert _bytes(32_768, "0.20.0", tp=8) == 4_653 * 9 * 10_240


def test_the_kv_dtype_before_and_after_032() -> None:
    # Before 0.32 --kv-cache-dtype never reaches MiMo's attention: asking for fp8 is refused as having no effect.
    with pytest.raises(UsageError, match="ignores --kv-cache-dtype"):
        _bytes(4_096, "0.31.0", kv="fp8_e4m3")
    assert _bytes(32_768, "0.19.0", kv="bf16") == 3_629 * PADDED_BLOCK
    # 0.33 on an A100 (no FlashAttention 3/4): TRITON_ATTN_DIFFKV takes fp8_e4m3: 1 B an element, a sliding page
    # 16 x 8 x 320 = 40,960 B. The A100 is on the small batch tier (2,048) with 2 batches in flight:
    # cdiv(127 + 4,096, 16) + 1 = 264 + 1 = 265 per sliding group; 1,024 + 5 x 265 = 2,349 blocks of 9 x 40,960 B.
    assert _bytes(32_768, "0.33.0", gpu="a100-80gb", kv="fp8_e4m3") == 2_349 * 9 * 40_960
    # FLASH_ATTN_DIFFKV on Hopper: kvsize has not read its fp8 path; TRITON_ATTN_DIFFKV has no fp16
    with pytest.raises(UnsupportedArchitecture, match="FLASH_ATTN_DIFFKV"):
        _bytes(4_096, "0.32.0", kv="fp8_e4m3")
    with pytest.raises(UnsupportedArchitecture, match="TRITON_ATTN_DIFFKV"):
        _bytes(4_096, "0.33.0", gpu="a100-80gb", kv="fp16")


@pytest.mark.parametrize(
    ("version", "gpu", "match"),
    [
        ("0.13.0", "h100", "no MiMoV2FlashForCausalLM"),
        ("0.22.0", "a100-80gb", "forces FLASH_ATTN_DIFFKV"),  # FA2 only on 8.0 before TRITON_ATTN_DIFFKV
        ("0.33.0", "mi300x", "which attention backend MiMo-V2 runs on for AMD Instinct MI300X"),
    ],
)
def test_refused(version: str, gpu: str, match: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match=match):
        _bytes(4_096, version, gpu=gpu)


def test_0_24_runs_the_a100_on_triton() -> None:
    # 0.24 TRITON_ATTN_DIFFKV on 8.0, bf16: the 0.20 pages; the A100's batch of 2,048 tokens, one in flight
    # before 0.26: cdiv(127 + 2,048, 16) + 1 = 136 + 1 = 137; 1,024 + 5 x 137 = 1,709 blocks.
    assert _bytes(32_768, "0.24.0", gpu="a100-80gb") == 1_709 * DIFFKV_BLOCK


def test_the_note_says_how_it_pages() -> None:
    notes = get_engine("vllm", "0.19.0").estimate_notes(parse_config(MIMO))
    assert any("V padded to K's width" in n and "in bf16" in n for n in notes)
    notes = get_engine("vllm", "0.33.0").estimate_notes(parse_config(MIMO))
    assert any("FLASH_ATTN_DIFFKV (192 + 128)" in n for n in notes)


def test_a_shared_prefix_leaves_the_window_at_sliding_window_size() -> None:
    # vLLM frees a sliding layer's blocks before floor((ctx - W) / 16) (remove_skipped_blocks) with W = 128: at
    # ctx 2,176 that is 2,048 / 16 = 128 blocks, the whole 2,048-token prefix, so the sliding layers share
    # nothing (W = 129 would keep 128 - 127 = 1 block). Full layers share the prefix's 2,048 tokens.
    from kvsize.dtypes import KvDtype
    from kvsize.serving import prefix_share

    got = prefix_share(
        get_engine("vllm", "0.33.0"),
        parse_config(MIMO),
        prefix_len=2_048,
        prompt_len=2_176,
        ctx=2_176,
        kv_dtype=KvDtype.BF16,
    )
    assert got.shared_tokens_by_kind == {"sliding": 0, "full": 2_048}


def test_an_unnamed_device_is_this_device() -> None:
    from kvsize.engines.context import Device, EngineContext

    device = Device(total_memory_bytes=80 << 30, platform="rocm")
    with pytest.raises(UnsupportedArchitecture, match="for this device"):
        get_engine("vllm", "0.33.0", EngineContext(device=device)).check_supported(parse_config(MIMO))
