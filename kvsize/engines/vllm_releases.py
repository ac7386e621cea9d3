"""vLLM's history as data: one `VllmRules` record per era of releases whose cache rules are identical.

Each field is one named rule switch; its docstring cites where the switch lives in vLLM's source. The eras
below (`VLLM_RELEASES`) give each switch's value with the release it was read from. The engine code
(`kvsize/engines/vllm.py`, `vllm_scheduler.py`, `kvsize/budget.py`, `kvsize/calibration.py`) reads switches and
never compares version strings; a new release is added here. docs/engines.md tabulates the eras.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kvsize.dtypes import KvDtype
from kvsize.engines.releases import Era, ReleaseTable


@dataclass(frozen=True)
class VllmRules:
    """The cache, scheduler and budget rules of one era of vLLM releases."""

    # --- the scheduler (engine/arg_utils.py, config/scheduler.py, config/vllm.py) --------------------------
    batch_defaults: Literal["set_default_args", "get_batch_defaults"]
    """EngineArgs._set_default_args (no throughput mode, no max_num_seqs x max_model_len clamp, max_model_len
    tokens without chunked prefill) or get_batch_defaults + _set_default_max_num_seqs_and_batched_tokens_args."""
    tier_160gib: bool
    """get_batch_defaults: a >= 160 GiB tier of 16384 tokens / 1024 sequences for both usage contexts."""
    gb10_small_tier: bool
    """get_batch_defaults: GB10 (capability 12.1) takes the small tier whatever its memory."""
    async_scheduling_default: bool
    """SchedulerConfig.async_scheduling's default (config/scheduler.py)."""
    async_batches: Literal["two_at_pp1", "pp_plus_one"]
    """Batches in flight with async scheduling: 2 at pp 1 (executors' max_concurrent_batches), or pp + 1
    (VllmConfig.max_concurrent_batches, with the V2 model runner); without it, pp."""
    sliding_reserve: Literal["full_length", "one_batch", "in_flight_batches"]
    """Tokens a sliding or chunked-local layer holds beyond its window (SlidingWindowSpec /
    ChunkedLocalAttentionSpec.max_memory_usage_bytes): none of the window at all (no hybrid allocator: every
    layer a FullAttentionSpec), one batch of max_num_batched_tokens, or VllmConfig.max_in_flight_tokens."""
    chunked_local_window: bool
    """Chunked-local layers (Llama 4) held for their chunk (ChunkedLocalAttentionSpec), not the whole context."""
    encoder_tokens: Literal["encoder_length", "batched_tokens"]
    """SchedulerConfig.max_num_encoder_input_tokens for encoder-decoder models: the encoder length
    (VllmConfig.__post_init__) or max_num_batched_tokens."""

    # --- dtypes (config/cache.py, models/config.py, mamba_utils.py) ----------------------------------------
    kv_dtypes: tuple[str, ...]
    """--kv-cache-dtype values accepted (config/cache.py CacheDType)."""
    sparse_mla_auto_ds_mla: bool
    """DeepseekV32ForCausalLM.verify_and_update_config: auto resolves to fp8_ds_mla on sparse MLA."""
    sparse_mla_fp8_is_ds_mla: bool
    """fp8 on a sparse-MLA model stores FlashMLA sparse's 656 B "fp8 with scale" layout."""
    nemotron_ssm_default: KvDtype | None
    """NemotronHForCausalLMConfig: the SSM state dtype when the config names no mamba_ssm_cache_dtype
    (None: no such hook, the model dtype)."""
    qwen35_ssm_dtype: bool
    """Qwen3_5ForConditionalGenerationConfig: the config's mamba_ssm_dtype sets the SSM state dtype."""

    # --- Mamba / linear attention (models/config.py, v1/kv_cache_interface.py MambaSpec) -------------------
    hybrid_prefix_caching: Literal["forced_off", "off_by_default", "on_by_default"]
    """Prefix caching for models with state: MambaModelConfig turns it off whatever the user says; or off
    unless asked (is_prefix_caching_supported: hybrids no); or on for hybrids with attention."""
    mamba_all_mode_models: frozenset[str]
    """Model types with SupportsMambaPrefixCaching: mamba_cache_mode "all" when prefix caching is on."""
    speculative_state: bool
    """Speculative tokens add conv columns and state blocks (MambaStateShapeCalculator, MambaSpec)."""
    prefill_checkpoint_blocks: bool
    """"align" mode holds one prefill-checkpoint block for mamba_mixer2 layers, and for GDN with the FlashInfer
    prefill on Hopper (get_mamba_prefill_checkpoint_alignment)."""
    hybrid_align: Literal["fixed16", "fixed16_mla64", "platform"]
    """Hybrid attention + Mamba block size: A x cdiv(state, A x attention bytes per token) with A = 16
    (HybridAttentionMambaModelConfig), A = 16 or 64 for MLA with "all" mode's SSD-chunk rounding, or
    Platform._align_hybrid_block_size (A = max(16, block), 128 for MLA hybrids, checkpoint lcm)."""

    # --- attention backends (platforms/cuda.py) ------------------------------------------------------------
    mla_blocks: Literal["flashmla_cutlass", "per_backend"]
    """MLA block size: FlashMLA 64 on Hopper, CUTLASS MLA 128 on sm_100, 16 elsewhere (check_and_update_config);
    or _get_backend_priorities' backend's kernel block (FlashInfer-MLA 32 on sm_10x, FlashAttention-MLA 16 /
    FlashMLA 64 for fp8 on Hopper, Triton 16)."""

    # --- groups (v1/core/kv_cache_utils.py, later kv_cache_planning.py) ------------------------------------
    page_unify: Literal["refuse", "divisible", "pad"]
    """Layer types whose pages differ: refused (NotImplementedError), unified when the smaller divide the
    largest, or also padded (non-MLA attention and Mamba) when they do not (unify_kv_cache_spec_page_size)."""
    group_pad_threshold: float | None
    """_get_kv_cache_groups_uniform_page_size: group size max(counts) when max < threshold x min, else min."""
    skip_layers_realign: bool
    """--kv-cache-dtype-skip-layers realigns the primary block (Platform._align_heterogeneous_kv_block_size) and
    pads skipped sliding pages (Attention.get_kv_cache_spec)."""
    logged_pool: Literal["blocks_per_group", "concurrency_x_len"]
    """What "GPU KV cache size: N tokens" means: num_blocks // len(groups) x block_size, or
    int(concurrency x max_model_len) (get_max_concurrency_for_kv_cache_config)."""

    # --- the memory budget (v1/worker/gpu_worker.py) -------------------------------------------------------
    gpu_memory_utilization: float
    """CacheConfig.gpu_memory_utilization's default."""
    cuda_graph_estimate: bool
    """determine_available_memory subtracts the profiled CUDA-graph memory estimate from the KV budget."""

    # --- the model's maximum context (config/model.py _get_and_verify_max_len) -------------------------------
    unscaled_rope_types: frozenset[str]
    """RoPE types whose `factor` does not scale the derived maximum."""
    yarn_from_original: bool
    """YaRN's maximum is original_max_position_embeddings x factor (`derived_max_model_len =
    rp["original_max_position_embeddings"]`); from 0.30 YaRN is unscaled: max_position_embeddings is taken as
    already scaled."""

    # --- models ------------------------------------------------------------------------------------------
    serves_mllama: bool
    """Mllama (Llama 3.2 Vision) is served (removed in 0.10.2)."""


KV_DTYPES_011 = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc")
KV_DTYPES_019 = ("auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")
KV_DTYPES_033 = (
    "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla", "nvfp4_ds_mla",
    "turboquant_k8v4", "turboquant_4bit_nc", "turboquant_k3v4_nc", "turboquant_3bit_nc", "octave_k3v4",
    "octave_k3v3", "octave_k3v3_compact", "ultraquant_4bit", "int4_per_token_head", "int8_per_token_head",
    "fp8_per_token_head", "nvfp4", "nvfp4_4over6",
)  # fmt: skip

# config/model.py _get_and_verify_max_len: the RoPE types left unscaled (0.29 and before; 0.30 and after).
UNSCALED_ROPE_OLD = frozenset({"su", "longrope", "llama3"})
UNSCALED_ROPE_030 = frozenset({"su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling"})

# models/interfaces.py SupportsMambaPrefixCaching (0.19).
MAMBA_ALL_MODE_019 = frozenset(
    {"bamba", "nemotron_h", "jamba", "mamba2", "mamba", "falcon_mamba", "zamba2", "granitemoehybrid", "falcon_h1"}
)

RULES_011 = VllmRules(
    batch_defaults="set_default_args",
    tier_160gib=False,
    gb10_small_tier=False,
    async_scheduling_default=False,
    async_batches="two_at_pp1",
    sliding_reserve="one_batch",
    chunked_local_window=False,
    encoder_tokens="encoder_length",
    kv_dtypes=KV_DTYPES_011,
    sparse_mla_auto_ds_mla=True,
    sparse_mla_fp8_is_ds_mla=True,
    nemotron_ssm_default=None,
    qwen35_ssm_dtype=False,
    hybrid_prefix_caching="forced_off",
    mamba_all_mode_models=frozenset(),
    speculative_state=False,
    prefill_checkpoint_blocks=False,
    hybrid_align="fixed16",
    mla_blocks="flashmla_cutlass",
    page_unify="refuse",
    group_pad_threshold=None,
    skip_layers_realign=False,
    logged_pool="blocks_per_group",
    gpu_memory_utilization=0.90,
    cuda_graph_estimate=False,
    unscaled_rope_types=UNSCALED_ROPE_OLD,
    yarn_from_original=True,
    serves_mllama=False,
)
RULES_019 = VllmRules(
    batch_defaults="get_batch_defaults",
    tier_160gib=False,
    gb10_small_tier=False,
    async_scheduling_default=True,
    async_batches="two_at_pp1",
    sliding_reserve="one_batch",
    chunked_local_window=True,
    encoder_tokens="batched_tokens",
    kv_dtypes=KV_DTYPES_019,
    sparse_mla_auto_ds_mla=False,
    sparse_mla_fp8_is_ds_mla=False,
    nemotron_ssm_default=KvDtype.FP16,
    qwen35_ssm_dtype=True,
    hybrid_prefix_caching="off_by_default",
    mamba_all_mode_models=MAMBA_ALL_MODE_019,
    speculative_state=True,
    prefill_checkpoint_blocks=False,
    hybrid_align="fixed16_mla64",
    mla_blocks="per_backend",
    page_unify="divisible",
    group_pad_threshold=1.5,
    skip_layers_realign=False,
    logged_pool="blocks_per_group",
    gpu_memory_utilization=0.90,
    cuda_graph_estimate=False,
    unscaled_rope_types=UNSCALED_ROPE_OLD,
    yarn_from_original=True,
    serves_mllama=False,
)
RULES_033 = VllmRules(
    batch_defaults="get_batch_defaults",
    tier_160gib=True,
    gb10_small_tier=True,
    async_scheduling_default=True,
    async_batches="pp_plus_one",
    sliding_reserve="in_flight_batches",
    chunked_local_window=True,
    encoder_tokens="batched_tokens",
    kv_dtypes=KV_DTYPES_033,
    sparse_mla_auto_ds_mla=False,
    sparse_mla_fp8_is_ds_mla=True,
    nemotron_ssm_default=KvDtype.FP32,
    qwen35_ssm_dtype=True,
    hybrid_prefix_caching="on_by_default",
    mamba_all_mode_models=frozenset(),
    speculative_state=True,
    prefill_checkpoint_blocks=True,
    hybrid_align="platform",
    mla_blocks="per_backend",
    page_unify="pad",
    group_pad_threshold=1.5,
    skip_layers_realign=True,
    logged_pool="concurrency_x_len",
    gpu_memory_utilization=0.92,
    cuda_graph_estimate=True,
    unscaled_rope_types=UNSCALED_ROPE_030,
    yarn_from_original=False,
    serves_mllama=False,
)

VLLM_RELEASES: ReleaseTable[VllmRules] = ReleaseTable(
    engine="vllm",
    title="vLLM",
    eras=(
        Era("0.11.0", "0.11.2", RULES_011, ("0.11.0",)),
        Era("0.12.0", "0.19.1", RULES_019, ("0.19.0",)),
        Era("0.20.0", "0.33.0", RULES_033, ("0.33.0",)),
    ),
)
