"""SGLang, TensorRT-LLM and llama.cpp engines: hand-worked figures (arithmetic in the comments) and registry sweep.

Geometry used below (from the registry configs):
- Llama-3.1-8B: 32 layers, 8 KV heads x 128; one layer's token = 8 x (128 + 128) x 2 B = 4,096 B (bf16),
  all layers 131,072 B.
- DeepSeek-V3: 61 MLA layers, latent 512 + 64 = 576 elements: 1,152 B per layer (bf16), 70,272 B per token.
- gemma-2-2b: 26 layers alternating sliding (W 4096) / full, 4 KV heads x 256: 4 x 512 x 2 = 4,096 B per layer.
- gpt-oss-20b: 24 layers alternating sliding (W 128) / full, 8 KV heads x 64: 8 x 128 x 2 = 2,048 B per layer.
- Qwen3-Next-80B: 48 layers, every 4th full (12 layers, 2 KV heads x 256: 2 x 512 x 2 = 2,048 B), 36 Gated
  DeltaNet layers with conv 8,192 channels x (kernel 4 - 1) and SSM 32 x 128 x 128 = 524,288 elements.
"""

from __future__ import annotations

from typing import Any

import pytest

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import ENGINES, get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.llamacpp import LlamaCppEngine, llamacpp_layer_split
from kvsize.engines.sglang import SglangEngine, sglang_pp_stages
from kvsize.engines.trtllm import TrtllmEngine, trtllm_pp_stages
from kvsize.errors import UsageError
from kvsize.registry import find_entry, load_registry_config, registry_entries
from kvsize.spec import ArchSpec

GIB = 1024**3
BF16 = KvDtype.BF16

_SPECS: dict[str, ArchSpec] = {}


def spec(hub_id: str) -> ArchSpec:
    if hub_id not in _SPECS:
        entry = find_entry(hub_id)
        assert entry is not None, hub_id
        _SPECS[hub_id] = parse_config(load_registry_config(entry), source=hub_id)
    return _SPECS[hub_id]


LLAMA = "meta-llama/Llama-3.1-8B"
DSV3 = "deepseek-ai/DeepSeek-V3"
GEMMA2 = "google/gemma-2-2b"
GPT_OSS = "openai/gpt-oss-20b"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"
REDPAJAMA = "togethercomputer/RedPajama-INCITE-Chat-3B-v1"  # head_dim 80: not a multiple of 32


def sglang(**options: Any) -> SglangEngine:
    engine = get_engine("sglang", **options)
    assert isinstance(engine, SglangEngine)
    return engine


def trtllm(**options: Any) -> TrtllmEngine:
    engine = get_engine("trtllm", **options)
    assert isinstance(engine, TrtllmEngine)
    return engine


def llamacpp(version: str | None = None, **options: Any) -> LlamaCppEngine:
    engine = get_engine("llamacpp", version, **options)
    assert isinstance(engine, LlamaCppEngine)
    return engine


def test_registered_beside_formula_and_vllm() -> None:
    assert {"formula", "vllm", "sglang", "trtllm", "llamacpp"} <= set(ENGINES)
    assert isinstance(get_engine("llama.cpp"), LlamaCppEngine)
    assert isinstance(get_engine("TRT-LLM"), TrtllmEngine)
    # The CLI's --block-size reaches SGLang's page size and TensorRT-LLM's tokens_per_block; llama.cpp has no blocks.
    assert sglang(block_size=64).page_size == 64
    assert trtllm(block_size=64).tokens_per_block == 64
    # llama.cpp's default is its newest read build (b11312, vendored by llama-cpp-python 0.3.36; it was labelled
    # "2026-01" before builds were modelled, issue 22).
    assert llamacpp(block_size=64).version == "b11312"


# --- SGLang -------------------------------------------------------------------------------------------------------


def test_sglang_gqa_page_rounding() -> None:
    # Page 1: exactly 1,000 slots x 131,072 B = 131,072,000 B.
    est = sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16)
    assert est.kv_bytes_per_token == 131_072
    assert est.kv_cache_bytes == 131_072_000
    assert est.block_size == 1
    # Page 64: cdiv(1000, 64) = 16 pages = 1,024 slots x 131,072 = 134,217,728 B; batch 3 triples it.
    est = sglang(block_size=64).estimate(spec(LLAMA), ctx=1000, batch=3, kv_dtype=BF16)
    assert est.bytes_per_request == 134_217_728
    assert est.kv_cache_bytes == 3 * 134_217_728


def test_sglang_mla_replicated_over_tp() -> None:
    # 61 x 576 x 2 B = 70,272 B per token on every rank; ctx 1000 -> 70,272,000 B per GPU, x 8 ranks in all.
    est = sglang().estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16, tp=8)
    assert est.kv_cache_bytes_per_gpu == 70_272_000
    assert est.kv_cache_bytes == 8 * 70_272_000


def test_sglang_gemma2_sliding_layers_are_full() -> None:
    # Gemma 2 is not a hybrid-SWA architecture in SGLang: all 26 layers hold 8,192 tokens.
    # 26 x 4,096 B = 106,496 B per token x 8,192 = 872,415,232 B.
    engine = sglang()
    est = engine.estimate(spec(GEMMA2), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 872_415_232
    assert any("as full attention" in note for note in engine.estimate_notes(spec(GEMMA2)))


def test_sglang_gpt_oss_swa_pool_per_request() -> None:
    # Full layers: 12 x 2,048 B x 8,192 = 201,326,592 B.
    # Sliding layers (SWA pool): SGLang's window is sliding_window - 1 = 127 (models/gpt_oss.py
    # get_attention_sliding_window_size), so min(8,192, window 127 + eviction interval 128 + page 1 + page 1) =
    # 257 slots (model_executor/pool_configurator.py compute_swa_request_cap, SGLang 0.5.23):
    # 12 x 2,048 x 257 = 6,316,032 B.
    est = sglang().estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 201_326_592 + 6_316_032
    # Page 64: window 127 + interval 128 + padding page 64 = 319 -> 320 (5 pages) + the decode page 64 = 384
    # slots: 12 x 2,048 x 384 = 9,437,184 B.
    est = sglang(block_size=64).estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 201_326_592 + 9_437_184


def test_sglang_hybrid_linear_state() -> None:
    # KV: 12 full layers x 2,048 B x 1,000 = 24,576,000 B.
    # State per GDN layer: conv 8,192 x 3 x 2 B (bf16) = 49,152 + SSM 524,288 x 4 B (fp32) = 2,097,152
    #   -> 2,146,304 B; x 36 layers = 77,266,944 B per slot.
    # Radix cache on, extra_buffer strategy (Qwen3NextForCausalLM; kv_cache_configurator.py
    # _calculate_mamba_ratio, SGLang 0.5.23): 3 + 2 tracking slots = 5 per request = 386,334,720 B.
    est = sglang().estimate(spec(QWEN_NEXT), ctx=1000, batch=1, kv_dtype=BF16)
    assert est.state_bytes_per_request == 386_334_720
    assert est.kv_cache_bytes == 24_576_000 + 386_334_720
    # --disable-radix-cache: one slot -> 24,576,000 + 77,266,944 = 101,842,944 B.
    est = sglang(enable_prefix_caching=False).estimate(spec(QWEN_NEXT), ctx=1000, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 101_842_944


def test_sglang_quantized_dtypes() -> None:
    # fp8: 1 B per element -> 65,536 B per token x 1,000 = 65,536,000 B.
    assert sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.FP8_E4M3).kv_cache_bytes == 65_536_000
    # nvfp4 per layer: 8 x (128 + 128) / 2 = 1,024 B data + 8 x 128 x 2 / 16 = 128 B scales = 1,152 B;
    # x 32 layers = 36,864 B per token x 1,000 = 36,864,000 B.
    assert sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.NVFP4).kv_cache_bytes == 36_864_000
    # MLA nvfp4: 576 / 2 + 576 / 16 = 288 + 36 = 324 B per layer x 61 = 19,764 B per token.
    assert sglang().estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=KvDtype.NVFP4).kv_bytes_per_token == 19_764
    for dtype in (KvDtype.INT8, KvDtype.INT4, KvDtype.Q8_0, KvDtype.MXFP4):
        with pytest.raises(UnsupportedArchitecture, match="SGLang has no"):
            sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=dtype)


def test_sglang_tp_beyond_kv_heads_floors() -> None:
    # tp 16 > 8 heads: max(1, 8 // 16) = 1 head per rank: 32 x 1 x 256 x 2 = 16,384 B per token per GPU.
    est = sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=16)
    assert est.kv_cache_bytes_per_gpu == 16_384_000
    assert est.kv_cache_bytes == 16 * 16_384_000
    # tp 3: SGLang refuses it (models/llama.py LlamaAttention asserts 32 heads % 3 == 0, SGLang 0.5.23).
    with pytest.raises(UsageError, match="32 attention heads"):
        sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=3)


def test_sglang_pipeline_split() -> None:
    # get_pp_indices: 26 layers on 4 stages -> 6, 6, 7, 7 (the last 26 % 4 = 2 stages take one more).
    assert [len(s) for s in sglang_pp_stages(26, 4)] == [6, 6, 7, 7]
    # Llama 32 layers on 3 stages -> 10, 11, 11: the largest stage holds 11 x 4,096 B x 1,000 = 45,056,000 B.
    est = sglang().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, pp=3)
    assert est.kv_cache_bytes_per_gpu == 45_056_000
    assert est.kv_cache_bytes == 131_072_000
    # Qwen3-Next 48 layers on 5 stages -> 9, 9, 10, 10, 10: layers 28-37 hold full layers 31, 35 and 8 GDN
    # layers: 2 x 2,048 x 1,000 + 8 x 2,146,304 x 5 = 4,096,000 + 85,852,160 = 89,948,160 B (the largest stage;
    # 5 state slots per request with the extra buffer).
    est = sglang().estimate(spec(QWEN_NEXT), ctx=1000, batch=1, kv_dtype=BF16, pp=5)
    assert est.kv_cache_bytes_per_gpu == 89_948_160


def test_sglang_pool() -> None:
    # max_total_num_tokens = available // cell: 60 GiB = 64,424,509,440 B // 131,072 = 491,520 tokens.
    pool = sglang().pool(spec(LLAMA), available_bytes=60 * GIB, kv_dtype=BF16)
    assert pool.max_total_num_tokens == 491_520
    assert pool.swa_max_total_num_tokens is None
    # The padding page: (491,520 + 1) rows x 131,072 B.
    assert pool.pool_bytes == 491_521 * 131_072
    # gpt-oss hybrid SWA: cell = 12 x 2,048 + 0.8 x 12 x 2,048 = 24,576 + 19,660.8 = 44,236.8 B;
    # 10 GiB = 10,737,418,240 B / 44,236.8 = 242,725.9 -> 242,725 full tokens; SWA int(242,725 x 0.8) = 194,180.
    pool = sglang().pool(spec(GPT_OSS), available_bytes=10 * GIB, kv_dtype=BF16)
    assert (pool.max_total_num_tokens, pool.swa_max_total_num_tokens) == (242_725, 194_180)
    # Qwen3-Next, 20 GiB = 21,474,836,480 B: state per request 77,266,944 B; budget x 0.9 / 1.9 =
    # 10,172,080,964.2; max_mamba_cache_size = (10,172,080,964.2 - 77,266,944) // 77,266,944 = 130;
    # KV gets 21,474,836,480 - 131 x 77,266,944 = 11,352,866,816 B / 24,576 B = 461,949.3 -> 461,949 tokens.
    pool = sglang().pool(spec(QWEN_NEXT), available_bytes=20 * GIB, kv_dtype=BF16)
    assert pool.max_mamba_cache_size == 130
    assert pool.mamba_request_limit == 130 // 5  # extra_buffer: 5 slots per request
    assert pool.max_total_num_tokens == 461_949


# --- TensorRT-LLM -------------------------------------------------------------------------------------------------


def test_trtllm_gqa_blocks_of_32() -> None:
    # cdiv(1000, 32) = 32 blocks = 1,024 tokens x 131,072 B = 134,217,728 B.
    est = trtllm().estimate(spec(LLAMA), ctx=1000, batch=2, kv_dtype=BF16)
    assert est.block_size == 32
    assert est.bytes_per_request == 134_217_728
    assert est.kv_cache_bytes == 2 * 134_217_728


def test_trtllm_mla() -> None:
    # kv_factor 1, one 576-element head, not split by tp: 1,024 tokens x 70,272 B = 71,958,528 B per GPU.
    est = trtllm().estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16, tp=8)
    assert est.kv_cache_bytes_per_gpu == 71_958_528
    assert est.kv_cache_bytes == 8 * 71_958_528


def test_trtllm_sliding_windows() -> None:
    # Default (no max_attention_window): all 24 gpt-oss layers hold 8,192 tokens: 24 x 2,048 x 8,192 = 402,653,184 B.
    engine = trtllm()
    assert engine.estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16).kv_cache_bytes == 402_653_184
    assert any("max_attention_window" in note for note in engine.estimate_notes(spec(GPT_OSS)))
    # VSWA: sliding layers cdiv(min(8192, 128), 32) = 4 blocks = 128 tokens: 12 x 2,048 x 128 = 3,145,728 B,
    # full layers 12 x 2,048 x 8,192 = 201,326,592 B.
    est = trtllm(vswa=True).estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 201_326_592 + 3_145_728
    # Gemma 2 has no PyTorch-flow implementation.
    with pytest.raises(UnsupportedArchitecture, match="gemma2"):
        trtllm().estimate(spec(GEMMA2), ctx=8192, batch=1, kv_dtype=BF16)


def test_trtllm_hybrid_linear_state() -> None:
    # KV: 12 x 2,048 B x 1,024 tokens = 25,165,824 B.
    # State in the model dtype (bf16): conv 8,192 x 3 x 2 = 49,152 + SSM 524,288 x 2 = 1,048,576 -> 1,097,728 B,
    # x 36 layers = 39,518,208 B; one slot per request.
    est = trtllm().estimate(spec(QWEN_NEXT), ctx=1000, batch=1, kv_dtype=BF16)
    assert est.state_bytes_per_request == 39_518_208
    assert est.kv_cache_bytes == 25_165_824 + 39_518_208


def test_trtllm_quantized_dtypes() -> None:
    # fp8: 65,536 B per token x 1,024 = 67,108,864 B.
    assert trtllm().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.FP8_E4M3).kv_cache_bytes == 67_108_864
    # nvfp4: a 128-element row = ceil(128/2) + ceil(128/16) = 64 + 8 = 72 B; 8 heads x 2 rows x 72 = 1,152 B per layer,
    # x 32 = 36,864 B per token x 1,024 = 37,748,736 B.
    assert trtllm().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.NVFP4).kv_cache_bytes == 37_748_736
    for dtype in (KvDtype.INT8, KvDtype.FP8_E5M2, KvDtype.Q8_0):
        with pytest.raises(UnsupportedArchitecture):
            trtllm().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=dtype)


def test_trtllm_tp_rounds_heads_up() -> None:
    # tp 16: ceil(8 / 16) = 1 head: 32 x 1 x 256 x 2 = 16,384 B per token x 1,024 = 16,777,216 B per GPU.
    assert trtllm().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=16).kv_cache_bytes_per_gpu == 16_777_216
    # tp 3: refused, 32 query heads % 3 != 0 (_torch/modules/attention.py Attention asserts num_heads % tp_size == 0);
    # the rounding up of KV heads is pinned in tests/test_engine_truth_others.py on a model tp divides.
    with pytest.raises(UsageError, match="32 attention heads"):
        trtllm().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=3)


def test_trtllm_pipeline_split() -> None:
    # Mapping.pp_layers (torch.tensor_split): 26 on 4 -> 7, 7, 6, 6; 32 on 3 -> 11, 11, 10.
    assert [len(s) for s in trtllm_pp_stages(26, 4)] == [7, 7, 6, 6]
    # Largest stage 11 x 4,096 B x 1,024 tokens = 46,137,344 B.
    est = trtllm().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, pp=3)
    assert est.kv_cache_bytes_per_gpu == 46_137_344


def test_trtllm_pool() -> None:
    # 60 GiB x 0.9 = 57,982,058,496 B / 131,072 B = 442,368 tokens; ceil(442,368 / 32) = 13,824 blocks.
    pool = trtllm().pool(spec(LLAMA), available_bytes=60 * GIB, kv_dtype=BF16)
    assert (pool.bytes_per_token, pool.max_tokens, pool.blocks) == (131_072, 442_368, 13_824)
    # tp 16: the estimator floors 128 x 8 // 16 = 64 elements per K (and V): 2 x 32 x 64 x 2 B = 8,192 B per token,
    # so 57,982,058,496 // 8,192 = 7,077,888 tokens; but calculate_max_num_blocks (resource_manager.py @ main
    # 1.2.0rc2) takes the min with 0.9 x free / the pool's 16,384 B (1 head rounded up) = 3,538,944 tokens ->
    # 110,592 blocks (was: the estimator's bound alone, 221,184 blocks, more than the memory holds).
    pool = trtllm().pool(spec(LLAMA), available_bytes=60 * GIB, kv_dtype=BF16, tp=16)
    assert (pool.bytes_per_token, pool.max_tokens, pool.blocks) == (8_192, 3_538_944, 110_592)
    assert (pool.bound, pool.pool_bytes) == ("free memory", 110_592 * 32 * 16_384)


# --- llama.cpp ----------------------------------------------------------------------------------------------------


def test_llamacpp_cells_padded_to_256() -> None:
    # -c 1000 -> n_ctx 1,024 cells x 131,072 B = 134,217,728 B.
    est = llamacpp().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.FP16)
    assert est.block_size is None
    assert est.kv_cache_bytes == 134_217_728
    # 3 requests of 100 tokens: -c 300 -np 3 --kv-unified: pad(300, 256) = 512 cells x 131,072 = 67,108,864 B.
    est = llamacpp(kv_unified=True).estimate(spec(LLAMA), ctx=100, batch=3, kv_dtype=KvDtype.FP16)
    assert est.kv_cache_bytes == 67_108_864
    assert est.bytes_per_request == 22_369_622  # cdiv(67,108,864, 3)
    # Explicit -np 3 (kv_unified false, common/common.h): n_ctx_seq = pad(512 // 3 = 170, 256) = 256, x 3 streams
    # = 768 cells = 100,663,296 B (src/llama-context.cpp llama_context ctor).
    est = llamacpp().estimate(spec(LLAMA), ctx=100, batch=3, kv_dtype=KvDtype.FP16)
    assert est.kv_cache_bytes == 100_663_296


def test_llamacpp_mla_versions() -> None:
    # 2026-01 (V-less): 61 x 576 x 2 B = 70,272 B per cell x 1,024 cells = 71,958,528 B.
    assert llamacpp("2026-01").estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16).kv_cache_bytes == 71_958_528
    # 2025-04: K 576 + V 512 = 1,088 x 2 B = 2,176 B per layer x 61 = 132,736 B x 1,024 = 135,921,664 B.
    assert llamacpp("2025-04").estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16).kv_cache_bytes == 135_921_664
    # 2025-03: decompressed heads, K 128 x (128 + 64) = 24,576 and V 128 x 128 = 16,384 elements:
    # 40,960 x 2 B = 81,920 B per layer x 61 = 4,997,120 B x 1,024 = 5,117,050,880 B - when the spec carries the
    # per-head MLA dims; otherwise kvsize cannot size it.
    mla = next(layer.attention for layer in spec(DSV3).layers if layer.attention is not None)
    if getattr(mla, "qk_nope_head_dim", None) is None:
        with pytest.raises(UnsupportedArchitecture, match="qk_nope_head_dim"):
            llamacpp("2025-03").estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16)
    else:
        est = llamacpp("2025-03").estimate(spec(DSV3), ctx=1000, batch=1, kv_dtype=BF16)
        assert est.kv_cache_bytes == 5_117_050_880


def test_llamacpp_swa_cache() -> None:
    # gemma-2-2b, -c 8192: full 13 x 4,096 B x 8,192 = 436,207,616 B; SWA 13 x 4,096 x pad(min(8192, 4096 + 512), 256)
    # = 13 x 4,096 x 4,608 = 245,366,784 B.
    est = llamacpp().estimate(spec(GEMMA2), ctx=8192, batch=1, kv_dtype=KvDtype.FP16)
    assert est.kv_cache_bytes == 436_207_616 + 245_366_784
    # --swa-full: 26 x 4,096 x 8,192 = 872,415,232 B.
    assert llamacpp(swa_full=True).estimate(spec(GEMMA2), ctx=8192, batch=1, kv_dtype=KvDtype.FP16).kv_cache_bytes == (
        872_415_232
    )
    # gpt-oss-20b, -c 8192: full 12 x 2,048 x 8,192 = 201,326,592 B; SWA pad(128 + 512, 256) = 768 cells:
    # 12 x 2,048 x 768 = 18,874,368 B.
    est = llamacpp().estimate(spec(GPT_OSS), ctx=8192, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 201_326_592 + 18_874_368
    # 4 requests, unified: n_ctx 32,768; full 12 x 2,048 x 32,768 = 805,306,368 B; SWA pad(128 x 4 + 512, 256) = 1,024
    # cells: 12 x 2,048 x 1,024 = 25,165,824 B.
    est = llamacpp(kv_unified=True).estimate(spec(GPT_OSS), ctx=8192, batch=4, kv_dtype=BF16)
    assert est.kv_cache_bytes == 805_306_368 + 25_165_824
    # Per-sequence streams (the default with -np 4): 4 x pad(min(8192, 128 + 512), 256) = 4 x 768 = 3,072 SWA
    # cells: 75,497,472 B.
    est = llamacpp().estimate(spec(GPT_OSS), ctx=8192, batch=4, kv_dtype=BF16)
    assert est.kv_cache_bytes == 805_306_368 + 75_497_472


def test_llamacpp_recurrent_state_f32() -> None:
    # KV: 12 x 2,048 B x 1,024 cells = 25,165,824 B. State f32: conv 8,192 x 3 x 4 = 98,304 + SSM 524,288 x 4 =
    # 2,097,152 -> 2,195,456 B x 36 layers = 79,036,416 B per sequence slot.
    est = llamacpp().estimate(spec(QWEN_NEXT), ctx=1000, batch=1, kv_dtype=BF16)
    assert est.kv_cache_bytes == 25_165_824 + 79_036_416
    # 2 sequences: n_ctx 2,048 -> 50,331,648 B of KV + 2 slots x 79,036,416 = 208,404,480 B.
    assert llamacpp().estimate(spec(QWEN_NEXT), ctx=1000, batch=2, kv_dtype=BF16).kv_cache_bytes == 208_404_480


def test_llamacpp_block_types() -> None:
    # q8_0: a K row of 8 x 128 = 1,024 elements = 32 blocks x 34 B = 1,088 B; K + V 2,176 B x 32 layers = 69,632 B
    # per cell x 1,024 cells = 71,303,168 B.
    assert llamacpp().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.Q8_0).kv_cache_bytes == 71_303_168
    # q4_0: 32 blocks x 18 B = 576 B per row; 2 x 576 x 32 = 36,864 B x 1,024 = 37,748,736 B.
    assert llamacpp().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.Q4_0).kv_cache_bytes == 37_748_736
    # head_dim 80 is not a multiple of q8_0's 32-element blocks: llama.cpp refuses the context.
    with pytest.raises(UnsupportedArchitecture, match="does not divide n_embd_head_k=80"):
        llamacpp().estimate(spec(REDPAJAMA), ctx=1000, batch=1, kv_dtype=KvDtype.Q8_0)
    with pytest.raises(UnsupportedArchitecture, match="no fp8_e4m3 cache type") as refused:
        llamacpp().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=KvDtype.FP8_E4M3)
    assert "q8_0" in str(refused.value.hint)  # the hint names llama.cpp's cache types


def test_llamacpp_parallelism() -> None:
    with pytest.raises(UsageError, match="tensor parallelism"):
        llamacpp().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, tp=16)
    # Layer split over n GPUs: device(il) = floor(il x n / (n_layer + 1)).
    # 26 layers on 4 GPUs (27 slots with the output layer): il 0-6, 7-13, 14-20, 21-25 -> 7, 7, 7, 5.
    assert [len(s) for s in llamacpp_layer_split(26, 4)] == [7, 7, 7, 5]
    # 32 layers on 3 GPUs: floor(il x 3 / 33) = il // 11 -> 11, 11, 10; largest 11 x 4,096 x 1,024 = 46,137,344 B.
    assert [len(s) for s in llamacpp_layer_split(32, 3)] == [11, 11, 10]
    est = llamacpp().estimate(spec(LLAMA), ctx=1000, batch=1, kv_dtype=BF16, pp=3)
    assert est.kv_cache_bytes_per_gpu == 46_137_344
    assert est.kv_cache_bytes == 134_217_728


# --- every registry config ----------------------------------------------------------------------------------------

ENGINE_DTYPES = {
    "sglang": (KvDtype.BF16, KvDtype.FP8_E4M3, KvDtype.Q8_0),
    "trtllm": (KvDtype.BF16, KvDtype.NVFP4, KvDtype.INT8),
    "llamacpp": (KvDtype.FP16, KvDtype.Q8_0, KvDtype.FP8_E4M3),
}


@pytest.mark.parametrize("engine_name", sorted(ENGINE_DTYPES))
def test_every_registry_config_sizes_or_is_refused(engine_name: str) -> None:
    engine = get_engine(engine_name)
    sized = 0
    for entry in registry_entries().values():
        arch = spec(entry.hub_id)
        for dtype in ENGINE_DTYPES[engine_name]:
            try:
                est = engine.estimate(arch, ctx=4096, batch=2, kv_dtype=dtype)
            except UnsupportedArchitecture as exc:
                assert str(exc), (engine_name, entry.hub_id, dtype)
                continue
            assert isinstance(est.kv_cache_bytes, int) and est.kv_cache_bytes > 0, (engine_name, entry.hub_id)
            assert isinstance(est.kv_cache_bytes_per_gpu, int)
            assert est.kv_cache_bytes_per_gpu <= est.kv_cache_bytes
            sized += 1
    assert sized > 40


def test_windowed_layers_counted_in_notes() -> None:
    # Every engine says what it did with gpt-oss's sliding layers.
    for name in ("sglang", "trtllm", "llamacpp"):
        notes = get_engine(name).estimate_notes(spec(GPT_OSS))
        assert any("12" in note and ("window" in note or "sliding" in note) for note in notes), name
