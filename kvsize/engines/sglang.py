"""SGLang: token pools of `page_size` rows, one cell per token spanning every layer of the stage.

Rules mirror SGLang 0.5.23 (the reference is ../ENGINES.md §2 of the kvsize repository's research notes; file
and function beside each rule, paths under `sglang/srt/`):

- Cell (bytes one token costs on one TP rank, `DefaultPoolConfigurator._compute_cell_size`,
  `model_executor/pool_configurator.py`): MHA `get_num_kv_heads(tp) x (head_dim + v_head_dim) x L x elem`
  with `get_num_kv_heads = max(1, kv // tp)` (`ModelConfig.get_num_kv_heads`, `configs/model_config.py`); MLA
  `(kv_lora_rank + qk_rope_head_dim) x L x elem`, one latent replicated on every rank (`MLATokenToKVPool`,
  `mem_cache/memory_pool.py`). `L` is `num_effective_layers = end_layer - start_layer`: every layer of the
  pipeline stage gets a buffer, including layers with no KV of their own (Nemotron-NAS no-op blocks, Gemma 3n
  shared layers). Hybrid Mamba / linear-attention models count only `full_attention_layer_ids`.
- Pages: `--page-size` defaults to 1 (`_page_size_default`, `arg_groups/overrides.py`); a request holds
  `cdiv(tokens, page) x page` slots. Every pool buffer has `size + page_size` rows (`_kv_buffer_shapes`): the extra
  page is a padding page for dummy writes, per pool and not per request, so only `pool()` counts it.
- Sliding windows: only `is_hybrid_swa_model` architectures (gpt-oss, Llama 4, Gemma 4, MiMo-V2, Step-3.5,
  Laguna; `configs/model_config.py`) get a separate SWA pool, sized `swa_full_tokens_ratio` (0.8) x the full
  pool (`HybridSWAPoolConfigurator`). Gemma 2/3/3n set `disable_hybrid_swa_memory` (`arg_groups/model_overrides/
  gemma2_gemma3.py`) and Mistral, Phi-3, Starcoder2, Cohere2, EXAONE 4 ... are not on the list: their sliding
  layers are sized as full attention. Per request kvsize charges a pooled sliding (or Llama 4 chunked) layer
  `min(ctx, window + page)` slots, page-aligned: the SWA pool's admission floor is `sliding_window_size +
  page_size` (`HybridSWAPoolConfigurator._solve_pool_sizes`) and pages wholly outside the window are freed.
- Cross attention (Mllama): encoder tokens take slots from the same token pool (`encoder_out_cache_loc`), and a
  slot spans every layer, so every layer holds `ctx + encoder tokens` slots per request.
- Mamba / GDN state (`Mamba2CacheParams`, `configs/mamba_utils.py`): conv `(conv_dim / tp, kernel - 1)` in bf16
  (`SGLANG_MAMBA_CONV_DTYPE`), SSM `(heads / tp, head_dim, state)` in fp32 (`SGLANG_MAMBA_SSM_DTYPE`; a config
  `mamba_ssm_dtype` would override it, but the architecture spec does not carry that field). With the radix
  cache on (the default) the scheduler admits `max_mamba_cache_size // 3` requests
  (`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`, `mem_cache/kv_cache_configurator.py _calculate_mamba_ratio`), so
  kvsize charges 3 state slots per request (1 with `enable_prefix_caching=False`, i.e. `--disable-radix-cache`).
- KV dtypes (`configure_kv_cache_dtype`, `mem_cache/kv_cache_dtype.py`): auto (the model dtype), bf16, fp8_e4m3,
  fp8_e5m2, nvfp4 (mxfp8 and fp4_mx_block16 have no kvsize format). NVFP4 cell (`_compute_cell_size`): data
  `heads x (D_k + D_v) / 2` + one e4m3 scale per 16 elements counted as `heads x D_k x 2 / 16`, plus one shared FP8
  dequant workspace of `heads x D_k x 2` bytes per token for the whole stage (in the cell, so in `pool()`; it is
  prefill scratch rather than cache, so per-request figures leave it out). MLA NVFP4: `576 / 2 + 576 / 16` = 324 B.
- Pool (`pool()`): `max_total_num_tokens = available // cell`, floored to the page size, min over PP stages
  (`DefaultPoolConfigurator.calculate_pool_sizes`); hybrid SWA: `cell = full x n_full + 0.8 x swa x n_swa`,
  `swa_tokens = 0.8 x full_tokens` (whole-model layer counts, as `HybridSWAPoolConfigurator` reads
  `model_config.full_attention_layer_ids`); hybrid Mamba: `rest x r / (1 + r)` with `mamba_full_memory_ratio`
  r = 0.9 goes to states, `max_mamba_cache_size = (budget - per_req) // per_req`, KV gets `rest - (max + 1) x
  per_req` (`KVCacheConfigurator._handle_max_mamba_cache`). `available_bytes` is SGLang's `rest`: free memory
  after loading the weights minus `(1 - mem_fraction_static) x` free memory before loading
  (`KVCacheConfigurator._profile_available_bytes`).
- Pipeline stages (`get_pp_indices`, `distributed/utils.py`): `n // pp` layers each, the last `n % pp` stages one
  more (vLLM gives the remainder to the stages before the last).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvsize.dtypes import KvDtype
from kvsize.engines.base import Engine, UnsupportedArchitecture, cdiv
from kvsize.errors import UsageError
from kvsize.sizing import KvEstimate
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateSpec

DEFAULT_PAGE_SIZE = 1  # arg_groups/overrides.py _page_size_default (Hopper fa3; trtllm_mha on SM100 forces 64)
SWA_FULL_TOKENS_RATIO = 0.8  # ServerArgs.swa_full_tokens_ratio
MAMBA_FULL_MEMORY_RATIO = 0.9  # ServerArgs.mamba_full_memory_ratio
MAMBA_SLOTS_RADIX = 3  # kv_cache_configurator.py MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (radix cache on)
MAMBA_SLOTS_NO_RADIX = 1  # _calculate_mamba_ratio with --disable-radix-cache
NVFP4_SCALE_BLOCK = 16  # pool_configurator.py _compute_cell_size: scale_block_size = 16

# configs/model_config.py is_hybrid_swa_model, by the model_type kvsize sees (text config of multimodal wrappers).
HYBRID_SWA_MODEL_TYPES = frozenset(
    {
        "gpt_oss",
        "llama4",
        "llama4_text",
        "gemma4",
        "gemma4_text",
        "mimo_v2",
        "mimo_v2_flash",
        "step3p5",
        "laguna",
    }
)

# Architectures with no implementation under sglang/srt/models/ (checked against the file list).
UNSERVED_MODEL_TYPES = {
    "zamba": "SGLang has no Zamba implementation (no sglang/srt/models/zamba*.py)",
    "zamba2": "SGLang has no Zamba2 implementation (no sglang/srt/models/zamba2.py)",
}

SUPPORTED_KV_DTYPES = frozenset(
    {KvDtype.BF16, KvDtype.FP16, KvDtype.FP32, KvDtype.FP8_E4M3, KvDtype.FP8_E5M2, KvDtype.NVFP4}
)


def sglang_pp_stages(num_layers: int, pp: int) -> list[range]:
    """Layers of each stage: `n // pp` each, the last `n % pp` stages one more (distributed/utils.py get_pp_indices,
    without SGLANG_PP_LAYER_PARTITION)."""
    if pp > num_layers:
        raise UsageError(f"--pp {pp} exceeds the model's {num_layers} layers")
    base, extra = divmod(num_layers, pp)
    sizes = [base + (1 if rank >= pp - extra else 0) for rank in range(pp)]
    starts = [sum(sizes[:i]) for i in range(pp)]
    return [range(start, start + size) for start, size in zip(starts, sizes, strict=True)]


@dataclass(frozen=True)
class SglangPool:
    """SGLang's start-up figures for one KV budget per GPU (the binding pipeline stage)."""

    max_total_num_tokens: int
    """The `max_total_num_tokens=` scheduler log figure (the full-attention pool for hybrid SWA models)."""
    swa_max_total_num_tokens: int | None
    """Tokens of the sliding-window pool (hybrid SWA models only)."""
    cell_size: float
    """Bytes per token of max_total_num_tokens (ratio-weighted for hybrid SWA; NVFP4 workspace included)."""
    pool_bytes: int
    """Bytes the KV buffers take, the padding page of every buffer included."""
    max_mamba_cache_size: int | None = None
    """Mamba/linear state slots (hybrid Mamba models only)."""
    mamba_request_limit: int | None = None
    """max_running_requests cap from the state slots: max_mamba_cache_size // slots per request."""


class SglangEngine(Engine):
    name = "sglang"
    title = "SGLang"
    versions = ("0.5.23",)

    def __init__(
        self, version: str | None = None, *, block_size: int | None = None, enable_prefix_caching: bool = True
    ) -> None:
        super().__init__(version)
        if block_size is not None and block_size < 1:
            raise UsageError(f"--block-size must be positive, got {block_size}")
        self.page_size = block_size or DEFAULT_PAGE_SIZE
        self.enable_prefix_caching = enable_prefix_caching

    @property
    def state_slots(self) -> int:
        """Mamba state slots one running request ties up (the scheduler's mamba ratio)."""
        return MAMBA_SLOTS_RADIX if self.enable_prefix_caching else MAMBA_SLOTS_NO_RADIX

    @property
    def rule(self) -> str:
        return (
            f"SGLang {self.version}: token pool of page {self.page_size}, one cell per token across every layer of "
            "the stage (kv heads max(1, kv//tp); MLA latent replicated); sliding layers pooled (0.8 ratio, min(ctx, "
            "window + page) per request) only for gpt-oss / Llama 4 / Gemma 4 / MiMo-V2 / Step-3.5 / Laguna, full "
            f"otherwise; Mamba state conv bf16 + SSM fp32, {self.state_slots} slot(s) per request "
            "(model_executor/pool_configurator.py, configs/model_config.py, mem_cache/kv_cache_configurator.py)"
        )

    # --- what SGLang serves -----------------------------------------------------------------------------

    def check_supported(self, spec: ArchSpec) -> None:
        reason = UNSERVED_MODEL_TYPES.get(spec.model_type)
        if reason is not None:
            raise UnsupportedArchitecture(f"{spec.model_type}: {reason}")
        if spec.model_type == "nemotron-nas":
            heads = {
                layer.attention.num_kv_heads
                for layer in spec.layers
                if layer.attention is not None and layer.attention.kind is not AttentionKind.SHARED
            }
            if len(heads) > 1:
                # ModelConfig.get_total_num_kv_heads raises for nemotron-nas with several kv-head counts.
                raise UnsupportedArchitecture(
                    f"nemotron-nas with {len(heads)} different kv-head counts: SGLang rejects variable GQA "
                    "(configs/model_config.py get_total_num_kv_heads)"
                )

    def check_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:
        if dtype not in SUPPORTED_KV_DTYPES:
            raise UnsupportedArchitecture(
                f"SGLang has no {dtype.value} KV cache",
                hint="SGLang's --kv-cache-dtype accepts auto (the model dtype), bf16, fp8_e4m3, fp8_e5m2, nvfp4 "
                "(and mxfp8, which kvsize does not model).",
            )

    # --- per layer, per rank ----------------------------------------------------------------------------

    def attention_bytes_per_token(self, attn: AttentionSpec, dtype: KvDtype, tp: int = 1) -> int:
        if attn.kind is AttentionKind.SHARED:
            return 0
        if dtype is not KvDtype.NVFP4:
            return super().attention_bytes_per_token(attn, dtype, tp)
        heads = self.kv_heads_per_rank(attn, tp)
        if attn.kind is AttentionKind.MLA:
            # MLATokenToKVPoolFP4: kv_cache_dim / 2 bytes of e2m1 + kv_cache_dim / 16 e4m3 scales.
            return attn.head_dim // 2 + attn.head_dim // NVFP4_SCALE_BLOCK
        # MHATokenToKVPoolFP4: heads x (D_k + D_v) / 2 data + heads x D_k x 2 / 16 scales (K and V, D_k for both).
        return heads * (attn.head_dim + attn.head_dim_v) // 2 + heads * attn.head_dim * 2 // NVFP4_SCALE_BLOCK

    def state_dtypes(self, spec: ArchSpec, state: StateSpec) -> tuple[KvDtype, KvDtype]:
        # SGLANG_MAMBA_CONV_DTYPE defaults to bfloat16, SGLANG_MAMBA_SSM_DTYPE to float32 (configs/mamba_utils.py).
        return KvDtype.BF16, KvDtype.FP32

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        """Slots of a full-attention pool (whole pages); `layer_request_bytes` applies the model-level rules."""
        if attn.kind is AttentionKind.SHARED:
            return 0
        if attn.kind is AttentionKind.CROSS:
            assert attn.encoder_tokens is not None
            return self._pages(attn.encoder_tokens)
        return self._pages(ctx)

    def layer_request_bytes(
        self, spec: ArchSpec, layer: LayerSpec, ctx: int, dtype: KvDtype, tp: int
    ) -> tuple[int, int, int]:
        self.check_dtype(spec, dtype)
        state = self.state_bytes(spec, layer.state, tp) * self.state_slots if layer.state is not None else 0
        attn = layer.attention
        if self._mambaish(spec):
            # Hybrid linear models: KV buffers only for full_attention_layer_ids.
            if attn is None or attn.kind is AttentionKind.SHARED:
                return 0, 0, state
            return self.attention_bytes_per_token(attn, dtype, tp), self._slots(spec, attn, ctx), state
        # Every layer of the stage has a row in the pool (layer_num = num_effective_layers).
        ref = attn if attn is not None and attn.kind is not AttentionKind.SHARED else self._reference(spec)
        if ref is None:
            return 0, 0, state
        return self.attention_bytes_per_token(ref, dtype, tp), self._slots(spec, ref, ctx), state

    def block_size(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        return self.page_size

    # --- helpers ----------------------------------------------------------------------------------------

    def _pages(self, tokens: int) -> int:
        return cdiv(tokens, self.page_size) * self.page_size

    @staticmethod
    def _mambaish(spec: ArchSpec) -> bool:
        return spec.has_state

    @staticmethod
    def _reference(spec: ArchSpec) -> AttentionSpec | None:
        """The model-level attention geometry SGLang sizes every pool row with."""
        return next(
            (
                layer.attention
                for layer in spec.layers
                if layer.attention is not None
                and layer.attention.kind not in (AttentionKind.SHARED, AttentionKind.CROSS)
            ),
            None,
        )

    @staticmethod
    def _encoder_tokens(spec: ArchSpec) -> int:
        return max(
            (
                layer.attention.encoder_tokens or 0
                for layer, _ in spec.layer_groups()
                if layer.attention is not None and layer.attention.kind is AttentionKind.CROSS
            ),
            default=0,
        )

    def _is_pooled_window(self, spec: ArchSpec, attn: AttentionSpec) -> bool:
        return spec.model_type in HYBRID_SWA_MODEL_TYPES and attn.kind in (
            AttentionKind.SLIDING,
            AttentionKind.CHUNKED,
        )

    def _slots(self, spec: ArchSpec, attn: AttentionSpec, ctx: int) -> int:
        """Slots one request holds in the pool of `attn`'s layer."""
        slots = self._pages(ctx)
        encoder = self._encoder_tokens(spec)
        if encoder:
            slots += self._pages(encoder)  # encoder tokens share the token pool (encoder_out_cache_loc)
        if self._is_pooled_window(spec, attn):
            assert attn.window is not None
            slots = min(slots, self._pages(attn.window) + self.page_size)
        return slots

    # --- summing ----------------------------------------------------------------------------------------

    def estimate(
        self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> KvEstimate:
        est = super().estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)
        # SGLang splits layers with the remainder on the last stages; every cell grows with the context
        # (cross-attention, KV-less and shared layers included), and the encoder slots are fixed per request.
        encoder = self._pages(self._encoder_tokens(spec)) if self._encoder_tokens(spec) else 0
        per_token = fixed = 0
        for layer, count in spec.layer_groups():
            slot, _, state = self.layer_request_bytes(spec, layer, ctx, kv_dtype, tp)
            per_token += count * tp * slot
            fixed += count * tp * (state + slot * encoder)
        return est.model_copy(
            update={
                "kv_bytes_per_token": per_token,
                "state_bytes_per_request": fixed,
            }
        )

    def stages(self, num_layers: int, pp: int) -> list[range]:
        return sglang_pp_stages(num_layers, pp)

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        notes = []
        windowed = [
            layer.attention
            for layer in spec.layers
            if layer.attention is not None and layer.attention.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED)
        ]
        if windowed and spec.model_type in HYBRID_SWA_MODEL_TYPES:
            notes.append(
                f"SGLang keeps {spec.model_type}'s {len(windowed)} windowed layers in a separate SWA pool sized "
                f"{SWA_FULL_TOKENS_RATIO} x the full pool; kvsize charges each request min(ctx, window + page) there"
            )
        elif windowed:
            notes.append(
                f"SGLang sizes {spec.model_type}'s {len(windowed)} sliding-window layers as full attention (its "
                "hybrid SWA pool serves only gpt-oss, Llama 4, Gemma 4, MiMo-V2, Step-3.5 and Laguna)"
            )
        if self._mambaish(spec):
            notes.append(
                "SGLang keeps Mamba/linear-attention state with conv in bf16 and SSM in fp32, and with the radix "
                f"cache on admits max_mamba_cache_size // {MAMBA_SLOTS_RADIX} requests: kvsize charges "
                f"{self.state_slots} state slot(s) per request"
            )
        else:
            kv_less = sum(
                1 for layer in spec.layers if layer.attention is None or layer.attention.kind is AttentionKind.SHARED
            )
            if kv_less:
                notes.append(
                    f"SGLang allocates a KV buffer for every layer of the stage, including the {kv_less} layers "
                    "without KV of their own"
                )
        if self._encoder_tokens(spec):
            notes.append("SGLang puts the encoder's tokens in the shared token pool: every layer holds them")
        if spec.model_dtype == KvDtype.FP32.value:
            notes.append(
                "SGLang's --dtype auto runs float32 checkpoints in bf16 (Gemma) or fp16, so its auto KV cache is 2 B "
                "per element; pass --kv-dtype bf16 to mirror that"
            )
        return tuple(notes)

    # --- the pool SGLang logs ---------------------------------------------------------------------------

    def pool(self, spec: ArchSpec, *, available_bytes: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1) -> SglangPool:
        """`max_total_num_tokens` (and the SWA / Mamba pool sizes) for `available_bytes` of KV budget per GPU."""
        self.check_supported(spec)
        self.check_dtype(spec, kv_dtype)
        stages = sglang_pp_stages(spec.num_layers, pp)
        pools = [self._stage_pool(spec, [spec.layers[i] for i in s], available_bytes, kv_dtype, tp) for s in stages]
        return min(pools, key=lambda p: p.max_total_num_tokens)  # min over PP ranks

    def _stage_pool(
        self, spec: ArchSpec, layers: Sequence[LayerSpec], available: int, dtype: KvDtype, tp: int
    ) -> SglangPool:
        page = self.page_size
        rest = max(available, 0)
        max_mamba = limit = None
        per_req = sum(self.state_bytes(spec, layer.state, tp) for layer in layers if layer.state is not None)
        if per_req:
            budget = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
            max_mamba = max(int((budget - per_req) // per_req), 0)
            rest = max(rest - (max_mamba + 1) * per_req, 0)  # MambaPool keeps max_mamba_cache_size + 1 slots
            limit = max_mamba // self.state_slots

        pooled = [
            layer.attention
            for layer in spec.layers
            if layer.attention is not None and self._is_pooled_window(spec, layer.attention)
        ]
        if pooled:
            # HybridSWAPoolConfigurator: whole-model layer counts, one geometry per pool.
            full = [
                layer.attention
                for layer in spec.layers
                if layer.attention is not None
                and layer.attention.kind is not AttentionKind.SHARED
                and not self._is_pooled_window(spec, layer.attention)
            ]
            swa_pt = self.attention_bytes_per_token(pooled[0], dtype, tp)
            full_pt = self.attention_bytes_per_token(full[0], dtype, tp) if full else 0
            if not full:
                cell: float = swa_pt * len(pooled)
                swa_tokens = full_tokens = int(rest // cell) // page * page
            else:
                cell = full_pt * len(full) + SWA_FULL_TOKENS_RATIO * swa_pt * len(pooled)
                full_tokens = int(rest // cell) // page * page
                swa_tokens = int(full_tokens * SWA_FULL_TOKENS_RATIO) // page * page
            pool_bytes = (full_tokens + page) * full_pt * len(full) + (swa_tokens + page) * swa_pt * len(pooled)
            return SglangPool(full_tokens, swa_tokens, cell, pool_bytes, max_mamba, limit)

        cell_bytes = sum(self.layer_request_bytes(spec, layer, 1, dtype, tp)[0] for layer in layers)
        workspace = 0
        ref = self._reference(spec)
        if dtype is KvDtype.NVFP4 and ref is not None and ref.kind is not AttentionKind.MLA and cell_bytes:
            workspace = self.kv_heads_per_rank(ref, tp) * ref.head_dim * 2  # one shared FP8 dequant workspace
        cell_total = cell_bytes + workspace
        # No KV on this stage (pure SSM): SGLang falls back to --max-total-tokens or the context length.
        tokens = rest // cell_total // page * page if cell_total else spec.max_context or 0
        return SglangPool(tokens, None, float(cell_total), (tokens + page) * cell_bytes, max_mamba, limit)

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    shares_prefixes = True  # the radix cache is on unless --disable-radix-cache

    def prefix_sharing_rule(self) -> str:
        return (
            f"SGLang {self.version} radix cache: shares tokens, the hit rounded down to whole pages of "
            f"{self.page_size} (mem_cache/radix_cache.py RadixKey.page_aligned, match_prefix); hybrid SWA models "
            "free out-of-window sliding slots, so sliding layers share only prefix tokens inside the window at "
            "ctx (mem_cache/common.py free_swa_out_of_window_slots)"
        )

    def prefix_shared_tokens(self, spec: ArchSpec, attn: AttentionSpec, hit: int, ctx: int, block: int) -> int:
        if attn.kind in (AttentionKind.CROSS, AttentionKind.SHARED):
            return 0
        shared = hit // self.page_size * self.page_size
        if self._is_pooled_window(spec, attn):
            assert attn.window is not None
            from kvsize.engines.base import blocks_in_window

            return blocks_in_window(shared, ctx, max(0, ctx - attn.window), self.page_size)
        return shared
