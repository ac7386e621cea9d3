"""SGLang's history as data: one `SglangRules` record per era of releases whose cache and budget rules match.

Each field is one rule switch; its docstring cites where it lives in SGLang's source (paths under
`python/sglang/srt/`). `SGLANG_RELEASES` gives each era with the releases read for it (sdists 0.4.0 ..
0.4.9.post1 for the default mem_fraction_static, 0.4.9.post2 .. 0.5.10.post1, wheels 0.5.11 .. 0.5.23).
kvsize/engines/sglang.py and kvsize/budget.py read switches and never
compare version strings. docs/releases/sglang.md tabulates the eras.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from kvsize.engines.releases import Era, ReleaseTable

TP_FRACTIONS = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
"""server_args.py ServerArgs.__post_init__@0.4.0 .. 0.4.7: the default mem_fraction_static by tp (0.4.7: tp x pp),
the first row whose bound the parallel size reaches."""

Tier = tuple[int, int, int, int]
"""(upper bound in MiB, chunked_prefill_size, decode CUDA-graph max_bs at tp < 4, at tp >= 4)."""


@dataclass(frozen=True)
class SglangRules:
    """The KV-pool, scheduler and mem_fraction_static rules of one era of SGLang releases."""

    # --- the default mem_fraction_static ---------------------------------------------------------------
    mem_formula: Literal["by_tp", "by_tp_13g", "by_parallel_48g", "tiered", "reserve"]
    """server_args.py ServerArgs.__post_init__: by_tp (0.4.0 .. 0.4.5) a fixed fraction by tp_size whatever
    the card: 0.79 at tp >= 16, 0.81 >= 8, 0.85 >= 4, 0.87 >= 2, else 0.88 (TP_FRACTIONS); by_tp_13g (0.4.6) that
    table on cards of at most 81,920 MiB, (gpu_mem - 13 GiB) / gpu_mem above; by_parallel_48g (0.4.7) the table
    by tp x pp up to 81,920 MiB, else 0.88, then 0.79 on CUDA cards over 180,000 MiB and, over 96 GiB,
    min(f + 48 GiB x (1 - f) / gpu_mem, (gpu_mem - 18 GiB) / gpu_mem); tiered (0.4.8 .. 0.5.2) a reserve per
    memory tier, (2.8 + tp x pp / 10) GiB
    under 35 GiB, (9.5 + tp x pp / 2) under 90, (12 + tp x pp / 2) under 160, else 32 GiB; or
    _handle_gpu_memory_settings (0.5.3+, arg_groups/memory_hook.py handle_gpu_memory_settings from 0.5.19):
    512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x decode max_bs + tp x pp / 8 GiB (+ prefill graph),
    floored at 10 GiB on cards over 60 GiB."""
    tiers: tuple[Tier, ...]
    """_handle_gpu_memory_settings: chunked_prefill_size and decode max_bs by nvidia-smi memory.total (the
    reserve formula only; B200-class cards above the last bound take 16384 / 512)."""
    vlm_factor: Literal["none", "x0.90", "vit_scaled"]
    """Multimodal models: no factor (<= 0.4.8), mem_fraction_static x 0.90 (server_args.py __post_init__,
    0.4.9 .. 0.4.9.post2), or
    adjust_mem_fraction_for_vlm's 0.95 x a ViT-size factor (0.4.9.post3+)."""
    prefill_graph: Literal["none", "text_only", "allow_list"]
    """The piecewise / breakable prefill CUDA-graph reserve (8 MiB per token bucket, MLA 1.5 GiB): not in the
    default formula (enable_piecewise_cuda_graph off by default, <= 0.5.9); on by default except for multimodal
    models (disable_piecewise_cuda_graph, _handle_piecewise_cuda_graph, 0.5.10); multimodal models on an
    allow-list keep it (configs/model_config.py multimodal_*_cuda_graph_supported_model_archs, 0.5.14+)."""
    vlm_kv_reserve_mib: int
    """MiB a multimodal model's KV budget loses to the embedding cache (mem_cache/kv_cache_configurator.py
    mm_runtime_reservation_gb, SGLANG_VLM_CACHE_SIZE_MB = 100; 0.5.18+). Earlier releases allocate the cache
    after sizing the pool (managers/scheduler.py, mem_cache/kv_cache_builder.py)."""

    # --- sliding windows -------------------------------------------------------------------------------
    swa_archs: frozenset[str]
    """Architectures that get a separate SWA pool by default: those whose model defines
    get_attention_sliding_window_size, less the ones server_args.py sets disable_hybrid_swa_memory for
    (model_executor/model_runner.py, 0.4.9.post3 .. 0.5.6), then configs/model_config.py is_hybrid_model
    (MiMo-V2-Flash, 0.5.7) and is_hybrid_swa_model (0.5.8+)."""
    swa_config_opt_in: bool
    """A config's `is_hybrid_swa: true` opts in (configs/model_config.py is_hybrid_swa_model, 0.5.23)."""
    swa_eviction: Literal["none", "window", "window_pages", "fixed"]
    """Decode steps between a request's SWA evictions (managers/schedule_batch.py maybe_evict_swa): "none", a
    running request keeps every token in the SWA pool (0.4.9.post3-0.4.10: prepare_for_decode evicts only for
    SWAChunkCache, and SWARadixCache frees unlocked tree nodes only, read in 0.4.10.post2); "window",
    the sliding window itself (`decode_batch_idx % sliding_window_size == 1`, read in 0.5.8, 0.5.9 and 0.5.10);
    "window_pages", max(page, window x SGLANG_SWA_EVICTION_INTERVAL_MULTIPLIER 1.0) in whole pages (0.5.11-0.5.13,
    read in each); "fixed", 128
    (environ.py SGLANG_SWA_EVICTION_INTERVAL, 0.5.14+). No release between 0.5.0 and 0.5.7 pools a model kvsize
    serves (MiMo-V2-Flash's 0.5.7 pool is refused)."""
    swa_stage_layers: Literal["model", "stage_plus_one", "stage"]
    """The layers a pipeline stage's hybrid SWA cell counts: the whole model's (through 0.5.7, kvsize's reading);
    the stage's layer ids in range(start_layer, end_layer + 1), one past the stage (0.5.8-0.5.20:
    model_runner.py / layer_setup.py, read in 0.5.8, 0.5.9, 0.5.10, 0.5.11, 0.5.15, 0.5.20); the stage's own
    (0.5.21+: layer_setup.py _resolve_local_hybrid_swa_layer_ids)."""
    swa_pool_floor: bool
    """SGLang refuses to start when the SWA pool holds no more than its window + a page (0.5.20+:
    model_executor/pool_configurator.py validate_swa_pool_size, "cannot hold even one request")."""
    gemma3n_full_rows: bool
    """Gemma 3n served with every layer full attention, one row per layer of the stage, KV-shared layers too
    (0.5.0+: arg_groups/model_overrides/gemma2_gemma3.py disable_hybrid_swa_memory, read in 0.5.23 with
    models/gemma3n_causal.py; no Gemma 3n before 0.4.9, its sliding layers pooled in 0.4.9.post3-0.4.10)."""
    gemma4_sm100: Literal["none", "triton", "trtllm_mha_but_fp4_moe", "trtllm_mha"]
    """The attention backend Gemma 4 is given on SM100 (the page it implies): no Gemma 4 (<= 0.5.10); triton, page
    1 (0.5.11-0.5.12, server_args.py _handle_model_specific_adjustments); trtllm_mha, pages of 64, except
    modelopt_fp4 MoE checkpoints on triton (0.5.13); trtllm_mha (0.5.14+, arg_groups/model_overrides/gemma4.py
    _gemma4_overrides). Every other GPU: triton, page 1."""

    # --- Mamba / linear-attention state (model_executor/model_runner.py, mem_cache/kv_cache_configurator.py) ---
    mamba_pool: Literal["none", "no_plus_one", "plus_one", "extra_buffer"]
    """none: no hybrid-state models served (<= 0.5.1). no_plus_one (0.5.2 .. 0.5.6, ModelRunner
    handle_max_mamba_cache): states take int(rest x 0.9 / 1.9 // per_req) slots, KV the rest; Mamba2 configs
    (Falcon-H1, Nemotron-H) turn the radix cache off and keep 512 slots, 1 per request; others 3 per request
    (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO). plus_one (0.5.7+): MambaPool holds size + 1 slots, the radix
    cache stays on, 3 per request. extra_buffer (0.5.14+): mamba_radix_cache_strategy auto -> extra_buffer for
    the listed architectures, 3 + 2 tracking slots per request (_calculate_mamba_ratio)."""
    half_pool_request_cap: bool
    """Default max_running_requests at most half the pool's tokens (resolve_max_num_reqs, 0.5.23); earlier
    releases clamp int(pool / context_len x 512) to [2048, 4096] only (ModelRunner.init_memory_pool, 0.5.4)."""

    # --- pages and sparse MLA --------------------------------------------------------------------------
    dsa_pool: Literal["none", "latent_only", "indexer_per_cell"]
    """DeepSeek-V3.2 (sparse MLA with an indexer): not served (<= 0.5.2); NSATokenToKVPool with the cell
    counting only the latent (ModelRunner.profile_max_num_token, 0.5.3); the cell adds the indexer's
    index_head_dim + index_head_dim / 128 x 4 B per layer (0.5.4+; pool_configurator.py
    _compute_dsa_indexer_cell_size in 0.5.23). Page 64 throughout ("Setting page size to 64 for DeepSeek NSA")."""
    sm100_mla_trtllm: bool
    """DeepSeek V3 / R1 (DeepseekV3ForCausalLM) on SM100 default to trtllm_mla, pages of 64
    (server_args.py _handle_model_specific_adjustments, 0.5.4+; arg_groups/model_overrides/deepseek_v2.py)."""
    sm100_mha: Literal["page1", "trtllm_mha", "trtllm_mha_fa4"]
    """MHA models on SM100: flashinfer, page 1 (<= 0.5.6); trtllm_mha, pages of 64 (_get_default_attn_backend,
    0.5.7+); FA4 with 128-token pages for unequal K / V head sizes (arg_groups/overrides.py
    _fa4_page_constraint, 0.5.23)."""
    unified_free: Literal["mem_get_info", "psutil_available"]
    """On an integrated GPU (Jetson, DGX Spark) the free memory the budget starts from: torch.cuda.mem_get_info's
    free, what the OS leaves outside its page cache (utils.py get_available_gpu_memory, <= 0.5.8), or
    psutil.virtual_memory().available, the page cache counted free (props.is_integrated, utils/common.py
    get_available_gpu_memory, 0.5.9+). Either is the OS's figure, not the card's."""
    decode_bs_capped_by_requests: bool
    """A stated --max-running-requests lowers the default decode graph max_bs (memory_hook.py
    handle_gpu_memory_settings, 0.5.23)."""
    serves_glm_moe_dsa: bool
    """GlmMoeDsaForCausalLM (GLM-5) has a model class (srt/models/glm4_moe.py) from 0.5.9; 0.5.8 has none."""
    swa_own_geometry: bool
    """The hybrid SWA pool sizes its SWA rows as get_swa_num_kv_heads(tp) x (swa_head_dim + swa_v_head_dim) and
    its full rows as get_num_kv_heads(tp) x (head_dim + v_head_dim), for any model (0.5.9+:
    model_runner_kv_cache_mixin.py get_cell_size_per_token / set_num_token_hybrid; 0.5.23
    pool_configurator.py HybridSWAPoolConfigurator). 0.5.7-0.5.8 add MiMo-V2-Flash's SWA rows to the cell by a
    rule of their own (`if "MiMoV2FlashForCausalLM" in architectures`, is_hybrid_swa_compress), not read."""

    # --- load-time buffers ------------------------------------------------------------------------------
    rope_table_fp32: bool
    """RoPE cos/sin tables kept in float32 on CUDA (layers/rotary_embedding.py RotaryEmbedding.__init__: "cache
    needs to be in FP32 for numerical stability", read in 0.4.3 .. 0.5.10); 0.4.0 (vLLM's get_rope), 0.4.1.post7
    and 0.4.2 cast them to the model's dtype (kvsize/rope_tables.py)."""


_T4090 = (20 * 1024, 2048, 8, 8)
TIERS_053: tuple[Tier, ...] = (
    _T4090,
    (35 * 1024, 2048, 16, 80),  # A10, 4090, 5090
    (60 * 1024, 4096, 32, 160),  # A100 40GB, L40
    (90 * 1024, 8192, 256, 512),  # H100, A100 80GB
    (160 * 1024, 8192, 256, 512),  # H20, H200
)
TIERS_055 = (_T4090, (35 * 1024, 2048, 24, 80), *TIERS_053[2:])  # 0.5.5: 4090 decode max_bs 24
TIERS_0520 = (_T4090, (35 * 1024, 4096, 48, 160), *TIERS_053[2:])  # 0.5.20: 4090 chunk 4096, max_bs 48
LARGE_TIER = (16384, 512)  # B200, MI300: chunked_prefill_size, decode max_bs

GEMMA_SWA = frozenset(
    {
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "Gemma3nForCausalLM",
        "Gemma3nForConditionalGeneration",
    }
)
# configs/model_config.py is_hybrid_swa_model, read per release (MTP draft architectures left out).
SWA_058 = frozenset({"Llama4ForConditionalGeneration", "GptOssForCausalLM", "MiMoV2FlashForCausalLM"})
SWA_059 = SWA_058 | {"Step3p5ForCausalLM"}
SWA_0511 = SWA_059 | {"Gemma4ForCausalLM", "Gemma4ForConditionalGeneration", "MiMoV2ForCausalLM"}
SWA_0512 = SWA_0511 | {"DeepseekV4ForCausalLM", "LagunaForCausalLM"}
SWA_0513 = SWA_0512 | {"Gemma4UnifiedForConditionalGeneration", "Step3p7ForConditionalGeneration"}
SWA_0515 = SWA_0513 | {"UnlimitedOCRForCausalLM"}
SWA_0516 = SWA_0515 | {"InklingForConditionalGeneration", "MellumForCausalLM"}
SWA_0518 = SWA_0516 | {"MuseGlimmerForCausalLM", "MuseGlimmerForConditionalGeneration"}
SWA_0519 = SWA_0518 | {"GraniteSWAForCausalLM", "GraniteMoeSWAForCausalLM"}
SWA_0521 = SWA_0519 | {"DiffusionGemmaForBlockDiffusion", "IQuestQ1ForCausalLM"}
SWA_0522 = SWA_0521 | {"EmbeddingGemma2Model"}
SWA_0523 = SWA_0522 | {"BeamForCausalLM"}

RULES_0409P2 = SglangRules(
    mem_formula="tiered",
    tiers=(),
    vlm_factor="x0.90",
    prefill_graph="none",
    vlm_kv_reserve_mib=0,
    swa_archs=frozenset(),  # no hybrid-SWA detection yet (Llama 4 only with --hybrid-kvcache-ratio)
    swa_config_opt_in=False,
    swa_eviction="none",
    swa_stage_layers="model",
    swa_pool_floor=False,
    gemma3n_full_rows=False,
    gemma4_sm100="none",
    mamba_pool="none",
    half_pool_request_cap=False,
    dsa_pool="none",
    sm100_mla_trtllm=False,
    sm100_mha="page1",
    decode_bs_capped_by_requests=False,
    unified_free="mem_get_info",
    serves_glm_moe_dsa=False,
    swa_own_geometry=False,
    rope_table_fp32=True,
)
# server_args.py ServerArgs.__post_init__@0.4.0 .. 0.4.9.post1, read for the default mem_fraction_static only
# (model_executor/model_runner.py profile_max_num_token is the same rule as 0.4.9.post2's: free memory after
# loading - (1 - mem_fraction_static) x free memory before); the other switches are taken as 0.4.9.post2's.
RULES_043 = replace(RULES_0409P2, mem_formula="by_tp", vlm_factor="none")
RULES_040 = replace(RULES_043, rope_table_fp32=False)  # 0.4.0 .. 0.4.2: RoPE tables in the model's dtype
EARLY_READ = "the default mem_fraction_static (server_args.py ServerArgs.__post_init__)"
RULES_046 = replace(RULES_043, mem_formula="by_tp_13g")
RULES_047 = replace(RULES_043, mem_formula="by_parallel_48g")
RULES_048 = replace(RULES_043, mem_formula="tiered")
RULES_049 = RULES_0409P2  # multimodal x 0.90 from 0.4.9
RULES_0409P3 = replace(RULES_0409P2, vlm_factor="vit_scaled", swa_archs=GEMMA_SWA)
RULES_0410P2 = replace(RULES_0409P3, swa_archs=GEMMA_SWA - {"Gemma2ForCausalLM"})
# Gemma 2/3/3n and gpt-oss: disable_hybrid_swa_memory
RULES_050 = replace(RULES_0410P2, swa_archs=frozenset(), gemma3n_full_rows=True)
RULES_052 = replace(RULES_050, mamba_pool="no_plus_one")
RULES_053 = replace(RULES_052, mem_formula="reserve", tiers=TIERS_053, dsa_pool="latent_only")
RULES_054 = replace(RULES_053, dsa_pool="indexer_per_cell", sm100_mla_trtllm=True)
RULES_055 = replace(RULES_054, tiers=TIERS_055)
RULES_057 = replace(
    RULES_055, swa_archs=frozenset({"MiMoV2FlashForCausalLM"}), mamba_pool="plus_one", sm100_mha="trtllm_mha"
)
RULES_058 = replace(RULES_057, swa_archs=SWA_058, swa_eviction="window", swa_stage_layers="stage_plus_one")
RULES_059 = replace(
    RULES_058, swa_archs=SWA_059, unified_free="psutil_available", serves_glm_moe_dsa=True, swa_own_geometry=True
)
RULES_0510 = replace(RULES_059, prefill_graph="text_only")
RULES_0511 = replace(RULES_0510, swa_archs=SWA_0511, gemma4_sm100="triton", swa_eviction="window_pages")
RULES_0512 = replace(RULES_0511, swa_archs=SWA_0512)
RULES_0513 = replace(RULES_0512, swa_archs=SWA_0513, gemma4_sm100="trtllm_mha_but_fp4_moe")
RULES_0514 = replace(
    RULES_0513, mamba_pool="extra_buffer", prefill_graph="allow_list", swa_eviction="fixed", gemma4_sm100="trtllm_mha"
)
RULES_0515 = replace(RULES_0514, swa_archs=SWA_0515)
RULES_0516 = replace(RULES_0515, swa_archs=SWA_0516)
RULES_0518 = replace(RULES_0516, swa_archs=SWA_0518, vlm_kv_reserve_mib=100)
RULES_0519 = replace(RULES_0518, swa_archs=SWA_0519)
RULES_0520 = replace(RULES_0519, tiers=TIERS_0520, swa_pool_floor=True)
RULES_0521 = replace(RULES_0520, swa_archs=SWA_0521, swa_stage_layers="stage")
RULES_0522 = replace(RULES_0521, swa_archs=SWA_0522)
RULES_0523 = replace(
    RULES_0522,
    swa_archs=SWA_0523,
    swa_config_opt_in=True,
    half_pool_request_cap=True,
    sm100_mha="trtllm_mha_fa4",
    decode_bs_capped_by_requests=True,
)


SGLANG_RELEASES: ReleaseTable[SglangRules] = ReleaseTable(
    engine="sglang",
    title="SGLang",
    eras=(
        Era("0.4.0", "0.4.2", RULES_040, ("0.4.0", "0.4.1.post7", "0.4.2"), series_depth=3, partly_read=EARLY_READ),
        Era(
            "0.4.3",
            "0.4.5",
            RULES_043,
            ("0.4.3", "0.4.3.post2", "0.4.3.post4", "0.4.4", "0.4.5"),
            series_depth=3,
            partly_read=EARLY_READ,
        ),
        Era("0.4.6", "0.4.6", RULES_046, ("0.4.6",), series_depth=3, partly_read=EARLY_READ),
        Era("0.4.7", "0.4.7", RULES_047, ("0.4.7",), series_depth=3, partly_read=EARLY_READ),
        Era("0.4.8", "0.4.8", RULES_048, ("0.4.8",), series_depth=3, partly_read=EARLY_READ),
        Era("0.4.9", "0.4.9.post1", RULES_049, ("0.4.9", "0.4.9.post1"), series_depth=3, partly_read=EARLY_READ),
        Era("0.4.9.post2", "0.4.9.post2", RULES_0409P2, ("0.4.9.post2",), series_depth=3),
        Era("0.4.9.post3", "0.4.10.post1", RULES_0409P3, ("0.4.9.post3", "0.4.10", "0.4.10.post1"), series_depth=3),
        Era("0.4.10.post2", "0.4.10.post2", RULES_0410P2, ("0.4.10.post2",), series_depth=3),
        Era("0.5.0rc0", "0.5.1.post3", RULES_050, ("0.5.0rc0", "0.5.1"), series_depth=3),
        Era("0.5.2", "0.5.2", RULES_052, ("0.5.2",), series_depth=3),
        Era("0.5.3", "0.5.3.post3", RULES_053, ("0.5.3",), series_depth=3),
        Era("0.5.4", "0.5.4.post3", RULES_054, ("0.5.4",), series_depth=3),
        Era("0.5.5", "0.5.6.post2", RULES_055, ("0.5.5", "0.5.6"), series_depth=3),
        Era("0.5.7", "0.5.7", RULES_057, ("0.5.7",), series_depth=3),
        Era("0.5.8", "0.5.8.post1", RULES_058, ("0.5.8",), series_depth=3),
        Era("0.5.9", "0.5.9", RULES_059, ("0.5.9",), series_depth=3),
        Era("0.5.10", "0.5.10.post1", RULES_0510, ("0.5.10", "0.5.10.post1"), series_depth=3),
        Era("0.5.11", "0.5.11", RULES_0511, ("0.5.11",), series_depth=3),
        Era("0.5.12", "0.5.12.post1", RULES_0512, ("0.5.12",), series_depth=3),
        Era("0.5.13", "0.5.13.post1", RULES_0513, ("0.5.13",), series_depth=3),
        Era("0.5.14", "0.5.14", RULES_0514, ("0.5.14",), series_depth=3),
        Era("0.5.15", "0.5.15.post1", RULES_0515, ("0.5.15",), series_depth=3),
        Era("0.5.16", "0.5.17", RULES_0516, ("0.5.16", "0.5.17"), series_depth=3),
        Era("0.5.18", "0.5.18", RULES_0518, ("0.5.18",), series_depth=3),
        Era("0.5.19", "0.5.19", RULES_0519, ("0.5.19",), series_depth=3),
        Era("0.5.20", "0.5.20", RULES_0520, ("0.5.20",), series_depth=3),
        Era("0.5.21", "0.5.21", RULES_0521, ("0.5.21",), series_depth=3),
        Era("0.5.22", "0.5.22", RULES_0522, ("0.5.22",), series_depth=3),
        Era("0.5.23", "0.5.23", RULES_0523, ("0.5.23",), series_depth=3),
    ),
)
