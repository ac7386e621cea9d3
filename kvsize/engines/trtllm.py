"""TensorRT-LLM (PyTorch flow): blocks of `tokens_per_block` tokens per layer, heads split by ceil(kv / tp).

The rules that vary by release are switches of `TrtllmRules` (kvsize/engines/trtllm_releases.py, one era: the 1.2
line as read at main 1.2.0rc2); the rest mirror the 1.2 line as read from its 2026 `main` source (the reference is
../ENGINES.md §4.1 of the kvsize repository's research notes; file and function beside each rule, paths under
`tensorrt_llm/`):

- Blocks: `KvCacheConfig.tokens_per_block = 32` in the PyTorch flow (`llmapi/llm_args.py`; TRT-engine builds use
  64); a request needs `cdiv(tokens, tokens_per_block)` blocks per layer
  (`KVCacheManager.calculateMaxBlockRequirementsPerBeam`, `cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`).
- Heads per rank: `(num_kv_heads + tp - 1) // tp` (`KVCacheManager.__init__`, `_torch/pyexecutor/
  resource_manager.py`): rounded *up*, so tp 16 on 8 KV heads keeps one head per rank (vLLM and SGLang floor and
  replicate: the same one head here; the two differ when tp does not divide the heads, e.g. 8 heads on tp 3:
  3 per rank, not 2). Attention data parallelism (tp 1 for attention) is not modelled.
- MLA (`_create_kv_cache_manager`, `_torch/pyexecutor/_util.py`): `CacheType.SELFKONLY`, one head of
  `kv_lora_rank + qk_rope_head_dim`, kv_factor 1, not divided by TP.
- KV dtypes (`validate_and_set_kv_cache_quant`, `_torch/pyexecutor/model_loader.py`: `auto`, `fp8`, `nvfp4`):
  auto is the checkpoint dtype (fp16 / bf16 / fp32), FP8 is e4m3 at 1 B, NVFP4 `ceil(n / 2) + ceil(n / 16)` bytes
  for `n` elements (e2m1 data + one e4m3 scale per 16; `get_cache_bytes_per_token`). INT8 KV exists only in the
  legacy TensorRT-engine flow and fp8_e5m2 not at all: both raise.
- Sliding windows: the PyTorch flow allocates every layer for the full sequence unless
  `kv_cache_config.max_attention_window` lists per-layer windows (`is_vswa_enabled`, `_util.py`; only Gemma 4
  fills it in automatically). With `vswa=True` kvsize mirrors that list set to the model's windows: one pool per
  window (`BlockManager`, VSWA) and `cdiv(min(ctx, W), 32)` blocks per request in a sliding layer. Llama 4 chunked
  layers are chunked in the kernel only and always hold the full context.
- Hybrid Mamba / GDN (`MambaHybridCacheManager`, `extract_mamba_kv_cache_params`, `_torch/pyexecutor/
  config_utils.py`): KV for the full-attention layers; per request one conv state `((d_inner + 2 G N) // tp,
  kernel - 1)` and one SSM state `(heads // tp, head_dim, N)`, conv in the model dtype and SSM in
  `mamba_ssm_cache_dtype` (auto: the config's ssm dtype, else the model dtype; the spec carries no ssm dtype, so
  the model dtype).
- Capacity (`pool()`; switches `pool_bounds`, `block_rounding`): the smaller of two bounds. The estimator's
  `int(int(available x free_gpu_memory_fraction) // bytes_per_token)` (`KvCacheCreator.configure_kv_cache_capacity`,
  `_util.py`; `available` = total GPU memory - warm-up peak + the warm-up's temporary KV cache; `bytes_per_token`
  from `KVCacheManager.get_cache_size_per_token`, which divides `head_dim x kv_heads` by tp, floored), and
  `fraction x free memory / the pool's own bytes per token` (heads rounded up; `calculate_max_num_blocks`,
  `resource_manager.py`), all-reduced MIN over ranks, then `ceil(max_tokens / tokens_per_block)` blocks.
- Pipeline stages (`Mapping.pp_layers`, `mapping.py`): `torch.tensor_split`, the first `n % pp` stages get one
  layer more.
- Pool tokens (`pool().pool_tokens`): whole blocks, `blocks x tokens_per_block`, as `KVCacheManager::allocatePools`
  logs them ("Allocated X GiB for max tokens in paged KV cache (N)").
- KV cache manager: this is the V1 manager (the C++ `KVCacheManager` / `BlockManager` behind the Python
  `resource_manager.py KVCacheManager`), which `KvCacheConfig.use_kv_cache_manager_v2 = False` selects (the 1.2
  line's default; the field is marked prototype). Later main resolves `use_kv_cache_manager_v2 = "auto"` per model
  class (`llm_utils._resolve_kv_cache_manager_v2_auto`, `get_model_defaults`, default False). V2 is a Python
  manager (`_torch/pyexecutor/kv_cache_manager_v2`, `KVCacheManagerV2`) with its own multi-tier storage and no
  allocatePools line; kvsize does not model its pool.
- Tensor parallelism (`_torch/modules/attention.py Attention.__init__`): `num_heads % tp == 0` is asserted (tp 1
  for attention under attention DP); KV heads per rank round up, so any tp splits them.
"""

from __future__ import annotations

import math

import msgspec

from kvsize.dtypes import KvDtype
from kvsize.engines.base import Engine, UnsupportedArchitecture, cdiv, check_head_split
from kvsize.engines.trtllm_releases import TRTLLM_RELEASES, TrtllmRules
from kvsize.errors import UsageError
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, StateSpec

DEFAULT_TOKENS_PER_BLOCK = TRTLLM_RELEASES.newest.rules.tokens_per_block  # the newest era's (TrtllmRules)
FREE_GPU_MEMORY_FRACTION = TRTLLM_RELEASES.newest.rules.free_gpu_memory_fraction  # the newest era's (TrtllmRules)
DEFAULT_MAX_BATCH_SIZE = 2048  # llmapi BuildConfig.max_batch_size: Mamba state slots preallocated per batch slot
NVFP4_BLOCK = 16  # resource_manager.py get_cache_size_per_token: "SFs (fp8) per 16 elements"

SUPPORTED_KV_DTYPES = frozenset({KvDtype.FP16, KvDtype.BF16, KvDtype.FP32, KvDtype.FP8_E4M3, KvDtype.NVFP4})

# model_types whose HF architecture has no entry in MODEL_ARCH_TO_MODULE (_torch/models/_arch_index.py), or whose
# implementation cannot run the model.
UNSERVED_MODEL_TYPES = {
    **dict.fromkeys(
        (
            "gemma",
            "gemma2",
            "gemma3n",
            "gemma3n_text",
            "deepseek_v2",
            "phi",
            "phi-msft",
            "phimoe",
            "gpt2",
            "gpt_bigcode",
            "gpt_neox",
            "gptj",
            "gpt_neo",
            "opt",
            "bloom",
            "falcon",
            "falcon_h1",
            "falcon_mamba",
            "mamba",
            "mamba2",
            "jamba",
            "zamba",
            "zamba2",
            "mpt",
            "dbrx",
            "chatglm",
            "glm",
            "glm4",
            "olmo",
            "olmo2",
            "granite",
            "cohere",
            "internlm2",
            "baichuan",
            "stablelm",
            "minicpm",
            "ernie4_5",
            "smollm3",
        ),
        "the PyTorch flow has no implementation for this architecture (_torch/models/_arch_index.py)",
    ),
    "mllama": "the PyTorch flow's Mllama skips cross-attention ('Cross-attention is not supported yet', "
    "_torch/models/modeling_mllama.py)",
    "mllama_text_model": "the PyTorch flow's Mllama skips cross-attention ('Cross-attention is not supported "
    "yet', _torch/models/modeling_mllama.py)",
}


def trtllm_pp_stages(num_layers: int, pp: int) -> list[range]:
    """Layers of each stage: torch.tensor_split, the first `n % pp` stages one layer more (Mapping.pp_layers)."""
    if pp > num_layers:
        raise UsageError(f"--pp {pp} exceeds the model's {num_layers} layers")
    base, extra = divmod(num_layers, pp)
    sizes = [base + (1 if rank < extra else 0) for rank in range(pp)]
    starts = [sum(sizes[:i]) for i in range(pp)]
    return [range(start, start + size) for start, size in zip(starts, sizes, strict=True)]


class TrtllmPool(msgspec.Struct, frozen=True):
    """TensorRT-LLM's KV capacity for one budget per GPU (the binding pipeline stage)."""

    bytes_per_token: int
    """The estimator's bytes per token on the binding rank (KVCacheManager.get_cache_size_per_token)."""
    max_tokens: int
    """The smaller bound, min over ranks (state slots taken first): the estimator's int(int(available x
    fraction) // bytes_per_token) or fraction x free memory / runtime_bytes_per_token."""
    blocks: int
    """Blocks in the primary pool: ceil(max_tokens / tokens_per_block) (TrtllmRules.block_rounding)."""
    pool_bytes: int
    """Bytes the primary pool takes: blocks x tokens_per_block x the runtime bytes per token (heads rounded up)."""
    tokens_per_block: int = DEFAULT_TOKENS_PER_BLOCK
    runtime_bytes_per_token: int = 0
    """The pool's own bytes per token (KVCacheManager.get_cache_bytes_per_token: heads ceil(kv / tp))."""
    bound: str = "estimator"
    """Which bound set max_tokens: "estimator" (KvCacheCreator's max_tokens) or "free memory" (the pool's)."""

    @property
    def pool_tokens(self) -> int:
        """Tokens the pool holds in whole blocks, the figure `KVCacheManager::allocatePools` logs ("Allocated X GiB
        for max tokens in paged KV cache (N)", N = getNumPrimaryBlocks() x getTokensPerBlock(),
        cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp)."""
        return self.blocks * self.tokens_per_block


class TrtllmEngine(Engine):
    name = "trtllm"
    title = "TensorRT-LLM"
    releases = TRTLLM_RELEASES
    versions = tuple(era.name for era in reversed(TRTLLM_RELEASES.eras))

    def __init__(self, version: str | None = None, *, block_size: int | None = None, vswa: bool = False) -> None:
        super().__init__(version)
        if block_size is not None and block_size < 1:
            raise UsageError(f"--block-size must be positive, got {block_size}")
        self.tokens_per_block = block_size or self.rules.tokens_per_block
        self.vswa = vswa

    @property
    def rules(self) -> TrtllmRules:
        """The switches of the era that sizes this release (kvsize/engines/trtllm_releases.py)."""
        assert self.era is not None
        rules: TrtllmRules = self.era.rules
        return rules

    @property
    def rule(self) -> str:
        windows = (
            "sliding layers cdiv(min(ctx, W), bs) blocks (VSWA: max_attention_window set)"
            if self.vswa
            else "sliding and chunked layers allocated for the full context (no max_attention_window)"
        )
        return (
            f"{self.release_label} PyTorch flow: blocks of {self.tokens_per_block} tokens, cdiv(ctx, bs) per "
            f"layer; kv heads ceil(kv/tp), MLA one latent (kv_factor 1) not divided by tp; {windows}; Mamba "
            "hybrids one state per request in the model dtype, outside the pool; V1 KV cache manager; pool the "
            "smaller of the estimator's and the free-memory bound, ceil(tokens / bs) blocks "
            "(_torch/pyexecutor/resource_manager.py calculate_max_num_blocks, _util.py configure_kv_cache_capacity)"
        )

    # --- what TensorRT-LLM serves -----------------------------------------------------------------------

    def check_serves(self, spec: ArchSpec) -> None:
        reason = UNSERVED_MODEL_TYPES.get(spec.model_type)
        if reason is not None:
            raise UnsupportedArchitecture(f"TensorRT-LLM ({spec.model_type}): {reason}")
        for layer, _ in spec.layer_groups():  # identical layers are checked once (100,000-layer configs)
            if layer.attention is not None and layer.attention.kind is AttentionKind.CROSS:
                raise UnsupportedArchitecture(
                    f"TensorRT-LLM ({spec.model_type}): cross-attention layers are not modelled for the PyTorch flow"
                )
            if layer.attention is not None and layer.state is not None:
                raise UnsupportedArchitecture(
                    f"TensorRT-LLM ({spec.model_type}): layers with both attention and a Mamba state have no "
                    "PyTorch-flow cache manager"
                )
            if layer.attention is not None and layer.attention.index_head_dim and self.rules.sparse_attention_manager:
                raise UnsupportedArchitecture(
                    f"TensorRT-LLM ({spec.model_type}): a sparse-attention indexer's K cache lives in the manager "
                    "get_sparse_attn_kv_cache_manager returns (_torch/pyexecutor/_util.py), which kvsize has not read",
                    hint="Size it with --engine vllm or sglang, which model the indexer cache.",
                )

    def check_parallel(self, spec: ArchSpec, tp: int, pp: int) -> None:
        # _torch/modules/attention.py Attention.__init__: assert num_heads % tp_size == 0, KV heads rounded up
        # per rank ((kv + tp - 1) // tp), so any tp splits the KV heads.
        check_head_split(
            spec, tp, engine="TensorRT-LLM", source="tensorrt_llm/_torch/modules/attention.py Attention", kv_rule="ceil"
        )
        # MambaCacheManager.__init__ (mamba_cache_manager.py): nheads % tp == 0 and conv_dim % tp == 0 asserted.
        for layer, _ in spec.layer_groups():
            state = layer.state
            if state is None:
                continue
            heads = state.ssm_shape[0] if state.ssm_shape else 0
            if heads % tp or state.conv_channels % tp:
                raise UsageError(
                    f"TensorRT-LLM asserts the Mamba state's {heads} heads and {state.conv_channels} conv channels "
                    f"divide by tp (MambaCacheManager.__init__); --tp {tp} does not",
                    hint="Choose a --tp that divides both.",
                )

    def check_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:
        if dtype in SUPPORTED_KV_DTYPES:
            return
        if dtype is KvDtype.INT8:
            raise UnsupportedArchitecture(
                "TensorRT-LLM's PyTorch flow has no int8 KV cache (only the legacy TensorRT-engine flow does)",
                hint="The PyTorch flow's kv_cache_dtype accepts auto, fp8 (e4m3) and nvfp4.",
            )
        raise UnsupportedArchitecture(
            f"TensorRT-LLM has no {dtype.value} KV cache",
            hint="The PyTorch flow's kv_cache_dtype accepts auto (the model dtype), fp8 (e4m3) and nvfp4.",
        )

    # --- per layer, per rank ----------------------------------------------------------------------------

    def kv_heads_per_rank(self, attn: AttentionSpec, tp: int) -> int:
        if attn.kind is AttentionKind.MLA:
            return attn.num_kv_heads  # one latent, every rank (kv_factor 1, SELFKONLY)
        return cdiv(attn.num_kv_heads, tp)  # KVCacheManager: (num_kv_heads + tp_size - 1) // tp_size

    def row_bytes(self, elements: int, dtype: KvDtype) -> int:
        if dtype is KvDtype.NVFP4 and elements:
            return cdiv(elements, 2) + cdiv(elements, NVFP4_BLOCK)  # e2m1 pairs + one fp8 scale per 16
        return super().row_bytes(elements, dtype)

    def state_bytes(self, spec: ArchSpec, state: StateSpec, tp: int = 1) -> int:
        # MambaHybridCacheManager.get_states_bytes_per_layer: conv_dim // tp and heads // tp (floor).
        conv_dtype, ssm_dtype = self.state_dtypes(spec, state)
        conv = state.conv_channels // tp * self.conv_state_kept(state)
        ssm = state.ssm_shape[0] // tp * (state.ssm_elements // state.ssm_shape[0]) if state.ssm_shape else 0
        return conv_dtype.storage.bytes_for(conv) + ssm_dtype.storage.bytes_for(ssm)

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        bs = self.tokens_per_block
        if attn.kind is AttentionKind.SHARED:
            return 0
        if attn.kind is AttentionKind.CROSS:
            assert attn.encoder_tokens is not None
            return cdiv(attn.encoder_tokens, bs) * bs
        if attn.kind is AttentionKind.SLIDING and self.vswa:
            assert attn.window is not None
            return cdiv(min(ctx, attn.window), bs) * bs  # calculateMaxBlockRequirementsPerBeam, no sink tokens
        return cdiv(ctx, bs) * bs

    def block_size(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        return self.tokens_per_block

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    shares_prefixes = True  # KvCacheConfig.enable_block_reuse defaults to True (docs/source/features/kvcache.md)

    def prefix_sharing_rule(self) -> str:
        return (
            f"TensorRT-LLM {self.version} block reuse: whole blocks of {self.tokens_per_block} tokens found in the "
            "radix tree are shared, the partial block is copied per request (docs/source/features/kvcache.md "
            "'Reuse Across Requests'); windowed (VSWA) layers keep only the prefix blocks inside the window; the "
            "hit is assumed to stop at prompt - 1 as in vLLM and SGLang"
        )

    def prefix_shared_tokens(self, spec: ArchSpec, attn: AttentionSpec, hit: int, ctx: int, block: int) -> int:
        if attn.kind in (AttentionKind.CROSS, AttentionKind.SHARED):
            return 0
        if attn.kind is AttentionKind.SLIDING and self.vswa:
            assert attn.window is not None
            from kvsize.engines.base import blocks_in_window

            return blocks_in_window(hit, ctx, max(0, ctx - attn.window), block)
        return hit // block * block

    # --- summing ----------------------------------------------------------------------------------------

    def stages(self, num_layers: int, pp: int) -> list[range]:
        return trtllm_pp_stages(num_layers, pp)

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        notes = []
        groups = spec.layer_groups()
        sliding = sum(
            n for layer, n in groups if layer.attention is not None and layer.attention.kind is AttentionKind.SLIDING
        )
        chunked = sum(
            n for layer, n in groups if layer.attention is not None and layer.attention.kind is AttentionKind.CHUNKED
        )
        if sliding and not self.vswa:
            notes.append(
                f"TensorRT-LLM allocates {spec.model_type}'s {sliding} sliding-window layers for the full context "
                "unless kv_cache_config.max_attention_window lists the windows (kvsize engine option vswa=True)"
            )
        elif sliding:
            notes.append(
                f"TensorRT-LLM VSWA: {spec.model_type}'s {sliding} sliding layers keep cdiv(min(ctx, window), "
                f"{self.tokens_per_block}) blocks in their own pool"
            )
        if chunked:
            notes.append(
                f"TensorRT-LLM applies {spec.model_type}'s attention chunks in the kernel only: its {chunked} chunked "
                "layers hold the full context"
            )
        if spec.has_state:
            notes.append(
                "TensorRT-LLM's MambaHybridCacheManager keeps one conv and one SSM state per request in the model "
                "dtype (mamba_ssm_cache_dtype auto)"
            )
        return tuple(notes)

    # --- the capacity TensorRT-LLM computes -------------------------------------------------------------

    def estimator_bytes_per_token(self, spec: ArchSpec, layers: list[int], dtype: KvDtype, tp: int) -> int:
        """KVCacheManager.get_cache_size_per_token for the attention layers of one stage: kv_factor x layers x
        (head_dim x kv_heads // tp) elements (MLA: 576, not divided), then x1 (fp8) or x2 for every other dtype,
        fp32 and (TrtllmRules.estimator_nvfp4_bytes "two_bytes") NVFP4 included. Per-layer head counts are summed
        where TensorRT-LLM averages a per-layer list."""
        elements = 0
        for i in layers:
            attn = spec.layers[i].attention
            if attn is None or attn.kind is AttentionKind.SHARED:
                continue
            if attn.kind is AttentionKind.MLA:
                elements += attn.head_dim
            else:
                elements += attn.head_dim * attn.num_kv_heads // tp + attn.head_dim_v * attn.num_kv_heads // tp
        if dtype is KvDtype.NVFP4 and self.rules.estimator_nvfp4_bytes == "packed":
            return cdiv(elements, 2) + cdiv(elements, NVFP4_BLOCK)
        if dtype is KvDtype.FP8_E4M3:
            return elements
        return 2 * elements  # "mem_per_token = 2" unless the quant mode has an FP8 KV cache (NVFP4 included)

    def pool(
        self,
        spec: ArchSpec,
        *,
        available_bytes: int,
        kv_dtype: KvDtype,
        tp: int = 1,
        pp: int = 1,
        free_gpu_memory_fraction: float | None = None,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        free_bytes: int | None = None,
    ) -> TrtllmPool:
        """KV capacity for `available_bytes` per GPU = total memory - profiled peak + the warm-up's temporary KV
        cache (KvCacheCreator._cal_max_memory), the smaller of two bounds (TrtllmRules.pool_bounds): the
        estimator's int(int(available x fraction) // estimator bytes) and fraction x `free_bytes` / the pool's
        own bytes, `free_bytes` being the free memory when the final KVCacheManager is built (None: taken as
        `available_bytes`, a lower bound: the warm-up's activations are freed by then). Hybrid Mamba models
        first set aside `max_batch_size` state slots (allocated before the KV pool, TrtllmRules.mamba_states)."""
        self.check_supported(spec)
        self.check_dtype(spec, kv_dtype)
        self.check_parallel(spec, tp, pp)
        windows = {
            a.window if a.kind is AttentionKind.SLIDING else None
            for layer, _ in spec.layer_groups()
            if (a := layer.attention)
        }
        if self.vswa and len(windows) > 1:  # is_vswa: more than one distinct max_attention_window
            raise UnsupportedArchitecture(
                f"TensorRT-LLM VSWA ({spec.model_type}): the pools per window are split by the C++ "
                "KVCacheManager::calculateMaxNumBlocks (calculate_max_num_blocks_from_cpp), which kvsize has not read",
                hint="Size the pool without vswa (one window), or per request with kvsize's estimate.",
            )
        rules = self.rules
        fraction = free_gpu_memory_fraction if free_gpu_memory_fraction is not None else rules.free_gpu_memory_fraction
        free = available_bytes if free_bytes is None else free_bytes
        bs = self.tokens_per_block
        best: tuple[float, TrtllmPool] | None = None
        for stage in trtllm_pp_stages(spec.num_layers, pp):
            layers = list(stage)
            states = max_batch_size * sum(
                self.state_bytes(spec, state, tp) for i in layers if (state := spec.layers[i].state) is not None
            )
            per_token = self.estimator_bytes_per_token(spec, layers, kv_dtype, tp)
            runtime = sum(
                self.attention_bytes_per_token(a, kv_dtype, tp)
                for i in layers
                if (a := spec.layers[i].attention) is not None
            )
            if not per_token or not runtime:
                continue
            # _util.py configure_kv_cache_capacity: max_tokens = int(int(available x fraction) // per_token).
            estimator = int(max(available_bytes - states, 0) * fraction) // per_token
            # resource_manager.py calculate_max_num_blocks: min(max_tokens, fraction x free_mem / runtime bytes).
            by_free = fraction * max(free - states, 0) / runtime
            tokens = min(float(estimator), by_free)
            blocks = math.ceil(tokens / bs) if rules.block_rounding == "ceil" else int(tokens // bs)
            pool = TrtllmPool(
                per_token,
                int(tokens),
                blocks,
                blocks * bs * runtime,
                bs,
                runtime_bytes_per_token=runtime,
                bound="estimator" if estimator <= by_free else "free memory",
            )
            if best is None or tokens < best[0]:  # all-reduce MIN over ranks
                best = (tokens, pool)
        return best[1] if best is not None else TrtllmPool(0, 0, 0, 0, bs)
