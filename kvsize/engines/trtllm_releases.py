"""TensorRT-LLM's history as data: one `TrtllmRules` record per era of releases whose cache rules are identical.

Each field is one rule switch; its docstring cites the file and function it was read from (paths under
`tensorrt_llm/`). The engine code (`kvsize/engines/trtllm.py`, `kvsize/budget.py`) reads switches and never compares
version strings. docs/releases/trtllm.md tabulates the eras and the commits read.

What was read, and what was not (kvsize issue 22): the release tags v1.0.0, v1.1.0 and v1.2.0 could not be read.
PyPI's sdists of 1.x are 2-10 KB stubs (the wheels live on pypi.nvidia.com, out of reach), the repository is too
large to fetch, and the stored index holds no file at the tag commits (ae8270b7 = v1.0.0, from the
triton-inference-server/tensorrtllm_backend v1.0.0 submodule). The one 1.2-line tree read is commit b35ac1b6 of
`main`, whose `version.py` says `__version__ = "1.2.0rc2"`: `_torch/pyexecutor/resource_manager.py`, `_util.py`
and `mamba_cache_manager.py` there. So one era, 1.2, is tabled; 1.0 and 1.1 are refused (older than the oldest
era) rather than sized with rules nobody read for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvsize.engines.releases import Era, ReleaseTable

MAIN_1_2_0RC2 = "b35ac1b64368513d215c57d2ed01d62d910df8da"
"""NVIDIA/TensorRT-LLM main at `__version__ = "1.2.0rc2"` (tensorrt_llm/version.py): the commit read."""


@dataclass(frozen=True)
class TrtllmRules:
    """The KV cache and budget rules of one era of TensorRT-LLM releases (PyTorch flow)."""

    free_gpu_memory_fraction: float
    """The fraction of memory the KV cache takes: `KvCacheCreator.configure_kv_cache_capacity` passes
    `kv_cache_config.free_gpu_memory_fraction` to `_cal_max_memory` (_torch/pyexecutor/_util.py); its fallback
    when unset is 0.9 (`KVCacheManager.calculate_max_num_blocks`, resource_manager.py)."""
    tokens_per_block: int
    """Tokens per KV block in the PyTorch flow (`KvCacheConfig.tokens_per_block`, llmapi/llm_args.py). Not re-read
    at 1.2.0rc2 (llm_args.py is not stored at that commit): the value of the 1.2 line read earlier (32)."""
    pool_bounds: Literal["min_estimator_and_free"]
    """Two bounds, the smaller taken: `configure_kv_cache_capacity` sets `kv_cache_config.max_tokens =
    int(int(available x fraction) // get_cache_size_per_token)` (the estimator: heads `head_dim x kv // tp`,
    floored), then `calculate_max_num_blocks` takes `min(max_tokens, fraction x free_mem /
    get_cache_bytes_per_token)` (the pool's own bytes: heads `ceil(kv / tp)`), all-reduced MIN over ranks. When tp
    does not divide the KV heads the second bound is the smaller."""
    block_rounding: Literal["ceil", "floor"]
    """Primary blocks from the bound's tokens: `math.ceil(max_tokens / tokens_per_block)`
    (`calculate_max_num_blocks`)."""
    estimator_nvfp4_bytes: Literal["two_bytes", "packed"]
    """`get_cache_size_per_token`'s bytes per element: 1 for FP8 and 2 for everything else, NVFP4 included
    ("two_bytes"); or NVFP4's packed size with its scales ("packed")."""
    mla_latent: bool
    """MLA models: `CacheType.SELFKONLY`, one head of `kv_lora_rank + qk_rope_head_dim`, not divided by tp
    (`KvCacheCreator._create_kv_cache_manager`, `get_cache_size_per_token` `kv_factor = 1`)."""
    vswa_pools: Literal["cpp_per_window"]
    """More than one distinct `max_attention_window`: `calculate_max_num_blocks_from_cpp` hands
    `max_gpu_total_bytes` (= int(available x fraction)) to the C++ `KVCacheManager::calculateMaxNumBlocks`, which
    splits it into one pool per window (after `adjust_window_sizes_for_vswa` shrinks windows that do not fit one
    sequence). The C++ split was not read at 1.2.0rc2: kvsize sizes a request's blocks per window and refuses the
    pool."""
    kv_cache_manager_v2: Literal["absent"]
    """No V2 KV cache manager (`kv_cache_manager_v2`) in `_util.py`'s `get_kv_cache_manager_cls`: the V1 manager,
    or a sparse-attention or Mamba-hybrid subclass of it."""
    sparse_attention_manager: bool
    """`get_kv_cache_manager_cls` returns `get_sparse_attn_kv_cache_manager(sparse_attention_config)` when a sparse
    attention config is set (DeepSeek-V3.2's DSA and its indexer K cache): a manager whose sizing was not read at
    1.2.0rc2, so kvsize refuses indexer models."""
    mamba_states: Literal["outside_before_kv"]
    """`MambaHybridCacheManager.__init__` (mamba_cache_manager.py) allocates `max_batch_size` conv and SSM states
    (`MambaCacheManager.__init__`) before `KVCacheManager.__init__`: outside the KV pool, in the warm-up's peak and
    in the free memory the pool is measured from, so taken from the budget first. `nheads % tp` and
    `conv_dim % tp` are asserted; block reuse must be off (`assert not kv_cache_config.enable_block_reuse`)."""
    hybrid_models: tuple[str, ...]
    """Model classes served by MambaHybridCacheManager (`get_kv_cache_manager_cls`: `is_nemotron_hybrid`,
    `is_qwen3_next`)."""


RULES_1_2 = TrtllmRules(
    free_gpu_memory_fraction=0.9,
    tokens_per_block=32,
    pool_bounds="min_estimator_and_free",
    block_rounding="ceil",
    estimator_nvfp4_bytes="two_bytes",
    mla_latent=True,
    vswa_pools="cpp_per_window",
    kv_cache_manager_v2="absent",
    sparse_attention_manager=True,
    mamba_states="outside_before_kv",
    hybrid_models=("nemotron_h", "qwen3_next"),
)

TRTLLM_RELEASES: ReleaseTable[TrtllmRules] = ReleaseTable(
    "trtllm",
    "TensorRT-LLM",
    (Era("1.2.0", "1.2.0", RULES_1_2, read=(f"1.2.0rc2 (main {MAIN_1_2_0RC2[:8]})",)),),
)
