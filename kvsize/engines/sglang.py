"""SGLang: token pools of `page_size` rows, one cell per token spanning every layer of the stage.

Rules by release: the era of the release asked for (kvsize/engines/sglang_releases.py `SglangRules`, one switch
per rule that changed between 0.4.9.post2 and 0.5.23; docs/releases/sglang.md) sets the default
mem_fraction_static formula, the SWA pool list, the Mamba pool, the SM100 page sizes and DeepSeek-V3.2's indexer.
The text below is 0.5.23's (file and function beside each rule, paths under `sglang/srt/`):

- Cell (bytes one token costs on one TP rank, `DefaultPoolConfigurator._compute_cell_size`,
  `model_executor/pool_configurator.py`): MHA `get_num_kv_heads(tp) x (head_dim + v_head_dim) x L x elem`
  with `get_num_kv_heads = max(1, kv // tp)` (`ModelConfig.get_num_kv_heads`, `configs/model_config.py`); MLA
  `(kv_lora_rank + qk_rope_head_dim) x L x elem`, one latent replicated on every rank (`MLATokenToKVPool`,
  `mem_cache/memory_pool.py`). `L` is `num_effective_layers = end_layer - start_layer`: every layer of the
  pipeline stage gets a buffer, including layers with no KV of their own (Nemotron-NAS no-op blocks, Gemma 3n
  shared layers). Hybrid Mamba / linear-attention models count only `full_attention_layer_ids`.
- Pages: `--page-size` defaults to 1 (`_page_size_default`, `arg_groups/overrides.py`), except on SM100 GPUs where
  MHA models default to trtllm_mha (pages of 64) or FA4 (128, unequal K/V head sizes) (`default_page_size`); a
  request holds `cdiv(tokens, page) x page` slots. Every pool buffer has `size + page_size` rows
  (`_kv_buffer_shapes`): the extra page is a padding page for dummy writes, per pool and not per request, so only
  `pool()` counts it.
- Sliding windows: only `is_hybrid_swa_model` architectures (gpt-oss, the Llama 4 multimodal wrapper, Gemma 4,
  MiMo-V2, Step-3.5, Laguna, Granite SWA, ...; `configs/model_config.py`) or configs with `is_hybrid_swa: true` get
  a separate SWA pool, sized `swa_full_tokens_ratio` (0.8) x the full pool (`HybridSWAPoolConfigurator`). Gemma
  2/3/3n set `disable_hybrid_swa_memory` (`arg_groups/model_overrides/gemma2_gemma3.py`) and Mistral, Phi-3,
  Starcoder2, Cohere2, EXAONE 4 ... are not on the list: their sliding layers are sized as full attention. Per
  request kvsize charges a pooled sliding (or Llama 4 chunked) layer `min(ctx, pages(window + 128 + page) + page)`
  slots: the window, the tokens that wait for the next eviction (SGLANG_SWA_EVICTION_INTERVAL = 128 decode steps;
  the window itself before 0.5.14, `SglangRules.swa_eviction`), the alignment page and the next decode page
  (`compute_swa_request_cap`, `model_executor/pool_configurator.py`). The window is SGLang's own
  (`resolve_sliding_window_size`): the config's sliding_window - 1 for gpt-oss and the Gemmas.
  Gemma 4 and Gemma 3n: `SglangEngine._check_gemma4`, `_check_gemma3n`, `shared_source`.
- Cross attention (Mllama): encoder tokens take slots from the same token pool (`encoder_out_cache_loc`), and a
  slot spans every layer, so every layer holds `ctx + encoder tokens` slots per request.
- Mamba / GDN state (`Mamba2CacheParams`, `configs/mamba_utils.py`): conv `(conv_dim / tp, kernel - 1)` in bf16
  (`SGLANG_MAMBA_CONV_DTYPE`), SSM `(heads / tp, head_dim, state)` in fp32 (`SGLANG_MAMBA_SSM_DTYPE`; a config
  `mamba_ssm_dtype` would override it, but the architecture spec does not carry that field). With the radix
  cache on (the default) the scheduler admits `max_mamba_cache_size // ratio` requests, ratio 3
  (`MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO`) plus 2 tracking slots for the extra-buffer architectures
  (Qwen3-Next, Nemotron-H, Falcon-H1, ...: 5) (`mem_cache/kv_cache_configurator.py _calculate_mamba_ratio`), so
  kvsize charges that many state slots per request (1 with `enable_prefix_caching=False`, `--disable-radix-cache`).
- Default `mem_fraction_static` (`spec_mem_fraction_static`, used by kvsize/budget.py): 0.5.23's reserve formula
  (`arg_groups/memory_hook.py handle_gpu_memory_settings`), the VLM factor and AMD aiter x 0.85.
- Default max_running_requests (`default_max_running_requests`, `running_request_cap`): `resolve_max_num_reqs`.
- Tensor parallelism (`check_parallel`): heads as `models/llama.py LlamaAttention` asserts them.
- KV dtypes (`configure_kv_cache_dtype`, `mem_cache/kv_cache_dtype.py`): auto (the model dtype), bf16, fp8_e4m3,
  fp8_e5m2, nvfp4 (mxfp8 and fp4_mx_block16 have no kvsize format). NVFP4 cell (`_compute_cell_size`): data
  `heads x (D_k + D_v) / 2` + one e4m3 scale per 16 elements counted as `heads x D_k x 2 / 16`, plus one shared FP8
  dequant workspace of `heads x D_k x 2` bytes per token for the whole stage (in the cell, so in `pool()`; it is
  prefill scratch rather than cache, so per-request figures leave it out). MLA NVFP4: `576 / 2 + 576 / 16` = 324 B.
- Pool (`pool()`): `max_total_num_tokens = available // cell`, floored to the page size, min over PP stages
  (`DefaultPoolConfigurator.calculate_pool_sizes`); hybrid SWA: `cell = full x n_full + 0.8 x swa x n_swa`,
  `swa_tokens = 0.8 x full_tokens` (the stage's layer counts as `HybridSWAPoolConfigurator` reads
  `kvc.layer_info.full_attention_layer_ids`, one past the stage through 0.5.20: `SglangRules.swa_stage_layers`);
  hybrid Mamba: `rest x r / (1 + r)` with `mamba_full_memory_ratio`
  r = 0.9 goes to states, `max_mamba_cache_size = (budget - per_req) // per_req`, KV gets `rest - (max + 1) x
  per_req` (`KVCacheConfigurator._handle_max_mamba_cache`). `available_bytes` is SGLang's `rest`: free memory
  after loading the weights minus `(1 - mem_fraction_static) x` free memory before loading
  (`KVCacheConfigurator._profile_available_bytes`).
- Pipeline stages (`get_pp_indices`, `distributed/utils.py`): `n // pp` layers each, the last `n % pp` stages one
  more (vLLM gives the remainder to the stages before the last).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from copy import copy

import msgspec

from kvsize.config import MIMO_V2_MODEL_TYPES
from kvsize.dtypes import KvDtype
from kvsize.engines.base import (
    Engine,
    UnsupportedArchitecture,
    cdiv,
    check_head_split,
    group_layers,
    sliding_window_size_attention,
)
from kvsize.engines.context import served_dtype_name
from kvsize.engines.sglang_releases import LARGE_TIER, RULES_0523, SGLANG_RELEASES, TP_FRACTIONS, SglangRules
from kvsize.errors import UsageError
from kvsize.sizing import KvEstimate
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateSpec

DEFAULT_PAGE_SIZE = 1  # arg_groups/overrides.py _page_size_default (Hopper fa3; trtllm_mha on SM100 forces 64)
TRTLLM_MHA_PAGE_SIZE = 64  # overrides.py _mla_backend_page_constraints: trtllm_mha takes 16/32/64/128, else 64
FA4_PAGE_SIZE = 128  # overrides.py _fa4_page_constraint: FA4 on SM100, non-MLA models
SWA_FULL_TOKENS_RATIO = 0.8  # ServerArgs.swa_full_tokens_ratio
MAMBA_FULL_MEMORY_RATIO = 0.9  # ServerArgs.mamba_full_memory_ratio
MAMBA_SLOTS_RADIX = 3  # kv_cache_configurator.py MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (radix cache on)
MAMBA_SLOTS_NO_RADIX = 1  # _calculate_mamba_ratio with --disable-radix-cache
MAMBA2_SLOTS_NO_RADIX = (
    512  # model_runner.py handle_max_mamba_cache (0.5.2-0.5.6): radix off, no --max-running-requests
)
# model_runner.py mamba2_config (0.5.3-0.5.6): these configs turn the radix cache off ("disable radix cache").
MAMBA2_NO_RADIX_TYPES = frozenset({"falcon_h1", "nemotron_h"})
DSA_PAGE_SIZE = 64  # "Setting page size to 64 for DeepSeek NSA/DSA" (0.5.3+; 64 x index_kpool in 0.5.23)
DSA_QUANT_BLOCK = 128  # NSATokenToKVPool.quant_block_size: one fp32 scale (4 B) per 128 indexer elements
TRTLLM_MLA_PAGE_SIZE = 64  # trtllm_mla takes 32 or 64, else 64 (_mla_backend_page_constraints)
TRTLLM_MLA_ARCHS = frozenset({"DeepseekV3ForCausalLM"})  # "Use trtllm_mla as attention backend on sm100 for ..."
NVFP4_SCALE_BLOCK = 16  # pool_configurator.py _compute_cell_size: scale_block_size = 16

# configs/model_config.py is_hybrid_swa_model: the architectures (config `architectures`) that get a separate SWA
# pool (SWA_SINK_ARCHS and MIMO_V2_MODEL_ARCHS included). Llama 4 only as the multimodal wrapper: the text-only
# Llama4ForCausalLM is not on the list. A config may also opt in with `is_hybrid_swa: true`.
HYBRID_SWA_ARCHS = frozenset(
    {
        "BeamForCausalLM",
        "Llama4ForConditionalGeneration",
        "DeepseekV4ForCausalLM",
        "GptOssForCausalLM",
        "GraniteSWAForCausalLM",
        "GraniteMoeSWAForCausalLM",
        "IQuestQ1ForCausalLM",
        "MiMoV2ForCausalLM",
        "MiMoV2FlashForCausalLM",
        "Step3p5ForCausalLM",
        "Step3p7ForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
        "EmbeddingGemma2Model",
        "Gemma4UnifiedForConditionalGeneration",
        "DiffusionGemmaForBlockDiffusion",
        "LagunaForCausalLM",
        "MellumForCausalLM",
        "MuseGlimmerForCausalLM",
        "MuseGlimmerForConditionalGeneration",
        "InklingForConditionalGeneration",
        "UnlimitedOCRForCausalLM",
    }
)
# Configs without `architectures` (hand-written ones): the model_types of the architectures above.
HYBRID_SWA_MODEL_TYPES = frozenset(
    {"gpt_oss", "llama4", "gemma4", "gemma4_text", "mimo_v2", "mimo_v2_flash", "step3p5", "laguna"}
)

# arg_groups/overrides.py _MAMBA_EXTRA_BUFFER_ARCHS: with the radix cache on, the overlap scheduler on (the
# default) and the triton linear-attention backend (the default), `_mamba_radix_cache_resolution` picks
# `extra_buffer` for these, and `_calculate_mamba_ratio` (mem_cache/kv_cache_configurator.py) admits
# max_mamba_cache_size // (3 + get_mamba_tracking_slots(extra_buffer=True, overlap=True)) = // 5 requests.
MAMBA_EXTRA_BUFFER_ARCHS = frozenset(
    {
        "KimiLinearForCausalLM",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen3_5MoeForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen4ExpForConditionalGeneration",
        "InternS2PreviewForConditionalGeneration",
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "BailingMoeV3ForCausalLM",
        "BailingMoeV3VLForConditionalGeneration",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "Glm5NextForConditionalGeneration",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "NemotronH_Omni_Reasoning_V3",
        "KimiK3ForConditionalGeneration",
        "InklingForConditionalGeneration",
    }
)
# Configs without `architectures`: the model_types of the extra-buffer architectures.
MAMBA_EXTRA_BUFFER_MODEL_TYPES = frozenset(
    {
        "qwen3_next",
        "qwen3_5",
        "qwen3_5_moe",
        "qwen3_5_text",
        "qwen3_5_moe_text",
        "nemotron_h",
        "falcon_h1",
        "granitemoehybrid",
        "kimi_linear",
    }
)
MAMBA_TRACKING_SLOTS = 2  # mem_cache/allocation_sizing.py get_mamba_tracking_slots(extra_buffer, overlap=True)
SWA_EVICTION_INTERVAL = 128  # environ.py SGLANG_SWA_EVICTION_INTERVAL: decode steps between SWA evictions
# Models whose get_attention_sliding_window_size is config.sliding_window - 1 ("inclusive (HF) -> exclusive"):
# models/gpt_oss.py (0.5.8-0.5.23), gemma2.py, gemma3_causal.py, gemma3n_causal.py / gemma3n_mm.py,
# gemma4_causal.py / gemma4_mm.py (0.5.23); model_runner_components/load_model_utils.py
# resolve_sliding_window_size gives the pools, the per-request cap and the eviction that window.
EXCLUSIVE_WINDOW_ARCHS = frozenset(
    {
        "GptOssForCausalLM",
        "Gemma2ForCausalLM",
        "Gemma3ForCausalLM",
        "Gemma3ForConditionalGeneration",
        "Gemma3nForCausalLM",
        "Gemma3nForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
    }
)
# Gemma 4 as SGLang serves it (0.5.11+): the multimodal class, whose config SGLang rewrites into one geometry per
# pool (utils/hf_transformers/config.py get_config / _apply_gemma4_attention_overrides). A gemma4_text
# checkpoint (Gemma4ForCausalLM) is not rewritten alike, and is not sized.
GEMMA4_ARCH = "Gemma4ForConditionalGeneration"
GEMMA3N_TYPES = frozenset({"gemma3n", "gemma3n_text"})

# Architectures with no implementation under sglang/srt/models/ (checked against the file list).
UNSERVED_MODEL_TYPES = {
    "zamba": "SGLang has no Zamba implementation (no sglang/srt/models/zamba*.py)",
    "zamba2": "SGLang has no Zamba2 implementation (no sglang/srt/models/zamba2.py)",
    "minimax_text_01": "SGLang has no MiniMax-Text-01 implementation (sglang/srt/models has minimax_m2/m3 only)",
    "minimax_m1": "SGLang has no MiniMax-M1 implementation (sglang/srt/models has minimax_m2/m3 only)",
    "minimax": "SGLang has no MiniMax (lightning attention) implementation (sglang/srt/models has minimax_m2/m3)",
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


def is_hybrid_swa(spec: ArchSpec, rules: SglangRules = RULES_0523) -> bool:
    """Whether SGLang gives the model's windowed layers their own pool (`rules.swa_archs`; 0.5.23's
    `is_hybrid_swa_model`, configs/model_config.py): an allow-listed architecture, or (0.5.23) a config that sets
    `is_hybrid_swa`. Laguna only with a sliding window; Beam only when its layer types include sliding layers.
    Configs without `architectures` match by model_type in the 0.5.23 era only."""
    windowed = any(
        layer.attention is not None and layer.attention.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED)
        for layer, _ in spec.layer_groups()
    )
    opt_in = rules.swa_config_opt_in and spec.declares_hybrid_swa
    if spec.architectures:
        listed = any(arch in rules.swa_archs for arch in spec.architectures)
        if listed and {"LagunaForCausalLM", "BeamForCausalLM"} & set(spec.architectures):
            return windowed
        return listed or opt_in
    if rules.swa_archs == HYBRID_SWA_ARCHS:
        return spec.model_type in HYBRID_SWA_MODEL_TYPES or opt_in
    return opt_in


def uses_mamba_extra_buffer(spec: ArchSpec, rules: SglangRules = RULES_0523) -> bool:
    """Whether SGLang's default mamba radix-cache strategy resolves to `extra_buffer` for the model
    (`_mamba_radix_cache_resolution` / `supports_mamba_cache_extra_buffer`, arg_groups/overrides.py, 0.5.23;
    `mamba_scheduler_strategy` auto -> no_buffer before 0.5.14)."""
    if not spec.has_state or rules.mamba_pool != "extra_buffer":
        return False
    if spec.architectures:
        return any(arch in MAMBA_EXTRA_BUFFER_ARCHS for arch in spec.architectures)
    return spec.model_type in MAMBA_EXTRA_BUFFER_MODEL_TYPES


def default_max_running_requests(
    pool_tokens: int, context_len: int, mamba_cap: int | None = None, rules: SglangRules = RULES_0523
) -> int:
    """SGLang's default `max_running_requests` (`KVCacheConfigurator.resolve_max_num_reqs`,
    mem_cache/kv_cache_configurator.py, 0.5.23): `int(pool / context_len x 512)` clamped to [2048, 4096], at most
    half the pool's tokens (`rules.half_pool_request_cap`; not in ModelRunner.init_memory_pool, 0.5.4), and for
    hybrid Mamba models at most `max_mamba_cache_size // mamba ratio`."""
    estimated = max(min(int(pool_tokens / max(context_len, 1) * 512), 4096), 2048)
    requests = min(estimated, pool_tokens // 2) if rules.half_pool_request_cap else estimated
    return min(requests, mamba_cap) if mamba_cap is not None else requests


def sglang_gpu_defaults(gpu_mem_mib: float, tp: int = 1, rules: SglangRules = RULES_0523) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max_bs) SGLang picks for a card of `gpu_mem_mib`
    (`rules.tiers`: arg_groups/memory_hook.py handle_gpu_memory_settings in 0.5.23, server_args.py
    _handle_gpu_memory_settings from 0.5.3)."""
    for bound, chunk, small_tp, large_tp in rules.tiers:
        if gpu_mem_mib < bound:
            return chunk, small_tp if tp < 4 else large_tp
    return LARGE_TIER


def tiered_reserve_mib(gpu_mem_mib: float, parallel: int) -> float:
    """The reserve of `mem_fraction_static` up to 0.5.2 (server_args.py ServerArgs.__post_init__, 0.4.9.post2):
    one figure per memory tier, growing with tp x pp."""
    if gpu_mem_mib < 35 * 1024:  # T4, 4080, A10, L40, 4090, 5090
        return (2.8 + parallel / 10) * 1024
    if gpu_mem_mib < 90 * 1024:  # H100, A100
        return (9.5 + parallel / 2) * 1024
    if gpu_mem_mib < 160 * 1024:  # H20, H200
        return (12 + parallel / 2) * 1024
    return 32 * 1024  # B200, MI300


def tp_fraction(parallel: int) -> float:
    """The fixed default mem_fraction_static by parallel size (server_args.py __post_init__@0.4.0 .. 0.4.7)."""
    return next(fraction for bound, fraction in TP_FRACTIONS if parallel >= bound)


def early_mem_fraction_static(gpu_mem_mib: float, *, tp: int, pp: int, amd: bool, rules: SglangRules) -> float:
    """The default mem_fraction_static of 0.4.0 .. 0.4.7 (server_args.py ServerArgs.__post_init__; `rules.mem_formula`
    by_tp, by_tp_13g or by_parallel_48g, SglangRules.mem_formula). Not rounded: these releases keep the quotient."""
    if rules.mem_formula == "by_tp":
        return tp_fraction(tp)
    if rules.mem_formula == "by_tp_13g":
        return tp_fraction(tp) if gpu_mem_mib <= 81920 else (gpu_mem_mib - 13 * 1024) / gpu_mem_mib
    fraction = tp_fraction(tp * pp) if gpu_mem_mib <= 81920 else 0.88
    if gpu_mem_mib > 180 * 1000 and not amd:
        return 0.79
    if gpu_mem_mib > 96 * 1024:
        return min(fraction + 48 * 1024 * (1 - fraction) / gpu_mem_mib, (gpu_mem_mib - 18 * 1024) / gpu_mem_mib)
    return fraction


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """Token buckets of the breakable prefill CUDA graph (arg_groups/cuda_graph_hook.py
    generate_prefill_cuda_graph_batch_sizes, 0.5.23)."""
    sizes = (
        list(range(4, 33, 4))
        + list(range(48, 257, 16))
        + list(range(288, 513, 32))
        + list(range(576, 1025, 64))
        + list(range(1280, 4097, 256))
        + list(range(4608, max_tokens + 1, 512))
    )
    return [n for n in sizes if n <= max_tokens]


def vlm_mem_fraction_factor(
    vision_layers: int | None, vision_hidden_size: int | None, rules: SglangRules = RULES_0523
) -> float:
    """`adjust_mem_fraction_for_vlm` (arg_groups/memory_hook.py, 0.5.23; server_args.py from 0.4.9.post3): 0.95 x
    a factor that falls 10% for every 100% more ViT weight than a ViT-L/14 (24 layers x 1024 wide), clamped to
    [0.8, 1.05]; a missing field takes its default (24 layers, 1024 wide). 0.4.9 .. 0.4.9.post2: a flat 0.90;
    up to 0.4.8 none (1.0)."""
    if rules.vlm_factor == "none":
        return 1.0
    if rules.vlm_factor == "x0.90":
        return 0.90
    layers = vision_layers or 24
    hidden = vision_hidden_size or 1024
    ratio = layers * hidden**2 / (24 * 1024**2)
    return 0.95 * max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))


def default_mem_fraction_static(
    gpu_mem_mib: float,
    *,
    tp: int = 1,
    pp: int = 1,
    mla: bool = False,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    prefill_graph: bool = True,
    vlm_factor: float | None = None,
    aiter_long_context: bool = False,
    rules: SglangRules = RULES_0523,
) -> float:
    """SGLang's default `mem_fraction_static` for a card of `gpu_mem_mib` (nvidia-smi memory.total, MiB), by
    `rules.mem_formula`: up to 0.5.2 `round((gpu_mem - tiered_reserve_mib) / gpu_mem, 3)`; from 0.5.3 (text below
    is 0.5.23's; `rules.prefill_graph` says whether the prefill-graph term is in the default):

    arg_groups/memory_hook.py handle_gpu_memory_settings, without post-capture KV sizing
    (SGLANG_ENABLE_POST_CAPTURE_KV_SIZING is off by default):
      reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + tp x pp / 8 x 1024 + graph reserve (MiB),
      graph reserve (reserve_for_graph_mb) = 2 x decode max_bs + prefill graph: 8 MiB per token bucket
      (MLA: 1.5 GiB), floored at 10 GiB on cards over 60 GiB;
      fraction = round((gpu_mem - reserved) / gpu_mem, 3).
    The breakable prefill graph is the CUDA default (cuda_graph_config.py default_prefill_backend) but is
    off with pp > 1 and for multimodal models off its allow-list (`prefill_graph=False`). Then multimodal
    models scale by `vlm_factor` (adjust_mem_fraction_for_vlm), and the AMD aiter attention backend with a
    context over 8k by 0.85 (attention_hook.py _handle_attention_backend_compatibility).
    """
    if rules.mem_formula in ("by_tp", "by_tp_13g", "by_parallel_48g"):
        return early_mem_fraction_static(gpu_mem_mib, tp=tp, pp=pp, amd=False, rules=rules)
    if rules.mem_formula == "tiered":
        reserved = tiered_reserve_mib(gpu_mem_mib, tp * pp)
    else:
        default_chunk, default_bs = sglang_gpu_defaults(gpu_mem_mib, tp, rules)
        chunk = chunked_prefill_size if chunked_prefill_size is not None else default_chunk
        max_bs = cuda_graph_max_bs if cuda_graph_max_bs is not None else default_bs
        reserved = 512 + max(chunk, 2048) * 1.5 + tp * pp / 8 * 1024 + max_bs * 2
        if prefill_graph and pp == 1 and rules.prefill_graph != "none":
            reserved += 1.5 * 1024 if mla else len(prefill_graph_sizes(min(8192, chunk) if mla else chunk)) * 8
        if gpu_mem_mib > 60 * 1024:
            reserved = max(reserved, 10 * 1024)
    fraction = round((gpu_mem_mib - reserved) / gpu_mem_mib, 3)
    if vlm_factor is not None:
        fraction *= vlm_factor
    if aiter_long_context:
        fraction *= 0.85
    return fraction


def spec_mem_fraction_static(
    spec: ArchSpec,
    memory_bytes: int,
    *,
    tp: int = 1,
    pp: int = 1,
    amd: bool = False,
    chunked_prefill_size: int | None = None,
    max_running_requests: int | None = None,
    rules: SglangRules = RULES_0523,
) -> float:
    """`default_mem_fraction_static` for `spec` on a card of `memory_bytes` (nvidia-smi / rocm-smi total), under
    the era `rules` (SglangEngine(version).rules).
    On AMD (ROCm) the breakable prefill graph is off (it is a CUDA default) and MHA models default to the aiter
    backend (model_override_base.py get_default_attention_backend), which scales by 0.85 past 8k context.
    A stated --max-running-requests lowers the default decode graph max_bs to it (handle_gpu_memory_settings).
    0.4.0 .. 0.4.7 pick a fraction by tp (and card size) alone (`early_mem_fraction_static`)."""
    if rules.mem_formula in ("by_tp", "by_tp_13g", "by_parallel_48g"):
        return early_mem_fraction_static(memory_bytes / 1024**2, tp=tp, pp=pp, amd=amd, rules=rules)
    _, default_bs = sglang_gpu_defaults(memory_bytes / 1024**2, tp, rules)
    capped = max_running_requests and rules.decode_bs_capped_by_requests
    max_bs = min(default_bs, max_running_requests) if capped and max_running_requests else None
    mla = any(
        layer.attention is not None and layer.attention.kind is AttentionKind.MLA for layer, _ in spec.layer_groups()
    )
    multimodal = spec.is_multimodal
    allowed = rules.prefill_graph == "allow_list" and set(spec.architectures) & MULTIMODAL_PREFILL_GRAPH_ARCHS
    graph_ok = not amd and not (multimodal and not allowed)
    return default_mem_fraction_static(
        memory_bytes / 1024**2,
        tp=tp,
        pp=pp,
        mla=mla,
        chunked_prefill_size=chunked_prefill_size,
        cuda_graph_max_bs=max_bs,
        prefill_graph=graph_ok,
        vlm_factor=(
            vlm_mem_fraction_factor(spec.vision_layers, spec.vision_hidden_size, rules)
            if multimodal and rules.vlm_factor != "none"
            else None
        ),
        aiter_long_context=amd and not mla and (spec.max_context or 0) > 8192,
        rules=rules,
    )


def vlm_kv_reserve_bytes(spec: ArchSpec, rules: SglangRules = RULES_0523) -> int:
    """Bytes a multimodal model's KV budget loses to the multimodal embedding cache
    (`rules.vlm_kv_reserve_mib`: mem_cache/kv_cache_configurator.py mm_runtime_reservation_gb,
    SGLANG_VLM_CACHE_SIZE_MB = 100, from 0.5.18; the CUDA-IPC feature cache only with --mm-feature-transport)."""
    return rules.vlm_kv_reserve_mib * 1024**2 if spec.is_multimodal else 0


# configs/model_config.py multimodal_breakable_cuda_graph_supported_model_archs (0.5.23).
MULTIMODAL_PREFILL_GRAPH_ARCHS = frozenset(
    {
        "MiniMaxM3SparseForConditionalGeneration",
        "Cohere2VisionForConditionalGeneration",
        "Glm5NextForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration",
        "PaddleOCRVLForConditionalGeneration",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "Qwen4ExpForConditionalGeneration",
        "MuseGlimmerForConditionalGeneration",
        "MuseSparkForConditionalGeneration",
        "KimiK3ForConditionalGeneration",
        "KimiK25ForConditionalGeneration",
        "MiniMaxM3SparseForCausalLM",
    }
)


class SglangPool(msgspec.Struct, frozen=True):
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


class SplitPools(msgspec.Struct, frozen=True, kw_only=True):
    """A hybrid SWA model's two pools at a context, each holding the requests on its own."""

    full_tokens: int
    swa_tokens: int
    concurrency: float
    """Requests of ctx tokens, as a ratio: the binding pool's tokens over one request's slots there."""
    requests: int
    longest: int
    """The longest context for the batch asked."""


class SglangEngine(Engine):
    name = "sglang"
    title = "SGLang"
    releases = SGLANG_RELEASES
    versions = tuple(era.name for era in reversed(SGLANG_RELEASES.eras))

    def __init__(
        self, version: str | None = None, *, block_size: int | None = None, enable_prefix_caching: bool = True
    ) -> None:
        super().__init__(version)
        if block_size is not None and block_size < 1:
            raise UsageError(f"--block-size must be positive, got {block_size}")
        self.page_size = block_size or DEFAULT_PAGE_SIZE
        self.page_size_given = block_size is not None
        self.enable_prefix_caching = enable_prefix_caching

    @property
    def rules(self) -> SglangRules:
        """The switches of the era that sizes this release (kvsize/engines/sglang_releases.py)."""
        assert self.era is not None
        rules: SglangRules = self.era.rules
        return rules

    @property
    def state_slots(self) -> int:
        """Mamba state slots one running request ties up without the extra buffer (the scheduler's base ratio)."""
        return MAMBA_SLOTS_RADIX if self.enable_prefix_caching else MAMBA_SLOTS_NO_RADIX

    def mamba_radix_off(self, spec: ArchSpec) -> bool:
        """Whether the radix cache is off for the model: --disable-radix-cache, or a Mamba2 config (Falcon-H1,
        Nemotron-H) in the no_plus_one era (model_runner.py: "model detected, disable radix cache")."""
        forced = self.rules.mamba_pool == "no_plus_one" and spec.model_type in MAMBA2_NO_RADIX_TYPES
        return not self.enable_prefix_caching or forced

    def mamba_ratio(self, spec: ArchSpec) -> int:
        """State slots per running request (`KVCacheConfigurator._calculate_mamba_ratio`, 0.5.23; ModelRunner
        init_memory_pool, 0.5.4): 1 without the radix cache; 3 with it; 3 + 2 tracking slots for the
        extra-buffer architectures (the default strategy from 0.5.14 for Qwen3-Next, Nemotron-H, Falcon-H1,
        Granite 4 hybrids, Qwen3.5, Kimi Linear)."""
        if self.mamba_radix_off(spec):
            return MAMBA_SLOTS_NO_RADIX
        return MAMBA_SLOTS_RADIX + (MAMBA_TRACKING_SLOTS if uses_mamba_extra_buffer(spec, self.rules) else 0)

    def default_page_size(self, spec: ArchSpec) -> int:
        """--page-size when not given (by the era's switches): 64 for DeepSeek-V3.2's sparse MLA on any GPU
        ("Setting page size to 64 for DeepSeek NSA", 0.5.3+); else 1, except on an SM100 GPU (B200, B300, GB200:
        compute capability 10.x) where DeepSeek V3 / R1 default to trtllm_mla (pages of 64, 0.5.4+), and MHA
        models to trtllm_mha (64, 0.5.7+) or, with unequal K and V head sizes, to FA4 (128, 0.5.23)
        (server_args.py _get_default_attn_backend; overrides.py _mla_backend_page_constraints,
        _fa4_page_constraint). Other MLA models (flashinfer there) keep 1."""
        rules = self.rules
        attns = [
            layer.attention
            for layer, _ in spec.layer_groups()
            if layer.attention is not None and layer.attention.kind not in (AttentionKind.SHARED, AttentionKind.CROSS)
        ]
        if rules.dsa_pool != "none" and any(a.index_head_dim for a in attns):
            return DSA_PAGE_SIZE
        device = self.context.device
        if device is None or device.platform != "cuda" or device.capability is None or device.capability[0] != 10:
            return DEFAULT_PAGE_SIZE
        if self._gemma4(spec):  # its attention backend is forced (SglangRules.gemma4_sm100)
            return TRTLLM_MHA_PAGE_SIZE if rules.gemma4_sm100 == "trtllm_mha" else DEFAULT_PAGE_SIZE
        if not attns:
            return DEFAULT_PAGE_SIZE
        if any(a.kind is AttentionKind.MLA for a in attns):
            trtllm = rules.sm100_mla_trtllm and bool(set(spec.architectures) & TRTLLM_MLA_ARCHS)
            return TRTLLM_MLA_PAGE_SIZE if trtllm else DEFAULT_PAGE_SIZE
        if rules.sm100_mha == "page1":
            return DEFAULT_PAGE_SIZE
        unequal = any(a.head_dim != a.head_dim_v for a in attns)
        return FA4_PAGE_SIZE if unequal and rules.sm100_mha == "trtllm_mha_fa4" else TRTLLM_MHA_PAGE_SIZE

    def _for(self, spec: ArchSpec) -> SglangEngine:
        """This engine with the page size SGLang picks for `spec` on the context's GPU (unless one was given)."""
        if self.page_size_given:
            return self
        page = self.default_page_size(spec)
        if page == self.page_size:
            return self
        other = copy(self)
        other.page_size = page
        return other

    @property
    def rule(self) -> str:
        return (
            f"{self.release_label}: token pool of page {self.page_size}, one cell per token across every layer of "
            "the stage (kv heads max(1, kv//tp); MLA latent replicated); sliding layers pooled (0.8 ratio, min(ctx, "
            "window + eviction interval + 2 pages) per request) only for gpt-oss / Llama 4 / Gemma 4 / MiMo-V2 / "
            "Step-3.5 / Laguna, full "
            f"otherwise; Mamba state conv bf16 + SSM fp32, {self.state_slots} slot(s) per request (5 with the "
            "extra buffer of Qwen3-Next / Nemotron-H / Falcon-H1 / Granite 4) "
            "(model_executor/pool_configurator.py, configs/model_config.py, mem_cache/kv_cache_configurator.py)"
        )

    # --- what SGLang serves -----------------------------------------------------------------------------

    def reads_layout(self, spec: ArchSpec) -> bool:
        """MiMo-V2-Flash's and Gemma 4's SWA and full layers of their own KV heads and K / V widths, each pool with
        its own geometry (SglangRules.swa_own_geometry); check_serves refuses the releases and GPUs not read."""
        return spec.model_type in MIMO_V2_MODEL_TYPES or self._gemma4(spec) or spec.model_type in GEMMA3N_TYPES

    @staticmethod
    def _gemma4(spec: ArchSpec) -> bool:
        return GEMMA4_ARCH in spec.architectures

    def _check_gemma4(self, spec: ArchSpec) -> None:
        """Gemma 4 (models/gemma4_mm.py, 0.5.11+): hybrid SWA, the full pool at global_head_dim and the global KV
        heads, the SWA pool at head_dim, on triton (page 1) or, on SM100, trtllm_mha (SglangRules.gemma4_sm100)."""
        rules = self.rules
        if rules.gemma4_sm100 == "none" or not is_hybrid_swa(spec, rules):
            raise UnsupportedArchitecture(
                f"{self.release_label} has no Gemma 4 (sglang/srt/models/gemma4_mm.py arrives in 0.5.11)",
                hint="Pass --engine-version 0.5.11 or later.",
            )
        device = self.context.device
        if device is not None and device.platform != "cuda":
            why = (
                "triton, not aiter, is forced there, and the aiter factor's rule was not traced"
                if device.platform == "rocm"
                else "its attention backend there was not read"
            )
            raise UnsupportedArchitecture(
                f"{self.release_label}: kvsize has not read SGLang's Gemma 4 on {device.name or 'this device'} ({why})",
                hint="Pick an NVIDIA --gpu, or use --engine formula.",
            )
        cap = device.capability if device is not None else None
        if (
            cap is not None
            and cap[0] == 10
            and rules.gemma4_sm100 == "trtllm_mha_but_fp4_moe"
            and not self.page_size_given
        ):
            raise UnsupportedArchitecture(
                f"{self.release_label} on SM100 serves Gemma 4 on trtllm_mha (pages of 64) except modelopt FP4 MoE "
                "checkpoints (triton, page 1), and kvsize does not tell them apart",
                hint="Pass --block-size 64 (or 1 for an FP4 MoE checkpoint), or --engine-version 0.5.14.",
            )

    def _check_gemma3n(self, spec: ArchSpec) -> None:
        """Gemma 3n (SglangRules.gemma3n_full_rows): every layer full attention with one row geometry, the
        KV-shared layers keeping a row of the token pool like every layer of the stage (num_effective_layers;
        Gemma3nAttention only reads another layer's cache: `save_kv_cache=not self.is_kv_shared_layer`)."""
        if not self.rules.gemma3n_full_rows:
            raise UnsupportedArchitecture(
                f"{self.release_label}: kvsize has read SGLang's Gemma 3n pages from 0.5.0 only (no Gemma 3n before "
                "0.4.9; 0.4.9.post3-0.4.10 pool its sliding layers)",
                hint="Pass --engine-version 0.5.0 or later.",
            )
        widths = {
            (layer.attention.num_kv_heads, layer.attention.head_dim, layer.attention.head_dim_v)
            for layer, _ in spec.layer_groups()
            if layer.attention is not None and layer.attention.kind is not AttentionKind.SHARED
        }
        if len(widths) > 1:
            raise UnsupportedArchitecture(
                "SGLang sizes every Gemma 3n row with one geometry: a config whose layers differ in KV heads or "
                "head sizes is not one it serves as read",
                hint="Use --engine formula or --engine hf.",
            )

    def shared_source(self, spec: ArchSpec, attn: AttentionSpec | None) -> AttentionSpec | None:
        """The attention whose geometry and pool a KV-shared layer's buffer takes: Gemma 4's shared layers keep
        a buffer of their own layer type, allocated and never written (models/gemma4_causal.py
        Gemma4Attention: `save_kv_cache=not self.is_kv_shared_layer`; configs/model_config.py
        get_hybrid_layer_ids counts every layer by layer_types). None for any other layer or model."""
        if attn is None or attn.kind is not AttentionKind.SHARED or not self._gemma4(spec):
            return None
        assert attn.shares_kv_with is not None
        return spec.layers[attn.shares_kv_with].attention

    def _check_mimo(self, spec: ArchSpec) -> None:
        rules = self.rules
        if not (rules.swa_own_geometry and is_hybrid_swa(spec, rules)):
            raise UnsupportedArchitecture(
                f"{self.release_label} sizes MiMo-V2-Flash's pools by a rule kvsize has not read (0.5.7-0.5.8: "
                "model_runner_kv_cache_mixin.py adds its SWA rows by architecture name; earlier releases have no "
                "hybrid SWA pool for it)",
                hint="Pass --engine-version 0.5.9 or later.",
            )
        device = self.context.device
        if device is not None and device.platform != "cuda":
            raise UnsupportedArchitecture(
                f"{self.release_label}: kvsize has not read which attention backend SGLang runs MiMo-V2-Flash's "
                f"K and V heads of different widths on for {device.name or 'this device'}",
                hint="Pick an NVIDIA --gpu, or use --engine formula.",
            )
        cap = device.capability if device is not None else None
        if cap is not None and cap[0] == 10 and rules.sm100_mha != "trtllm_mha_fa4":
            raise UnsupportedArchitecture(
                f"{self.release_label}: kvsize has not read which attention backend (and page size) SGLang "
                "picks on SM100 for K and V heads of different widths before 0.5.23 (trtllm_mha takes equal "
                "widths only; arg_groups/overrides.py)",
                hint="Pass --engine-version 0.5.23 or another --gpu.",
            )

    def check_serves(self, spec: ArchSpec) -> None:
        if spec.model_type in MIMO_V2_MODEL_TYPES:
            self._check_mimo(spec)
        if self._gemma4(spec):
            self._check_gemma4(spec)
        if spec.model_type in GEMMA3N_TYPES:
            self._check_gemma3n(spec)
        if "CogVLMForCausalLM" in spec.architectures:  # CogVLM2 runs on its remote code only
            raise UnsupportedArchitecture(
                "SGLang has no CogVLMForCausalLM (sglang/srt/models, 0.5.x): it cannot serve CogVLM2",
                hint="Size it with --engine formula.",
            )
        reason = UNSERVED_MODEL_TYPES.get(spec.model_type)
        if reason is not None:
            raise UnsupportedArchitecture(f"{spec.model_type}: {reason}")
        if spec.model_type == "glm_moe_dsa" and not self.rules.serves_glm_moe_dsa:
            raise UnsupportedArchitecture(
                f"SGLang {self.version} has no GlmMoeDsaForCausalLM (srt/models; added in 0.5.9): it cannot serve "
                "GLM-5",
                hint="Pass --engine-version 0.5.9 or later.",
            )
        rules = self.rules
        if spec.has_state and rules.mamba_pool == "none":
            raise UnsupportedArchitecture(
                f"{spec.model_type}: {self.release_label} has no Mamba / linear-attention state pool "
                "(model_executor/model_runner.py has no max_mamba_cache_size before 0.5.2)",
                hint="Pass --engine-version 0.5.2 or newer.",
            )
        if rules.dsa_pool == "none" and any(
            layer.attention is not None and layer.attention.index_head_dim for layer, _ in spec.layer_groups()
        ):
            raise UnsupportedArchitecture(
                f"{spec.model_type}: {self.release_label} has no sparse-MLA (DeepSeek-V3.2 indexer) cache "
                "(mem_cache/memory_pool.py NSATokenToKVPool arrives in 0.5.3)",
                hint="Pass --engine-version 0.5.3 or newer.",
            )
        if spec.model_type == "nemotron-nas":
            heads = {
                layer.attention.num_kv_heads
                for layer, _ in spec.layer_groups()
                if layer.attention is not None and layer.attention.kind is not AttentionKind.SHARED
            }
            if len(heads) > 1:
                # ModelConfig.get_total_num_kv_heads raises for nemotron-nas with several kv-head counts.
                raise UnsupportedArchitecture(
                    f"nemotron-nas with {len(heads)} different kv-head counts: SGLang rejects variable GQA "
                    "(configs/model_config.py get_total_num_kv_heads)"
                )

    def check_parallel(self, spec: ArchSpec, tp: int, pp: int) -> None:
        # models/llama.py LlamaAttention.__init__ (0.5.23; the other attention modules assert the same):
        # total_num_heads % tp_size == 0; kv >= tp: kv % tp == 0, else tp % kv == 0.
        check_head_split(spec, tp, engine=f"SGLang {self.version}", source="sglang/srt/models/llama.py LlamaAttention")

    def max_running_requests(self, spec: ArchSpec, max_model_len: int, tp: int = 1, pp: int = 1) -> int | None:
        """A stated --max-running-requests (the context's max_num_seqs); SGLang's default depends on the pool
        (`default_max_running_requests`, applied with `running_request_cap`), so None here."""
        return self.context.max_num_seqs

    def running_request_cap(self, pool: SglangPool, context_len: int) -> int:
        """SGLang's max_running_requests for a pool: the stated one (at most half the pool's tokens) or the
        default (`default_max_running_requests`), and the Mamba state cap (`resolve_max_num_reqs`, 0.5.23)."""
        tokens = pool.max_total_num_tokens
        stated = self.context.max_num_seqs
        requests = (
            min(stated, tokens // 2) if stated else default_max_running_requests(tokens, context_len, rules=self.rules)
        )
        return min(requests, pool.mamba_request_limit) if pool.mamba_request_limit is not None else requests

    def served_dtype(self, spec: ArchSpec) -> KvDtype:
        """model_config.dtype (configs/model_config.py _get_and_verify_dtype, read in 0.5.9; the same rule since
        SGLang copied it from vLLM 0.2): --dtype half / bfloat16 / float32 when given (server_args.py --dtype);
        with auto, a float32 (or unstated) checkpoint dtype runs in bfloat16 for model types starting "gemma"
        and in float16 for every other ("Following the common practice, we use float16 for float32 models");
        any other checkpoint dtype runs as it is."""
        given = served_dtype_name(self.context.dtype)
        if given is not None:
            return KvDtype(given)
        if spec.model_dtype == KvDtype.FP32.value:
            return KvDtype.BF16 if spec.model_type.startswith("gemma") else KvDtype.FP16
        return KvDtype(spec.model_dtype) if spec.model_dtype in KvDtype._value2member_map_ else KvDtype.BF16

    def run_dtype(self, spec: ArchSpec) -> str:
        return self.served_dtype(spec).value

    def auto_kv_dtype(self, spec: ArchSpec, chosen: KvDtype) -> KvDtype:
        """--kv-cache-dtype auto is the served dtype (mem_cache/kv_cache_dtype.py: model_config.dtype), unless
        the config's quantization names an fp8 KV cache (kvsize's choice)."""
        if chosen in (KvDtype.FP8_E4M3, KvDtype.FP8_E5M2):
            return chosen
        return self.served_dtype(spec)

    def check_dtype(self, spec: ArchSpec, dtype: KvDtype) -> None:
        if dtype is KvDtype.NVFP4 and self._gemma4(spec):
            raise UnsupportedArchitecture(
                "SGLang's hybrid SWA pools have no FP4 branch (pool_configurator.py HybridSWAPoolConfigurator sizes "
                "1 B per element, no scales) and kvsize has not read whether Gemma 4's kernels run that way",
                hint="Use --kv-dtype fp8_e4m3 or bf16.",
            )
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
            return super().attention_bytes_per_token(attn, dtype, tp) + self.indexer_bytes(attn)
        heads = self.kv_heads_per_rank(attn, tp)
        if attn.kind is AttentionKind.MLA:
            # MLATokenToKVPoolFP4: kv_cache_dim / 2 bytes of e2m1 + kv_cache_dim / 16 e4m3 scales.
            return attn.head_dim // 2 + attn.head_dim // NVFP4_SCALE_BLOCK + self.indexer_bytes(attn)
        # MHATokenToKVPoolFP4: heads x (D_k + D_v) / 2 data + heads x D_k x 2 / 16 scales (K and V, D_k for both).
        return heads * (attn.head_dim + attn.head_dim_v) // 2 + heads * attn.head_dim * 2 // NVFP4_SCALE_BLOCK

    @staticmethod
    def indexer_bytes(attn: AttentionSpec) -> int:
        """DeepSeek-V3.2's indexer key per token per layer, in every cell (NSATokenToKVPool index_k_with_scale_buffer,
        uint8: fp8 keys + one fp32 scale per 128; pool_configurator.py _compute_dsa_indexer_cell_size, 0.5.23)."""
        if attn.kind is not AttentionKind.MLA or not attn.index_head_dim:
            return 0
        return attn.index_head_dim + attn.index_head_dim // DSA_QUANT_BLOCK * 4

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
        state = self.state_bytes(spec, layer.state, tp) * self.mamba_ratio(spec) if layer.state is not None else 0
        attn = layer.attention
        if self._mambaish(spec):
            # Hybrid linear models: KV buffers only for full_attention_layer_ids.
            if attn is None or attn.kind is AttentionKind.SHARED:
                return 0, 0, state
            return self.attention_bytes_per_token(attn, dtype, tp), self._slots(spec, attn, ctx), state
        # Every layer of the stage has a row in the pool (layer_num = num_effective_layers); a Gemma 4 shared
        # layer's row is in its own type's pool (shared_source).
        ref = (
            attn
            if attn is not None and attn.kind is not AttentionKind.SHARED
            else self.shared_source(spec, attn) or self._reference(spec)
        )
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
                for layer, _ in spec.layer_groups()
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
        return is_hybrid_swa(spec, self.rules) and attn.kind in (
            AttentionKind.SLIDING,
            AttentionKind.CHUNKED,
        )

    def _slots(self, spec: ArchSpec, attn: AttentionSpec, ctx: int) -> int:
        """Slots one request holds in the pool of `attn`'s layer."""
        slots = self._pages(ctx)
        encoder = self._encoder_tokens(spec)
        if encoder:
            slots += self._pages(encoder)  # encoder tokens share the token pool (encoder_out_cache_loc)
        if self._is_pooled_window(spec, attn) and self.rules.swa_eviction != "none":
            slots = min(slots, self.swa_request_slots(self.sliding_window_size(spec, attn)))
        return slots

    @staticmethod
    def sliding_window_size(spec: ArchSpec, attn: AttentionSpec) -> int:
        """The window SGLang's pools and evictions use (resolve_sliding_window_size): the config's, one less
        for EXCLUSIVE_WINDOW_ARCHS, MiMo-V2's sliding_window_size (engines.base.sliding_window_size_attention)."""
        window = sliding_window_size_attention(spec, attn).window
        assert window is not None
        exclusive = attn.kind is AttentionKind.SLIDING and set(spec.architectures) & EXCLUSIVE_WINDOW_ARCHS
        return window - 1 if exclusive and window > 1 else window

    def eviction_interval(self, window: int) -> int:
        """Decode steps between a request's SWA evictions (SglangRules.swa_eviction)."""
        if self.rules.swa_eviction == "fixed":
            return SWA_EVICTION_INTERVAL
        if self.rules.swa_eviction == "window":
            return window
        return max(self.page_size, window) // self.page_size * self.page_size

    def swa_request_slots(self, window: int) -> int:
        """Worst-case SWA slots a running request holds (`compute_swa_request_cap`,
        model_executor/pool_configurator.py, 0.5.23): the window, the out-of-window tokens that wait for the
        next eviction (eviction_interval: 128 decode steps from 0.5.14, the window before), a page of padding so
        the eviction point is page-aligned, and the page the next decode step allocates."""
        return self._pages(window + self.eviction_interval(window) + self.page_size) + self.page_size

    # --- summing ----------------------------------------------------------------------------------------

    def estimate(
        self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> KvEstimate:
        resolved = self._for(spec)
        if resolved is not self:
            return resolved.estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)
        est = super().estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp)
        # SGLang splits layers with the remainder on the last stages; every cell grows with the context
        # (cross-attention, KV-less and shared layers included), and the encoder slots are fixed per request.
        encoder = self._pages(self._encoder_tokens(spec)) if self._encoder_tokens(spec) else 0
        per_token = fixed = 0
        for layer, count in spec.layer_groups():
            slot, _, state = self.layer_request_bytes(spec, layer, ctx, kv_dtype, tp)
            per_token += count * tp * slot
            fixed += count * tp * (state + slot * encoder)
        return msgspec.structs.replace(est, kv_bytes_per_token=per_token, state_bytes_per_request=fixed)

    def stages(self, num_layers: int, pp: int) -> list[range]:
        return sglang_pp_stages(num_layers, pp)

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        notes = []
        windowed = sum(
            count
            for layer, count in spec.layer_groups()
            if layer.attention is not None and layer.attention.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED)
        )
        if windowed and is_hybrid_swa(spec, self.rules):
            interval = (
                f"{SWA_EVICTION_INTERVAL} (SGLANG_SWA_EVICTION_INTERVAL)"
                if self.rules.swa_eviction == "fixed"
                else "the window again (evicted every window steps before 0.5.14)"
            )
            exclusive = (
                " (SGLang's window: the config's - 1)" if set(spec.architectures) & EXCLUSIVE_WINDOW_ARCHS else ""
            )
            charge = (
                "ctx there (a running request's SWA tokens are not evicted in this release)"
                if self.rules.swa_eviction == "none"
                else f"min(ctx, window{exclusive} + {interval} + 2 pages) there"
            )
            notes.append(
                f"SGLang keeps {spec.model_type}'s {windowed} windowed layers in a separate SWA pool sized "
                f"{SWA_FULL_TOKENS_RATIO} x the full pool; kvsize charges each request {charge}"
            )
        elif windowed:
            notes.append(
                f"{self.release_label} sizes {spec.model_type}'s {windowed} sliding-window layers as full attention "
                + (
                    f"(its hybrid SWA pool serves only {len(self.rules.swa_archs)} architectures"
                    if self.rules.swa_archs
                    else "(it has no hybrid SWA pool for any architecture"
                )
                + (": " + ", ".join(sorted(self.rules.swa_archs)[:4]) + " ..." if self.rules.swa_archs else "")
                + ")"
            )
        if spec.shared_indexer_layers:
            notes.append(
                f"{self.release_label} keeps an indexer key on every DSA layer, the {spec.shared_indexer_layers} that "
                "share a top-k too (NSATokenToKVPool: one index_k buffer per layer)"
            )
        if self._mambaish(spec):
            ratio = self.mamba_ratio(spec)
            buffer = " (extra_buffer strategy: 3 + 2 tracking slots)" if ratio == 5 else ""
            notes.append(
                "SGLang keeps Mamba/linear-attention state with conv in bf16 and SSM in fp32, and admits "
                f"max_mamba_cache_size // {ratio} requests{buffer}: kvsize charges {ratio} state slot(s) per request"
            )
        else:
            kv_less = sum(
                count
                for layer, count in spec.layer_groups()
                if layer.attention is None or layer.attention.kind is AttentionKind.SHARED
            )
            if kv_less:
                where = " (Gemma 4's in the pool of their layer type)" if self._gemma4(spec) else ""
                notes.append(
                    f"SGLang allocates a KV buffer for every layer of the stage, including the {kv_less} layers "
                    f"without KV of their own{where}"
                )
        if self._encoder_tokens(spec):
            notes.append("SGLang puts the encoder's tokens in the shared token pool: every layer holds them")
        return tuple(notes)

    # --- the pool SGLang logs ---------------------------------------------------------------------------

    def pool(self, spec: ArchSpec, *, available_bytes: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1) -> SglangPool:
        """`max_total_num_tokens` (and the SWA / Mamba pool sizes) for `available_bytes` of KV budget per GPU."""
        resolved = self._for(spec)
        if resolved is not self:
            return resolved.pool(spec, available_bytes=available_bytes, kv_dtype=kv_dtype, tp=tp, pp=pp)
        self.check_supported(spec)
        self.check_dtype(spec, kv_dtype)
        self.check_parallel(spec, tp, pp)
        stages = sglang_pp_stages(spec.num_layers, pp)
        stage_layers = [spec.layers] if len(stages) == 1 else [[spec.layers[i] for i in s] for s in stages]
        pools = [self._stage_pool(spec, layers, available_bytes, kv_dtype, tp) for layers in stage_layers]
        return min(pools, key=lambda p: p.max_total_num_tokens)  # min over PP ranks

    def _stage_pool(
        self, spec: ArchSpec, layers: Sequence[LayerSpec], available: int, dtype: KvDtype, tp: int
    ) -> SglangPool:
        page = self.page_size
        rest = max(available, 0)
        max_mamba = limit = None
        stage_groups = group_layers(spec, layers)  # distinct layers with their counts (100,000-layer configs)
        per_req = sum(
            self.state_bytes(spec, layer.state, tp) * count for layer, count in stage_groups if layer.state is not None
        )
        if per_req:
            budget = rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO)
            if self.rules.mamba_pool != "no_plus_one":
                max_mamba = max(int((budget - per_req) // per_req), 0)
                rest = max(rest - (max_mamba + 1) * per_req, 0)  # MambaPool keeps max_mamba_cache_size + 1 slots
            else:
                # model_runner.py handle_max_mamba_cache (0.5.4): 512 slots with the radix cache off (Mamba2
                # configs), else int(budget // per_req); the pool holds exactly that many.
                max_mamba = MAMBA2_SLOTS_NO_RADIX if self.mamba_radix_off(spec) else int(budget // per_req)
                rest = max(rest - max_mamba * per_req, 0)
            limit = max_mamba // self.mamba_ratio(spec)

        # Gemma 4's KV-shared layers take a row in their own type's pool (shared_source); other shared layers none.
        pool_layers = [
            (self.shared_source(spec, layer.attention) or layer.attention, count)
            for layer, count in self._swa_cell_layers(spec, layers)
            if layer.attention is not None
        ]
        pooled = [(attn, count) for attn, count in pool_layers if self._is_pooled_window(spec, attn)]
        if pooled:
            # HybridSWAPoolConfigurator: whole-model layer counts, one geometry per pool.
            full = [
                (attn, count)
                for attn, count in pool_layers
                if attn.kind is not AttentionKind.SHARED and not self._is_pooled_window(spec, attn)
            ]
            n_pooled, n_full = sum(n for _, n in pooled), sum(n for _, n in full)
            swa_pt = self.attention_bytes_per_token(pooled[0][0], dtype, tp)
            full_pt = self.attention_bytes_per_token(full[0][0], dtype, tp) if full else 0
            if not full:
                cell: float = swa_pt * n_pooled
                swa_tokens = full_tokens = int(rest // cell) // page * page
            else:
                cell = full_pt * n_full + SWA_FULL_TOKENS_RATIO * swa_pt * n_pooled
                full_tokens = int(rest // cell) // page * page
                swa_tokens = int(full_tokens * SWA_FULL_TOKENS_RATIO) // page * page
            pool_bytes = (full_tokens + page) * full_pt * n_full + (swa_tokens + page) * swa_pt * n_pooled
            return SglangPool(full_tokens, swa_tokens, cell, pool_bytes, max_mamba, limit)

        cell_bytes = sum(
            self.layer_request_bytes(spec, layer, 1, dtype, tp)[0] * count for layer, count in stage_groups
        )
        workspace = 0
        ref = self._reference(spec)
        if dtype is KvDtype.NVFP4 and ref is not None and ref.kind is not AttentionKind.MLA and cell_bytes:
            workspace = self.kv_heads_per_rank(ref, tp) * ref.head_dim * 2  # one shared FP8 dequant workspace
        if self.rules.dsa_pool == "latent_only" and ref is not None:
            # 0.5.3 profile_max_num_token: the cell counts the latent only; the indexer buffer is allocated anyway.
            cell_bytes -= self.indexer_bytes(ref) * sum(count for _, count in stage_groups)
        cell_total = cell_bytes + workspace
        # No KV on this stage (pure SSM): SGLang falls back to --max-total-tokens or the context length.
        tokens = rest // cell_total // page * page if cell_total else spec.max_context or 0
        return SglangPool(tokens, None, float(cell_total), (tokens + page) * cell_bytes, max_mamba, limit)

    def split_pools(
        self, spec: ArchSpec, *, available_bytes: int, ctx: int, batch: int, kv_dtype: KvDtype, tp: int = 1, pp: int = 1
    ) -> SplitPools | None:
        """What a hybrid SWA model's two pools hold, each on its own (the split is fixed at start-up: memory does
        not move between them; managers/scheduler.py admits a request only while both have room, tp_worker.py
        max_req_len = full tokens - 1): the full pool's max_total_num_tokens over pages(ctx) per request, the SWA
        pool's tokens over min(pages(ctx), the SWA cap). Nothing fits where the release refuses to start
        (SglangRules.swa_pool_floor). None for a single pool, whose bytes decide alone."""
        resolved = self._for(spec)
        if resolved is not self:
            return resolved.split_pools(
                spec, available_bytes=available_bytes, ctx=ctx, batch=batch, kv_dtype=kv_dtype, tp=tp, pp=pp
            )
        pooled = self._pooled(spec)
        if not pooled:
            return None
        pool = self.pool(spec, available_bytes=available_bytes, kv_dtype=kv_dtype, tp=tp, pp=pp)
        full, swa = pool.max_total_num_tokens, pool.swa_max_total_num_tokens or 0
        batch = max(batch, 1)
        page = self.page_size
        window = max(self.sliding_window_size(spec, a) for a in pooled)
        if self.rules.swa_pool_floor and window + page >= swa:  # validate_swa_pool_size: the server does not start
            return SplitPools(full_tokens=full, swa_tokens=swa, concurrency=0.0, requests=0, longest=0)
        swa_slots = max(self._slots(spec, a, ctx) for a in pooled)
        reference = self._reference_full(spec)
        ratios = [swa / swa_slots]
        if reference is not None:  # no full layer: the full pool's figure is the SWA pool's (one cell)
            ratios.append(full / self._slots(spec, reference, ctx))
        # the longest context for `batch` requests: whole pages of each pool while a request holds all its tokens
        # there (the full pool always; the SWA pool below its cap), and max_req_len = full tokens - 1
        cap = max(self.swa_request_slots(self.sliding_window_size(spec, a)) for a in pooled)
        longest = full - 1
        if reference is not None:
            longest = min(longest, full // batch // page * page)
        if self.rules.swa_eviction == "none" or batch * cap > swa:
            longest = min(longest, swa // batch // page * page)
        concurrency = min(ratios)
        return SplitPools(
            full_tokens=full,
            swa_tokens=swa,
            concurrency=concurrency,
            requests=math.floor(concurrency),
            longest=max(longest, 0),
        )

    def _pooled(self, spec: ArchSpec) -> list[AttentionSpec]:
        return [
            layer.attention
            for layer, _ in spec.layer_groups()
            if layer.attention is not None and self._is_pooled_window(spec, layer.attention)
        ]

    def _reference_full(self, spec: ArchSpec) -> AttentionSpec | None:
        return next(
            (
                layer.attention
                for layer, _ in spec.layer_groups()
                if layer.attention is not None
                and layer.attention.kind not in (AttentionKind.SHARED, AttentionKind.CROSS)
                and not self._is_pooled_window(spec, layer.attention)
            ),
            None,
        )

    def _swa_cell_layers(self, spec: ArchSpec, layers: Sequence[LayerSpec]) -> Sequence[tuple[LayerSpec, int]]:
        """The layers a stage's hybrid SWA cell counts (SglangRules.swa_stage_layers)."""
        mode = self.rules.swa_stage_layers
        if mode == "model" or layers is spec.layers:
            return spec.layer_groups()
        counted = list(layers)
        after = layers[-1].index + 1 if layers else len(spec.layers)
        if mode == "stage_plus_one" and after < len(spec.layers):
            counted.append(spec.layers[after])  # range(start_layer, end_layer + 1)
        return group_layers(spec, counted)

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
        if self._is_pooled_window(spec, attn) and self.rules.swa_eviction != "none":
            window = self.sliding_window_size(spec, attn)
            from kvsize.engines.base import blocks_in_window

            return blocks_in_window(shared, ctx, max(0, ctx - window), self.page_size)
        return shared
