"""Which config.json fields change what a layer caches, and which of them kvsize understands.

kvsize first meets a new architecture as a config.json it has never seen. Before `kvsize.config` sizes a
config, `unknown_cache_fields` lists every field that may change what a layer caches but that kvsize does not
read in the sense it has there; `parse_config` refuses such a config (exit 2, naming the fields) unless the
caller passes `assume_standard_attention`, and then every answer names the fields it ignored.

Three tables decide it, field by field (top-level fields of the language model's config, and the wrapper's
top-level fields around a nested `text_config`):

- `READ`: the fields kvsize's parser reads, grouped by the layout family that reads them, each with the
  condition under which the parser's reading is the field's meaning (`attention_chunk_size` is Llama 4
  chunking only beside `no_rope_layers`; `index_topk` is DeepSeek sparse attention only beside an MLA
  `kv_lora_rank`).
- `IRRELEVANT` (and `IRRELEVANT_PATTERNS`): fields whose name sounds cache-related but which size nothing in
  the KV cache or the recurrent state, with the reason each.
- `cache_sounding`: the generic detector for every other field: a name that speaks of windows, chunks,
  compression, indexers, latent ranks, linear or convolutional state, heads or head sizes, KV sharing, layer
  types. Anything it flags and the tables do not explain is not understood.

A field whose value is null, false or empty is treated as absent (a switch that is off). The conditions ask
only whether another field is given (not null), as the parser does: `kv_lora_rank: false` on DeepSeek-V3 lets
its `qk_rope_head_dim` through, and the parser refuses the false by name instead of this guard naming the
wrong field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvsize.errors import ConfigError
from kvsize.text import clean

Config = Mapping[str, Any]


class UnmodelledFields(ConfigError):
    """A config whose cache-relevant fields kvsize does not understand; `fields` names them."""

    def __init__(self, message: str, *, fields: tuple[str, ...], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.fields = fields


# --- what the parser reads -----------------------------------------------------------------------------------

# The layer_types / layers_block_type values kvsize.config maps to a layer kind (its _LAYER_TYPE_KIND).
KNOWN_LAYER_TYPES = frozenset(
    {
        "full_attention",
        "attention",
        "global",
        "sliding_attention",
        "local",
        "chunked_attention",
        "linear_attention",
        "mamba",
        "hybrid",
        "mlp",
        "moe",
        "conv",
        "indexed_attention",
        "deepseek_sparse_attention",
        "minimax_m3_sparse",
    }
)
# Families whose "linear_attention" layers kvsize sizes: Gated DeltaNet (Qwen3-Next / Qwen3.5 `linear_*`
# fields) and MiniMax lightning attention. Another family's linear layers (Kimi's KDA) keep another state.
_GDN_FIELDS = ("linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim", "linear_value_head_dim")


# transformers 5.24 configuration_utils.py _LEGACY_LAYER_TYPE_REMAP writes Mamba layers as "linear_attention"
# ("mamba" -> "linear_attention", "attention" -> "full_attention") in every config it saves (Granite 4, Bamba, ...):
# kvsize reads them as Mamba where the config has a Mamba state and no Gated DeltaNet widths.
MAMBA_STATE_FIELDS = ("mamba_d_state", "ssm_state_size", "state_size", "d_state")


def mamba_named_linear(c: Config) -> bool:
    """Whether this config's "linear_attention" layers are Mamba layers under transformers' 5.x name."""
    return any(_has(c, k) for k in MAMBA_STATE_FIELDS) and not any(_has(c, k) for k in _GDN_FIELDS)


def _has(c: Config, key: str) -> bool:
    """Whether a field the conditions depend on is given: not null, the parser's own test (`_Fields.has`).
    A false or an empty value in it is not "off" but a bad value the parser refuses by name."""
    return c.get(key) is not None


# Model types kvsize knows (kvsize.config KNOWN_MODEL_TYPES) that have MLA layers or recurrent-state layers. A
# known type outside them keeps standard attention whatever extra fields its config carries (transformers'
# LlamaConfig ignores a kv_lora_rank); a type kvsize does not know is read by the fields it carries.
MLA_MODEL_TYPES = frozenset(
    {"deepseek_v2", "deepseek_v3", "deepseek_v32", "glm_moe_dsa", "glm4_moe_lite", "kimi_linear", "longcat_flash"}
)
STATE_MODEL_TYPES = frozenset(
    {
        "mamba",
        "mamba2",
        "falcon_mamba",
        "jamba",
        "nemotron_h",
        "zamba2",
        "qwen3_next",
        "qwen3_5",
        "qwen3_5_text",
        "qwen3_5_moe",
        "qwen3_5_moe_text",
        "falcon_h1",
        "minimax",
        "bamba",
        "granitemoehybrid",
        "recurrent_gemma",
    }
)
# Families whose own fields kvsize.config reads (_kimi_layer_kinds / _kda_state, _lfm2_layer_kinds /
# _short_conv_state): another model type carrying them is refused.
KIMI_LINEAR_TYPES = frozenset({"kimi_linear"})
LFM2_TYPES = frozenset({"lfm2", "lfm2_moe"})
# kvsize.config _gemma4_global_shapes / _per_layer_config and _mimo_layer_kinds / _per_layer_shapes.
GEMMA4_TYPES = frozenset({"gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"})
MIMO_V2_TYPES = frozenset({"mimo_v2_flash"})
# kvsize.config _deepseek_v4_layer_kinds / _deepseek_v4_attention.
DEEPSEEK_V4_TYPES = frozenset({"deepseek_v4"})
STEP3P5_TYPES = frozenset({"step3p5", "step3p7"})
# MiniMax-M3: the hub's flat "minimax_m3" and transformers 5.24's MiniMaxM3VL text config
MINIMAX_M3_TYPES = frozenset({"minimax_m3", "minimax_m3_vl_text"})


def _minimax_m3(c: Config) -> bool:
    return str(c.get("model_type")) in MINIMAX_M3_TYPES


DEEPSEEK_V4_LAYER_TYPES = frozenset(
    {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"}
)
_KNOWN = "__kvsize_known_model_types__"  # where unknown_cache_fields puts the known types for the conditions


def _type_allows(c: Config, family_types: frozenset[str]) -> bool:
    model_type = c.get("model_type")
    known: frozenset[str] = c.get(_KNOWN, frozenset())
    return model_type not in known or model_type in family_types


def _mla(c: Config) -> bool:
    return _has(c, "kv_lora_rank") and _type_allows(c, MLA_MODEL_TYPES)


def _deepseek_v4(c: Config) -> bool:
    return c.get("model_type") in DEEPSEEK_V4_TYPES


def _deepseek_v4_nope(c: Config) -> bool:
    """qk_nope_head_dim on DeepSeek-V4 is head_dim less the RoPE part (qk_rope_head_dim, else head_dim x
    partial_rotary_factor, default 64 / 512: configuration_deepseek_v4.py __post_init__, 5.25)."""
    if not _deepseek_v4(c):
        return False
    head, nope, rope = c.get("head_dim", 512), c.get("qk_nope_head_dim"), c.get("qk_rope_head_dim")
    factor = c.get("partial_rotary_factor") or 64 / 512
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (head, nope)):
        return False
    if rope is None and isinstance(factor, (int, float)) and not isinstance(factor, bool):
        rope = int(head * factor)
    return isinstance(rope, int) and not isinstance(rope, bool) and nope == head - rope


def _layer_types_known(c: Config) -> bool:
    for key in ("layer_types", "layers_block_type"):
        names = c.get(key)
        if not isinstance(names, list):
            continue
        if key == "layer_types" and _deepseek_v4(c):
            return all(isinstance(n, str) and n in DEEPSEEK_V4_LAYER_TYPES for n in names)
        if any(not isinstance(n, str) or n not in KNOWN_LAYER_TYPES for n in names):
            return False
        if {"indexed_attention", "deepseek_sparse_attention"} & set(names) and not (_mla(c) and _has(c, "index_topk")):
            return False  # transformers' DSA layers (DynamicIndexedLayer): MLA with an indexer, nothing else
        if "minimax_m3_sparse" in names and not _minimax_m3(c):
            return False
        if "conv" in names and c.get("model_type") not in LFM2_TYPES:
            return False  # LFM2's short convolutions; another family's "conv" layers keep another state
        if "linear_attention" in names:
            lightning = str(c.get("model_type", "")).startswith("minimax")
            kda = c.get("model_type") in KIMI_LINEAR_TYPES
            if not lightning and not kda and not all(_has(c, k) for k in _GDN_FIELDS) and not mamba_named_linear(c):
                return False
    return True


def _llama4_chunking(c: Config) -> bool:
    return str(c.get("model_type", "")).startswith("llama4") or any(
        _has(c, k) for k in ("no_rope_layers", "no_rope_layer_interval")
    )


def _mimo(c: Config) -> bool:
    return c.get("model_type") in MIMO_V2_TYPES


def _gemma4(c: Config) -> bool:
    return c.get("model_type") in GEMMA4_TYPES


def _same_window(c: Config) -> bool:
    return c.get("sliding_window") in (None, c.get("sliding_window_size"))


# Model types whose DSA layers may share an earlier layer's top-k (kvsize.config _shared_indexer_layers):
# transformers 5.24 GlmMoeDsaConfig.__post_init__ (indexer_types, or index_topk_pattern / index_topk_freq /
# index_skip_topk_offset). transformers' DeepseekV32Config reads none of them, where vLLM's deepseek_v2.py would.
DSA_SHARING_TYPES = frozenset({"glm_moe_dsa"})


def _dsa_sharing(c: Config) -> bool:
    return _mla(c) and str(c.get("model_type")) in DSA_SHARING_TYPES


def _full_indexers(c: Config) -> bool:
    types = c.get("indexer_types")
    if not (_mla(c) and isinstance(types, list)):
        return False
    return all(t == "full" for t in types) or (_dsa_sharing(c) and all(t in ("full", "shared") for t in types))


def _no_index_sharing(c: Config) -> bool:
    """An index_topk schedule that shares nothing: every layer runs its indexer, for any engine."""
    return c.get("index_topk_freq") in (None, 1) and c.get("index_topk_pattern") is None


def _has_state(c: Config) -> bool:
    return any(_has(c, k) for k in _STATE_SIZE_FIELDS) and _recurrent_layout(c)


# Fields that tell kvsize.config _layer_kinds which layers are recurrent in a config of a type it does not know.
_RECURRENT_LAYOUT_FIELDS = (
    "hybrid_override_pattern",
    "attn_layer_period",
    "attn_layer_indices",
    "full_attention_interval",
    "attn_type_list",
)
_HEAD_FIELDS = ("num_attention_heads", "n_head", "n_heads")


def _recurrent_layout(c: Config) -> bool:
    """Whether the parser would give the state fields a recurrent layer to size: a known family with recurrent
    layers, or an unknown type that has no attention heads (a pure SSM) or says which layers are recurrent.
    An unknown type with heads and state fields but no such layout would be sized as pure attention."""
    model_type = c.get("model_type")
    if model_type in c.get(_KNOWN, frozenset()):
        return model_type in STATE_MODEL_TYPES
    if not any(_has(c, k) for k in _HEAD_FIELDS) or any(_has(c, k) for k in _RECURRENT_LAYOUT_FIELDS):
        return True
    return any(
        isinstance(names := c.get(key), list) and any(n in ("mamba", "linear_attention", "hybrid") for n in names)
        for key in ("layer_types", "layers_block_type")
    )


def _windowed(c: Config) -> bool:
    return _has(c, "sliding_window") or str(c.get("model_type")) in ("gemma2", "gemma3_text", "cohere2")


_STATE_SIZE_FIELDS = ("ssm_state_size", "state_size", "mamba_d_state", "d_state", "linear_num_value_heads")


@dataclass(frozen=True)
class Reading:
    """How kvsize reads one field: the layout family that reads it, and when its reading is the meaning."""

    family: str
    when: Callable[[Config], bool] | None = None
    condition: str = ""
    """The `when` in words, for the refusal message."""


def _family(
    family: str, *keys: str, when: Callable[[Config], bool] | None = None, condition: str = ""
) -> dict[str, Reading]:
    return {key: Reading(family, when, condition) for key in keys}


READ: dict[str, Reading] = {
    **_family("layers", "num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    # standard attention: MHA / GQA / MQA (kvsize.config _attention_params, _num_kv_heads)
    **_family(
        "attention",
        "num_attention_heads",
        "n_head",
        "n_heads",
        "num_key_value_heads",
        "n_head_kv",
        "num_kv_heads",
        "num_attention_groups",
        "multi_query",
        "new_decoder_architecture",
        "multi_query_attention",
        "multi_query_group_num",
        "head_dim",
        "kv_channels",
        "attention_head_dim",
        "hidden_size_per_head",
        "v_head_dim",
        "hidden_size",
        "n_embd",
        "d_model",
    ),  # fmt: skip
    # sliding windows: every layer (Mistral), from max_window_layers (Qwen2), by period or L/G pattern
    **_family("sliding", "sliding_window", "use_sliding_window", "max_window_layers"),
    # SGLang's opt-in to its separate sliding-window pool (configs/model_config.py is_hybrid_swa_model), read into
    # ArchSpec.declares_hybrid_swa; it changes which pool holds the layers, not what a layer caches
    **_family("sliding", "is_hybrid_swa"),
    **_family(
        "sliding",
        "sliding_window_pattern",
        when=_windowed,
        condition="only beside a sliding_window",
    ),
    **_family(
        "sliding",
        "sliding_window_size",
        when=lambda c: _same_window(c) or _mimo(c),
        condition="only as the same number as sliding_window (Gemma 2's older spelling), or as MiMo-V2's window "
        "less the query",
    ),
    # "vision" masks image tokens both ways and caches the same keys; "all" (Gemma 4) / true (Gemma 3, 3n) makes
    # transformers halve the window (Gemma3TextConfig / Gemma4TextConfig.__post_init__: sliding_window // 2 + 1)
    # and attend both ways: an encoder kvsize does not size
    **_family(
        "sliding",
        "use_bidirectional_attention",
        when=lambda c: c.get("use_bidirectional_attention") == "vision" or c.get("model_type") in ("gemma", "gemma2"),
        condition="only as 'vision' (an image-token mask), or on Gemma 1 / 2 (PaliGemma's prefix-LM backbones: "
        "Gemma3TextConfig and Gemma4TextConfig halve their window for it, GemmaConfig and Gemma2Config do not)",
    ),
    **_family(
        "layer_types",
        "layer_types",
        "layers_block_type",
        when=_layer_types_known,
        condition=f"only with the layer types {', '.join(sorted(KNOWN_LAYER_TYPES))} (linear_attention only "
        "as Gated DeltaNet with linear_num_value_heads, or MiniMax lightning attention; DeepSeek-V4's own three)",
    ),
    # MiMo-V2-Flash's hub config carries attention_chunk_size 128 beside its window; neither transformers 5.24
    # (MiMoV2FlashConfig, MiMoV2FlashAttention) nor vLLM 0.33 mimo_v2.py reads it: its layers slide, none chunk
    **_family(
        "chunked",
        "attention_chunk_size",
        when=lambda c: _llama4_chunking(c) or _mimo(c),
        condition="only as Llama 4 chunked attention (llama4 model types, or beside no_rope_layers), or on MiMo-V2 "
        "(which reads none)",
    ),
    **_family(
        "chunked",
        "no_rope_layers",
        "no_rope_layer_interval",
        when=lambda c: (
            _has(c, "attention_chunk_size")
            or str(c.get("model_type")).startswith("llama4")
            or c.get("model_type") == "smollm3"
        ),
        condition="only beside Llama 4's attention_chunk_size, or on SmolLM3 (its NoPE layers slide)",
    ),
    **_family("cross", "cross_attention_layers"),
    **_family("kv_sharing", "num_kv_shared_layers"),
    # MLA (DeepSeek-V2/V3, Kimi K2): one latent per token; DeepSeek-V3.2 sparse attention adds its indexer key
    **_family(
        "mla",
        "kv_lora_rank",
        when=_mla,
        condition=f"only for MLA model types ({', '.join(sorted(MLA_MODEL_TYPES))}) or model types it does not know",
    ),
    **_family(
        "mla",
        "qk_head_dim",
        when=_mla,
        condition="only beside an MLA kv_lora_rank",
    ),  # fmt: skip
    # DeepSeek-V4 configs saved by transformers 5.7 write qk_nope_head_dim: the one cached head's non-RoPE part,
    # which DeepseekV4Config (5.25) no longer reads
    **_family(
        "mla",
        "qk_nope_head_dim",
        when=lambda c: _mla(c) or _deepseek_v4_nope(c),
        condition="only beside an MLA kv_lora_rank, or on DeepSeek-V4 as head_dim less its RoPE part",
    ),  # fmt: skip
    # DeepSeek-V4 reads the indexer's width too (its CSA layers key each compressed entry); its qk_rope_head_dim
    # is the RoPE part of the one cached head (transformers folds it into partial_rotary_factor)
    **_family(
        "mla",
        "qk_rope_head_dim",
        "index_topk",
        when=lambda c: _mla(c) or _deepseek_v4(c),
        condition="only beside an MLA kv_lora_rank, or on DeepSeek-V4",
    ),  # fmt: skip
    # the indexer's key width (and its query heads, which cache nothing): DSA, DeepSeek-V4, MiniMax-M3
    **_family(
        "mla",
        "index_head_dim",
        "index_n_heads",
        when=lambda c: _mla(c) or _deepseek_v4(c) or _minimax_m3(c),
        condition="only beside an MLA kv_lora_rank, or on DeepSeek-V4 or MiniMax-M3",
    ),  # fmt: skip
    # MiniMax-M3 sparse attention (kvsize.config _minimax_m3_sparse_layers): block selection settings size nothing
    **_family(
        "minimax_m3",
        "sparse_attention_config",
        "index_block_size",
        "index_topk_blocks",
        "index_local_blocks",
        when=_minimax_m3,
        condition=f"only for MiniMax-M3 model types ({', '.join(sorted(MINIMAX_M3_TYPES))})",
    ),
    # DeepSeek-V4 compressed attention (kvsize.config _deepseek_v4_layer_kinds / _deepseek_v4_attention); the
    # compressor's RoPE (compress_rope_theta in 5.25, compress_rope_parameters as 5.7 saved it) sizes nothing
    **_family(
        "deepseek_v4",
        "compress_rope_theta",
        "compress_rope_parameters",
        when=_deepseek_v4,
        condition="only for model_type deepseek_v4",
    ),
    **_family(
        "deepseek_v4",
        "compress_ratios",
        "compress_rates",
        "compress_rate_csa",
        "compress_rate_hca",
        when=_deepseek_v4,
        condition="only for model_type deepseek_v4",
    ),
    **_family(
        "mla",
        "indexer_types",
        when=_full_indexers,
        condition="only with MLA and every layer's indexer 'full', or 'full' and 'shared' on GLM-5 (glm_moe_dsa)",
    ),
    **_family(
        "mla",
        "index_topk_freq",
        "index_topk_pattern",
        "index_skip_topk_offset",
        when=lambda c: _mla(c) and (_dsa_sharing(c) or _no_index_sharing(c)),
        condition="only on GLM-5 (glm_moe_dsa), or as a schedule that shares no indexer (freq 1, no pattern)",
    ),
    # layer patterns of hybrids
    **_family(
        "hybrid",
        "hybrid_override_pattern",
        "attn_layer_period",
        "attn_layer_indices",
        "full_attention_interval",
        "attn_type_list",
        "block_configs",
    ),  # fmt: skip
    **_family(
        "hybrid",
        "attn_layer_offset",
        when=lambda c: _has(c, "attn_layer_period"),
        condition="only beside attn_layer_period",
    ),
    # recurrent state: Mamba-1/2 and Gated DeltaNet (kvsize.config _state_spec)
    **_family(
        "state",
        "ssm_state_size",
        "state_size",
        "mamba_d_state",
        "d_state",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        when=_recurrent_layout,
        condition=f"only for model types with recurrent layers ({', '.join(sorted(STATE_MODEL_TYPES))}), or "
        "model types it does not know that have no attention heads or say which layers are recurrent "
        "(layer_types, hybrid_override_pattern, attn_layer_period, full_attention_interval)",
    ),  # fmt: skip
    # Gated DeltaNet's conv width, and Kimi Linear's KDA conv under transformers 5.24's flat names
    # (KimiLinearConfig: linear_head_dim, linear_num_heads, linear_conv_kernel_dim; kvsize.config _kda_state)
    **_family(
        "state",
        "linear_conv_kernel_dim",
        when=lambda c: _recurrent_layout(c) or c.get("model_type") in KIMI_LINEAR_TYPES,
        condition="only for model types with recurrent layers, or on Kimi Linear",
    ),
    **_family(
        "kda",
        "linear_head_dim",
        "linear_num_heads",
        when=lambda c: c.get("model_type") in KIMI_LINEAR_TYPES,
        condition="only for model_type kimi_linear",
    ),
    **_family(
        "state",
        "conv_kernel",
        "mamba_d_conv",
        "d_conv",
        "conv_dimension",
        "mamba_d_ssm",
        "expand",
        "mamba_expand",
        "expansion_factor",
        "mamba_head_dim",
        "mamba_headdim",
        "mamba_d_head",
        "n_groups",
        "mamba_n_groups",
        "mamba_ngroups",
        "ngroups",
        "mamba_num_heads",
        "mamba_n_heads",
        "n_mamba_heads",
        "mamba_chunk_size",
        "chunk_size",
        "mamba_ssm_dtype",
        "mamba_ssm_cache_dtype",
        when=_has_state,
        condition="only beside a recurrent state size (ssm_state_size, d_state, linear_num_value_heads)",
    ),  # fmt: skip
    **_family(
        "state",
        "num_heads",
        when=lambda c: (
            _has_state(c)
            or c.get("is_encoder_decoder") is True
            or c.get("model_type") == "gpt_neo"
            # the hub's LFM2 files keep this older name beside num_attention_heads; neither transformers 5.24
            # (Lfm2Config, modeling_lfm2) nor vLLM 0.19 (models/lfm2.py) reads it
            or (_lfm2(c) and c.get("num_heads") == c.get("num_attention_heads"))
        ),
        condition="only as Mamba-2 heads, an encoder-decoder's heads, GPT-Neo's attention heads or LFM2's copy of "
        "num_attention_heads",
    ),
    # AFMoE (Arcee Trinity): every n-th layer global, the rest sliding (AfmoeConfig.__post_init__; kvsize.config
    # _attention_layer_kinds)
    **_family(
        "sliding",
        "global_attn_every_n_layers",
        when=lambda c: c.get("model_type") == "afmoe",
        condition="only for model_type afmoe",
    ),
    # Ergo (transformers 5.25 configuration_ergo.py ErgoConfig.__post_init__): sliding where
    # (i + 1) % global_attention_every_n_layers, full otherwise; its released configs spell the window
    # local_attention_window (ErgoConfig.attribute_map), which kvsize.config reads as sliding_window
    **_family(
        "sliding",
        "global_attention_every_n_layers",
        "local_attention_window",
        when=lambda c: c.get("model_type") == "ergo",
        condition="only for model_type ergo",
    ),
    # Laguna: per-layer query heads; both transformers 5.24 (LagunaAttention) and vLLM 0.33 (laguna.py
    # LagunaDecoderLayer: num_kv_heads=config.num_key_value_heads) keep the same KV heads on every layer
    **_family(
        "attention",
        "num_attention_heads_per_layer",
        when=lambda c: c.get("model_type") == "laguna",
        condition="only for model_type laguna (query heads per layer)",
    ),
    # transformers' private copy of sliding_window_pattern (Gemma 3 saves it beside layer_types, which decide)
    **_family(
        "sliding",
        "_sliding_window_pattern",
        when=lambda c: _has(c, "layer_types"),
        condition="only beside layer_types (which decide the layers)",
    ),
    # GPT-Neo's global and local (windowed) layers (kvsize.config _gpt_neo_layer_kinds)
    **_family(
        "gpt_neo",
        "attention_types",
        "attention_layers",
        "window_size",
        when=lambda c: c.get("model_type") == "gpt_neo",
        condition="only for model_type gpt_neo",
    ),
    # MPT / DBRX keep their KV heads inside attn_config (its fields are checked one by one)
    **_family("attention", "attn_config"),
    # encoder-decoder models (T5, BART, Whisper: kvsize.config _encoder_decoder)
    **_family(
        "encoder_decoder",
        "is_encoder_decoder",
        "decoder_layers",
        "num_decoder_layers",
        "decoder_attention_heads",
        "d_kv",
        "max_source_positions",
        "encoder_layers",
        "encoder_attention_heads",
    ),  # fmt: skip
}


def _lfm2(c: Config) -> bool:
    return c.get("model_type") in LFM2_TYPES


def _zamba2_derived(c: Config) -> bool:
    """The values transformers 5.25 Zamba2Config.__post_init__ writes into every config it saves, whatever the
    file said: attention_hidden_size = 2 x hidden_size (kvsize.config's Zamba2 head_dim, 2 x hidden / heads) and
    hybrid_layer_ids = the indices of the "hybrid" entries of layers_block_type."""
    hidden, types = c.get("hidden_size"), c.get("layers_block_type")
    hybrid = [i for i, t in enumerate(types) if t == "hybrid"] if isinstance(types, list) else None
    return (
        c.get("model_type") == "zamba2"
        and c.get("attention_hidden_size") in (None, 2 * hidden if isinstance(hidden, int) else None)
        and c.get("hybrid_layer_ids") in (None, hybrid)
    )


READ.update(
    {
        # RecurrentGemma: block_types, the local window and the RG-LRU state (kvsize.config _recurrent_gemma_*)
        **_family(
            "rg_lru",
            "block_types",
            "attention_window_size",
            "conv1d_width",
            "lru_width",
            when=lambda c: c.get("model_type") == "recurrent_gemma",
            condition="only for model_type recurrent_gemma",
        ),
        # Kimi Linear: KDA and MLA layers from linear_attn_config (its children in READ_NESTED)
        **_family(
            "kda",
            "linear_attn_config",
            when=lambda c: c.get("model_type") in KIMI_LINEAR_TYPES,
            condition="only for model_type kimi_linear",
        ),
        # CogVLM2's KV heads (its configs name no model_type)
        **_family(
            "attention",
            "num_multi_query_heads",
            when=lambda c: c.get("model_type") not in c.get(_KNOWN, frozenset()),
            condition="only for model types it does not know (CogVLM2 names none): a known type's class ignores it",
        ),
        # Gemma 4: full layers with their own head size and KV heads (kvsize.config _gemma4_global_shapes)
        **_family(
            "gemma4",
            "global_head_dim",
            "num_global_key_value_heads",
            "attention_k_eq_v",
            when=_gemma4,
            condition=f"only for Gemma 4 model types ({', '.join(sorted(GEMMA4_TYPES))})",
        ),
        # transformers' per-layer overrides: Gemma 4's KV heads and head sizes, Step-3.5's query heads (their keys
        # are checked one by one: READ_NESTED)
        **_family(
            "per_layer",
            "per_layer_config",
            when=lambda c: _gemma4(c) or str(c.get("model_type")) in STEP3P5_TYPES,
            condition=f"only for Gemma 4 and Step-3.5 model types ({', '.join(sorted(GEMMA4_TYPES | STEP3P5_TYPES))})",
        ),
        # MiMo-V2-Flash: sliding layers with their own KV heads and head sizes (kvsize.config _per_layer_shapes)
        **_family(
            "mimo_v2",
            "hybrid_layer_pattern",
            "swa_num_key_value_heads",
            "swa_head_dim",
            "swa_v_head_dim",
            when=_mimo,
            condition="only for model_type mimo_v2_flash",
        ),
        **_family(
            "mimo_v2",
            "swa_num_attention_heads",
            when=lambda c: _mimo(c) and c.get("swa_num_attention_heads") == c.get("num_attention_heads"),
            condition="only for mimo_v2_flash with as many query heads as num_attention_heads (transformers' "
            "MiMoV2FlashAttention gives every layer num_attention_heads)",
        ),
        # Step-3.5 / 3.7: sliding layers with their own query-head count. Both transformers 5.24 (Step3p7Attention:
        # config.num_key_value_heads and head_dim on every layer) and vLLM 0.33 (step3p5.py Step3p5DecoderLayer:
        # num_kv_heads=config.num_attention_groups, head_dim=config.head_dim) cache the same KV on every layer;
        # the legacy attention_other_setting and transformers' per_layer_config give only query heads there.
        **_family(
            "step3p5",
            "num_sliding_attention_heads",
            "attention_other_setting",
            when=lambda c: str(c.get("model_type")) in STEP3P5_TYPES,
            condition=f"only for Step-3.5 model types ({', '.join(sorted(STEP3P5_TYPES))}), whose sliding layers "
            "change only their query heads",
        ),
        # LFM2 / LFM2.5: short-convolution layers over hidden_size channels
        **_family("lfm2", "conv_L_cache", "full_attn_idxs", when=_lfm2, condition="only for LFM2 model types"),
        # Zamba2 as transformers 5.x saves it; adapter_rank is the shared blocks' LoRA rank (weights only)
        **_family(
            "zamba2",
            "attention_hidden_size",
            "hybrid_layer_ids",
            "adapter_rank",
            when=_zamba2_derived,
            condition="only for Zamba2, as its config class derives them (2 x hidden_size, the hybrid layers)",
        ),
        **_family(
            "lfm2",
            "conv_dim",
            when=lambda c: _lfm2(c) and c.get("conv_dim") == c.get("hidden_size"),
            condition="only for LFM2 with conv_dim equal to hidden_size (transformers convolves hidden_size "
            "channels, vLLM conv_dim)",
        ),
        # The hub's LFM2 files (LiquidAI/LFM2-1.2B, the text_config of LFM2.5-VL) keep an older name no engine
        # reads: transformers 5.24 modeling_lfm2 and vLLM 0.19 models/lfm2.py map the conv back to hidden_size.
        **_family(
            "lfm2",
            "conv_dim_out",
            when=lambda c: _lfm2(c) and c.get("conv_dim_out") == c.get("hidden_size"),
            condition="only for LFM2 with conv_dim_out equal to hidden_size (no engine reads it)",
        ),
    }
)

# The fields of nested objects the parser reads, by the object's key.
READ_NESTED: dict[str, frozenset[str]] = {
    "attn_config": frozenset({"kv_n_heads"}),
    "linear_attn_config": frozenset(
        {"kda_layers", "full_attn_layers", "num_heads", "head_dim", "short_conv_kernel_size"}
    ),
    "block_configs[].attention": frozenset({"n_heads_in_group", "no_op", "replace_with_linear"}),
    # Gemma 4 per-layer overrides: every other key (skip, sliding_window, ...) is refused, cache-sounding or not
    "per_layer_config[]": frozenset({"head_dim", "num_key_value_heads"}),
    # Step-3.5 / 3.7 per-layer overrides (Step3p5TextConfig.__post_init__): query heads only
    "step3p5 per_layer_config[]": frozenset({"num_attention_heads"}),
    "attention_other_setting": frozenset({"attention_type", "num_attention_heads"}),
    # MiniMax-M3 (MiniMaxM3VLTextConfig.__post_init__ reads the first five; block selection sizes nothing;
    # kvsize.config checks use_sparse_attention and sparse_disable_index_value)
    "sparse_attention_config": frozenset(
        {
            "sparse_attention_freq",
            "sparse_index_dim",
            "sparse_num_index_heads",
            "sparse_block_size",
            "sparse_topk_blocks",
            "sparse_local_block",
            "sparse_init_block",
            "sparse_score_type",
            "sparse_disable_index_value",
            "use_sparse_attention",
        }
    ),
}

# --- cache-sounding fields that size nothing ------------------------------------------------------------------

_NO_CACHE = "sizes no cache"
IRRELEVANT: dict[str, str] = {
    "attn_impl": "MPT's attention kernel name (torch, flash, triton); no cache shape",
    "attn_type": "MPT's attention variant: transformers' MptAttention is MHA whatever it says, vLLM reads kv_n_heads",
    "ssm_multipliers": "Falcon-H1's multipliers on the SSM's activations (muP); no state shape",
    # generation and runtime switches
    "use_cache": "turns the cache on at inference; kvsize sizes the cache that is on",
    "cache_implementation": "transformers' default cache class for generate(); kvsize's hf engine takes its own",
    "output_attentions": "returns attention weights; stores nothing per token",
    "_attn_implementation": "the attention kernel's name (eager, sdpa, flash); no cache shape",
    "attn_implementation": "the attention kernel's name (eager, sdpa, flash); no cache shape",
    "flash_attn": "kernel choice; no cache shape",
    "use_flash_attention": "kernel choice; no cache shape",
    "attention_softmax_in_fp32": "the softmax's compute dtype",
    "scale_attention_softmax_in_fp32": "the softmax's compute dtype",
    "is_decoder": "a class flag; the layers are read from the decoder fields",
    # mixture of experts routing
    "norm_topk_prob": "MoE router: renormalises the top-k expert weights",
    "topk_group": "MoE router: expert groups each token may choose",
    "n_group": "MoE router: expert groups",
    "num_expert_group": "MoE router: expert groups",
    "topk_method": "MoE router: how experts are picked",
    "top_k": "generation sampling (or MoE top-k): no cache",
    "top_k_experts": "MoE top-k",
    "moe_topk": "MoE top-k",
    "decoder_sparse_step": "MoE: every n-th layer has experts (the MLP, not attention)",
    "moe_layer_freq": "MoE: which layers have experts",
    "mlp_only_layers": "MoE: layers with a dense MLP",
    "mlp_layer_types": "dense or MoE MLP per layer; the attention is the same",
    "moe_latent_size": "Nemotron-3 latent MoE: experts run in a smaller width; weights only",
    "interleave_moe_layer_step": "Llama 4: MoE every n-th layer (the MLP)",
    "first_k_dense_replace": "MoE: the first layers have a dense MLP",
    "num_experts_per_tok": "MoE top-k",
    "use_grouped_topk": "MoE router",
    # low-rank projections that are weights, not cache
    "q_lora_rank": "MLA: the query's low-rank projection; queries are not cached",
    "o_lora_rank": "DeepSeek-V4: the output's low-rank projection; weights only",
    "lora_rank": "Zamba2: LoRA adapters of the shared attention block; weights only",
    "use_shared_attention_lora": "Zamba2: LoRA adapters on the shared attention; weights only",
    "use_shared_block_lora": "Zamba2: LoRA adapters on the shared block; weights only",
    "time_step_rank": "Mamba: rank of the dt projection; weights only (the state is d_inner x d_state)",
    "mamba_dt_rank": "Mamba: rank of the dt projection; weights only",
    # positions
    "partial_rotary_factor": "RoPE covers part of each head; the head is cached whole",
    "rotary_pct": "RoPE covers part of each head; the head is cached whole",
    "rotary_dim": "RoPE covers part of each head; the head is cached whole",
    "rotary": "GPT-J: RoPE on; no cache shape",
    "original_rope": "ChatGLM: RoPE layout",
    "use_mem_rope": "Zamba2: RoPE in the shared blocks",
    "use_mrope": "multimodal RoPE sections",
    "rope_interleave": "RoPE layout",
    "rope_interleaved": "RoPE layout",
    "indexer_rope_interleave": "the DSA indexer's RoPE layout",
    "projector_patch_to_query_dict": "Aria: the vision projector's query tokens per image size; no decoder cache",
    "max_value_projector_patch_to_query_dict": "Aria: the largest projector query count; no decoder cache",
    "seconds_per_chunk": "Qwen2.5-Omni: audio seconds per position chunk (time ids); no cache shape",
    # MiniMax-Text-01 / M1 (modeling_minimax.py MiniMaxDecoderLayer.forward): residual * alpha + output * beta
    "full_attn_alpha_factor": "MiniMax: a residual scale after softmax attention; no cache shape",
    "full_attn_beta_factor": "MiniMax: a scale on the softmax-attention output; no cache shape",
    "linear_attn_alpha_factor": "MiniMax: a residual scale after lightning attention; no cache shape",
    "linear_attn_beta_factor": "MiniMax: a scale on the lightning-attention output; no cache shape",
    "use_index_cache": "vLLM 0.21-0.23 IndexCache switch: skips the indexer's top-k on shared layers, whose indexer "
    "and cache are built all the same (deepseek_v2.py DeepseekV2MLAAttention)",
    "no_rope_layers_interval": "RoPE layout",
    "rope_local_base_freq": "RoPE frequency of local layers",
    "mrope_section": "RoPE layout",
    # vision, MTP and other towers that hold no decoder cache
    "vision_config": "the vision tower's own config: it holds no KV cache of the language model",
    "audio_config": "the audio tower's own config: it holds no KV cache of the language model",
    "vision_feature_layer": "which vision layer feeds the projector",
    "num_nextn_predict_layers": "MTP draft layers: cached only with speculative decoding, not modelled",
    "mtp_num_hidden_layers": "MTP draft layers: cached only with speculative decoding, not modelled",
    "mtp_hybrid_override_pattern": "MTP draft layers: cached only with speculative decoding, not modelled",
    "mtp_layers_block_type": "MTP draft layers: cached only with speculative decoding, not modelled",
    "mtp_transformer_layers": "MTP draft layers: cached only with speculative decoding, not modelled",
    "num_mtp_modules": "MTP draft layers: cached only with speculative decoding, not modelled",
    "index_share_for_mtp_iteration": "MTP draft layers' indexer: speculative decoding, not modelled",
    "mtp_share_layers": "EXAONE 4.5: whether the MTP draft layers share weights (modeling_exaone4_5.py ignores the "
    "mtp.* weights: no cache layer is built for them)",
    "mtp_loss_scaling_factor": "MTP training loss weight; no cache shape",
    # MiniMax-M3-VL wrapper keys that transformers 5.25's minimax_m3_vl classes do not read
    "img_token_compression_config": "MiniMax-M3-VL: image-token compression before the language model (the prompt's "
    "length, not a layer's cache); not read by transformers 5.25",
    "num_reward_heads": "MiniMax-M3-VL: reward-model heads, weights only; not read by transformers 5.25",
    "num_mem_blocks": "Zamba2: shared transformer blocks reused across layers; their cache is per layer",
    # context keys read for the maximum, not the layout
    "context_window_size": "CodeLlama: a context length; kvsize reads max_position_embeddings",
    "prefill_chunk_size": "a serving default (chunked prefill); no cache shape",
    # quantization: the KV dtype is read by kvsize.api from quantization_config.kv_cache_scheme
    "quantization_config": "weights' quantization; an fp8 kv_cache_scheme is read by --kv-dtype auto",
    "transformers.js_config": "transformers.js ONNX export settings",
    "full_attn_mod": "Phi-4-mini: read by neither transformers' nor vLLM's phi3 model",
    "hidden_size_per_layer_input": "Gemma 3n/4 per-layer input embeddings; weights only",
    "laurel_rank": "Gemma 3n LAuReL: a low-rank learned residual beside attention; weights only",
    "activation_sparsity_pattern": "Gemma 3n: per-layer sparsity of the MLP's activations",
    "add_swa_attention_sink_bias": "MiMo-V2: a learned sink logit per head on sliding layers; no cached token",
    "add_full_attention_sink_bias": "MiMo-V2: a learned sink logit per head on full layers; no cached token",
    "num_hash_layers": "DeepSeek-V4: hash-routed MoE layers",
    "attention_value_scale": "a scale on values; no cache shape",
    "hc_sinkhorn_iters": "DeepSeek-V4 hyper-connections: mixes residual streams; no cache",
    "o_groups": "DeepSeek-V4: groups of the output projection; weights only",
    "mla_use_nope": "Kimi: MLA without RoPE rotation; the latent keeps kv_lora_rank + qk_rope_head_dim (vLLM "
    "kimi_linear.py KimiMLAAttention)",
    "scale_attn_weights": "GPT-2 family: scales attention scores",
    "scale_attn_by_inverse_layer_idx": "GPT-2: scales attention scores",
    "reorder_and_upcast_attn": "GPT-2: the score computation's dtype",
    "query_pre_attn_scalar": "Gemma: scales queries",
    "attn_temperature_tuning": "Llama 4: scales the queries of NoPE layers at long context (transformers 5.25 "
    "Llama4TextAttention); no cache shape",
    "parallel_attn": "Falcon: attention and MLP side by side; the attention caches the same",
    "attn_output_gate": "Qwen3.5: a gate on the attention output; weights only",
    "attention_output_gate": "a gate on the attention output; weights only",
    "output_gate_type": "a gate on the attention output; weights only",
    "use_mamba_kernels": "kernel choice (CUDA Mamba kernels); the state is the same",
    "chunk_size_feed_forward": "transformers' feed-forward chunking over the sequence; no cache shape",
    "use_unified_vision_chunk": "Kimi-K2.5: vision chunking",
    "gated_linear_unit": "Zamba2: a gated MLP",
    "num_query_groups": "Zamba2: overwritten with num_attention_heads (transformers Zamba2Config.__post_init__)",
    "relative_attention_num_buckets": "T5: a position bias; no cache",
    "relative_attention_max_distance": "T5: a position bias; no cache",
}
# Name patterns with one reason each: special-token ids, dropouts, biases, norms, scales and initialisation.
IRRELEVANT_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r".*_token_(id|index)$|^ignore_index$|.*_token_ids?$"), "a special token's id"),
    (re.compile(r".*(dropout|pdrop|layerdrop)$"), "training-time dropout"),
    (re.compile(r".*_bias$|^(use_)?(qkv_|attention_|conv_|proj_)?bias$|^add_.*bias.*"), "a bias term: weights"),
    (re.compile(r".*norm.*|.*_eps$|.*epsilon$"), "normalisation: no cache shape"),
    (re.compile(r".*(scale|scaling|multiplier|softcap|softcapping)$"), "a scale on activations: no cache shape"),
    (re.compile(r"^(init|initializer)_.*|.*_init(_.*)?$"), "weight initialisation"),
    (re.compile(r".*_(act|activation)$|^activation_.*|.*hidden_act$"), "an activation function"),
    (re.compile(r"^rope_.*|.*_rope_theta$|^rope$"), "RoPE frequencies: kvsize reads only a scaling factor"),
    (re.compile(r"^(output|return)_.*"), "what a forward returns"),
    (re.compile(r"^(num_beams|num_beam_groups|.*_penalty|num_return_sequences)$"), "generation settings"),
    (re.compile(r".*_experts?(_.*)?$|^n_routed_experts$|^experts_.*"), "MoE experts: the MLP, not attention"),
    (re.compile(r"^moe_.*|.*router.*"), "MoE settings: the MLP, not attention"),
    (re.compile(r".*_intermediate_size$|^intermediate_size.*|.*ffn.*"), "an MLP width"),
    (re.compile(r"^mm_.*|^vision_.*|^image_.*|^video_.*|^audio_.*"), "multimodal projector settings"),
    (re.compile(r".*logits.*|.*_heads?_bias$"), "output logits"),
    (re.compile(r".*pretraining_tp$|.*_tp$"), "training-time tensor parallelism"),
)

# --- the generic detector ---------------------------------------------------------------------------------------

CACHE_WORDS = (
    "window", "sliding", "swa", "chunk", "compress", "index", "topk", "lora", "latent", "rank", "linear",
    "conv", "state", "ssm", "mamba", "recurr", "delta", "kda", "gdn", "lightning", "retention", "kv", "key",
    "value", "head", "query", "group", "layer_type", "layers_block", "pattern", "shared", "share", "sparse",
    "cache", "attn", "attention", "local", "global", "nope", "rope", "mla", "dsa", "csa", "hca", "sink",
    "mem", "expand", "hybrid", "block_type",
)  # fmt: skip
_CACHE_WORDS = re.compile("|".join(CACHE_WORDS))


def cache_sounding(key: str) -> bool:
    """Whether a field's name speaks of something a layer may cache (windows, chunks, compression, indexers,
    ranks, linear or convolutional state, heads, KV sharing, layer types)."""
    return bool(_CACHE_WORDS.search(key.lower()))


def irrelevant_reason(key: str) -> str | None:
    """Why a field sizes no cache, or None when no table says so."""
    reason = IRRELEVANT.get(key)
    if reason is not None:
        return reason
    return next((why for pattern, why in IRRELEVANT_PATTERNS if pattern.fullmatch(key)), None)


def present(value: object) -> bool:
    """A field is absent when null, false or empty (a switch that is off)."""
    return value is not None and value is not False and value != [] and value != {} and value != ""


# --- the guard ---------------------------------------------------------------------------------------------------

TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config", "decoder", "generator")


@dataclass(frozen=True)
class Finding:
    field: str
    """The field as written in the config (`text_config.compress_ratios`, `attn_config.alibi`)."""
    why: str
    """Why kvsize does not understand it."""


def unknown_cache_fields(
    raw: Config, data: Config, where: str, model_type: str, known_model_types: frozenset[str] = frozenset()
) -> list[Finding]:
    """The fields of a config that may change what a layer caches but that kvsize does not understand.

    `data` is the language model's config (`raw` itself, or its `text_config`), `where` its prefix, `model_type`
    the checked model type ("unknown" when it names none); `known_model_types` those kvsize's parser was written
    against."""
    context = {**data, "model_type": model_type, _KNOWN: known_model_types}
    found = [f for key, value in data.items() if (f := _judge(key, value, context, where)) is not None]
    if where:  # the wrapper's own fields around a nested language model
        for key, value in raw.items():
            if key in TEXT_CONFIG_KEYS or key in data:
                continue
            finding = _judge(key, value, {**raw, "model_type": model_type, _KNOWN: known_model_types}, "")
            if finding is not None:
                found.append(finding)
    found.extend(_nested(context, where))  # with the checked model_type (a text_config may name none)
    return found


def _judge(key: str, value: object, config: Config, where: str) -> Finding | None:
    if not isinstance(key, str) or not present(value) or key == "model_type":
        return None
    reading = READ.get(key)
    if reading is not None:
        if reading.when is None or reading.when(config):
            return None
        return Finding(f"{where}{key}", f"kvsize reads it {reading.condition}")
    if irrelevant_reason(key) is not None or not cache_sounding(key):
        return None
    return Finding(f"{where}{key}", "not a field kvsize reads")


def _nested(data: Config, where: str) -> list[Finding]:
    found: list[Finding] = []
    attn = data.get("attn_config")
    if isinstance(attn, Mapping):
        found += _unread_children(attn, READ_NESTED["attn_config"], f"{where}attn_config.")
    linear = data.get("linear_attn_config")
    if isinstance(linear, Mapping) and data.get("model_type") in KIMI_LINEAR_TYPES:
        found += _unread_children(linear, READ_NESTED["linear_attn_config"], f"{where}linear_attn_config.")
    overrides = data.get("per_layer_config")
    step = str(data.get("model_type")) in STEP3P5_TYPES
    other = data.get("attention_other_setting")
    if step and isinstance(other, Mapping):
        # vLLM step3p5.py reads only its num_attention_heads (and attention_type); transformers the same. Its KV
        # groups and head_dim are read by neither: the standard fields decide, so a different value is refused.
        same = {"num_attention_groups": data.get("num_attention_groups", data.get("num_key_value_heads"))}
        same |= {"num_key_value_heads": same["num_attention_groups"], "head_dim": data.get("head_dim")}
        same |= {"true_head_dim": data.get("head_dim")}
        found += [
            Finding(f"{where}attention_other_setting.{key}", "differs from the standard field that every engine reads")
            for key, value in other.items()
            if key in same and value is not None and value != same[key]
        ]
    if isinstance(overrides, Mapping) and (data.get("model_type") in GEMMA4_TYPES or step):
        read = READ_NESTED["step3p5 per_layer_config[]" if step else "per_layer_config[]"]
        for index, over in overrides.items():
            if isinstance(over, Mapping):
                found += [
                    Finding(f"{where}per_layer_config.{index}.{key}", "not a per-layer override kvsize reads")
                    for key, value in over.items()
                    if isinstance(key, str) and key not in read and value is not None and irrelevant_reason(key) is None
                ]
    sparse = data.get("sparse_attention_config")
    if isinstance(sparse, Mapping) and _minimax_m3(data):
        found += _unread_children(sparse, READ_NESTED["sparse_attention_config"], f"{where}sparse_attention_config.")
    blocks = data.get("block_configs")
    if isinstance(blocks, list):
        for i, block in enumerate(blocks):
            sub = block.get("attention") if isinstance(block, Mapping) else None
            if isinstance(sub, Mapping):
                prefix = f"{where}block_configs[{i}].attention."
                found += _unread_children(sub, READ_NESTED["block_configs[].attention"], prefix)
    return found


def _unread_children(sub: Config, read: frozenset[str], prefix: str) -> list[Finding]:
    return [
        Finding(f"{prefix}{key}", "not a field kvsize reads")
        for key, value in sub.items()
        if isinstance(key, str)
        and key not in read
        and present(value)
        and cache_sounding(key)
        and irrelevant_reason(key) is None
    ]


def refusal(source: str, model_type: str, findings: list[Finding]) -> UnmodelledFields:
    names = tuple(dict.fromkeys(f.field for f in findings))
    shown = ", ".join(clean(n)[:60] for n in names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    return UnmodelledFields(
        f"{source}: kvsize does not understand the cache-relevant field{'s' if len(names) > 1 else ''} {shown} "
        f"(model_type {clean(model_type)[:60]}): it cannot say what these layers cache",
        fields=names,
        hint="kvsize cannot size this layout yet. To size it from its standard attention fields anyway, pass "
        "--assume-standard-attention (library: assume_standard_attention=True); every answer then names the "
        "fields it ignored.",
    )


def ignored_note(findings: list[Finding]) -> str:
    names = ", ".join(dict.fromkeys(clean(f.field)[:60] for f in findings))
    return (
        f"--assume-standard-attention: sized as standard attention, ignoring cache fields kvsize does not "
        f"understand: {names}; the real cache may differ"
    )
