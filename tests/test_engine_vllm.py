"""vLLM's rules, worked by hand from the configs and vLLM 0.33.0's source (see kvsize/engines/vllm.py)."""

from __future__ import annotations

import pytest

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.vllm import VllmEngine
from kvsize.errors import UsageError
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

GIB = 1024**3


def spec(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None
    return parse_config(load_registry_config(entry))


def vllm(**options: int) -> VllmEngine:
    # The release these cases were worked for: 16-token blocks (0.34's 64-token default: tests/test_vllm_034.py).
    engine = get_engine("vllm", "0.33.0", **options)
    assert isinstance(engine, VllmEngine)
    return engine


def test_gqa_rounds_to_blocks() -> None:
    # Llama-3.1-8B at 1000 tokens: cdiv(1000, 16) = 63 blocks = 1008 token slots x 131,072 B.
    est = vllm().estimate(spec("meta-llama/Llama-3.1-8B"), ctx=1000, batch=3, kv_dtype=KvDtype.BF16)
    assert est.block_size == 16 and est.bytes_per_request == 1008 * 131_072 == 132_120_576
    assert est.kv_cache_bytes == 3 * 132_120_576
    fp8 = vllm().estimate(spec("meta-llama/Llama-3.1-8B"), ctx=1000, batch=3, kv_dtype=KvDtype.FP8_E4M3)
    assert fp8.kv_cache_bytes * 2 == est.kv_cache_bytes


def test_mla_latent_replicated_over_tp() -> None:
    # DeepSeek-V3: 61 layers x 576-element latent x 2 B = 70,272 B per token; 1008 slots at 1000 tokens.
    # tp 8: every rank holds the whole latent, so per GPU = one rank's cache and all ranks = 8 x that.
    est = vllm().estimate(spec("deepseek-ai/DeepSeek-V3"), ctx=1000, batch=1, kv_dtype=KvDtype.BF16, tp=8)
    assert est.kv_cache_bytes_per_gpu == 1008 * 70_272 == 70_834_176
    assert est.kv_cache_bytes == 8 * 70_834_176


def test_sliding_window_past_the_window() -> None:
    # gemma-2-2b at 8192: 13 sliding (W 4096) + 13 full layers, 4 KV heads x 256 x 2 x 2 B = 4096 B per token.
    # Sliding: cdiv(min(4096 - 1 + 2 x 8192, 8192), 16) + 1 = 513 blocks; full: 512 blocks. Two groups of
    # 13 layers, a block = 13 pages of 16 x 4096 B.
    est = vllm().estimate(spec("google/gemma-2-2b"), ctx=8192, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == (513 + 512) * 13 * 16 * 4096 == 873_267_200
    # At 32k with a 2048-token batch budget the window bound bites: cdiv(4095 + 4096, 16) + 1 = 513 blocks.
    est = vllm(max_num_batched_tokens=2048).estimate(spec("google/gemma-2-2b"), ctx=32768, batch=1,
                                                     kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == (513 + 2048) * 13 * 16 * 4096


def test_hybrid_linear_attention_pages() -> None:
    # Qwen3-Next: attention 2 KV heads x 256 x 2 x 2 B = 2048 B per token per layer; Gated DeltaNet state
    # (bf16) = conv 8192 x 3 x 2 + 32 x 128 x 128 x 2 = 1,097,728 B. vLLM 0.33.0 on the reference H100 (sm_90):
    # prefix caching on for hybrids -> mamba_cache_mode "align"; the FlashInfer GDN prefill exports checkpoints
    # aligned to 64 tokens (qwen_gdn_linear_attn.py, gdn_attn.py FLASHINFER_GDN_CHECKPOINT_ALIGNMENT), so
    # Platform._align_hybrid_block_size uses lcm(16, 64) = 64: block = 64 x cdiv(1,097,728, 64 x 2048) = 576
    # tokens; page = 576 x 2048 = 1,179,648 B. 36 GDN + 12 attention layers: group size 12, 3 Mamba groups + 1
    # attention group; a block spans 12 pages. Per request at 128k: cdiv(131072, 576) = 228 attention blocks
    # + 3 groups x (2 + 1 checkpoint) state blocks (MambaSpec.max_memory_usage_bytes, align mode).
    engine = vllm()
    qwen = spec("Qwen/Qwen3-Next-80B-A3B-Thinking")
    assert engine.block_size(qwen, KvDtype.BF16, 1) == 576
    est = engine.estimate(qwen, ctx=131072, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == (228 + 3 * 3) * 12 * 1_179_648
    lay = engine.layout(qwen, qwen.layers, 131072, KvDtype.BF16, 1)
    assert (lay.groups, lay.bytes_per_block, lay.blocks_per_request) == (4, 12 * 1_179_648, 237)


def test_tp_beyond_kv_heads_replicates() -> None:
    # Llama-3.1-8B at tp 16: max(1, 8 // 16) = 1 KV head per rank -> 32 x 1 x 256 x 2 B = 16,384 B per token.
    est = vllm().estimate(spec("meta-llama/Llama-3.1-8B"), ctx=1000, batch=1, kv_dtype=KvDtype.BF16, tp=16)
    assert est.kv_cache_bytes_per_gpu == 1008 * 16_384
    assert est.kv_cache_bytes == 16 * 1008 * 16_384  # twice the unsharded cache: every head is held twice


def test_pp_uneven_split() -> None:
    # 32 layers over 3 stages: [11, 11, 10] (get_pp_indices gives the remainder to the stages before the last).
    est = vllm().estimate(spec("meta-llama/Llama-3.1-8B"), ctx=1000, batch=1, kv_dtype=KvDtype.BF16, pp=3)
    assert est.kv_cache_bytes_per_gpu == 11 * 4096 * 1008
    assert est.kv_cache_bytes == 32 * 4096 * 1008
    with pytest.raises(UsageError, match="exceeds the model's 32 layers"):
        vllm().estimate(spec("meta-llama/Llama-3.1-8B"), ctx=1000, batch=1, kv_dtype=KvDtype.BF16, pp=33)


def test_pool_log_figures() -> None:
    # ENGINES.md §1.12: 60 GiB for Llama-3.1-8B -> 30,720 blocks of 2 MiB; 131072 tokens need 8192 blocks ->
    # concurrency 3.75 and "GPU KV cache size: 491,520 tokens".
    pool = vllm().pool(spec("meta-llama/Llama-3.1-8B"), available_bytes=60 * GIB, max_model_len=131072,
                       kv_dtype=KvDtype.BF16)
    assert (pool.num_blocks, pool.kv_pool_tokens, pool.concurrency, pool.max_requests) == (30720, 491_520, 3.75, 3)


def test_versions() -> None:
    llama4 = spec("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    # 0.11 allocated chunked-local layers for the whole context; 0.33 bounds them to cdiv(8192 + 16384, 16).
    old = vllm().__class__("0.11").estimate(llama4, ctx=131072, batch=1, kv_dtype=KvDtype.BF16)
    new = vllm().estimate(llama4, ctx=131072, batch=1, kv_dtype=KvDtype.BF16)
    per_token = 8 * 256 * 2  # 8 KV heads x 128 x (K+V) x 2 B
    assert old.kv_cache_bytes == 48 * 131072 * per_token
    # Groups: 36 chunked + 12 full layers -> group size 12: 3 chunked groups, 1 full group, blocks of 12 pages.
    assert new.kv_cache_bytes == (3 * (24576 // 16) + 131072 // 16) * 12 * 16 * per_token
    with pytest.raises(UsageError, match="not modelled"):
        VllmEngine("0.5")
