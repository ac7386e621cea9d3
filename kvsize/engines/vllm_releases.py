"""vLLM's history as data: one `VllmRules` record per era of releases whose cache rules are identical.

Each field is one named rule switch; its docstring says where the switch lives in vLLM's source. The eras
(`VLLM_RELEASES`) start from the oldest read release's record and list, era by era, only the switches that
change, each with the file, function and release it was read from (every release 0.8.5-0.33.0 on PyPI was read
from its sdist except 0.15.0 and 0.15.1, which have none: a change dated 0.16.0 landed after 0.14.1 and at or
before 0.16.0). Patch releases never change a sizing rule, except 0.20.1 (the logged pool figure). The engine
code (`kvsize/engines/vllm.py`, `vllm_scheduler.py`, `kvsize/budget.py`, `kvsize/calibration.py`,
`kvsize/fit.py`) reads switches and never compares version strings; a new release is added here.
docs/engines.md tabulates the eras.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from kvsize.dtypes import KvDtype
from kvsize.engines.releases import Era, ReleaseTable


@dataclass(frozen=True)
class VllmRules:
    """The cache, scheduler and budget rules of one era of vLLM releases."""

    # --- the scheduler (engine/arg_utils.py, config/scheduler.py, config/vllm.py, v1/executor) -------------
    tier_a100_excluded: bool
    """The >= 70 GiB batch tier leaves out cards named "a100" (EngineArgs._set_default_args_v1 /
    get_batch_defaults: `and "a100" not in device_name`)."""
    tier_160gib: bool
    """get_batch_defaults: a >= 160 GiB tier of 16384 tokens / 1024 sequences for both usage contexts."""
    gb10_small_tier: bool
    """get_batch_defaults: GB10 (capability 12.1) is kept out of the 70 GiB tier."""
    nvml_total_fallback: bool
    """platforms/cuda.py NvmlCudaPlatform.get_device_total_memory falls back to torch's total_memory when
    nvmlDeviceGetMemoryInfo raises (0.33+). Before, it raises on such a device (GB10) and the batch defaults'
    `except Exception` takes device_memory = 0: the small tier."""
    seqs_capped_by_tokens: bool
    """The default max_num_seqs is at most max_num_batched_tokens (`min(default_max_num_seqs, B)`)."""
    seqs_x_len_clamp: bool
    """A defaulted max_num_batched_tokens is at most max_num_seqs x max_model_len."""
    throughput_mode: bool
    """--performance-mode throughput doubles the defaulted batch sizes."""
    no_chunked_tokens: Literal["chunked_always", "max_model_len", "at_least_max_model_len"]
    """max_num_batched_tokens without chunked prefill: V1 always chunks; max_model_len; max(L, the default)."""
    encoder_decoder_chunked: bool
    """arg_utils still turns chunked prefill on for encoder-decoder models, so they take the tier default
    (until ModelConfig.is_chunked_prefill_supported says no)."""
    async_scheduling_default: bool
    """SchedulerConfig.async_scheduling's default for generative models."""
    async_batches: Literal["two", "two_at_pp1"]
    """Batches in flight with async scheduling on the V1 runner: 2, or 2 at pp 1 and pp otherwise; pp without
    it (MultiprocExecutor / UniProcExecutor.max_concurrent_batches, later VllmConfig.max_concurrent_batches)."""
    v2_runner: Literal["off", "dense", "all"]
    """Models on the V2 model runner, which keeps pp + 1 batches in flight (VllmConfig.max_concurrent_batches,
    use_v2_model_runner): none that matter here, dense non-hybrid models (and the listed MoE architectures), or
    every model."""
    sliding_reserve: Literal["one_batch", "in_flight_batches"]
    """Tokens a sliding or chunked-local layer holds beyond its window (SlidingWindowSpec /
    ChunkedLocalAttentionSpec.max_memory_usage_bytes): one batch of max_num_batched_tokens, or
    VllmConfig.max_in_flight_tokens (batches in flight x max_num_batched_tokens)."""
    hybrid_allocator: bool
    """Several KV-cache groups exist (the hybrid KV-cache manager); without it a model mixing layer types has
    every layer converted to FullAttentionSpec (kv_cache_utils.unify_hybrid_kv_cache_specs)."""
    chunked_local_window: bool
    """Chunked-local layers (Llama 4) are held for their chunk (ChunkedLocalAttentionSpec with the hybrid
    allocator on), not the whole context."""
    encoder_tokens: Literal["encoder_length", "batched_tokens"]
    """SchedulerConfig.max_num_encoder_input_tokens for encoder-decoder models: the encoder length
    (VllmConfig.__post_init__) or max_num_batched_tokens (SchedulerConfig.__post_init__)."""

    # --- what the V1 engine serves (engine/arg_utils.py _is_v1_supported_oracle, models/registry.py) --------
    v1_state_models: bool
    """Mamba and linear-attention models run on the V1 engine by default (before: the V0 engine)."""
    v1_whisper: bool
    """Whisper runs on the V1 engine (CrossAttentionSpec)."""
    mllama: Literal["v0", "removed"]
    """Mllama (Llama 3.2 Vision): V0 only, or removed (registry _PREVIOUSLY_SUPPORTED_MODELS: "0.10.2")."""

    # --- dtypes (config/cache.py, models/config.py, mla_attention.py, mamba_utils.py) ----------------------
    kv_dtypes: tuple[str, ...]
    """--kv-cache-dtype values accepted (CacheDType)."""
    sparse_mla: bool
    """DeepSeek-V3.2's sparse MLA and indexer cache are served (flashmla_sparse.py, indexer.py)."""
    sparse_mla_auto_ds_mla: bool
    """DeepseekV32ForCausalLM.verify_and_update_config: auto resolves to fp8_ds_mla too."""
    sparse_fp8: Literal["config", "backend"]
    """fp8 on sparse MLA: the config turns it into fp8_ds_mla (656 B) on every GPU, or MLAAttention.__init__
    does so only on the FLASHMLA_SPARSE backend (FlashInfer-MLA sparse on sm_10x keeps standard fp8)."""
    serves_gemma3n: bool
    """Gemma3nForConditionalGeneration is in models/registry.py (from 0.9.2; absent in 0.9.1). Its last
    num_kv_shared_layers attention layers name a kv_sharing_target_layer_name and get no KV-cache spec
    (gpu_model_runner.get_kv_cache_spec); the model has no SupportsPP."""
    gemma4: Literal["absent", "triton", "fa4", "fa4_sm90_fp8_pages"]
    """Gemma 4 (models/gemma4.py, registry: from 0.19.0) when its sliding and full layers differ in head size
    (models/config.py Gemma4Config.verify_and_update_config): absent; TRITON_ATTN forced on every platform
    (0.19-0.23); FlashAttention 4 forced on compute capability 9.x-11.x (fa_utils / flash_attn_interface
    _is_fa4_supported), TRITON_ATTN elsewhere (0.24-0.30); as before, and on 9.x an fp8 cache of head size 512
    takes 64-token FA4 pages (flash_attn.py _get_sm90_fa4_fp8_kv_block_size, from 0.31.0)."""
    mimo_v2: Literal["absent", "v_padded", "diffkv_fa", "diffkv"]
    """MiMoV2FlashForCausalLM (models/mimo_v2_flash.py from 0.14.0, mimo_v2.py from 0.21.0), whose K heads are 192
    wide and V heads 128: absent; V zero-padded to K's width before the cache (MiMoV2Attention.forward
    torch.nn.functional.pad, 0.14-0.19: pages of 2 x 192); K and V packed at their own widths (head_size_v,
    pages of 192 + 128) on FLASH_ATTN_DIFFKV, forced on every device (0.20-0.23); or on FLASH_ATTN_DIFFKV where
    FlashAttention 3 or 4 runs (capability 9.x, 10.x: FlashAttentionDiffKVBackend.is_supported_on_current_device)
    and TRITON_ATTN_DIFFKV elsewhere (0.24+)."""
    mimo_v2_cache_config: bool
    """MiMoV2Attention hands the cache config to Attention (0.32+). Before, Attention(cache_config=None) keeps
    kv_cache_dtype "auto" (models/layers/attention/attention.py): the model's dtype whatever --kv-cache-dtype
    asks."""
    serves_glm_moe_dsa: bool
    """GlmMoeDsaForCausalLM (GLM-5) is in model_executor/models/registry.py (from 0.16.0; absent in 0.14.1)."""
    glm_dsa_fp8_on_sm100: bool
    """models/config.py GlmMoeDsaForCausalLM.verify_and_update_config: --kv-cache-dtype auto becomes fp8_e4m3 on
    the sm_10x family (is_device_capability_family(100); from 0.32.0, absent in 0.31.0)."""
    dsa_shared_layers_unindexed: bool
    """models/deepseek_v2.py DeepseekV2MLAAttention.__init__: a DSA layer whose top-k is shared (index_topk_freq /
    index_skip_topk_offset / index_topk_pattern, GLM-5.2) builds no Indexer, so no DeepseekV32IndexerCache (from
    0.24.0; 0.21.0-0.23.0 only skip its top-k under use_index_cache, and build the Indexer on every layer)."""
    nemotron_ssm_default: KvDtype | None
    """NemotronHForCausalLMConfig: the SSM state dtype when the config names no mamba_ssm_cache_dtype
    (None: no such hook, the model dtype)."""
    qwen35_ssm_dtype: bool
    """Qwen3_5ForConditionalGenerationConfig: the config's mamba_ssm_dtype sets the SSM state dtype."""
    nvfp4_sliding_packed: bool
    """nvfp4 pages of sliding layers are packed (D/2 + D/16) like full ones (SlidingWindowSpec.
    real_page_size_bytes); before, they count 1 B per element."""

    # --- Mamba / linear attention (models/config.py, v1/kv_cache_interface.py MambaSpec, mamba_utils.py) ----
    hybrid_prefix_caching: Literal["forced_off", "off_by_default", "on_by_default"]
    """Prefix caching for models with state: MambaModelConfig turns it off whatever the user says; off unless
    asked (is_prefix_caching_supported / the arg defaults: hybrids no); or on for hybrids with attention."""
    attention_free_prefix_caching: bool
    """Attention-free Mamba models keep prefix caching on by default."""
    mamba_cache_modes: Literal["one_block", "all_when_caching", "modes"]
    """MambaSpec blocks per request: always one; cdiv(L, block) with prefix caching on (other models forced
    off); or mamba_cache_mode "all" cdiv(L, block) / "align" 2 + speculative / "none" 1 + speculative."""
    mamba_all_mode_models: frozenset[str]
    """Model types with SupportsMambaPrefixCaching, which take "all" with prefix caching on."""
    all_mode_under_speculation: bool
    """"all" stays "all" with speculative decoding (else "align")."""
    all_mode_speculative_blocks: bool
    """"all" mode adds the speculative blocks: cdiv(L, block) + speculative."""
    speculative_blocks: bool
    """MambaSpec.max_memory_usage_bytes counts num_speculative_blocks."""
    speculative_conv_mamba2: bool
    """The Mamba-2 conv state keeps kernel - 1 + speculative columns (GDN always does)."""
    checkpoint_mixer2: bool
    """"align" mode holds one prefill-checkpoint block for mamba_mixer2 layers (MambaMixer2.get_kv_cache_spec)."""
    checkpoint_gdn: bool
    """"align" mode holds one prefill-checkpoint block for GDN with the FlashInfer prefill on Hopper, and the
    hybrid block is lcm'd with its 64-token alignment."""
    hybrid_align: Literal["fixed16", "fixed16_mla64", "backend"]
    """Hybrid attention + Mamba block size A x cdiv(state, A x attention bytes per token): A = 16
    (HybridAttentionMambaModelConfig); A = 16, 64 for MLA; or A = max(the backend's smallest kernel block, the
    block size) (Platform._align_hybrid_block_size)."""
    blackwell_hd256_align32: bool
    """HybridAttentionMambaModelConfig: A = 32 on sm_10x for head size 256 (FlashInfer)."""
    mla_hybrid_align_128: bool
    """_align_hybrid_block_size: MLA hybrids take A >= 128."""

    qwen_mixed_windows: Literal["refused", "qwen3_all_full"]
    """Qwen2-family configs whose layers only partly slide (use_sliding_window with max_window_layers below the
    layer count): models/qwen2.py refuses them ("Sliding window for some but all layers is not supported", in
    Qwen2Model through 0.33); from 0.34 the assertion sits in Qwen2DecoderLayer, so Qwen2 / Qwen2-VL are still
    refused and Qwen3 / Qwen3-VL (Qwen3DecoderLayer) are served with every layer full: engine/arg_utils.py sets no
    global window for a mixed model and the layers take none of their own."""

    qwen2_moe_windows: Literal["every_layer", "transformers_dependent", "none"]
    """Qwen2-MoE with use_sliding_window on. models/qwen2_moe.py passes no window of its own, so every layer takes
    CacheConfig.sliding_window, which engine/arg_utils.py sets only for a config with no layer_types or with every
    layer sliding (0.10.1.1 `not is_interleaved`, 0.33/0.34 the layer_types test). transformers 4.x's
    Qwen2MoeConfig has no layer_types (4.57.1), so every layer slides: 0.8.5-0.11 predate transformers 5.0 and
    0.12-0.19 require < 5 (requirements/common.txt). 5.x builds a mixed layer_types (its even layers below
    max_window_layers: 5.5.3, 5.25), so no layer slides: 0.24+ require >= 5.5.3. 0.20-0.23 accept either
    (>= 4.56.0, != 5.0-5.5.0), so kvsize cannot tell which this run gets."""

    # --- attention backends (platforms/cuda.py) ------------------------------------------------------------
    default_block_size: int
    """CacheConfig.DEFAULT_BLOCK_SIZE, which Platform.update_block_size_for_backend hands each attention backend
    (platforms/interface.py _preferred_block_size_for_backends -> AttentionBackend.get_preferred_block_size: the
    default where the backend's kernels accept it, else its smallest kernel block): 16 (0.8.5-0.33), 64 (0.34+,
    config/cache.py). FlashAttention, FlashInfer, Triton, FlashAttention-MLA, Triton-MLA and FlashInfer
    sparse-MLA take it; FlashInfer-MLA [32, 64] takes 32 at 16 and 64 at 64; FlashMLA (64) and CUTLASS-MLA (128)
    keep theirs; ROCm's ROCM_ATTN keeps 16 (RocmAttentionBackend.get_preferred_block_size, 0.34). The hybrid
    alignment A is max(16, this) (_align_hybrid_block_size)."""
    mla_blocks: Literal["hopper64", "cutlass100", "cutlass10x", "flashinfer64", "per_backend"]
    """MLA block size: FlashMLA 64 on Hopper, else 16; + CUTLASS MLA 128 on cc 10.0; on any cc 10.x; Blackwell
    FlashInfer-MLA 64 when qk_nope_head_dim is 128 (else CUTLASS 128); or the backend's preferred kernel block
    (_get_backend_priorities: FlashInfer-MLA 32 on sm_10x, FlashAttention-MLA 16 / FlashMLA 64 for fp8 on
    Hopper, Triton 16)."""

    # --- groups (v1/core/kv_cache_utils.py, later kv_cache_planning.py) ------------------------------------
    uniform_type_groups: bool
    """UniformTypeKVCacheSpecs: layers of one type whose specs differ share one group (a block spans them)."""
    page_unify: Literal["refuse", "divisible", "pad_block_stride", "pad"]
    """Layer types whose pages differ: refused (NotImplementedError); unified when the smaller divide the
    largest; also padded for num-blocks-first backends only (which kvsize cannot tell, so refused); or padded
    for any non-MLA attention page (unify_kv_cache_spec_page_size)."""
    group_pad_threshold: float | None
    """_get_kv_cache_groups_uniform_page_size: group size max(counts) when max < threshold x min, else min."""
    skip_layers: Literal["none", "unify", "realign"]
    """--kv-cache-dtype-skip-layers: absent; skipped layers' pages unified like any other; or the primary block
    realigned (Platform._align_heterogeneous_kv_block_size) and skipped sliding pages padded."""
    logged_pool: Literal["blocks_x_bs", "blocks_per_group", "concurrency_x_len"]
    """"GPU KV cache size: N tokens": num_blocks x block_size (one group, concurrency N / L);
    num_blocks // len(groups) x block_size; or int(concurrency x max_model_len)."""

    # --- the memory budget (config/cache.py, v1/worker/gpu_worker.py) ---------------------------------------
    gpu_memory_utilization: float
    """CacheConfig.gpu_memory_utilization's default."""
    cuda_graph_estimate: bool
    """determine_available_memory subtracts the profiled CUDA-graph memory estimate from the KV budget
    (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS's default). Under the measured sizing (kv_sizing) the estimate is 0
    (v1/worker/gpu/model_runner.py profile_cudagraph_memory) and the captured graphs are counted instead."""
    kv_sizing: Literal["profiled", "measured"]
    """How the pool is sized on CUDA and ROCm. "profiled": ceil(total x utilisation) - weights - profile peak -
    non-torch [- CUDA-graph estimate] (v1/worker/gpu_worker.py determine_available_memory). "measured" (0.34+, the
    extensible KV cache on by default: config/vllm.py VllmConfig._resolve_extensible_kv_cache): the profile only
    reserves address space and the pool is what v1/worker/extensible_kv_cache.py measure_kv_cache_bytes leaves after
    warm-up and CUDA-graph capture, min(ceil(total x u), free at start - max(1 GiB (3 on ROCm), 0.75 x transient
    peak)) - what loading and capture keep - max(transient peak, torch reservation growth). Off (the profiled rule
    at 0.92) with --kv-cache-memory-bytes, off CUDA/ROCm, and where the driver's virtual-memory check fails (WSL2)."""
    measured_utilization: float | None
    """CacheConfig.resolved_gpu_memory_utilization under the measured sizing when --gpu-memory-utilization is unset:
    1.0 (0.34+); `gpu_memory_utilization` stays the profiled path's default (DEFAULT_GPU_MEMORY_UTILIZATION)."""
    mrope_unit_factor_archs: frozenset[str]
    """Architectures whose multimodal RoPE table covers max_position once, not 4x (models/qwen3_vl.py
    mrope_positions_factor: 1 unless video pruning is on, for Qwen3-VL, Qwen3-VL-MoE and Qwen3.5's decoder
    layers, 0.32+); every other mrope model keeps MRotaryEmbedding's default 4 (kvsize/rope_tables.py)."""
    deepseek_rope_fp32: bool
    """DeepseekScalingRotaryEmbedding (MLA models with a scaled RoPE) keeps its cos/sin table in float32 on CUDA
    where FlashInfer applies it (`use_flashinfer`: head size 64/128/256/512, FlashInfer installed, as in vLLM's
    CUDA wheels; model_executor/layers/rotary_embedding/deepseek_scaling_rope.py, 0.14.0+); earlier releases cast
    it to the model's dtype (kvsize/rope_tables.py)."""

    mm_items_ceil: bool
    """profile_run's multimodal dummy batch holds cdiv(encoder budget, tokens per item) items (0.8.5-0.9.2,
    v1/worker/gpu_model_runner.py profile_run); from 0.10.0 budget // tokens per item (kvsize/mm_profile.py)."""
    mm_items_by_len: bool
    """The decoder's side of the item count is max_num_seqs x max(1, min(limit, max_model_len // tokens per
    item)) (v1/worker/utils.py MultiModalBudget.get_max_items, 0.10.1+); before, max_num_seqs x limit."""
    mm_dummy_at_model_len: bool
    """_get_mm_dummy_batch builds the dummy item with seq_len = max_model_len (0.11.0+, read in 0.11.0, 0.13.0);
    before, max_num_tokens (max_num_batched_tokens), so a Qwen-VL video is rebuilt with the frames that fit one
    step (v1/worker/gpu_model_runner.py, read in 0.10.1, 0.10.2; inline in profile_run in 0.8.5)."""
    qwen_vl_video_frames: int
    """Qwen2-VL / Qwen2.5-VL's _MAX_FRAMES_PER_VIDEO (models/qwen2_vl.py): 16 through 0.10.2, 14 from 0.11.0."""
    qwen_vl_video_minus_image: bool
    """Qwen2VLProcessingInfo.get_num_frames_with_most_features budgets the video with max_model_len less one
    largest image (read in 0.8.5 and 0.10.1); from 0.10.2 with max_model_len alone."""
    mxfp4_hopper: Literal["marlin", "triton_dup_scales", "triton_dup_scales_row64", "triton"]
    """The MXFP4 MoE kernel an sm_90 card loads gpt-oss's experts for (quantization/mxfp4.py
    get_mxfp4_backend; fused_moe/oracle/mxfp4.py from 0.19): Marlin through 0.11.2 (the default wheel ships no
    triton_kernels); OAI Triton from 0.12, whose swizzle keeps the original scales resident beside their swizzled
    copy through 0.24 (freed from 0.25: convert_gpt_oss_weight_to_mxfp4_moe_kernel_format), and whose vendored
    triton_kernels 3.6 (0.17-0.21) pads each weight row to 64 bytes (HopperMXValueLayout.swizzle_data)."""
    mxfp4_trtllm_pad: int
    """FlashInfer TRT-LLM's MXFP4 MoE (sm_10x) pads intermediate_size per partition to this: 256 through 0.26,
    128 from 0.27 (mxfp4_round_up_hidden_size_and_intermediate_size)."""
    language_model_only: bool
    """--language-model-only exists (0.17.0+: engine/arg_utils.py EngineArgs, config/multimodal.py
    MultiModalConfig.language_model_only)."""
    skip_mm_profiling: bool
    """--skip-mm-profiling exists (0.10.1+, config.py / config/multimodal.py MultiModalConfig.skip_mm_profiling):
    profile_run encodes no dummy batch."""
    mm_dummy_options: bool
    """--limit-mm-per-prompt takes {"count": N, "width": ...} per modality beside a bare count (0.11.1+,
    config/multimodal.py BaseDummyOptions)."""
    zero_limit_drops_towers: Literal["none", "families", "marked"]
    """A tower whose modalities are all limited to 0 is not built: "families", the models of
    ZERO_LIMIT_TOWER_ARCHS (`if multimodal_config.get_limit_per_prompt("image")` in llava.py, mistral3.py,
    mllama4.py, qwen2_vl.py, qwen2_5_vl.py from 0.10.1; qwen3_vl.py from its first release, 0.11.0); "marked", every
    model whose towers vLLM marks (models/interfaces.py SupportsMultiModal._mark_tower_model, 0.16.0+, one tower
    per modality set: Gemma 3n's audio tower goes with audio 0 alone); "none" through 0.10.0."""
    qwen3_vl_video_x12_5: bool
    """Qwen3VLProcessingInfo.get_max_video_tokens counts the dummy video's tokens x 12.5 (the timestamps'
    text: `formatted_video_soft_tokens`, 0.11.0-0.12.0), so the video, not the image, is profiled; from 0.13.0 the
    image (16,384 tokens) has the most (models/qwen3_vl.py)."""

    # --- the model's maximum context (config/model.py _get_and_verify_max_len) -------------------------------
    unscaled_rope_types: frozenset[str]
    """RoPE types whose `factor` does not scale the derived maximum."""
    yarn_from_original: bool
    """YaRN's maximum is original_max_position_embeddings x factor (`derived_max_model_len =
    rp["original_max_position_embeddings"]`); later max_position_embeddings is taken as already scaled."""


# config/cache.py CacheDType, as each release grows it.
KV_DTYPES_085 = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
KV_DTYPES_0100 = (*KV_DTYPES_085, "fp8_inc")
KV_DTYPES_0110 = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
KV_DTYPES_0111 = (*KV_DTYPES_0110, "fp8_ds_mla")
KV_DTYPES_0180 = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
KV_DTYPES_0200 = (
    *KV_DTYPES_0180, "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc",
    "int8_per_token_head", "fp8_per_token_head", "nvfp4",
)  # fmt: skip
KV_DTYPES_0250 = (*KV_DTYPES_0200, "int4_per_token_head")
KV_DTYPES_0280 = (*KV_DTYPES_0250, "nvfp4_4over6")
KV_DTYPES_0300 = (*KV_DTYPES_0280, "nvfp4_ds_mla")
KV_DTYPES_0320 = (*KV_DTYPES_0300, "ultraquant_4bit")
KV_DTYPES_0330 = (*KV_DTYPES_0320, "octave_k3v4", "octave_k3v3", "octave_k3v3_compact")

# The models that skip their vision tower when every vision modality is limited to 0, 0.10.1-0.14 (each one's
# __init__: llava.py, mistral3.py, mllama4.py, qwen2_vl.py, qwen2_5_vl.py; qwen3_vl.py and qwen3_vl_moe.py from
# 0.11.0, read in 0.10.1.1, 0.12.0 and 0.14.1).
ZERO_LIMIT_TOWER_ARCHS = frozenset(
    {
        "LlavaForConditionalGeneration",
        "Mistral3ForConditionalGeneration",
        "Llama4ForConditionalGeneration",
        "Qwen2VLForConditionalGeneration",
        "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
    }
)

# models/interfaces.py SupportsMambaPrefixCaching (0.11.1; BambaForCausalLM removed in 0.24.0).
MAMBA_PREFIX_CACHING_MODELS = frozenset(
    {"bamba", "falcon_h1", "granitemoehybrid", "jamba", "mamba", "falcon_mamba", "mamba2", "nemotron_h", "zamba2"}
)
# config/model.py _get_and_verify_max_len: the RoPE types left unscaled (0.29 and before; 0.30 and after).
UNSCALED_ROPE_OLD = frozenset({"su", "longrope", "llama3"})
UNSCALED_ROPE_030 = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})

# 0.8.5 (0.8.5.post1 is the same), the oldest release read.
R_0_8_5 = VllmRules(
    tier_a100_excluded=False,  # arg_utils.py _set_default_args_v1: `if device_memory >= 70 * GiB_bytes:`
    tier_160gib=False,
    gb10_small_tier=False,
    nvml_total_fallback=False,
    seqs_capped_by_tokens=False,
    seqs_x_len_clamp=False,
    throughput_mode=False,
    no_chunked_tokens="chunked_always",  # V1 sets enable_chunked_prefill = True
    encoder_decoder_chunked=True,
    async_scheduling_default=False,  # no async scheduling before 0.10.0
    async_batches="two",
    v2_runner="off",
    sliding_reserve="one_batch",  # SlidingWindowSpec.max_memory_usage_bytes: W - 1 + max_num_batched_tokens
    hybrid_allocator=False,  # get_kv_cache_config calls unify_hybrid_kv_cache_specs unconditionally
    chunked_local_window=False,  # no ChunkedLocalAttentionSpec: local layers are FullAttentionSpec
    encoder_tokens="encoder_length",
    v1_state_models=False,  # models SupportsV0Only
    v1_whisper=False,  # whisper.py SupportsV0Only
    mllama="v0",
    kv_dtypes=KV_DTYPES_085,  # config.py CacheDType
    sparse_mla=False,
    sparse_mla_auto_ds_mla=False,
    sparse_fp8="config",
    serves_gemma3n=False,
    gemma4="absent",
    mimo_v2="absent",
    mimo_v2_cache_config=False,
    serves_glm_moe_dsa=False,
    glm_dsa_fp8_on_sm100=False,
    dsa_shared_layers_unindexed=False,
    nemotron_ssm_default=None,
    qwen35_ssm_dtype=False,
    nvfp4_sliding_packed=False,
    hybrid_prefix_caching="forced_off",
    attention_free_prefix_caching=False,
    mamba_cache_modes="one_block",
    mamba_all_mode_models=frozenset(),
    all_mode_under_speculation=True,
    all_mode_speculative_blocks=False,
    speculative_blocks=False,
    speculative_conv_mamba2=False,
    checkpoint_mixer2=False,
    checkpoint_gdn=False,
    hybrid_align="fixed16",
    blackwell_hd256_align32=False,
    mla_hybrid_align_128=False,
    qwen_mixed_windows="refused",
    qwen2_moe_windows="every_layer",
    default_block_size=16,
    mla_blocks="hopper64",  # platforms/cuda.py check_and_update_config: FlashMLA forces 64 on Hopper
    uniform_type_groups=False,
    page_unify="refuse",
    group_pad_threshold=None,
    skip_layers="none",
    logged_pool="blocks_x_bs",  # _get_kv_cache_config_uniform_type: num_blocks * block_size
    gpu_memory_utilization=0.90,
    cuda_graph_estimate=False,
    kv_sizing="profiled",
    measured_utilization=None,
    deepseek_rope_fp32=False,
    mrope_unit_factor_archs=frozenset(),
    mm_items_ceil=True,
    mm_items_by_len=False,
    mm_dummy_at_model_len=False,
    qwen_vl_video_frames=16,
    qwen_vl_video_minus_image=True,
    qwen3_vl_video_x12_5=False,
    mxfp4_hopper="marlin",
    mxfp4_trtllm_pad=256,
    language_model_only=False,
    skip_mm_profiling=False,
    mm_dummy_options=False,
    zero_limit_drops_towers="none",
    unscaled_rope_types=UNSCALED_ROPE_OLD,
    yarn_from_original=True,
)
# 0.9.0: arg_utils.py _set_default_args_v1: `and "a100" not in device_name`.
R_0_9_0 = replace(R_0_8_5, tier_a100_excluded=True)
# 0.9.1: the hybrid allocator (_get_kv_cache_config_uniform_page_size; unify_hybrid_kv_cache_specs only when
# disable_hybrid_kv_cache_manager); concurrency by blocks per request; multi-group log num_blocks // groups x bs.
R_0_9_1 = replace(R_0_9_0, hybrid_allocator=True, logged_pool="blocks_per_group")
# 0.9.2: without chunked prefill max_num_batched_tokens = max_model_len (_set_default_args_v1).
R_0_9_2 = replace(R_0_9_1, no_chunked_tokens="max_model_len", serves_gemma3n=True)
# 0.10.0: ChunkedLocalAttentionSpec (v1/kv_cache_interface.py); fp8_inc; async scheduling (off); the multimodal
# profile's items by floor division (gpu_model_runner.py profile_run `encoder_budget // max_tokens_per_mm_item`).
R_0_10_0 = replace(R_0_9_2, chunked_local_window=True, kv_dtypes=KV_DTYPES_0100, mm_items_ceil=False)
# 0.10.1: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 0 (hybrid allocator off for Llama 4:
# chunked layers full again); CUTLASS MLA 128 on cc 10.0; max_num_seqs <= max_num_batched_tokens; multimodal
# items per prompt bounded by max_model_len (v1/worker/utils.py MultiModalBudget.get_max_items);
# --skip-mm-profiling; towers limited to 0 skipped by LLaVA, Mistral 3, Llama 4 and Qwen-VL.
R_0_10_1 = replace(
    R_0_10_0,
    chunked_local_window=False,
    mla_blocks="cutlass100",
    seqs_capped_by_tokens=True,
    mm_items_by_len=True,
    skip_mm_profiling=True,
    zero_limit_drops_towers="families",
)
# 0.10.2: hybrids and Whisper on V1 by default (_is_v1_supported_oracle); MambaModelConfig forces prefix caching
# off; HybridAttentionMambaModelConfig A = 16; cross attention = the encoder length; Qwen2-VL's video budget no
# longer less an image (qwen2_vl.py get_num_frames_with_most_features).
R_0_10_2 = replace(R_0_10_1, v1_state_models=True, v1_whisper=True, qwen_vl_video_minus_image=False)
# 0.11.0: V0 removed (Mllama with it); bfloat16 KV; DeepSeek-V3.2 (auto and fp8 -> fp8_ds_mla,
# DeepseekV32ForCausalLM); UniformTypeKVCacheSpecs; groups over the whole model; the multimodal dummy built at
# max_model_len, Qwen2-VL videos of at most 14 frames, Qwen3-VL (new) with its video's tokens x 12.5.
R_0_11_0 = replace(
    R_0_10_2,
    mllama="removed",
    kv_dtypes=KV_DTYPES_0110,
    sparse_mla=True,
    sparse_mla_auto_ds_mla=True,
    uniform_type_groups=True,
    mm_dummy_at_model_len=True,
    qwen_vl_video_frames=14,
    qwen3_vl_video_x12_5=True,
)
# 0.11.1: --limit-mm-per-prompt's dummy sizes (BaseDummyOptions); hybrid prefix caching off by default,
# SupportsMambaPrefixCaching models may turn it on
# (get_chunked_prefill_prefix_caching_defaults; MambaSpec cdiv(L, block)); alignment 16 / MLA 64 / sm_10x head
# size 256: 32 with SSD-chunk rounding (HybridAttentionMambaModelConfig); B <= seqs x L, B >= L without chunked
# prefill; fp8_ds_mla offered, V3.2 auto stays bf16.
R_0_11_1 = replace(
    R_0_11_0,
    hybrid_prefix_caching="off_by_default",
    attention_free_prefix_caching=True,
    mm_dummy_options=True,
    mamba_cache_modes="all_when_caching",
    mamba_all_mode_models=MAMBA_PREFIX_CACHING_MODELS,
    hybrid_align="fixed16_mla64",
    blackwell_hd256_align32=True,
    seqs_x_len_clamp=True,
    no_chunked_tokens="at_least_max_model_len",
    kv_dtypes=KV_DTYPES_0111,
    sparse_mla_auto_ds_mla=False,
)
# 0.12.0: unify_kv_cache_spec_page_size (divisible pages); group size max when max < 1.25 min; attention-free
# prefix caching off (is_prefix_caching_supported); encoder-decoder no longer chunked (is_chunked_prefill_supported).
# gpt-oss on sm_90: the vendored OAI triton_kernels (MXFP4 experts on Triton, original scales kept).
R_0_12_0 = replace(
    R_0_11_1,
    page_unify="divisible",
    group_pad_threshold=1.25,
    attention_free_prefix_caching=False,
    encoder_decoder_chunked=False,
    mxfp4_hopper="triton_dup_scales",
)
# 0.13.0: Whisper's max_num_encoder_input_tokens = max_num_batched_tokens (SchedulerConfig.__post_init__);
# NemotronH SSM dtype from the config, default float16 (NemotronHForCausalLMConfig); CUTLASS MLA on any cc 10.x.
# Qwen3-VL profiles its image again: the x 12.5 on its video's tokens is gone (qwen3_vl.py get_max_video_tokens).
R_0_13_0 = replace(
    R_0_12_0,
    encoder_tokens="batched_tokens",
    nemotron_ssm_default=KvDtype.FP16,
    mla_blocks="cutlass10x",
    qwen3_vl_video_x12_5=False,
)
# 0.14.0: VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE defaults to 1 (Llama 4 chunked again); async
# scheduling on by default (config/vllm.py VllmConfig.__post_init__); DeepSeek's scaled RoPE table in float32
# where FlashInfer applies it (deepseek_scaling_rope.py use_flashinfer); MiMo-V2-Flash, V padded to K.
R_0_14_0 = replace(
    R_0_13_0, chunked_local_window=True, async_scheduling_default=True, deepseek_rope_fp32=True, mimo_v2="v_padded"
)
# 0.16.0 (0.15.x has no sdist): mamba_cache_mode none/align/all (MambaModelConfig); MambaSpec counts speculative
# blocks; Blackwell FlashInfer-MLA 64 for qk_nope_head_dim 128; max_concurrent_batches 2 only at pp 1; towers
# limited to 0 skipped for every marked model (_mark_tower_model).
R_0_16_0 = replace(
    R_0_14_0,
    serves_glm_moe_dsa=True,
    mamba_cache_modes="modes",
    speculative_blocks=True,
    mla_blocks="flashinfer64",
    async_batches="two_at_pp1",
    zero_limit_drops_towers="marked",
)
# 0.17.0: --performance-mode throughput; Mamba-2 conv keeps speculative columns (mamba2_state_shape); Qwen3.5.
# triton_kernels 3.6: MXFP4 weight rows padded to 64 bytes on sm_90. --language-model-only.
R_0_17_0 = replace(
    R_0_16_0,
    throughput_mode=True,
    speculative_conv_mamba2=True,
    qwen35_ssm_dtype=True,
    mxfp4_hopper="triton_dup_scales_row64",
    language_model_only=True,
)
# 0.18.0: group size max when max < 1.5 min; MLA block from the backend's preference
# (update_block_size_for_backend); float16 KV; the sm_10x head-size-256 alignment dropped; fp8 -> fp8_ds_mla only
# on FLASHMLA_SPARSE (MLAAttention.__init__).
R_0_18_0 = replace(
    R_0_17_0,
    group_pad_threshold=1.5,
    mla_blocks="per_backend",
    kv_dtypes=KV_DTYPES_0180,
    blackwell_hd256_align32=False,
    sparse_fp8="backend",
)
# 0.19.0: --kv-cache-dtype-skip-layers (config/cache.py); Gemma 4 on TRITON_ATTN (models/config.py Gemma4Config).
R_0_19_0 = replace(R_0_18_0, skip_layers="unify", gemma4="triton")
# 0.20.0: gpu_memory_utilization 0.92 and the CUDA-graph estimate subtracted (config/cache.py, envs.py
# VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS "1"); NemotronH SSM float32; _align_hybrid_block_size; turboquant,
# per-token-head and nvfp4 KV; "align" for SupportsMambaPrefixCaching models when speculating.
# MiMo-V2 on FLASH_ATTN_DIFFKV (K and V at their own widths).
R_0_20_0 = replace(
    R_0_19_0,
    gpu_memory_utilization=0.92,
    cuda_graph_estimate=True,
    nemotron_ssm_default=KvDtype.FP32,
    hybrid_align="backend",
    kv_dtypes=KV_DTYPES_0200,
    all_mode_under_speculation=False,
    mimo_v2="diffkv_fa",
    qwen2_moe_windows="transformers_dependent",  # requirements/common.txt: transformers 4.x or 5.5.1+
)
# 0.20.1: the logged pool is int(max_concurrency x max_model_len) (_report_kv_cache_config).
R_0_20_1 = replace(R_0_20_0, logged_pool="concurrency_x_len")
# 0.21.0: nvfp4 sliding pages packed (SlidingWindowSpec.real_page_size_bytes).
R_0_21_0 = replace(R_0_20_1, nvfp4_sliding_packed=True)
# 0.22.0: "all" + speculative blocks, "all" again under speculation (MambaModelConfig, MambaSpec). 0.23.0 moves
# max_concurrent_batches into VllmConfig (pp + 1 on the V2 runner), which sizes nothing until 0.26.0.
# triton_kernels 3.5 again (no row padding).
R_0_22_0 = replace(
    R_0_21_0, all_mode_speculative_blocks=True, all_mode_under_speculation=True, mxfp4_hopper="triton_dup_scales"
)
# 0.24.0: a non-divisible attention page is padded on num-blocks-first backends; BambaForCausalLM removed; DSA
# layers that share a top-k build no indexer (deepseek_v2.py); Gemma 4 on FA4 where supported (Gemma4Config).
# MiMo-V2 on TRITON_ATTN_DIFFKV where FlashAttention 3/4 does not run.
R_0_24_0 = replace(
    R_0_22_0,
    page_unify="pad_block_stride",
    gemma4="fa4",
    mimo_v2="diffkv",
    mamba_all_mode_models=MAMBA_PREFIX_CACHING_MODELS - {"bamba"},
    dsa_shared_layers_unindexed=True,
    qwen2_moe_windows="none",  # requirements/common.txt: transformers >= 5.5.3
)
# 0.25.0: Platform._align_heterogeneous_kv_block_size (skip layers); int4_per_token_head; V2 runner for listed
# architectures or any non-MoE model (never hybrid).
# The original MXFP4 scales freed after the Triton swizzle.
R_0_25_0 = replace(R_0_24_0, skip_layers="realign", kv_dtypes=KV_DTYPES_0250, v2_runner="dense", mxfp4_hopper="triton")
# 0.26.0: sliding and chunked layers reserve VllmConfig.max_in_flight_tokens.
R_0_26_0 = replace(R_0_25_0, sliding_reserve="in_flight_batches")
# 0.27.0: MLA hybrids A >= 128 (_align_hybrid_block_size).
# FlashInfer TRT-LLM MXFP4 MoE pads intermediate to 128, not 256.
R_0_27_0 = replace(R_0_26_0, mla_hybrid_align_128=True, mxfp4_trtllm_pad=128)
# 0.28.0: hybrid prefix caching on by default, always "align" (EngineArgs defaults, MambaModelConfig); the
# 160 GiB tier (get_batch_defaults); nvfp4_4over6.
R_0_28_0 = replace(
    R_0_27_0,
    hybrid_prefix_caching="on_by_default",
    mamba_all_mode_models=frozenset(),
    tier_160gib=True,
    kv_dtypes=KV_DTYPES_0280,
)
# 0.29.0: every non-MLA attention page padded (unify_kv_cache_spec_page_size); the V2 runner for every model.
R_0_29_0 = replace(R_0_28_0, page_unify="pad", v2_runner="all")
# 0.30.0: YaRN maxima unscaled (_get_and_verify_max_len); nvfp4_ds_mla.
R_0_30_0 = replace(R_0_29_0, unscaled_rope_types=UNSCALED_ROPE_030, yarn_from_original=False, kv_dtypes=KV_DTYPES_0300)
# 0.31.0: FA4 on sm_90 pages an fp8 cache of head size 512 in 64 tokens (flash_attn.py
# _get_sm90_fa4_fp8_kv_block_size), which only Gemma 4's full layers reach.
R_0_31_0 = replace(R_0_30_0, gemma4="fa4_sm90_fp8_pages")
# 0.32.0: the mamba_mixer2 checkpoint block (MambaMixer2.get_kv_cache_spec); "all" removed; ultraquant_4bit;
# GLM-5's auto cache is fp8_e4m3 on sm_10x (models/config.py GlmMoeDsaForCausalLM); Qwen3-VL and Qwen3.5 build
# their multimodal RoPE table over max_position once (models/qwen3_vl.py mrope_positions_factor).
MROPE_UNIT_0320 = frozenset(
    {
        "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
    }
)
# MiMo-V2's attention takes the cache config: --kv-cache-dtype applies.
R_0_32_0 = replace(
    R_0_31_0,
    checkpoint_mixer2=True,
    kv_dtypes=KV_DTYPES_0320,
    glm_dsa_fp8_on_sm100=True,
    mrope_unit_factor_archs=MROPE_UNIT_0320,
    mimo_v2_cache_config=True,
)
# 0.33.0: GB10 on the small tier by its capability, now that NVML's memory query falls back to torch's total
# (before, the failed query put it there); the GDN checkpoint block and 64 alignment (qwen_gdn_linear_attn.py); FA4
# sparse MLA; octave KV formats.
R_0_33_0 = replace(
    R_0_32_0,
    gb10_small_tier=True,
    nvml_total_fallback=True,
    checkpoint_gdn=True,
    kv_dtypes=KV_DTYPES_0330,
)
# 0.34.0: 64-token default blocks (config/cache.py DEFAULT_BLOCK_SIZE); the extensible KV cache on by default on
# CUDA and ROCm, sized after warm-up and capture at utilisation 1.0 (v1/worker/extensible_kv_cache.py); Qwen3's
# partly sliding configs served with every layer full (models/qwen2.py Qwen2DecoderLayer).
R_0_34_0 = replace(
    R_0_33_0,
    default_block_size=64,
    qwen_mixed_windows="qwen3_all_full",
    kv_sizing="measured",
    measured_utilization=1.0,
)


def measures_pool(rules: VllmRules, platform: str) -> bool:
    """Whether the release sizes its pool after warm-up on this platform (VllmRules.kv_sizing: CUDA and ROCm)."""
    return rules.kv_sizing == "measured" and platform in ("cuda", "rocm")


# Architectures vLLM has removed, with the last release that served each: model_executor/models/registry.py
# _PREVIOUSLY_SUPPORTED_MODELS (0.34.0; ModelRegistry refuses them, "was supported in vLLM until v<release>").
REMOVED_ARCHITECTURES: dict[str, str] = {
    "MotifForCausalLM": "0.10.2",
    "Phi3SmallForCausalLM": "0.9.2",
    "Phi4FlashForCausalLM": "0.10.2",
    "Phi4MultimodalForCausalLM": "0.12.0",
    "JAISLMHeadModel": "0.22.0",
    "ErnieModel": "0.23.0",
    "ErnieForSequenceClassification": "0.23.0",
    "ErnieForTokenClassification": "0.23.0",
    "InternLM2VEForCausalLM": "0.23.0",
    "QWenLMHeadModel": "0.23.0",
    "QwenVLForConditionalGeneration": "0.23.0",
    "InternLMForCausalLM": "0.23.0",
    "DonutForConditionalGeneration": "0.10.2",
    "MllamaForConditionalGeneration": "0.10.2",
    "XverseForCausalLM": "0.23.0",
    "Dots1ForCausalLM": "0.23.0",
    "BambaForCausalLM": "0.23.0",
    "MiniMaxForCausalLM": "0.23.0",
    "MiniMaxText01ForCausalLM": "0.23.0",
    "MiniMaxM1ForCausalLM": "0.23.0",
    "MiniMaxVL01ForConditionalGeneration": "0.23.0",
    "BaiChuanForCausalLM": "0.23.0",
    "BaichuanForCausalLM": "0.23.0",
    "AquilaModel": "0.24.0",
    "AquilaForCausalLM": "0.24.0",
    "Grok1ModelForCausalLM": "0.24.0",
    "Grok1ForCausalLM": "0.24.0",
    "TarsierForConditionalGeneration": "0.24.0",
    "Tarsier2ForConditionalGeneration": "0.23.0",
    "MantisForConditionalGeneration": "0.24.0",
    "MusicFlamingoForConditionalGeneration": "0.24.0",
    "AyaVisionForConditionalGeneration": "0.24.0",
    "TeleChatForCausalLM": "0.25.0",
    "PersimmonForCausalLM": "0.25.0",
    "FuyuForCausalLM": "0.25.0",
    "Plamo2ForCausalLM": "0.26.0",
    "OuroForCausalLM": "0.26.0",
    "ArcticForCausalLM": "0.28.0",
    "ChameleonForConditionalGeneration": "0.28.0",
    "Cheers": "0.28.0",
    "CheersForConditionalGeneration": "0.28.0",
    "Fairseq2LlamaForCausalLM": "0.28.0",
    "FireRedLIDForConditionalGeneration": "0.28.0",
    "GritLM": "0.28.0",
    "HCXVisionForCausalLM": "0.28.0",
    "MPTForCausalLM": "0.28.0",
    "MptForCausalLM": "0.28.0",
    "RWForCausalLM": "0.28.0",
    "StableLMEpochForCausalLM": "0.28.0",
    "PrithviGeoSpatialMAE": "0.28.0",
    "KeyeForConditionalGeneration": "0.33.0",
    "KeyeVL1_5ForConditionalGeneration": "0.33.0",
}

VLLM_RELEASES: ReleaseTable[VllmRules] = ReleaseTable(
    engine="vllm",
    title="vLLM",
    eras=(
        Era("0.8.5", "0.8.5.post1", R_0_8_5, ("0.8.5", "0.8.5.post1")),
        Era("0.9.0", "0.9.0.1", R_0_9_0, ("0.9.0", "0.9.0.1")),
        Era("0.9.1", "0.9.1", R_0_9_1, ("0.9.1",)),
        Era("0.9.2", "0.9.2", R_0_9_2, ("0.9.2",)),
        Era("0.10.0", "0.10.0", R_0_10_0, ("0.10.0",)),
        Era("0.10.1", "0.10.1.1", R_0_10_1, ("0.10.1", "0.10.1.1")),
        Era("0.10.2", "0.10.2", R_0_10_2, ("0.10.2",)),
        Era("0.11.0", "0.11.0", R_0_11_0, ("0.11.0",)),
        Era("0.11.1", "0.11.2", R_0_11_1, ("0.11.1", "0.11.2")),
        Era("0.12.0", "0.12.0", R_0_12_0, ("0.12.0",)),
        Era("0.13.0", "0.13.0", R_0_13_0, ("0.13.0",)),
        Era("0.14.0", "0.15.1", R_0_14_0, ("0.14.0", "0.14.1")),
        Era("0.16.0", "0.16.0", R_0_16_0, ("0.16.0",)),
        Era("0.17.0", "0.17.1", R_0_17_0, ("0.17.0", "0.17.1")),
        Era("0.18.0", "0.18.1", R_0_18_0, ("0.18.0", "0.18.1")),
        Era("0.19.0", "0.19.1", R_0_19_0, ("0.19.0", "0.19.1")),
        Era("0.20.0", "0.20.0", R_0_20_0, ("0.20.0",)),
        Era("0.20.1", "0.20.2", R_0_20_1, ("0.20.1", "0.20.2")),
        Era("0.21.0", "0.21.0", R_0_21_0, ("0.21.0",)),
        Era("0.22.0", "0.23.0", R_0_22_0, ("0.22.0", "0.22.1", "0.23.0")),
        Era("0.24.0", "0.24.0", R_0_24_0, ("0.24.0",)),
        Era("0.25.0", "0.25.1", R_0_25_0, ("0.25.0", "0.25.1")),
        Era("0.26.0", "0.26.0", R_0_26_0, ("0.26.0",)),
        Era("0.27.0", "0.27.1", R_0_27_0, ("0.27.0", "0.27.1")),
        Era("0.28.0", "0.28.0", R_0_28_0, ("0.28.0",)),
        Era("0.29.0", "0.29.0", R_0_29_0, ("0.29.0",)),
        Era("0.30.0", "0.30.0", R_0_30_0, ("0.30.0",)),
        Era("0.31.0", "0.31.0", R_0_31_0, ("0.31.0",)),
        Era("0.32.0", "0.32.0", R_0_32_0, ("0.32.0",)),
        Era("0.33.0", "0.33.0", R_0_33_0, ("0.33.0",)),
        Era("0.34.0", "0.34.0", R_0_34_0, ("0.34.0",)),
    ),
    # No sdist on PyPI: sized with the era before them, with a note (a change dated 0.16.0 may have landed there).
    unread=("0.15.0", "0.15.1"),
)
UNREAD_RELEASES = VLLM_RELEASES.unread
