"""vLLM (v1 engine): paged blocks, per-kind admission bounds, KV-cache groups and the pool figures it logs.

Rules mirror vLLM 0.33 (default), 0.19 (0.12-0.19) and 0.11 as read from their source (file and function beside each
rule; the reference is ../ENGINES.md §1 of the kvsize repository's research notes):

- Page of one layer: block_size x kv_heads_per_rank x (head_size + head_size_v) x dtype bytes
  (vllm/v1/kv_cache_interface.py AttentionSpec.page_size_bytes); MLA: one head of kv_lora_rank +
  qk_rope_head_dim, replicated on every TP rank (MLAAttentionSpec, max_tp_shards=1); NVFP4 adds one e4m3
  scale per 16 elements (FlashInferBackend.customize_spec).
- Blocks one request may need, per layer (max_memory_usage_bytes / page): full and MLA
  cdiv(max_model_len, block_size); sliding window cdiv(min(W - 1 + in_flight, L), bs) + 1
  (SlidingWindowSpec); chunked local cdiv(min(C + in_flight, L), bs) (ChunkedLocalAttentionSpec);
  cross attention cdiv(encoder tokens, bs); Mamba 2 blocks with prefix caching on (the default for hybrid
  models, mamba_cache_mode "align"), 1 for attention-free models. in_flight = max_concurrent_batches x
  max_num_batched_tokens (2 batches with async scheduling in 0.33; 0.19 and older used one batch).
- Groups (vllm/v1/core/kv_cache_planning.py get_kv_cache_groups): one group for identical layers; layers
  of one type with different sizes share one group whose block spans every layer's page; mixed types are
  bucketed, group_size = min bucket (max when max < 1.5 x min), short groups padded. A block spans
  group_size pages; bytes_per_block = group_size x page (uniform: layers x page).
- Hybrid attention + Mamba: block_size = 16 x cdiv(state bytes, 16 x attention bytes per token) and the
  state page is padded to the attention page (Platform._align_hybrid_block_size).
- Pool: num_blocks = available // bytes_per_block; concurrency = num_blocks / blocks per request; logged
  "GPU KV cache size" = int(concurrency x max_model_len) (kv_cache_utils.get_max_concurrency_for_kv_cache_config;
  0.19 and older: num_blocks // groups x block_size).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvsize.dtypes import KvDtype
from kvsize.engines.base import Engine, UnsupportedArchitecture, cdiv, group_layers
from kvsize.engines.context import Device
from kvsize.engines.vllm_scheduler import SchedulerSettings, scheduler_settings
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateSpec

DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE; FA, FlashInfer and Hopper's FlashAttention-MLA keep it
HYBRID_ALIGN = 16  # smallest kernel block of the FlashAttention backend
# The device assumed when none is given: an H100 SXM (gpu_profiles/h100-sxm.yaml), whose API-server scheduler
# defaults are 8192 batched tokens and 1024 sequences in every modelled release (vllm_scheduler.py).
REFERENCE_DEVICE = Device(total_memory_bytes=85_520_809_984, name="NVIDIA H100 80GB HBM3", capability=(9, 0))
MAMBA_BLOCKS_PREFIX_CACHING = 2  # mamba_cache_mode "align": 2 + num_speculative + checkpoint blocks
MAMBA_BLOCKS_PLAIN = 1


@dataclass(frozen=True)
class _Slot:
    """One cache-holding sub-layer (an attention or a Mamba mixer) on one rank."""

    kind: str  # "attention" or "mamba"
    key: tuple[object, ...]  # the spec type: attention kind and window, or "mamba"
    per_token: int  # attention bytes per token slot; 0 for mamba
    state: int  # mamba state bytes; 0 for attention
    attn: AttentionSpec | None  # the attention it pages, for its blocks per request


@dataclass(frozen=True)
class Layout:
    """How one pipeline stage's cache is paged."""

    block_size: int
    bytes_per_block: int
    blocks_per_request: int
    groups: int


@dataclass(frozen=True)
class Pool:
    """vLLM's start-up figures for a KV budget."""

    num_blocks: int
    kv_pool_tokens: int
    """The "GPU KV cache size: N tokens" log figure."""
    concurrency: float
    """The "Maximum concurrency for N tokens per request: X" log figure."""
    max_requests: int
    """Requests of max_model_len vLLM can admit at once (the null block is never handed out)."""


class VllmEngine(Engine):
    name = "vllm"
    title = "vLLM"
    versions = ("0.33", "0.19", "0.11")
    serves_encoder_decoder = True  # Whisper only (check_supported)

    def __init__(
        self,
        version: str | None = None,
        *,
        block_size: int | None = None,
        max_num_batched_tokens: int | None = None,
        enable_prefix_caching: bool = True,
    ) -> None:
        super().__init__(version)
        self.fixed_block_size = block_size
        self.batched_tokens_option = max_num_batched_tokens
        self.enable_prefix_caching = enable_prefix_caching

    @property
    def device(self) -> Device:
        """The GPU the rules are evaluated for: the context's, else the reference H100."""
        return self.context.device or REFERENCE_DEVICE

    def scheduler(self, max_model_len: int, tp: int = 1, pp: int = 1) -> SchedulerSettings:
        """The scheduler vLLM runs for this model on the context's device (vllm_scheduler.scheduler_settings)."""
        return scheduler_settings(
            self.version,
            self.device,
            max_model_len=max_model_len,
            usage=self.context.usage,
            tp=tp,
            pp=pp,
            max_num_batched_tokens=self.batched_tokens_option or self.context.max_num_batched_tokens,
            max_num_seqs=self.context.max_num_seqs,
        )

    def max_running_requests(self, spec: ArchSpec, max_model_len: int, tp: int = 1, pp: int = 1) -> int | None:
        """max_num_seqs: the scheduler admits no request once that many run (v1/core/sched/scheduler.py
        Scheduler.schedule: `if len(self.running) == self.max_num_seqs: break`)."""
        return self.scheduler(max_model_len, tp, pp).max_num_seqs

    @property
    def rule(self) -> str:
        return (
            f"vLLM {self.version}: blocks of {self.fixed_block_size or DEFAULT_BLOCK_SIZE} tokens per layer "
            "(hybrid Mamba: enlarged to fit a state), sliding layers cdiv(min(W-1+in-flight, ctx), "
            "bs)+1 blocks, chunked cdiv(min(C+in-flight, ctx), bs), MLA latent replicated per TP rank, "
            "kv heads max(1, kv//tp); groups padded to a common size (vllm/v1/kv_cache_interface.py, "
            "v1/core/kv_cache_planning.py)"
        )

    def in_flight_tokens(self, max_model_len: int, pp: int = 1) -> int:
        """Tokens scheduled but not yet settled that a sliding window must keep (VllmConfig.max_in_flight_tokens):
        pp + 1 batches with async scheduling (0.33), one batch in 0.19 and older."""
        return self.scheduler(max_model_len, pp=pp).in_flight_tokens

    def check_supported(self, spec: ArchSpec) -> None:
        if spec.is_encoder_decoder and spec.model_type != "whisper":
            raise UnsupportedArchitecture(
                f"vLLM's v1 engine serves Whisper as its only encoder-decoder model, not {spec.model_type}",
                hint="Use --engine hf or formula for T5 / BART style models.",
            )

    # --- per layer ------------------------------------------------------------------------------------

    def state_dtypes(self, spec: ArchSpec, state: StateSpec) -> tuple[KvDtype, KvDtype]:
        # MambaStateDtypeCalculator: both in the model dtype, except NemotronH whose SSM state is float32
        # unless its config names mamba_ssm_cache_dtype (NemotronHForCausalLMConfig, models/config.py).
        model = KvDtype(state.dtype)
        if spec.model_type == "nemotron_h":
            return model, KvDtype.FP32
        return model, model

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        return self._blocks_for(attn, ctx, self.fixed_block_size or DEFAULT_BLOCK_SIZE) * (
            self.fixed_block_size or DEFAULT_BLOCK_SIZE
        )

    def _blocks_for(self, attn: AttentionSpec, ctx: int, bs: int) -> int:
        if attn.kind is AttentionKind.SLIDING:
            assert attn.window is not None
            return cdiv(min(attn.window - 1 + self.in_flight_tokens(ctx), ctx), bs) + 1
        if attn.kind is AttentionKind.CHUNKED and self.version != "0.11":
            # 0.11 allocated chunked layers as full attention (hybrid allocator off for chunked local).
            assert attn.window is not None
            return cdiv(min(attn.window + self.in_flight_tokens(ctx), ctx), bs)
        if attn.kind is AttentionKind.CROSS:
            assert attn.encoder_tokens is not None
            return cdiv(attn.encoder_tokens, bs)
        if attn.kind is AttentionKind.SHARED:
            return 0
        return cdiv(ctx, bs)

    # --- paging ---------------------------------------------------------------------------------------

    def _slots(self, spec: ArchSpec, layers: Sequence[LayerSpec], dtype: KvDtype, tp: int) -> list[tuple[_Slot, int]]:
        """Each distinct cache-holding sub-layer (attention, cross-attention, Mamba mixer) with its count."""
        counts: dict[_Slot, int] = {}
        for layer, n in group_layers(spec, layers):
            for a in (layer.attention, layer.cross):
                if a is not None and a.kind is not AttentionKind.SHARED:
                    per_token = self.attention_bytes_per_token(a, dtype, tp)
                    slot = _Slot("attention", (a.kind, a.window), per_token, 0, a)
                    counts[slot] = counts.get(slot, 0) + n
            if layer.state is not None:
                state = self.state_bytes(spec, layer.state, tp)
                slot = _Slot("mamba", ("mamba",), 0, state, None)
                counts[slot] = counts.get(slot, 0) + n
        return list(counts.items())

    def block_size(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        """16 unless the model mixes attention with Mamba: then enough tokens that one attention page holds
        a Mamba state (Platform._align_hybrid_block_size)."""
        slots = [slot for slot, _ in self._slots(spec, spec.layers, dtype, tp)]
        base = self.fixed_block_size or DEFAULT_BLOCK_SIZE
        attn = [s.per_token for s in slots if s.kind == "attention"]
        states = [s.state for s in slots if s.kind == "mamba"]
        if not attn or not states:
            return base
        align = max(HYBRID_ALIGN, base)
        return align * cdiv(max(states), align * min(attn))

    def layout(self, spec: ArchSpec, layers: Sequence[LayerSpec], ctx: int, dtype: KvDtype, tp: int) -> Layout:
        """Bytes per block and blocks per request of one pipeline stage at max_model_len `ctx`."""
        bs = self.block_size(spec, dtype, tp)
        slots = self._slots(spec, layers, dtype, tp)
        if not slots:
            return Layout(bs, 0, 0, 0)
        attn_page = bs * min((s.per_token for s, _ in slots if s.kind == "attention"), default=0)
        mamba_blocks = MAMBA_BLOCKS_PREFIX_CACHING if attn_page and self.enable_prefix_caching else MAMBA_BLOCKS_PLAIN
        # Buckets of one spec type: (page, blocks per request, layers) entries.
        buckets: dict[tuple[object, ...], list[tuple[int, int, int]]] = {}
        for s, n in slots:
            if s.attn is not None:
                entry = (bs * s.per_token, self._blocks_for(s.attn, ctx, bs), n)
            else:
                entry = (max(s.state, attn_page), mamba_blocks, n)  # states padded to the attention page
            buckets.setdefault((s.kind, *s.key), []).append(entry)
        if len(buckets) == 1:
            # One group: identical layers (bytes_per_block = layers x page) or one type with different sizes
            # (UniformTypeKVCacheSpecs: a block spans every layer's page).
            (entries,) = buckets.values()
            return Layout(bs, sum(page * n for page, _, n in entries), max(b for _, b, _ in entries), 1)
        # Mixed types: pages were unified to one size; buckets split into groups of group_size layers.
        sizes = [sum(n for _, _, n in entries) for entries in buckets.values()]
        group_size = max(sizes) if max(sizes) < 1.5 * min(sizes) else min(sizes)
        page = max(page for entries in buckets.values() for page, _, _ in entries)
        n_groups = per_request = 0
        for size, entries in zip(sizes, buckets.values(), strict=True):
            groups = cdiv(size, group_size)
            n_groups += groups
            per_request += groups * max(b for _, b, _ in entries)
        return Layout(bs, group_size * page, per_request, n_groups)

    def stage_request_bytes(
        self, spec: ArchSpec, layers: Sequence[LayerSpec], ctx: int, dtype: KvDtype, tp: int
    ) -> int:
        lay = self.layout(spec, layers, ctx, dtype, tp)
        return lay.blocks_per_request * lay.bytes_per_block

    def layer_request_bytes(
        self, spec: ArchSpec, layer: LayerSpec, ctx: int, dtype: KvDtype, tp: int
    ) -> tuple[int, int, int]:
        bs = self.block_size(spec, dtype, tp)
        per_token = tokens = state = 0
        a = layer.attention
        if a is not None and a.kind is not AttentionKind.SHARED:
            per_token = self.attention_bytes_per_token(a, dtype, tp)
            tokens = self._blocks_for(a, ctx, bs) * bs
        if layer.cross is not None:  # CrossAttentionSpec: cdiv(encoder tokens, block_size) blocks per request
            state += (
                self.attention_bytes_per_token(layer.cross, dtype, tp) * self._blocks_for(layer.cross, ctx, bs) * bs
            )
        if layer.state is not None:
            raw = self.state_bytes(spec, layer.state, tp)
            attn_page = bs * min(
                (
                    self.attention_bytes_per_token(x.attention, dtype, tp)
                    for x, _ in spec.layer_groups()
                    if x.attention is not None and x.attention.kind is not AttentionKind.SHARED
                ),
                default=0,
            )
            blocks = MAMBA_BLOCKS_PREFIX_CACHING if attn_page and self.enable_prefix_caching else MAMBA_BLOCKS_PLAIN
            state += blocks * max(raw, attn_page)
        return per_token, tokens, state

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        notes = []
        if spec.has_state and any(layer.attention for layer, _ in spec.layer_groups()):
            notes.append(
                "vLLM pads each Mamba state to one attention page and, with prefix caching on (its default for "
                "hybrid models), keeps 2 state blocks per request"
            )
        if self.version == "0.11" and any(
            layer.attention is not None and layer.attention.kind is AttentionKind.CHUNKED for layer in spec.layers
        ):
            notes.append("vLLM 0.11 allocated chunked-local layers for the full context")
        return tuple(notes)

    # --- the pool vLLM logs ---------------------------------------------------------------------------

    def pool(
        self, spec: ArchSpec, *, available_bytes: int, max_model_len: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> Pool:
        """Blocks, logged token capacity and concurrency for `available_bytes` of KV memory per GPU."""
        from kvsize.engines.base import pipeline_stages

        stages = pipeline_stages(spec.num_layers, pp)
        stage_layers = [spec.layers] if len(stages) == 1 else [[spec.layers[i] for i in s] for s in stages]
        layouts = [self.layout(spec, layers, max_model_len, kv_dtype, tp) for layers in stage_layers]
        live = [lay for lay in layouts if lay.bytes_per_block]
        if not live or available_bytes <= 0:
            return Pool(0, 0, 0.0, 0)
        num_blocks = min(available_bytes // lay.bytes_per_block for lay in live)  # min over workers
        per_request = max(lay.blocks_per_request for lay in live)
        concurrency = num_blocks / per_request
        if self.version == "0.33":
            tokens = int(concurrency * max_model_len)
        else:  # <= 0.20: num_blocks // len(kv_cache_groups) x block_size
            groups = max(lay.groups for lay in live)
            tokens = num_blocks // groups * live[0].block_size
        return Pool(num_blocks, tokens, concurrency, max(num_blocks - 1, 0) // per_request)

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    shares_prefixes = True  # CacheConfig.enable_prefix_caching = True (vllm/config/cache.py)

    def prefix_sharing_rule(self) -> str:
        return (
            f"vLLM {self.version} prefix caching: whole blocks only, floor(hit / block) per layer, the partial "
            "block stays per request; sliding layers keep only the prefix blocks still inside the window at "
            "ctx, chunked layers those of the current chunk (v1/core/single_type_kv_cache_manager.py "
            "FullAttentionManager.find_longest_cache_hit, get_num_skipped_tokens, remove_skipped_blocks)"
        )

    def prefix_shared_tokens(self, spec: ArchSpec, attn: AttentionSpec, hit: int, ctx: int, block: int) -> int:
        from kvsize.engines.base import blocks_in_window

        # At a request's last step num_computed_tokens = ctx - 1: get_num_skipped_tokens frees the blocks before
        # max(0, ctx - W) (sliding) or (ctx - 1) // C x C (chunked local).
        if attn.kind is AttentionKind.SLIDING:
            assert attn.window is not None
            return blocks_in_window(hit, ctx, max(0, ctx - attn.window), block)
        if attn.kind is AttentionKind.CHUNKED and self.version != "0.11":
            assert attn.window is not None
            return blocks_in_window(hit, ctx, (ctx - 1) // attn.window * attn.window, block)
        if attn.kind in (AttentionKind.CROSS, AttentionKind.SHARED):
            return 0
        return hit // block * block
