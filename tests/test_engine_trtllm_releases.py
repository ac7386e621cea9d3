"""TensorRT-LLM's releases as data (kvsize/engines/trtllm_releases.py): era resolution and the rules of the one era
read, each value worked by hand from the source at NVIDIA/TensorRT-LLM main b35ac1b6 (`tensorrt_llm/version.py`
`__version__ = "1.2.0rc2"`, written "@1.2.0rc2" below; paths under `tensorrt_llm/_torch/pyexecutor/`). The tags
v1.0.0, v1.1.0 and v1.2.0 could not be read (docs/releases/trtllm.md), so 1.0 and 1.1 are refused."""

from __future__ import annotations

import pytest

from kvsize.budget import kv_budget
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.trtllm import TrtllmEngine
from kvsize.engines.trtllm_releases import TRTLLM_RELEASES
from kvsize.errors import UsageError
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

GIB = 1024**3
BF16 = KvDtype.BF16


def spec(hub_id: str, **changes: object) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    raw = load_registry_config(entry)
    raw.update(changes)
    return parse_config(raw, source=hub_id)


LLAMA = "meta-llama/Llama-3.1-8B"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


# --- which era a typed version gets -----------------------------------------------------------------------------


@pytest.mark.parametrize("typed", ["1.2", "1.2.0", "v1.2.0", "1.2.0rc3", "1.2.0rc6.post1", "1.2.0+vendor"])
def test_the_1_2_line_resolves_to_its_era(typed: str) -> None:
    engine = TrtllmEngine(typed)
    assert engine.rules_name == "1.2.0"
    assert engine.release_note is None
    assert "rules of 1.2" in engine.rule


def test_a_newer_release_is_sized_by_the_newest_era_with_a_note() -> None:
    engine = TrtllmEngine("1.2.1")
    assert engine.rules_name == "1.2.0"
    assert engine.release_note is not None and "newer than the newest release kvsize has read" in engine.release_note


@pytest.mark.parametrize("typed", ["1.0", "1.0.0", "v1.1", "1.1.0", "1.1.0+vendor", "1.1.0rc5"])
def test_1_0_and_1_1_are_refused_not_guessed(typed: str) -> None:
    # Their tags' sources were not readable (no sdist on PyPI, no stored file at the tag commits).
    with pytest.raises(UsageError, match="older than the oldest release kvsize models"):
        TrtllmEngine(typed)


# --- the rules of 1.2 -------------------------------------------------------------------------------------------


def test_two_pool_bounds_when_tp_does_not_divide_the_kv_heads() -> None:
    # 48 heads, 8 KV heads of 128, 32 layers, tp 6 (48 % 6 == 0; 8 % 6 != 0).
    model = spec(LLAMA, num_attention_heads=48, hidden_size=6144, head_dim=128)
    # resource_manager.py KVCacheManager.get_cache_size_per_token@1.2.0rc2: head_dim x kv // tp = 1,024 // 6 = 170,
    # x 2 (K, V) x 32 layers x 2 B = 21,760 B. The pool (get_cache_bytes_per_token): (8 + 6 - 1) // 6 = 2 heads,
    # 2 x 128 x 2 x 32 x 2 B = 32,768 B.
    # _util.py KvCacheCreator.configure_kv_cache_capacity@1.2.0rc2: int(10 GiB x 0.9) = 9,663,676,416 B
    # // 21,760 = 444,102 tokens; calculate_max_num_blocks@1.2.0rc2: min(444,102, 0.9 x 10 GiB / 32,768 = 294,912)
    # = 294,912 -> math.ceil(294,912 / 32) = 9,216 blocks.
    pool = TrtllmEngine("1.2.0").pool(model, available_bytes=10 * GIB, kv_dtype=BF16, tp=6)
    assert (pool.bytes_per_token, pool.runtime_bytes_per_token) == (21_760, 32_768)
    assert (pool.max_tokens, pool.blocks, pool.bound) == (294_912, 9_216, "free memory")
    # With 20 GiB free when the pool is built the free bound is 0.9 x 20 GiB / 32,768 = 589,824 tokens and the
    # estimator's 444,102 binds: math.ceil(444,102 / 32) = 13,879 blocks.
    pool = TrtllmEngine("1.2.0").pool(model, available_bytes=10 * GIB, free_bytes=20 * GIB, kv_dtype=BF16, tp=6)
    assert (pool.max_tokens, pool.blocks, pool.bound) == (444_102, 13_879, "estimator")


def test_blocks_round_up() -> None:
    # calculate_max_num_blocks@1.2.0rc2: blocks_in_primary_pool = math.ceil(max_tokens / tokens_per_block).
    # Llama 3.1 8B bf16: int(1 GiB x 0.9) = 966,367,641 // 131,072 = 7,372 tokens -> ceil(7,372 / 32) = 231 blocks
    # (a floor would give 230).
    pool = TrtllmEngine("1.2").pool(spec(LLAMA), available_bytes=GIB, kv_dtype=BF16)
    assert (pool.max_tokens, pool.blocks, pool.pool_tokens) == (7_372, 231, 7_392)


def test_the_estimator_counts_nvfp4_as_two_bytes() -> None:
    # get_cache_size_per_token@1.2.0rc2: mem_per_token = 2 unless has_fp8_kv_cache() (no NVFP4 branch):
    # 32 x 8 x 128 x 2 x 2 B = 131,072 B; the pool's own NVFP4 bytes (get_cache_bytes_per_token: 65,536 elements
    # e2m1 = 32,768 B + one fp8 scale per 16 = 4,096 B) = 36,864 B. Estimator bound int(1 GiB x 0.9) // 131,072 =
    # 7,372 < 0.9 GiB / 36,864 = 26,214.4 -> 7,372 tokens, 231 blocks of 32 x 36,864 B.
    pool = TrtllmEngine("1.2").pool(spec(LLAMA), available_bytes=GIB, kv_dtype=KvDtype.NVFP4)
    assert (pool.bytes_per_token, pool.runtime_bytes_per_token) == (131_072, 36_864)
    assert (pool.max_tokens, pool.blocks, pool.bound) == (7_372, 231, "estimator")
    assert pool.pool_bytes == 231 * 32 * 36_864


def test_mamba_states_sit_outside_the_kv_budget() -> None:
    # mamba_cache_manager.py MambaHybridCacheManager.__init__@1.2.0rc2 allocates MambaCacheManager's conv and SSM
    # states for max_batch_size slots before KVCacheManager.__init__. Qwen3-Next: 39,518,208 B of state per slot
    # (36 GDN layers x (conv 8,192 x 3 x 2 B + SSM 524,288 x 2 B)); 2 slots = 79,036,416 B.
    # (10 GiB - 79,036,416) x 0.9 = 9,592,543,641.6 -> int // 24,576 B (12 full-attention layers x 2 KV heads
    # x 256 x 2 x 2 B) = 390,321 tokens; free bound 390,321.6 -> 390,321; ceil(390,321 / 32) = 12,198 blocks.
    # (Inside the budget it would be int(10 GiB x 0.9) // 24,576 = 393,216.)
    pool = TrtllmEngine("1.2").pool(spec(QWEN_NEXT), available_bytes=10 * GIB, kv_dtype=BF16, max_batch_size=2)
    assert (pool.bytes_per_token, pool.max_tokens, pool.blocks) == (24_576, 390_321, 12_198)


def test_mla_is_one_latent_not_split_by_tp() -> None:
    # _util.py KvCacheCreator._create_kv_cache_manager@1.2.0rc2: is_mla -> SELFKONLY, num_kv_heads=1,
    # head_dim=kv_lora_rank + qk_rope_head_dim = 512 + 64 = 576; get_cache_size_per_token: kv_factor 1, not divided:
    # 61 layers x 576 x 2 B = 70,272 B per token at tp 8 as at tp 1.
    dsv3 = spec("deepseek-ai/DeepSeek-V3")
    pool = TrtllmEngine("1.2").pool(dsv3, available_bytes=10 * GIB, kv_dtype=BF16, tp=8)
    assert (pool.bytes_per_token, pool.runtime_bytes_per_token) == (70_272, 70_272)


def test_the_indexer_cache_is_refused() -> None:
    # _util.py get_kv_cache_manager_cls@1.2.0rc2: a sparse attention config takes
    # get_sparse_attn_kv_cache_manager's manager, whose indexer K cache kvsize has not read.
    v32 = spec(
        "deepseek-ai/DeepSeek-V3",
        model_type="deepseek_v32",
        architectures=["DeepseekV32ForCausalLM"],
        index_topk=2048,
        index_head_dim=128,
        index_n_heads=64,
    )
    with pytest.raises(UnsupportedArchitecture, match="indexer"):
        TrtllmEngine("1.2").pool(v32, available_bytes=10 * GIB, kv_dtype=BF16)


def test_vswa_pools_per_window_are_refused() -> None:
    # resource_manager.py KVCacheManager.__init__@1.2.0rc2: more than one distinct max_attention_window goes to
    # calculate_max_num_blocks_from_cpp, whose C++ split per window was not read; one window is the plain pool.
    gpt_oss = spec("openai/gpt-oss-20b")
    with pytest.raises(UnsupportedArchitecture, match="per window"):
        TrtllmEngine("1.2", vswa=True).pool(gpt_oss, available_bytes=10 * GIB, kv_dtype=BF16)
    assert TrtllmEngine("1.2").pool(gpt_oss, available_bytes=10 * GIB, kv_dtype=BF16).blocks > 0


def test_the_budget_takes_the_eras_fraction() -> None:
    # _util.py KvCacheCreator._cal_max_memory@1.2.0rc2: (total - peak + temporary KV) x fraction, 0.9 by default
    # (calculate_max_num_blocks' fallback); 1.1 has no era, so its budget is refused too.
    llama = spec(LLAMA)
    b = kv_budget("trtllm", "1.2.0rc3", llama, memory_bytes=80 * GIB, weights_bytes=16 * GIB)
    assert b.utilization == TRTLLM_RELEASES.newest.rules.free_gpu_memory_fraction == 0.9
    with pytest.raises(UsageError):
        kv_budget("trtllm", "1.1.0", llama, memory_bytes=80 * GIB, weights_bytes=16 * GIB)
