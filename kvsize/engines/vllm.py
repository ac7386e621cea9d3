"""vLLM (v1 engine): paged blocks, per-kind admission bounds, KV-cache groups and the pool figures it logs.

Rules mirror vLLM 0.33 (default), 0.19 (0.12-0.19) and 0.11, read from each release's source (file and function
beside each rule; docs/engines.md tabulates them). The device, the scheduler settings and the user's switches
come from the engine context (`Engine.context`): the rules below depend on the GPU generation and memory tier.

- Page of one layer: block_size x kv_heads_per_rank x (head_size + head_size_v) x dtype bytes
  (v1/kv_cache_interface.py AttentionSpec.page_size_bytes); *_per_token_head dtypes add one fp32 scale per head
  row (TritonAttentionBackend.customize_spec); MLA: one latent of kv_lora_rank + qk_rope_head_dim, replicated on
  every TP rank; DeepSeek-V3.2 fp8_ds_mla 656 B and nvfp4_ds_mla 352 B per token, plus its indexer key of
  index_head_dim + 4 B per 128 (models/deepseek_v2.py Indexer / DeepseekV32IndexerCache).
- Blocks one request may need, per layer (max_memory_usage_bytes / page): full and MLA cdiv(max_model_len, bs);
  sliding window cdiv(min(W - 1 + in_flight, L), bs) + 1; chunked local cdiv(min(C + in_flight, L), bs); cross
  attention cdiv(max_num_encoder_input_tokens, bs); Mamba: "align" mode 2 + speculative + checkpoint blocks
  (0.33), 1 + speculative without prefix caching. in_flight comes from vllm_scheduler.py (GPU and version).
- Groups (v1/core/kv_cache_planning.py get_kv_cache_groups, formed over the whole model and projected onto each
  pipeline stage: get_global_kv_cache_groups / _project_kv_cache_groups_to_worker): one group for identical or
  same-type layers (UniformTypeKVCacheSpecs: a block spans every layer's page); mixed types get one page size
  (unify_kv_cache_spec_page_size) and are split into groups of group_size layers.
- Hybrid attention + Mamba: block_size = A x cdiv(state bytes, A x attention bytes per token), A the backend's
  alignment (x the prefill-checkpoint alignment in 0.33's align mode), and the state page padded to the attention
  page (Platform._align_hybrid_block_size; 0.19/0.11 HybridAttentionMambaModelConfig).
- Pool: num_blocks = available // bytes_per_block; concurrency = num_blocks / blocks per request; logged
  "GPU KV cache size" = int(concurrency x max_model_len) (0.33 get_max_concurrency_for_kv_cache_config;
  0.19 and older: num_blocks // groups x block_size).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from math import lcm
from typing import Literal

import msgspec

from kvsize.config import GEMMA3N_MODEL_TYPES, MIMO_V2_MODEL_TYPES
from kvsize.dtypes import KvDtype
from kvsize.engines.base import (
    CLASSIC_STATE_KINDS,
    Engine,
    UnsupportedArchitecture,
    cdiv,
    pipeline_stages,
    sliding_window_size_attention,
)
from kvsize.engines.context import Device, served_dtype_name
from kvsize.engines.vllm_releases import VLLM_RELEASES, VllmRules, measures_pool
from kvsize.engines.vllm_scheduler import SchedulerSettings, scheduler_settings
from kvsize.errors import UsageError
from kvsize.sizing import KvEstimate
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateKind, StateSpec

DEFAULT_BLOCK_SIZE = 16  # CacheConfig.DEFAULT_BLOCK_SIZE through 0.33 (VllmRules.default_block_size: 64 from 0.34)
HYBRID_ALIGN = 16  # smallest kernel block of FlashAttention / FlashInfer (MultipleOf(16))
KERNEL_BLOCK_MIN = HYBRID_ALIGN  # the smallest kernel block, which the skip-layer realignment steps by
# The device assumed when none is given: an H100 SXM (gpu_profiles/h100-sxm.yaml), whose API-server scheduler
# defaults are 8192 batched tokens and 1024 sequences in every modelled release (vllm_scheduler.py).
REFERENCE_DEVICE = Device(total_memory_bytes=85_520_809_984, name="NVIDIA H100 80GB HBM3", capability=(9, 0))

# kvsize's formats that each release's names map to (fp8 and fp8_inc are e4m3 on CUDA).
_KV_DTYPE_NAMES: dict[KvDtype, str] = {
    KvDtype.FP16: "float16",
    KvDtype.BF16: "bfloat16",
    KvDtype.FP8_E4M3: "fp8_e4m3",
    KvDtype.FP8_E5M2: "fp8_e5m2",
    KvDtype.NVFP4: "nvfp4",
    KvDtype.INT8_PER_TOKEN_HEAD: "int8_per_token_head",
    KvDtype.FP8_PER_TOKEN_HEAD: "fp8_per_token_head",
    KvDtype.INT4_PER_TOKEN_HEAD: "int4_per_token_head",
    KvDtype.FP8_DS_MLA: "fp8_ds_mla",
    KvDtype.NVFP4_DS_MLA: "nvfp4_ds_mla",
}
PER_TOKEN_HEAD = frozenset({KvDtype.INT8_PER_TOKEN_HEAD, KvDtype.FP8_PER_TOKEN_HEAD, KvDtype.INT4_PER_TOKEN_HEAD})
PER_TOKEN_HEAD_SCALE_BYTES = 4  # one fp32 scale after each head's K row and each V row
DS_MLA = frozenset({KvDtype.FP8_DS_MLA, KvDtype.NVFP4_DS_MLA})
# Gemma 4 (models/gemma4.py, Gemma4ForCausalLM / Gemma4ForConditionalGeneration) and Gemma 3n (models/gemma3n.py):
# the families whose per-layer shapes and KV-shared layers were read (VllmEngine.reads_layout).
GEMMA4_TYPES = ("gemma4", "gemma4_text")  # not gemma4_unified (Gemma4UnifiedForConditionalGeneration, 0.23+): not read
# The KV formats of the backends vLLM runs Gemma 4 on (supported_kv_cache_dtypes): v1/attention/backends/
# triton_attn.py TritonAttentionBackend (0.19-0.33, with the per-token-head formats once offered) and flash_attn.py
# FlashAttentionBackend (no fp8_e5m2).
TRITON_KV_DTYPES = frozenset({KvDtype.FP16, KvDtype.BF16, KvDtype.FP8_E4M3, KvDtype.FP8_E5M2, *PER_TOKEN_HEAD})
FLASH_ATTN_KV_DTYPES = frozenset({KvDtype.FP16, KvDtype.BF16, KvDtype.FP8_E4M3})
FA3_MAX_HEAD = 256  # models/config.py Gemma4Config: FlashAttention's head_size <= 256 kernel limit
FA4_MAX_HEAD = 512  # Gemma4Config (0.24+): FA4 only when the largest head size is at most 512
Gemma4Backend = Literal["default", "triton", "flash_attn"]
# What pages MiMo-V2's K 192 / V 128 heads (VllmRules.mimo_v2): V padded to K on the default backend, or K and V
# packed at their own widths on FLASH_ATTN_DIFFKV / TRITON_ATTN_DIFFKV.
MimoBackend = Literal["v_padded", "flash_attn_diffkv", "triton_attn_diffkv"]
# The KV formats each DiffKV backend takes (0.33 v1/attention/backends/triton_attn_diffkv.py
# supported_kv_cache_dtypes: auto, bfloat16, fp8, fp8_e4m3; FLASH_ATTN_DIFFKV inherits FlashAttentionBackend's
# 16-bit formats, its fp8 depending on the FlashAttention version, which kvsize has not read for DiffKV).
MIMO_KV_DTYPES: dict[MimoBackend, frozenset[KvDtype]] = {
    "flash_attn_diffkv": frozenset({KvDtype.FP16, KvDtype.BF16}),
    "triton_attn_diffkv": frozenset({KvDtype.BF16, KvDtype.FP8_E4M3}),
}
# vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS (0.33; 0.11 also lists plamo2).
FLOAT16_NOT_SUPPORTED = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4", "plamo2"})
MLLAMA_TYPES = frozenset({"mllama", "mllama_text_model"})
# models/qwen2.py: Qwen2DecoderLayer models and Qwen3DecoderLayer ones (Qwen3Model(Qwen2Model), Qwen3-VL's
# Qwen3LLMModel), which VllmRules.qwen_mixed_windows tells apart from 0.34.
QWEN2_DECODER_TYPES = frozenset({"qwen2", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text"})
QWEN3_DECODER_TYPES = frozenset({"qwen3", "qwen3_vl", "qwen3_vl_text"})
FLASHINFER_GDN_CHECKPOINT_ALIGNMENT = 64  # v1/attention/backends/gdn_attn.py (0.33)
MambaMode = Literal["none", "align", "all"]


def _sliding_window(spec: ArchSpec) -> int | None:
    """The window of a model's sliding layers (one window per model here: Qwen2-MoE's)."""
    return next(
        (
            layer.attention.window
            for layer, _ in spec.layer_groups()
            if layer.attention and layer.attention.kind is AttentionKind.SLIDING
        ),
        None,
    )


class CacheSpec(msgspec.Struct, frozen=True):
    """One KV-cache spec of one layer on one rank (vLLM's KVCacheSpec): what a group pages."""

    kind: str  # "full", "sliding", "chunked", "mla", "cross", "mamba"
    window: int | None
    block_size: int
    page: int  # bytes of one block of this layer, padding included
    blocks: int  # blocks one request may hold at max_model_len
    per_token: int = 0  # attention bytes per token (0 for Mamba)

    @property
    def type_key(self) -> tuple[str, int | None]:
        """Specs of one type share a group when they are the only type (UniformTypeKVCacheSpecs)."""
        return (self.kind, self.window)


class Unit(msgspec.Struct, frozen=True):
    """Identical layers: their cache specs, how many there are and one of them."""

    specs: tuple[CacheSpec, ...]
    count: int
    layer: LayerSpec
    skipped: bool  # listed by index in --kv-cache-dtype-skip-layers


class Group(msgspec.Struct, frozen=True):
    """A KV-cache group: its spec, its layers and the bytes of one block of it."""

    spec: CacheSpec
    size: int  # layers (sub-layers) in the group
    bytes: int  # one block of the group: the sum of its layers' pages
    layers: tuple[int, ...] = ()  # layer indices, when listed (pipeline parallelism)
    pages: tuple[int, ...] = ()


class Layout(msgspec.Struct, frozen=True):
    """How one pipeline stage's cache is paged."""

    block_size: int
    bytes_per_block: int
    blocks_per_request: int
    groups: int


class Pool(msgspec.Struct, frozen=True):
    """vLLM's start-up figures for a KV budget."""

    num_blocks: int
    kv_pool_tokens: int
    """The "GPU KV cache size: N tokens" log figure."""
    concurrency: float
    """The "Maximum concurrency for N tokens per request: X" log figure."""
    max_requests: int
    """Requests of max_model_len vLLM can admit at once (the null block is never handed out)."""


def parse_skip_layers(value: str | Iterable[str | int] | None) -> tuple[str, ...]:
    """--kv-cache-dtype-skip-layers: layer indices or `sliding_window`, comma-separated or repeated."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if item != "sliding_window" and not item.isdigit():
            raise UsageError(
                f"--kv-cache-dtype-skip-layers: '{item}' is neither a layer index nor 'sliding_window'",
                hint="Give layer indices (0,2,4) or sliding_window, as vLLM accepts.",
            )
        out.append(item)
    return tuple(out)


class VllmEngine(Engine):
    name = "vllm"
    title = "vLLM"
    releases = VLLM_RELEASES
    versions = tuple(era.name for era in reversed(VLLM_RELEASES.eras))
    serves_encoder_decoder = True  # Whisper only (check_supported)
    # LFM2's short convolution (models/lfm2.py Lfm2ForCausalLM, 0.10.2+, the release that runs state models on V1)
    sized_state_kinds = CLASSIC_STATE_KINDS | {StateKind.SHORT_CONV}

    def __init__(
        self,
        version: str | None = None,
        *,
        block_size: int | None = None,
        max_num_batched_tokens: int | None = None,
        max_num_seqs: int | None = None,
        enable_prefix_caching: bool | None = None,
        kv_cache_dtype_skip_layers: str | Sequence[str | int] | None = None,
        num_speculative_tokens: int | None = None,
    ) -> None:
        super().__init__(version)
        if block_size is not None and block_size < 1:  # as the SGLang and TensorRT-LLM engines refuse it
            raise UsageError(f"--block-size must be positive, got {block_size}")
        self.fixed_block_size = block_size
        self.batched_tokens_option = max_num_batched_tokens
        self.max_num_seqs_option = max_num_seqs
        self.prefix_caching_option = enable_prefix_caching
        self.skip_layers = parse_skip_layers(kv_cache_dtype_skip_layers)
        self.speculative_option = num_speculative_tokens

    # --- the deployment -------------------------------------------------------------------------------

    @property
    def rules(self) -> VllmRules:
        """The switches of the era that sizes this release (kvsize/engines/vllm_releases.py)."""
        assert self.era is not None
        rules: VllmRules = self.era.rules
        return rules

    @property
    def device(self) -> Device:
        """The GPU the rules are evaluated for: the context's, else the reference H100."""
        return self.context.device or REFERENCE_DEVICE

    @property
    def num_speculative_tokens(self) -> int:
        return self.speculative_option if self.speculative_option is not None else self.context.num_speculative_tokens

    def scheduler(
        self, max_model_len: int, tp: int = 1, pp: int = 1, spec: ArchSpec | None = None
    ) -> SchedulerSettings:
        """The scheduler vLLM runs for this model on the context's device (vllm_scheduler.scheduler_settings).
        Encoder-decoder models run without chunked prefill from 0.12 (ModelConfig.is_chunked_prefill_supported);
        the V2 model runner (pp + 1 batches) takes the models its era runs there (VllmRules.v2_runner)."""
        encoder_decoder = spec is not None and spec.is_encoder_decoder
        return scheduler_settings(
            self.version,
            self.device,
            max_model_len=max_model_len,
            usage=self.context.usage,
            tp=tp,
            pp=pp,
            max_num_batched_tokens=self.batched_tokens_option or self.context.max_num_batched_tokens,
            max_num_seqs=self.max_num_seqs_option or self.context.max_num_seqs,
            chunked_prefill=not encoder_decoder or self.rules.encoder_decoder_chunked,
            v2_runner=spec is None or _v2_runner_model(spec),
        )

    def max_running_requests(self, spec: ArchSpec, max_model_len: int, tp: int = 1, pp: int = 1) -> int | None:
        """max_num_seqs: the scheduler admits no request once that many run (v1/core/sched/scheduler.py
        Scheduler.schedule: `if len(self.running) == self.max_num_seqs: break`)."""
        return self.scheduler(max_model_len, tp, pp, spec).max_num_seqs

    def in_flight_tokens(self, max_model_len: int, pp: int = 1) -> int:
        """Tokens scheduled but not yet settled that a sliding window must keep (VllmConfig.max_in_flight_tokens):
        pp + 1 batches with async scheduling (0.33), one batch in 0.19 and older."""
        return self.scheduler(max_model_len, pp=pp).in_flight_tokens

    @property
    def rule(self) -> str:
        return (
            f"vLLM {self.version}: blocks of {self.fixed_block_size or self.default_block(mla=False)} tokens per layer "
            "(hybrid Mamba: enlarged to fit a state; MLA: the backend's block), sliding layers "
            "cdiv(min(W-1+in-flight, ctx), bs)+1 blocks, chunked cdiv(min(C+in-flight, ctx), bs), in-flight from "
            "the GPU's scheduler defaults, MLA latent replicated per TP rank, kv heads max(1, kv//tp); groups over "
            "the whole model, padded to a common size (vllm/v1/kv_cache_interface.py, "
            "v1/core/kv_cache_planning.py)"
        )

    # --- what vLLM serves -----------------------------------------------------------------------------

    def check_serves(self, spec: ArchSpec) -> None:
        if spec.model_type == "glm_moe_dsa" and not self.rules.serves_glm_moe_dsa:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} has no GlmMoeDsaForCausalLM (model_executor/models/registry.py; added in "
                "0.16.0): it cannot serve GLM-5",
                hint="Pass --engine-version 0.16 or later.",
            )
        if "CogVLMForCausalLM" in spec.architectures:  # CogVLM2 runs on its remote code only
            raise UnsupportedArchitecture(
                "vLLM has no CogVLMForCausalLM (model_executor/models/registry.py 0.8.5-0.33): it cannot serve CogVLM2",
                hint="Size it with --engine formula.",
            )
        r = self.rules
        if self._qwen_partly_sliding(spec) and (
            r.qwen_mixed_windows == "refused" or spec.model_type in QWEN2_DECODER_TYPES
        ):
            raise UnsupportedArchitecture(
                f"vLLM {self.version} refuses a {spec.model_type} model whose layers only partly slide: 'Sliding "
                "window for some but all layers is not supported' (models/qwen2.py, use_sliding_window with "
                "max_window_layers below num_hidden_layers)",
                hint="Set max_window_layers to num_hidden_layers (every layer slides) or use_sliding_window to false; "
                + ("vLLM 0.34+ serves Qwen3 with every layer full; " if r.qwen_mixed_windows == "refused" else "")
                + "or size it with --engine hf.",
            )
        if self._qwen2_moe_windows(spec) == "transformers_dependent":
            raise UnsupportedArchitecture(
                f"vLLM {self.version} pages a Qwen2-MoE model with use_sliding_window by the transformers release "
                "beside it: every layer slides under 4.x (no layer_types), none under 5.x (mixed layer_types: "
                "engine/arg_utils.py sets no window), and this release accepts either (requirements/common.txt)",
                hint="Pass --engine-version 0.19 (transformers 4.x) or 0.24 or later (5.x), or use --engine hf.",
            )
        if spec.model_type in MLLAMA_TYPES:
            why = (
                "serves Mllama (Llama 3.2 Vision) on its V0 engine only"
                if r.mllama == "v0"
                else ("cannot serve Mllama (Llama 3.2 Vision): vLLM removed the model after 0.10.2")
            )
            raise UnsupportedArchitecture(
                f"vLLM {self.version} {why}", hint="Use --engine hf or sglang, or size it with --engine formula."
            )
        self._check_not_removed(spec)
        if spec.has_state and not r.v1_state_models:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} runs Mamba and linear-attention models on its V0 engine, whose state cache "
                "(MambaCacheManager, sized by max_num_seqs outside the KV pool) kvsize does not model",
                hint="Use --engine-version 0.10.2 or later (V1 by default), or --engine formula.",
            )
        if spec.model_type == "whisper" and not r.v1_whisper:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} runs Whisper on its V0 engine, which kvsize does not model",
                hint="Use --engine-version 0.10.2 or later, or --engine formula.",
            )
        if self._sparse_mla(spec) and not r.sparse_mla:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} has no DeepSeek-V3.2 sparse attention (added in 0.11.0)",
                hint="Use --engine-version 0.11.0 or later.",
            )
        if self.skip_layers and r.skip_layers == "none":
            raise UsageError(
                f"vLLM {self.version} has no --kv-cache-dtype-skip-layers (added in 0.19.0)",
                hint="Drop it, or use --engine-version 0.19 or later.",
            )
        if spec.is_encoder_decoder and spec.model_type != "whisper":
            raise UnsupportedArchitecture(
                f"vLLM's v1 engine serves Whisper as its only encoder-decoder model, not {spec.model_type}",
                hint="Use --engine formula for T5 / BART style models (the engine-independent cache size).",
            )
        if spec.model_type in GEMMA3N_MODEL_TYPES and not r.serves_gemma3n:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} has no Gemma3nForConditionalGeneration (model_executor/models/registry.py; "
                "added in 0.9.2)",
                hint="Pass --engine-version 0.9.2 or later.",
            )
        if spec.model_type in GEMMA4_TYPES:
            self.gemma4_backend(spec)
        if spec.model_type in MIMO_V2_MODEL_TYPES:
            self.mimo_backend(spec)

    def reads_layout(self, spec: ArchSpec) -> bool:
        """Gemma 4's per-layer head sizes and KV heads (models/gemma4.py Gemma4DecoderLayer: global_head_dim, and
        num_global_key_value_heads under attention_k_eq_v; 0.33 reads the same from per_layer_config) and the
        KV-shared layers of Gemma 4 and Gemma 3n, which name a kv_sharing_target_layer_name and so get no
        KV-cache spec (v1/worker/gpu_model_runner.py get_kv_cache_spec). Layers of different pages are then paged
        by unify_kv_cache_spec_page_size (_unified), as any hybrid model's."""
        return spec.model_type in (*GEMMA4_TYPES, *GEMMA3N_MODEL_TYPES, *MIMO_V2_MODEL_TYPES)

    def mimo_backend(self, spec: ArchSpec) -> MimoBackend:
        """How vLLM pages MiMo-V2's attention (VllmRules.mimo_v2), refusing what kvsize has not read: releases
        without the model, platforms other than CUDA, and FLASH_ATTN_DIFFKV forced (0.20-0.23) where neither
        FlashAttention 3 nor 4 runs (0.24's own test: fa_utils.get_flash_attn_version, 3 on 9.x, 4 on 10.x)."""
        mode = self.rules.mimo_v2
        if mode == "absent":
            raise UnsupportedArchitecture(
                f"vLLM {self.version} has no MiMoV2FlashForCausalLM (model_executor/models/registry.py; added "
                "in 0.14.0)",
                hint="Pass --engine-version 0.14 or later.",
            )
        dev = self.device
        if dev.platform != "cuda" or dev.capability is None:
            raise UnsupportedArchitecture(
                f"vLLM {self.version}: kvsize has not read which attention backend MiMo-V2 runs on for "
                f"{dev.name or 'this device'} (it has read NVIDIA GPUs of known compute capability)",
                hint="Pick an NVIDIA --gpu, or use --engine formula / hf.",
            )
        if mode == "v_padded":
            return "v_padded"
        fa = dev.capability[0] in (9, 10)
        if mode == "diffkv_fa" and not fa:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} forces FLASH_ATTN_DIFFKV on MiMo-V2 (models/mimo_v2*.py), which needs "
                f"FlashAttention 3 or 4; kvsize has not read what runs on compute capability "
                f"{dev.capability[0]}.{dev.capability[1]}",
                hint="Use --engine-version 0.24 or later (TRITON_ATTN_DIFFKV there), or a Hopper or B200-class GPU.",
            )
        return "flash_attn_diffkv" if fa else "triton_attn_diffkv"

    def served_attention(self, spec: ArchSpec, attn: AttentionSpec) -> AttentionSpec:
        """A layer's attention as vLLM caches it. MiMo-V2 (models/mimo_v2_flash.py, mimo_v2.py): its sliding layers
        take `sliding_window_size` as the window (kvsize's spec holds transformers' sliding_window_size + 1), and
        through 0.19 V is padded to K's width (VllmRules.mimo_v2). Every other model: as parsed."""
        all_full = self.rules.qwen_mixed_windows == "qwen3_all_full" and spec.model_type in QWEN3_DECODER_TYPES
        if attn.kind is AttentionKind.SLIDING and all_full and self._qwen_partly_sliding(spec):
            return msgspec.structs.replace(attn, kind=AttentionKind.FULL, window=None)
        qwen2_moe = self._qwen2_moe_windows(spec)
        if qwen2_moe == "every_layer" and attn.kind is AttentionKind.FULL:
            return msgspec.structs.replace(attn, kind=AttentionKind.SLIDING, window=_sliding_window(spec))
        if qwen2_moe == "none" and attn.kind is AttentionKind.SLIDING:
            return msgspec.structs.replace(attn, kind=AttentionKind.FULL, window=None)
        if spec.model_type not in MIMO_V2_MODEL_TYPES or attn.kind is AttentionKind.SHARED:
            return attn
        attn = sliding_window_size_attention(spec, attn)
        if self.rules.mimo_v2 == "v_padded" and attn.head_dim_v < attn.head_dim:
            attn = msgspec.structs.replace(attn, head_dim_v=attn.head_dim)
        return attn

    def _check_not_removed(self, spec: ArchSpec) -> None:
        """Refuse an architecture vLLM removed before this release (vllm_releases.REMOVED_ARCHITECTURES)."""
        from kvsize.engines.vllm_releases import REMOVED_ARCHITECTURES

        for arch in spec.architectures:
            last = REMOVED_ARCHITECTURES.get(arch)
            if last is None:
                continue
            from packaging.version import Version  # only for a removed architecture: most runs never load it

            if Version(self.version.split("+")[0]) > Version(last):
                raise UnsupportedArchitecture(
                    f"vLLM {self.version} no longer serves {arch}: it was supported until v{last} "
                    "(model_executor/models/registry.py _PREVIOUSLY_SUPPORTED_MODELS)",
                    hint=f"Pass --engine-version {last} or older, or size it with --engine hf or formula.",
                )

    def _qwen2_moe_windows(self, spec: ArchSpec) -> Literal["every_layer", "transformers_dependent", "none"] | None:
        """How this release pages a Qwen2-MoE model whose layers partly slide (VllmRules.qwen2_moe_windows; a
        config that lists its own mixed layer_types gets no window in any release); None for any other model."""
        if spec.model_type != "qwen2_moe":
            return None
        kinds = {layer.attention.kind for layer, _ in spec.layer_groups() if layer.attention is not None}
        if AttentionKind.SLIDING not in kinds or AttentionKind.FULL not in kinds:
            return None
        return "none" if spec.lists_layer_types else self.rules.qwen2_moe_windows

    @staticmethod
    def _qwen_partly_sliding(spec: ArchSpec) -> bool:
        """A Qwen2-family model with sliding and full layers (models/qwen2.py's mixed layer_types)."""
        if spec.model_type not in QWEN2_DECODER_TYPES | QWEN3_DECODER_TYPES:
            return False
        kinds = {layer.attention.kind for layer, _ in spec.layer_groups() if layer.attention is not None}
        return AttentionKind.SLIDING in kinds and AttentionKind.FULL in kinds

    def gemma4_backend(self, spec: ArchSpec) -> Gemma4Backend:
        """The attention backend vLLM runs a Gemma 4 model on (VllmRules.gemma4), refusing the paths kvsize has
        not read. Both kvsize-modelled backends take any multiple of 16 tokens as a kernel block
        (get_supported_kernel_block_sizes: MultipleOf(16)), so every layer starts from the default block (16, 64 from
        0.34: VllmRules.default_block_size)."""
        heads = {
            a.head_dim
            for layer, _ in spec.layer_groups()
            if (a := layer.attention) is not None and a.kind is not AttentionKind.SHARED
        }
        mode = self.rules.gemma4
        if mode == "absent":
            raise UnsupportedArchitecture(
                f"vLLM {self.version} has no Gemma4ForCausalLM (model_executor/models/registry.py; added in 0.19.0)",
                hint="Pass --engine-version 0.19 or later.",
            )
        if len(heads) <= 1:
            return "default"  # Gemma4Config changes nothing when the head sizes agree
        top = max(heads)
        dev = self.device
        if mode == "triton":
            # 0.19-0.23 Gemma4Config: TRITON_ATTN on every platform when the sizes differ and one exceeds 256
            if top <= FA3_MAX_HEAD:
                return "default"
            if dev.platform in ("cuda", "rocm"):
                return "triton"
        elif dev.platform == "cuda" and dev.capability is not None:
            # 0.24+ Gemma4Config: FA4 where flash_attn_interface._is_fa4_supported (capability 9.x, 10.x, 11.x)
            # and the largest head is at most 512, else TRITON_ATTN
            if dev.capability[0] not in (9, 10, 11) or top > FA4_MAX_HEAD:
                return "triton"
            if dev.capability[0] == 9:
                return "flash_attn"
            raise UnsupportedArchitecture(
                f"vLLM {self.version} runs Gemma 4 on FlashAttention 4 on {dev.name or 'this GPU'} "
                f"(compute capability {dev.capability[0]}.x; models/config.py Gemma4Config), where the platform "
                "puts FlashInfer first for the sliding layers and FA4 pages head size 256 in 128 tokens from 0.29 "
                "(flash_attn.py _get_fa4_hd256_block_size): kvsize has not modelled those blocks",
                hint="Use --engine-version 0.23 (TRITON_ATTN), a Hopper or Ampere --gpu, or --engine formula / hf.",
            )
        raise UnsupportedArchitecture(
            f"vLLM {self.version}: kvsize has not read which attention backend Gemma 4 runs on for "
            f"{dev.name or dev.platform} (models/config.py Gemma4Config chooses by platform and compute capability)",
            hint="Pass --gpu with a CUDA card, or use --engine formula / hf.",
        )

    def check_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:
        """Only the --kv-cache-dtype values the release offers (config/cache.py CacheDType), plus the dtype
        the model is served in (what `auto` resolves to)."""
        offered = self.rules.kv_dtypes
        name = _KV_DTYPE_NAMES.get(dtype)
        if dtype == self.served_dtype(spec) or (name is not None and name in offered):
            if dtype in DS_MLA and not self._sparse_mla(spec):
                raise UnsupportedArchitecture(
                    f"vLLM's {name} KV cache is DeepSeek-V3.2's sparse-MLA format; {spec.model_type} has no "
                    "sparse MLA indexer",
                    hint="Choose fp8, bfloat16 or auto.",
                )
            if dtype in PER_TOKEN_HEAD and self._mla(spec):
                raise UnsupportedArchitecture(
                    f"vLLM's {name} KV cache (Triton attention backend) does not serve MLA models",
                    hint="Choose fp8, bfloat16 or auto.",
                )
            if spec.model_type in GEMMA4_TYPES:
                self._check_gemma4_dtype(spec, dtype)
            if spec.model_type in MIMO_V2_MODEL_TYPES:
                self._check_mimo_dtype(spec, dtype)
            return
        raise UnsupportedArchitecture(
            f"vLLM {self.version} has no {dtype.value} KV cache; --kv-cache-dtype offers {', '.join(offered)}",
            hint="Choose one of those (kvsize names: fp16, bf16, fp8_e4m3, fp8_e5m2, ...), or another --engine.",
        )

    def _check_mimo_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:
        served = self.served_dtype(spec)
        if not self.rules.mimo_v2_cache_config:
            if dtype != served:
                raise UsageError(
                    f"vLLM {self.version} ignores --kv-cache-dtype for MiMo-V2: its attention is built without the "
                    'cache config (models/mimo_v2*.py; Attention keeps kv_cache_dtype "auto"), so the cache is '
                    f"{served.value} (the cache config reaches it from 0.32.0)",
                    hint=f"Drop --kv-dtype (or pass {served.value}), or use --engine-version 0.32 or later.",
                )
            return
        backend = self.mimo_backend(spec)
        offered = MIMO_KV_DTYPES.get(backend)
        if offered is not None and dtype not in offered:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} runs MiMo-V2 on {backend.upper()} here (models/mimo_v2.py), and kvsize has "
                f"read no {dtype.value} KV cache for it",
                hint="Choose " + " or ".join(sorted(d.value for d in offered)) + ".",
            )

    def _check_gemma4_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:
        backend = self.gemma4_backend(spec)
        if backend == "default":
            return
        offered = TRITON_KV_DTYPES if backend == "triton" else FLASH_ATTN_KV_DTYPES
        label = "TRITON_ATTN" if backend == "triton" else "FLASH_ATTN"
        if dtype not in offered:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} runs Gemma 4 on {label} here (models/config.py Gemma4Config), which has no "
                f"{dtype.value} KV cache (supported_kv_cache_dtypes); kvsize has not read the blocks of a backend "
                "vLLM would pick instead",
                hint="Choose auto, bf16, fp16 or fp8_e4m3.",
            )
        largest = max(a.head_dim for layer, _ in spec.layer_groups() if (a := layer.attention) is not None)
        sm90_fp8_pages = self.rules.gemma4 == "fa4_sm90_fp8_pages" and largest == FA4_MAX_HEAD
        if backend == "flash_attn" and dtype is KvDtype.FP8_E4M3 and sm90_fp8_pages:
            raise UnsupportedArchitecture(
                f"vLLM {self.version} pages an fp8 cache of Gemma 4's head-size-512 layers in 64 tokens on "
                "Hopper (flash_attn.py _get_sm90_fa4_fp8_kv_block_size), which kvsize has not modelled",
                hint="Use --engine-version 0.30, a 16-bit --kv-dtype, or --engine formula / hf.",
            )

    def check_parallel(self, spec: ArchSpec, tp: int, pp: int) -> None:
        """ModelConfig.verify_with_parallel_config: attention heads must divide over tp; pp may not exceed the
        layers (get_pp_indices); Mamba state shards must divide (MambaStateShapeCalculator uses `divide`)."""
        heads = spec.num_attention_heads
        if heads is not None and heads % tp:
            raise UsageError(
                f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tp})",
                hint="vLLM refuses this split (ModelConfig.verify_with_parallel_config); choose a --tp that divides "
                f"{heads}.",
            )
        # QKVParallelLinear (model_executor/layers/linear.py): KV heads split when tp < their number
        # (divide(total_num_kv_heads, tp)), replicated when tp >= it (divide(tp, total_num_kv_heads)).
        for kv in sorted(
            {
                layer.attention.num_kv_heads
                for layer, _ in spec.layer_groups()
                if layer.attention is not None and layer.attention.kind not in (AttentionKind.MLA, AttentionKind.SHARED)
            }
        ):
            if (tp < kv and kv % tp) or (tp >= kv and tp % kv):
                raise UsageError(
                    f"vLLM cannot split {kv} KV heads over tensor parallel size {tp}: it divides the KV heads "
                    "when tp is smaller and replicates them when tp is larger, and both must divide evenly",
                    hint=f"Choose a --tp that divides {kv} or that {kv} divides (QKVParallelLinear).",
                )
        if pp > spec.num_layers:
            raise UsageError(f"--pp {pp} exceeds the model's {spec.num_layers} layers")
        if pp > 1 and spec.model_type in GEMMA3N_MODEL_TYPES:
            raise UsageError(
                "vLLM's Gemma 3n does not support pipeline parallelism (models/gemma3n.py implements no SupportsPP; "
                "ModelConfig.verify_with_parallel_config)",
                hint="Drop --pp, or use --tp.",
            )
        if pp > 1 and any(layer.attention and layer.attention.kind is AttentionKind.SHARED for layer in spec.layers):
            raise UnsupportedArchitecture(
                "kvsize has not read how vLLM serves KV-shared layers whose target layer lies on another pipeline "
                "stage (kv_sharing_target_layer_name)",
                hint="Drop --pp, or use --tp.",
            )
        for state in {layer.state for layer, _ in spec.layer_groups() if layer.state is not None}:
            if state.kind is StateKind.MAMBA2 and state.ssm_shape[0] % tp:
                raise UsageError(
                    f"vLLM shards the {state.ssm_shape[0]} Mamba heads over tp: {tp} does not divide them",
                    hint="Choose a --tp that divides the Mamba head count (MambaStateShapeCalculator).",
                )

    # --- dtypes -----------------------------------------------------------------------------------------

    def served_dtype(self, spec: ArchSpec) -> KvDtype:
        """The dtype vLLM serves the model in with --dtype auto (config/model.py _resolve_auto_dtype): float32
        checkpoints are cast to the platform's first dtype (bfloat16 from compute capability 8.0, float16 on
        Volta/Turing); a dtype the GPU lacks falls back to it; gemma2/gemma3/glm4 never run in float16.
        --dtype half / bfloat16 / float32 (EngineContext.dtype) is served as given (_get_and_verify_dtype), or
        refused where vLLM refuses it: float16 for those models (_check_valid_dtype), bfloat16 below compute
        capability 8.0 (platforms/cuda.py check_if_supports_dtype)."""
        model = KvDtype(spec.model_dtype) if spec.model_dtype in KvDtype._value2member_map_ else KvDtype.BF16
        dev = self.device
        old_cuda = dev.platform == "cuda" and dev.capability is not None and dev.capability < (8, 0)
        given = served_dtype_name(self.context.dtype)
        if given is not None:
            if given == KvDtype.FP16.value and spec.model_type in FLOAT16_NOT_SUPPORTED:
                raise UsageError(
                    f"vLLM refuses --dtype {self.context.dtype} for {spec.model_type}: 'does not support float16' "
                    "(config/model.py _check_valid_dtype)",
                    hint="Use --dtype bfloat16, float32 or auto.",
                )
            if given == KvDtype.BF16.value and old_cuda:
                raise UsageError(
                    f"vLLM refuses --dtype bfloat16 on {dev.name or 'this GPU'}: 'Bfloat16 is only supported on GPUs "
                    "with compute capability of at least 8.0' (platforms/cuda.py check_if_supports_dtype)",
                    hint="Use --dtype half (what auto picks there).",
                )
            return KvDtype(given)
        supported = [KvDtype.FP16, KvDtype.FP32] if old_cuda else [KvDtype.BF16, KvDtype.FP16, KvDtype.FP32]
        if spec.model_type in FLOAT16_NOT_SUPPORTED:
            supported.remove(KvDtype.FP16)
        preferred = supported[0]
        if model is KvDtype.FP32:
            model = preferred
        return model if model in supported else preferred

    def run_dtype(self, spec: ArchSpec) -> str:
        return self.served_dtype(spec).value

    def auto_kv_dtype(self, spec: ArchSpec, chosen: KvDtype) -> KvDtype:
        """--kv-cache-dtype auto: the served dtype (float32 checkpoints run in 16 bits); DeepSeek-V3.2 on 0.11
        uses fp8_ds_mla (models/config.py DeepseekV32ForCausalLM). A config's fp8 KV scheme is kept."""
        if chosen in (KvDtype.FP8_E4M3, KvDtype.FP8_E5M2):
            return chosen
        cap = self.device.capability if self.device.platform == "cuda" else None
        if self.rules.glm_dsa_fp8_on_sm100 and spec.model_type == "glm_moe_dsa" and cap is not None and cap[0] == 10:
            return KvDtype.FP8_E4M3  # GlmMoeDsaForCausalLM.verify_and_update_config (VllmRules.glm_dsa_fp8_on_sm100)
        if self.rules.sparse_mla_auto_ds_mla and self._sparse_mla(spec):
            return KvDtype.FP8_DS_MLA
        return self.served_dtype(spec)

    def state_dtypes(self, spec: ArchSpec, state: StateSpec) -> tuple[KvDtype, KvDtype]:
        """MambaStateDtypeCalculator._mamba_state_dtype: the conv state in the served dtype (mamba_cache_dtype
        auto); the SSM state likewise unless mamba_ssm_cache_dtype is set: NemotronH takes the config's
        mamba_ssm_cache_dtype or float32 in 0.33, float16 in 0.19 (NemotronHForCausalLMConfig; 0.11 has no such
        hook), Qwen3.5 the config's mamba_ssm_dtype (Qwen3_5ForConditionalGenerationConfig, 0.19+)."""
        conv = self.served_dtype(spec)
        ssm = conv
        default = self.rules.nemotron_ssm_default
        if spec.model_type in ("nemotron_h", "nemotron_h_puzzle") and default is not None:
            ssm = _torch_dtype(state.ssm_dtype) or default
        elif spec.model_type.startswith("qwen3_5") and self.rules.qwen35_ssm_dtype and state.ssm_dtype:
            ssm = _torch_dtype(state.ssm_dtype) or conv
        return conv, ssm

    def layer_dtype(self, spec: ArchSpec, layer: LayerSpec, dtype: KvDtype) -> KvDtype:
        """--kv-cache-dtype-skip-layers: listed layer indices, or every sliding-window layer, keep the served
        dtype (models/layers/attention/attention.py Attention.__init__: kv_cache_dtype = "auto")."""
        if not self.skip_layers or layer.attention is None:
            return dtype
        sliding = layer.attention.kind is AttentionKind.SLIDING and "sliding_window" in self.skip_layers
        return self.served_dtype(spec) if sliding or str(layer.index) in self.skip_layers else dtype

    # --- per layer, per rank ----------------------------------------------------------------------------

    def attention_bytes_per_token(self, attn: AttentionSpec, dtype: KvDtype, tp: int = 1) -> int:
        if attn.kind is AttentionKind.MLA:
            return self._mla_bytes_per_token(attn, dtype, tp)
        if dtype is KvDtype.NVFP4 and attn.kind is AttentionKind.SLIDING and not self.rules.nvfp4_sliding_packed:
            # 0.20.x SlidingWindowSpec.real_page_size_bytes: get_dtype_size(uint8) = 1 B per element, unpacked.
            return self.kv_heads_per_rank(attn, tp) * (attn.head_dim + attn.head_dim_v)
        if dtype in PER_TOKEN_HEAD and attn.kind is not AttentionKind.SHARED:
            # TritonAttentionBackend.customize_spec: (hs_k + hs_v) x 1 B (int4: halves) + 2 fp32 scales per head.
            heads = self.kv_heads_per_rank(attn, tp)
            return heads * (
                dtype.storage.bytes_for(attn.head_dim)
                + dtype.storage.bytes_for(attn.head_dim_v)
                + 2 * PER_TOKEN_HEAD_SCALE_BYTES
            )
        return super().attention_bytes_per_token(attn, dtype, tp)

    def _mla_bytes_per_token(self, attn: AttentionSpec, dtype: KvDtype, tp: int = 1) -> int:
        """MLA latent bytes (replicated on every rank), plus DeepSeek-V3.2's indexer key."""
        rope = attn.qk_rope_head_dim or 0
        nope = attn.head_dim - rope
        if dtype is KvDtype.FP8_DS_MLA or (
            dtype is KvDtype.FP8_E4M3 and attn.index_head_dim and self._sparse_backend(attn, dtype, tp)[1]
        ):
            # FlashMLA sparse "FP8 with scale": NoPE in e4m3, one fp32 scale per 128, RoPE in bf16 (512 + 16 + 128).
            latent = nope + cdiv(nope, 128) * 4 + rope * 2
        elif dtype is KvDtype.NVFP4_DS_MLA:
            # NoPE e2m1 (2 per byte) + one e4m3 scale per 16 + RoPE in e4m3 (256 + 32 + 64).
            latent = cdiv(nope, 2) + cdiv(nope, 16) + rope
        else:
            latent = self.row_bytes(attn.head_dim, dtype)
        if attn.index_head_dim and not (attn.index_shared and self.rules.dsa_shared_layers_unindexed):
            # Indexer.__init__: DeepseekV32IndexerCache(head_dim = index_head_dim + index_head_dim // 128 * 4,
            # dtype uint8): fp8 keys with one fp32 scale per 128 (132 B at index_head_dim 128). Before 0.24 a
            # GLM-5.2 layer that shares a top-k builds its Indexer (and this cache) all the same.
            latent += attn.index_head_dim + attn.index_head_dim // 128 * 4
        return latent

    def _sparse_backend(self, attn: AttentionSpec, dtype: KvDtype, tp: int) -> tuple[int, bool]:
        """(block size, fp8 in FlashMLA sparse's 656 B layout) of DeepSeek-V3.2's sparse MLA.

        The block is 64 tokens in every release: 0.11-0.17 set it (DeepseekV32ForCausalLM.verify_and_update_config);
        from 0.18 the indexer cache's backend decides it (v1/attention/backends/mla/indexer.py
        DeepseekV32IndexerBackend.get_supported_kernel_block_sizes: [64] on CUDA), as the first attention layer a
        model registers (Platform.update_block_size_for_backend, 0.18-0.30: the indexer is built before the MLA
        layer in models/deepseek_v2.py DeepseekV2MLAAttention) and then as the least common multiple over every
        layer's backend (_preferred_block_size_for_backends, 0.31+): FlashInfer sparse-MLA's MultipleOf(32) takes it.
        fp8: fp8_ds_mla on every GPU through 0.17; from 0.18 only on FLASHMLA_SPARSE (mla_attention.py
        _canonicalize_sparse_mla_kv_cache_dtype): sm_10x with fp8 runs FlashInfer-MLA sparse in standard fp8, and
        in 16 bits FlashInfer sparse at <= 16 heads per rank (FA4 sparse from 0.33), FlashMLA sparse above."""
        if self.rules.sparse_fp8 == "config":
            return 64, True
        dev = self.device
        if dev.platform == "cuda" and dev.capability is not None and dev.capability[0] == 10:
            if dtype in (KvDtype.FP8_E4M3, KvDtype.FP8_E5M2):
                return 64, False
            heads = (attn.num_query_heads or 128) // tp  # MLAAttention.num_heads: the heads on this rank
            if heads <= 16:
                return 64, False
        return 64, True

    def state_bytes(self, spec: ArchSpec, state: StateSpec, tp: int = 1) -> int:
        """MambaStateShapeCalculator (model_executor/layers/mamba/mamba_utils.py): Mamba-2 conv over
        intermediate + 2 x n_groups x d_state channels with n_groups replicated up to tp when tp does not
        divide them (extra_groups_for_head_shards), heads split over tp; conv keeps kernel - 1 + speculative
        columns (Mamba-2, GDN; 0.19+). Gated DeltaNet: conv over 2 x key_dim + value_dim, state
        v_heads/tp x v_dim x k_dim."""
        conv_dtype, ssm_dtype = self.state_dtypes(spec, state)
        spec_cols = self.num_speculative_tokens if self.rules.speculative_conv_mamba2 else 0
        if state.kind is StateKind.MAMBA2 and state.n_groups:
            heads, head_dim, d_state = state.ssm_shape
            intermediate = state.conv_channels - 2 * state.n_groups * d_state
            groups = state.n_groups + (0 if state.n_groups % tp == 0 else tp - state.n_groups)
            conv = cdiv(intermediate + 2 * groups * d_state, tp) * (state.conv_kernel - 1 + spec_cols)
            ssm = cdiv(heads, tp) * head_dim * d_state
        elif state.kind is StateKind.SHORT_CONV:
            # short_conv_state_shape(tp, conv_dim, conv_L_cache): divide(conv_dim, tp) x (L_cache - 1); lfm2.py passes
            # no speculative columns (0.10.2 .. 0.33), and there is no recurrent state. conv_dim = hidden_size =
            # heads x head_dim, so the query-head check already makes tp divide it
            return conv_dtype.storage.bytes_for(state.conv_channels // tp * (state.conv_kernel - 1))
        elif state.kind is StateKind.GATED_DELTANET:  # gated_delta_net_state_shape: speculative columns since 0.10.2
            conv = cdiv(state.conv_channels, tp) * (state.conv_kernel - 1 + self.num_speculative_tokens)
            ssm = cdiv(state.ssm_shape[0], tp) * state.ssm_elements // state.ssm_shape[0]
        else:
            return super().state_bytes(spec, state, tp)
        return conv_dtype.storage.bytes_for(conv) + ssm_dtype.storage.bytes_for(ssm)

    @property
    def measured_sizing(self) -> bool:
        """Whether this release sizes the pool after warm-up on this platform (VllmRules.kv_sizing)."""
        return measures_pool(self.rules, self.device.platform)

    def default_block(self, mla: bool) -> int:
        """The block a backend takes from CacheConfig's default (VllmRules.default_block_size): ROCm's
        ROCM_ATTN keeps 16 for non-MLA layers in every release (rocm_attn.py get_preferred_block_size, 0.34)."""
        if not mla and self.device.platform == "rocm":
            return DEFAULT_BLOCK_SIZE
        return self.rules.default_block_size

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        bs = self.fixed_block_size or self.default_block(attn.kind is AttentionKind.MLA)
        return self._attention_blocks(attn, ctx, bs, 1, None) * bs

    # --- the rules that depend on the model ---------------------------------------------------------------

    @staticmethod
    def _mla(spec: ArchSpec) -> bool:
        return any(
            layer.attention is not None and layer.attention.kind is AttentionKind.MLA
            for layer, _ in spec.layer_groups()
        )

    @staticmethod
    def _mla_layers(spec: ArchSpec) -> list[AttentionSpec]:
        return [
            layer.attention
            for layer, _ in spec.layer_groups()
            if layer.attention is not None and layer.attention.kind is AttentionKind.MLA
        ]

    @staticmethod
    def _sparse_mla(spec: ArchSpec) -> bool:
        return any(layer.attention is not None and layer.attention.index_head_dim for layer, _ in spec.layer_groups())

    @staticmethod
    def _attends(spec: ArchSpec) -> bool:
        return any(
            layer.attention is not None and layer.attention.kind is not AttentionKind.SHARED
            for layer, _ in spec.layer_groups()
        )

    def prefix_caching(self, spec: ArchSpec) -> bool:
        """Whether prefix caching is on: the user's --enable-prefix-caching / --no-enable-prefix-caching, else
        ModelConfig.is_prefix_caching_supported (0.33: decoder and hybrid models yes, attention-free and
        encoder-decoder no; 0.19: hybrids no). 0.11 turns it off for every Mamba model whatever the user says
        (models/config.py MambaModelConfig)."""
        chosen = self.prefix_caching_option
        if chosen is None:
            chosen = self.context.enable_prefix_caching
        r = self.rules
        if spec.has_state and r.hybrid_prefix_caching == "forced_off":
            return False
        if (
            spec.has_state
            and r.mamba_cache_modes == "all_when_caching"
            and (spec.model_type not in r.mamba_all_mode_models)
        ):
            return False  # 0.11.1-0.14.1 MambaModelConfig: only SupportsMambaPrefixCaching models keep it
        if chosen is not None:
            return chosen
        if spec.is_encoder_decoder:
            return False
        if spec.has_state:
            if not self._attends(spec):
                return r.attention_free_prefix_caching and spec.model_type in r.mamba_all_mode_models
            return r.hybrid_prefix_caching == "on_by_default"
        return True

    def mamba_mode(self, spec: ArchSpec) -> MambaMode:
        """CacheConfig.mamba_cache_mode (models/config.py MambaModelConfig): "align" with prefix caching (0.19:
        "all" for SupportsMambaPrefixCaching models), "none" without."""
        r = self.rules
        if not spec.has_state or not self.prefix_caching(spec):
            return "none"
        if r.mamba_cache_modes == "all_when_caching":
            return "all"  # MambaSpec cdiv(max_model_len, block) with the attention block
        speculating = self.num_speculative_tokens > 0
        if spec.model_type in r.mamba_all_mode_models and (r.all_mode_under_speculation or not speculating):
            return "all"
        return "align"

    def _gdn_checkpoints(self, spec: ArchSpec) -> bool:
        """0.33 align mode: Gated DeltaNet layers export prefill checkpoints only with the FlashInfer GDN prefill
        kernel (qwen_gdn_linear_attn.py _resolve_gdn_prefill_backend: Hopper, capability 9.0; Blackwell needs
        CUDA 13 runtimes, which kvsize does not assume) and only when every Mamba layer can
        (get_mamba_prefill_checkpoint_alignment)."""
        kinds = {layer.state.kind for layer, _ in spec.layer_groups() if layer.state is not None}
        return (
            self.rules.checkpoint_gdn
            and kinds == {StateKind.GATED_DELTANET}
            and self.mamba_mode(spec) == "align"
            and self.device.platform == "cuda"
            and self.device.capability == (9, 0)
        )

    def mamba_blocks(self, spec: ArchSpec, state: StateSpec, ctx: int, bs: int) -> int:
        """MambaSpec.max_memory_usage_bytes / page: "align" 2 + speculative + prefill-checkpoint blocks (0.33;
        mamba_mixer2 declares one checkpoint block, so Mamba-2 hybrids hold 3; GDN one with the FlashInfer
        prefill), "align" 2 + speculative (0.19); "all" cdiv(max_model_len, block) (0.19); otherwise 1 +
        speculative (0.11: 1)."""
        r = self.rules
        spec_blocks = self.num_speculative_tokens if r.speculative_blocks else 0
        mode = self.mamba_mode(spec)
        if mode == "align":
            mixer2 = state.kind is StateKind.MAMBA2 and r.checkpoint_mixer2
            gdn = state.kind is StateKind.GATED_DELTANET and self._gdn_checkpoints(spec)
            return 2 + spec_blocks + (1 if mixer2 or gdn else 0)
        if mode == "all":
            return cdiv(ctx, bs) + (spec_blocks if r.all_mode_speculative_blocks else 0)
        return 1 + spec_blocks

    # --- block sizes ------------------------------------------------------------------------------------

    def _attention_dtype_bytes(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        """Bytes one token costs in one attention layer, model-wide (FullAttentionSpec(block_size=1, the model's
        KV heads per rank and head size)): the smallest page of the model's attention layers."""
        return min(
            (
                self.attention_bytes_per_token(
                    self.served_attention(spec, layer.attention), self.layer_dtype(spec, layer, dtype), tp
                )
                for layer, _ in spec.layer_groups()
                if layer.attention is not None and layer.attention.kind is not AttentionKind.SHARED
            ),
            default=0,
        )

    def mla_block_size(self, spec: ArchSpec, dtype: KvDtype, tp: int = 1) -> int:
        """The MLA backend's block (0.33 / 0.19 platforms/cuda.py _get_backend_priorities and each backend's
        supported kernel blocks): DeepSeek-V3.2 sparse MLA 64 (FlashMLA sparse); Blackwell (sm_10x) FlashInfer-MLA
        32; Hopper FlashAttention-MLA 16 in 16-bit, FlashMLA 64 for fp8 (FlashAttention-MLA has no fp8); others
        Triton MLA 16. 0.11 (platforms/cuda.py check_and_update_config): 128 (CUTLASS MLA) on capability 10.0,
        FlashMLA 64 on Hopper, 64 for sparse MLA."""
        dev = self.device
        cap = dev.capability if dev.platform == "cuda" else None
        mode = self.rules.mla_blocks
        sparse = next(
            (layer.attention for layer, _ in spec.layer_groups() if layer.attention and layer.attention.index_head_dim),
            None,
        )
        if sparse is not None:
            return self._sparse_backend(sparse, dtype, tp)[0]
        default = self.default_block(mla=True)
        hopper = 64 if cap is not None and cap[0] == 9 else default  # FlashMLA on Hopper
        if mode == "hopper64":
            return hopper
        if mode in ("cutlass100", "cutlass10x"):
            blackwell = cap == (10, 0) if mode == "cutlass100" else cap is not None and cap[0] == 10
            return 128 if blackwell else hopper  # CUTLASS MLA
        if mode == "flashinfer64":
            if cap is not None and cap[0] == 10:
                nope = next((a.qk_nope_head_dim for a in self._mla_layers(spec)), None)
                return 64 if nope == 128 else 128  # FlashInfer-MLA only for qk_nope_head_dim 128, else CUTLASS
            return hopper
        if cap is not None and cap[0] == 10:
            return default if default % 32 == 0 else 32  # FlashInfer-MLA's kernels: [32, 64]
        if cap is not None and cap[0] == 9 and dtype in (KvDtype.FP8_E4M3, KvDtype.FP8_E5M2):
            return 64
        return default

    def block_size(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        """Tokens per block of the primary attention layers.

        - MLA models: the backend's block (mla_block_size), unless --block-size is given.
        - Hybrid attention + Mamba (0.33 Platform._align_hybrid_block_size): A x cdiv(state, A x attention page
          per token) with A = max(16, block size), raised to 128 for MLA hybrids, then lcm with the Mamba
          prefill-checkpoint alignment in align mode (64 for the FlashInfer GDN prefill on Hopper); 0.19:
          A = 16 (64 for MLA), "all" mode rounds the state's tokens up to lcm(chunk, A); 0.11: A = 16.
        - --kv-cache-dtype-skip-layers (0.33 Platform._align_heterogeneous_kv_block_size): when the skipped
          layers' page per token S exceeds the primary P, the block grows to 16 x cdiv(16 S, 16 P).
        """
        base = self.fixed_block_size or (
            self.mla_block_size(spec, dtype, tp) if self._mla(spec) else self.default_block(mla=False)
        )
        attn = self._attention_dtype_bytes(spec, dtype, tp)
        states = [self._raw_state(spec, layer.state, tp) for layer, _ in spec.layer_groups() if layer.state is not None]
        bs = base
        if attn and states and max(states):
            state = max(states)
            align = self._hybrid_alignment(spec, base)
            if self.mamba_mode(spec) == "all":  # "all" mode: whole SSD chunks (lcm(mamba chunk size, A))
                chunk = lcm(_chunk_size(spec), align)
                bs = chunk * cdiv(cdiv(state, attn), chunk)
            else:
                bs = max(base, align * cdiv(state, align * attn))
        if self.skip_layers and self.rules.skip_layers == "realign":
            primary = self.attention_bytes_per_token_model(spec, dtype, tp)
            skipped = self.attention_bytes_per_token_model(spec, self.served_dtype(spec), tp)
            if primary and skipped > primary:
                align = max(KERNEL_BLOCK_MIN, bs)
                bs = max(bs, align * cdiv(skipped * KERNEL_BLOCK_MIN, align * primary))
        return bs

    def _hybrid_alignment(self, spec: ArchSpec, base: int) -> int:
        """A of the hybrid block size (VllmRules.hybrid_align): 16 (0.10.2-0.11.0); 16, 64 for MLA, 32 for head
        size 256 on sm_10x (0.11.1-0.17: HybridAttentionMambaModelConfig); or max(16, the backend's block),
        at least 128 for MLA hybrids (0.27+), lcm'd with the GDN checkpoint alignment (0.33:
        Platform._align_hybrid_block_size)."""
        r = self.rules
        if r.hybrid_align == "fixed16":
            return HYBRID_ALIGN
        if r.hybrid_align == "fixed16_mla64":
            if self._mla(spec):
                return 64
            dev = self.device
            blackwell = dev.platform == "cuda" and dev.capability is not None and dev.capability[0] == 10
            head_256 = any(
                layer.attention is not None and layer.attention.head_dim == 256 for layer, _ in spec.layer_groups()
            )
            return 32 if r.blackwell_hd256_align32 and blackwell and head_256 else HYBRID_ALIGN
        align = max(HYBRID_ALIGN, base)
        if self._mla(spec) and r.mla_hybrid_align_128:
            align = max(align, 128)
        if self._gdn_checkpoints(spec):
            align = lcm(align, FLASHINFER_GDN_CHECKPOINT_ALIGNMENT)
        return align

    def attention_bytes_per_token_model(self, spec: ArchSpec, dtype: KvDtype, tp: int) -> int:
        """Model-wide bytes per token of one attention layer in `dtype` (the platform's FullAttentionSpec)."""
        return min(
            (
                self.attention_bytes_per_token(self.served_attention(spec, layer.attention), dtype, tp)
                for layer, _ in spec.layer_groups()
                if layer.attention is not None and layer.attention.kind is not AttentionKind.SHARED
            ),
            default=0,
        )

    def _raw_state(self, spec: ArchSpec, state: StateSpec | None, tp: int) -> int:
        return self.state_bytes(spec, state, tp) if state is not None else 0

    # --- groups -----------------------------------------------------------------------------------------

    def all_full(self, spec: ArchSpec) -> bool:
        """Every attention layer is paged as full attention: no hybrid allocator and the model mixes layer types
        (0.8.5-0.9.0: kv_cache_utils.unify_hybrid_kv_cache_specs always), or a chunked-local model whose era
        turns the hybrid allocator off for it (0.8.5-0.9.2 no ChunkedLocalAttentionSpec; 0.10.1-0.13
        VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=0)."""
        kinds = {
            layer.attention.kind
            for layer, _ in spec.layer_groups()
            if layer.attention is not None
            and layer.attention.kind
            in (AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.MLA)
        }
        if AttentionKind.CHUNKED in kinds and not self.rules.chunked_local_window:
            return True
        return len(kinds) > 1 and not self.rules.hybrid_allocator

    def _attention_blocks(self, attn: AttentionSpec, ctx: int, bs: int, pp: int, spec: ArchSpec | None) -> int:
        if spec is not None and attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED) and self.all_full(spec):
            return cdiv(ctx, bs)
        if attn.kind is AttentionKind.SLIDING:
            assert attn.window is not None
            return cdiv(min(attn.window - 1 + self.in_flight_tokens(ctx, pp), ctx), bs) + 1
        if attn.kind is AttentionKind.CHUNKED and self.rules.chunked_local_window:
            assert attn.window is not None
            return cdiv(min(attn.window + self.in_flight_tokens(ctx, pp), ctx), bs)
        if attn.kind is AttentionKind.CROSS:
            assert attn.encoder_tokens is not None
            # CrossAttentionSpec: cdiv(max_num_encoder_input_tokens, bs). 0.33 / 0.19: SchedulerConfig sets it to
            # max_num_batched_tokens; 0.11 to the encoder length (VllmConfig.__post_init__ for encoder-decoder).
            encoder = attn.encoder_tokens
            if self.rules.encoder_tokens == "batched_tokens" and spec is not None:
                encoder = self.scheduler(ctx, pp=pp, spec=spec).max_num_encoder_input_tokens
            return cdiv(encoder, bs)
        if attn.kind is AttentionKind.SHARED:
            return 0
        return cdiv(ctx, bs)

    def _layer_specs(
        self, spec: ArchSpec, layer: LayerSpec, layer_dtype: KvDtype, dtype: KvDtype, ctx: int, tp: int, pp: int
    ) -> tuple[CacheSpec, ...]:
        """The cache specs of one layer (attention or cross-attention, Mamba mixer) before page unification."""
        bs = self.block_size(spec, dtype, tp)
        found = []
        for raw in (layer.attention, layer.cross):
            if raw is None or raw.kind is AttentionKind.SHARED:
                continue
            a = self.served_attention(spec, raw)
            per_token = self.attention_bytes_per_token(a, layer_dtype, tp)
            block, page = bs, bs * per_token
            primary = self.attention_bytes_per_token_model(spec, dtype, tp)
            realign = self.rules.skip_layers == "realign"
            if layer_dtype != dtype and realign and a.kind is AttentionKind.SLIDING and primary:
                # A skipped sliding layer pads its page to the primary page (skip_page_size_padded) and takes
                # the largest multiple of 16 tokens that fits it (attention.py _largest_kernel_block_within).
                shared = bs * primary
                block = max(KERNEL_BLOCK_MIN, shared // per_token // KERNEL_BLOCK_MIN * KERNEL_BLOCK_MIN)
                page = max(shared, block * per_token)
            kind = "mla" if a.kind is AttentionKind.MLA else a.kind.value
            window = a.window
            if kind in ("sliding", "chunked") and self.all_full(spec):
                kind, window = "full", None  # FullAttentionSpec
            blocks = self._attention_blocks(a, ctx, block, pp, spec)
            found.append(CacheSpec(kind, window, block, page, blocks, per_token))
        if layer.state is not None:
            attn_page = bs * self._attention_dtype_bytes(spec, dtype, tp)
            state = self.state_bytes(spec, layer.state, tp)
            blocks = self.mamba_blocks(spec, layer.state, ctx, bs)
            found.append(CacheSpec("mamba", None, bs, max(state, attn_page), blocks))  # padded to the attention page
        return tuple(found)

    def _units(self, spec: ArchSpec, ctx: int, dtype: KvDtype, tp: int, pp: int) -> list[Unit]:
        """Distinct layers with their specs and counts; layers listed by index in --kv-cache-dtype-skip-layers
        are told apart from their twins."""
        index_skips = self._index_skips()
        units: list[Unit] = []
        for layer, count in spec.layer_groups():
            twins = [x for x in spec.layers if x.index in index_skips and _same_layer(x, layer)] if index_skips else []
            if twins:
                specs = self._layer_specs(spec, twins[0], self.layer_dtype(spec, twins[0], dtype), dtype, ctx, tp, pp)
                units.append(Unit(specs, len(twins), twins[0], True))
            if count > len(twins):
                rep = layer
                if layer.index in index_skips:
                    rep = next(x for x in spec.layers if x.index not in index_skips and _same_layer(x, layer))
                specs = self._layer_specs(spec, rep, self.layer_dtype(spec, rep, dtype), dtype, ctx, tp, pp)
                units.append(Unit(specs, count - len(twins), rep, False))
        return units

    def _index_skips(self) -> set[int]:
        return {int(i) for i in self.skip_layers if i.isdigit()}

    def _unit_of(self, layer: LayerSpec, units: list[Unit]) -> Unit:
        skipped = layer.index in self._index_skips()
        return next(u for u in units if u.skipped == skipped and _same_layer(layer, u.layer))

    def _unified(self, units: list[Unit], ctx: int, pp: int, spec: ArchSpec) -> dict[CacheSpec, CacheSpec]:
        """Each spec as the groups page it: unchanged when all layers are of one type (is_kv_cache_spec_uniform,
        UniformTypeKVCacheSpecs), else after unify_kv_cache_spec_page_size."""
        specs = {s for u in units for s in u.specs}
        pages = {s.page for s in specs}
        if len({s.type_key for s in specs}) == 1 and len({s.blocks for s in specs}) == 1:
            if len(pages) > 1 and not self.rules.uniform_type_groups:
                raise UnsupportedArchitecture(
                    f"vLLM {self.version} cannot page layers of one type whose pages differ (kv_cache_utils: "
                    "NotImplementedError before UniformTypeKVCacheSpecs, 0.11.0)",
                    hint="Use --engine-version 0.11 or later.",
                )
            return {s: s for s in specs}
        if len(pages) <= 1:
            return {s: s for s in specs}
        if self.rules.page_unify == "refuse":
            raise UnsupportedArchitecture(
                f"vLLM {self.version} cannot group layer types whose pages differ (kv_cache_utils.get_kv_cache_groups "
                "raises NotImplementedError)",
                hint="Use --engine-version 0.19 or 0.33, or drop --kv-cache-dtype-skip-layers.",
            )
        top = max(pages)
        unified: dict[CacheSpec, CacheSpec] = {}
        for s in specs:
            if s.page == top:
                unified[s] = s
            elif s.kind == "mamba":
                unified[s] = CacheSpec(s.kind, s.window, s.block_size, top, s.blocks)
            elif top % s.page == 0:
                block = s.block_size * (top // s.page)
                unified[s] = CacheSpec(s.kind, s.window, block, top, self._blocks_of(s, ctx, block, pp), s.per_token)
            elif self.rules.page_unify == "pad" and s.kind != "mla":
                unified[s] = CacheSpec(s.kind, s.window, s.block_size, top, s.blocks, s.per_token)
            elif self.rules.page_unify == "pad_block_stride" and s.kind != "mla":
                raise UnsupportedArchitecture(
                    f"vLLM {self.version} pads a {s.page} B page to {top} B only when the attention backend indexes "
                    "blocks outermost (unify_kv_cache_spec_page_size: indexes_kv_by_block_stride), which kvsize "
                    "does not know for this GPU",
                    hint="Use --engine-version 0.29 or later (pads every such page), or drop "
                    "--kv-cache-dtype-skip-layers.",
                )
            else:
                raise UnsupportedArchitecture(
                    f"vLLM {self.version} cannot unify a {s.page} B page with a {top} B page "
                    "(unify_kv_cache_spec_page_size: not divisible)",
                    hint="Drop --kv-cache-dtype-skip-layers or use another --kv-dtype.",
                )
        return unified

    def _blocks_of(self, s: CacheSpec, ctx: int, block: int, pp: int) -> int:
        """Blocks per request of an attention spec at another block size."""
        window = s.window
        if s.kind == "sliding" and window is not None:
            return cdiv(min(window - 1 + self.in_flight_tokens(ctx, pp), ctx), block) + 1
        if s.kind == "chunked" and window is not None and self.rules.chunked_local_window:
            return cdiv(min(window + self.in_flight_tokens(ctx, pp), ctx), block)
        if s.kind == "cross":
            return cdiv(s.blocks * s.block_size, block)  # the encoder tokens, rounded to the old block
        return cdiv(ctx, block)

    def global_groups(self, spec: ArchSpec, ctx: int, dtype: KvDtype, tp: int, pp: int = 1) -> list[Group]:
        """KV-cache groups of the whole model (get_global_kv_cache_groups -> get_kv_cache_groups). A group's
        `layers` are listed only when pp > 1 needs them for the projection onto stages."""
        units = self._units(spec, ctx, dtype, tp, pp)
        if not any(u.specs for u in units):
            return []
        unified = self._unified(units, ctx, pp, spec)
        specs = {s for u in units for s in u.specs}
        members: dict[CacheSpec, list[int]] | None = None
        if pp > 1:
            members = self._members(spec, units, unified)
        if len({s.type_key for s in specs}) == 1 and len({s.blocks for s in specs}) == 1:
            # is_kv_cache_spec_uniform / UniformTypeKVCacheSpecs: one group, a block spans every layer's page.
            first = next(iter(unified.values()))
            total = sum(u.count * unified[s].page for u in units for s in u.specs)
            layers = tuple(sorted(i for v in members.values() for i in v)) if members else ()
            pages = self._pages_of(layers, spec, units, unified) if members else ()
            return [Group(first, sum(u.count * len(u.specs) for u in units), total, layers, pages)]
        counts: dict[CacheSpec, int] = {}
        for u in units:
            for s in u.specs:
                counts[unified[s]] = counts.get(unified[s], 0) + u.count
        sizes = list(counts.values())
        group_size = min(sizes)
        threshold = self.rules.group_pad_threshold
        if threshold is not None and max(sizes) < threshold * min(sizes):
            group_size = max(sizes)  # _get_kv_cache_groups_uniform_page_size: pad rather than split
        groups = []
        for s, count in counts.items():
            n = cdiv(count, group_size)
            ordered = members[s] if members else None
            for i in range(n):
                part = tuple(ordered[i::n]) if ordered is not None else ()
                size = len(range(i, count, n))
                groups.append(Group(s, size, size * s.page, part, tuple(s.page for _ in part)))
        return groups

    def _members(
        self, spec: ArchSpec, units: list[Unit], unified: dict[CacheSpec, CacheSpec]
    ) -> dict[CacheSpec, list[int]]:
        """Layer indices of each (unified) spec, in layer order (needed to project groups onto pp stages)."""
        out: dict[CacheSpec, list[int]] = {}
        for layer in spec.layers:
            for s in self._unit_of(layer, units).specs:
                out.setdefault(unified[s], []).append(layer.index)
        return out

    def _pages_of(
        self, layers: tuple[int, ...], spec: ArchSpec, units: list[Unit], unified: dict[CacheSpec, CacheSpec]
    ) -> tuple[int, ...]:
        """Each listed layer's page (summed over its specs) for a uniform-type group."""
        return tuple(sum(unified[s].page for s in self._unit_of(spec.layers[i], units).specs) for i in layers)

    def layout(
        self, spec: ArchSpec, layers: Sequence[LayerSpec], ctx: int, dtype: KvDtype, tp: int, pp: int = 1
    ) -> Layout:
        """Bytes per block and blocks per request of the pipeline stage holding `layers`: the model's groups
        projected onto the stage (_project_kv_cache_groups_to_worker). Every group keeps its block table, so a
        request holds the same blocks on every stage; a block spans the stage's largest group
        (_get_kv_cache_bytes_per_block)."""
        groups = self.global_groups(spec, ctx, dtype, tp, pp if len(layers) < spec.num_layers else 1)
        bs = self.block_size(spec, dtype, tp)
        if not groups:
            return Layout(bs, 0, 0, 0)
        if len(layers) == spec.num_layers:
            bytes_per_block = max(g.bytes for g in groups)
        else:
            here = {layer.index for layer in layers}
            bytes_per_block = max(sum(p for i, p in zip(g.layers, g.pages, strict=True) if i in here) for g in groups)
        return Layout(bs, bytes_per_block, sum(g.spec.blocks for g in groups), len(groups))

    # --- summing --------------------------------------------------------------------------------------

    def stage_request_bytes(
        self, spec: ArchSpec, layers: Sequence[LayerSpec], ctx: int, dtype: KvDtype, tp: int
    ) -> int:
        lay = self.layout(spec, layers, ctx, dtype, tp, self._pp)
        return lay.blocks_per_request * lay.bytes_per_block

    _pp = 1  # the pipeline size of the estimate in progress (sliding windows reserve pp + 1 batches in 0.33)

    def estimate(
        self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> KvEstimate:
        previous = self._pp
        self._pp = pp
        try:
            return super().estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)
        finally:
            self._pp = previous

    def layer_request_bytes(
        self, spec: ArchSpec, layer: LayerSpec, ctx: int, dtype: KvDtype, tp: int
    ) -> tuple[int, int, int]:
        """(bytes per token slot, token slots, fixed bytes) of one layer, for the per-layer table: the layer's
        own specs after page unification (a Mamba state counts its padded page x its blocks)."""
        units = self._units(spec, ctx, dtype, tp, self._pp)
        unified = self._unified(units, ctx, self._pp, spec)
        per_token = tokens = fixed = 0
        for raw in self._unit_of(layer, units).specs:
            s = unified.get(raw, raw)
            if s.kind in ("mamba", "cross"):
                fixed += s.page * s.blocks
            else:
                per_token = s.page // s.block_size
                tokens = s.blocks * s.block_size
        return per_token, tokens, fixed

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        notes = []
        if self.rules.qwen_mixed_windows == "qwen3_all_full" and self._qwen_partly_sliding(spec):
            notes.append(
                f"vLLM {self.version} caches every layer of this {spec.model_type} model in full: a model whose layers "
                "only partly slide gets no window (models/qwen2.py Qwen2DecoderLayer, engine/arg_utils.py)"
            )
        qwen2_moe = self._qwen2_moe_windows(spec)
        if qwen2_moe in ("every_layer", "none"):
            every = qwen2_moe == "every_layer"
            notes.append(
                f"vLLM {self.version} caches every layer of this Qwen2-MoE model "
                + ("in its sliding window" if every else "in full")
                + ", not transformers' even layers below max_window_layers: models/qwen2_moe.py takes the engine's "
                "one window, which engine/arg_utils.py sets only without mixed layer_types"
                + (" (transformers 4.x has none)" if every else "")
            )
        if spec.has_state and self._attends(spec):
            mode = self.mamba_mode(spec)
            notes.append(
                f"vLLM {self.version} pads each Mamba state to one attention page; prefix caching "
                + ("on" if self.prefix_caching(spec) else "off")
                + f" (mamba_cache_mode {mode})"
            )
        if spec.shared_indexer_layers and not self.rules.dsa_shared_layers_unindexed:
            notes.append(
                f"vLLM {self.version} builds the DSA indexer (and its key cache) on the {spec.shared_indexer_layers} "
                "layers that share a top-k as well (deepseek_v2.py; none there from 0.24.0)"
            )
        if spec.model_type in MIMO_V2_MODEL_TYPES:
            notes.append(self._mimo_note(spec))
        if self.all_full(spec):
            notes.append(
                f"vLLM {self.version} pages every attention layer as full attention for this model (no hybrid "
                "KV-cache manager for it): sliding and chunked layers hold the whole context"
            )
        return tuple(notes)

    def _mimo_note(self, spec: ArchSpec) -> str:
        pages = {
            "v_padded": "V padded to K's width before the cache (MiMoV2Attention.forward): K and V both 192 wide",
            "flash_attn_diffkv": "K and V packed at their own widths on FLASH_ATTN_DIFFKV (192 + 128)",
            "triton_attn_diffkv": "K and V packed at their own widths on TRITON_ATTN_DIFFKV (192 + 128)",
        }[self.mimo_backend(spec)]
        note = f"vLLM {self.version} caches MiMo-V2 with {pages}; sliding layers keep sliding_window_size tokens"
        if not self.rules.mimo_v2_cache_config:
            note += f", in {self.served_dtype(spec).value} (its attention takes no cache config before 0.32)"
        return note

    # --- the pool vLLM logs ---------------------------------------------------------------------------

    def pool(
        self, spec: ArchSpec, *, available_bytes: int, max_model_len: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> Pool:
        """Blocks, logged token capacity and concurrency for `available_bytes` of KV memory per GPU."""
        stages = pipeline_stages(spec.num_layers, pp)
        stage_layers = [spec.layers] if len(stages) == 1 else [[spec.layers[i] for i in s] for s in stages]
        layouts = [self.layout(spec, layers, max_model_len, kv_dtype, tp, pp) for layers in stage_layers]
        live = [lay for lay in layouts if lay.bytes_per_block]
        if not live or available_bytes <= 0:
            return Pool(0, 0, 0.0, 0)
        num_blocks = min(available_bytes // lay.bytes_per_block for lay in live)  # min over workers
        per_request = max(lay.blocks_per_request for lay in live)
        concurrency = num_blocks / per_request
        if self.rules.logged_pool == "blocks_x_bs":  # one group: num_blocks x block_size, concurrency tokens / L
            tokens = num_blocks * live[0].block_size
            concurrency = tokens / max_model_len
        elif self.rules.logged_pool == "concurrency_x_len":
            tokens = int(concurrency * max_model_len)
        else:  # num_blocks // len(kv_cache_groups) x block_size
            groups = max(lay.groups for lay in live)
            tokens = num_blocks // groups * live[0].block_size
        return Pool(num_blocks, tokens, concurrency, max(num_blocks - 1, 0) // per_request)

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    shares_prefixes = True  # CacheConfig.enable_prefix_caching = True (vllm/config/cache.py)

    def prefix_caching_enabled(self, spec: ArchSpec) -> bool:
        return self.prefix_caching(spec)  # the same switch that sets the Mamba state blocks

    def prefix_sharing_rule(self) -> str:
        return (
            f"vLLM {self.version} prefix caching: whole blocks only, floor(hit / block) per layer, the partial "
            "block stays per request; sliding layers keep only the prefix blocks still inside the window at "
            "ctx, chunked layers those of the current chunk (v1/core/single_type_kv_cache_manager.py "
            "FullAttentionManager.find_longest_cache_hit, get_num_skipped_tokens, remove_skipped_blocks)"
        )

    def prefix_shared_tokens(self, spec: ArchSpec, attn: AttentionSpec, hit: int, ctx: int, block: int) -> int:
        from kvsize.engines.base import blocks_in_window

        attn = self.served_attention(spec, attn)
        # At a request's last step num_computed_tokens = ctx - 1: get_num_skipped_tokens frees the blocks before
        # max(0, ctx - W) (sliding) or (ctx - 1) // C x C (chunked local).
        if attn.kind is AttentionKind.SLIDING:
            assert attn.window is not None
            return blocks_in_window(hit, ctx, max(0, ctx - attn.window), block)
        if attn.kind is AttentionKind.CHUNKED and self.rules.chunked_local_window:
            assert attn.window is not None
            return blocks_in_window(hit, ctx, (ctx - 1) // attn.window * attn.window, block)
        if attn.kind in (AttentionKind.CROSS, AttentionKind.SHARED):
            return 0
        return hit // block * block


# config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES (0.24+): the MoE architectures listed, by model type.
V2_RUNNER_MOE_TYPES = frozenset({"deepseek_v2", "qwen2_moe", "granitemoe"})


def _v2_runner_model(spec: ArchSpec) -> bool:
    """Whether the V2 model runner takes the model where the era runs only some there (0.25-0.28:
    VllmConfig._is_default_v2_model_runner_model: the listed architectures or any non-MoE model, never a
    hybrid or attention-free one)."""
    if spec.has_state:
        return False
    return not spec.experts_per_token or spec.model_type in V2_RUNNER_MOE_TYPES


def _same_layer(a: LayerSpec, b: LayerSpec) -> bool:
    return a.attention == b.attention and a.state == b.state and a.cross == b.cross


def _torch_dtype(name: str | None) -> KvDtype | None:
    from kvsize.dtypes import dtype_from_torch_name

    return dtype_from_torch_name(name)


# HF config classes' defaults where a config.json omits the chunk size (transformers NemotronHConfig 128,
# Mamba2Config / Zamba2Config / BambaConfig / FalconH1Config / GraniteMoeHybridConfig 256).
_DEFAULT_CHUNK = {
    "nemotron_h": 128,
    "mamba2": 256,
    "zamba2": 256,
    "bamba": 256,
    "falcon_h1": 256,
    "granitemoehybrid": 256,
}


def _chunk_size(spec: ArchSpec) -> int:
    """ModelConfig.get_mamba_chunk_size (0.19): the config's mamba_chunk_size or chunk_size, else 2048."""
    for layer, _ in spec.layer_groups():
        if layer.state is not None and layer.state.chunk_size:
            return layer.state.chunk_size
    return _DEFAULT_CHUNK.get(spec.model_type, 2048)
