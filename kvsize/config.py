"""config.json -> ArchSpec. The only module that knows Hugging Face key names.

Fields are read generically (a family is recognised by the fields it carries, not by its name) with the
transformers class defaults filling what a config leaves out. Configs are data: `auto_map` and any
custom code they point to are never imported or run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import msgspec

from kvsize.cache_fields import (
    DSA_SHARING_TYPES,
    Finding,
    ignored_note,
    mamba_named_linear,
    refusal,
    unknown_cache_fields,
)
from kvsize.dtypes import KvDtype, dtype_from_torch_name
from kvsize.errors import ConfigError
from kvsize.mm_profile import vision_dummy
from kvsize.record import InvalidRecord
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, RopeScaling, RopeTable, StateKind, StateSpec
from kvsize.text import shown

# Values no real model reaches: they stop absurd configs before they turn into absurd numbers.
MAX_LAYERS = 100_000
MAX_DIM = 1 << 24  # heads, head dims, hidden sizes, windows
MAX_POSITIONS = 1 << 40

# Wrappers whose text_config may name no model_type: transformers builds it as the wrapper's text class
# (sub_configs_defaults; configuration_minimax_m3_vl.py MiniMaxM3VLConfig, 5.25).
WRAPPER_TEXT_TYPES = {"minimax_m3_vl": "minimax_m3_vl_text"}

# Where multimodal and wrapper configs keep their language model (transformers `get_text_config`).
TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config", "decoder", "generator")

# Defaults of the transformers config classes for the fields that size the cache and the weights, applied
# only when a config leaves the field out (transformers 4.57 / 5.x `configuration_*.py`).
_GEMMA4_TEXT_DEFAULTS: dict[str, Any] = {
    "num_hidden_layers": 30,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "global_head_dim": 512,
    "hidden_size": 2304,
    "max_position_embeddings": 131_072,
    "sliding_window": 512,
    "vocab_size": 262_144,
    "intermediate_size": 9216,
    "tie_word_embeddings": True,
}
# The layer_types a transformers 5.25 config class generates when a config.json names none (its __post_init__):
# layer i is the second kind where (i + 1) % period == 0, else the first. gpt_oss (configuration_gpt_oss.py):
# "sliding_attention" if (i + 1) % 2 else "full_attention"; olmo3: sliding unless (i + 1) % 4 == 0; minimax:
# "full_attention" if (i + 1) % 2 else "linear_attention" (where no attn_type_list says otherwise).
LAYER_TYPES_DEFAULTS: dict[str, tuple[int, str, str]] = {
    "gpt_oss": (2, "sliding_attention", "full_attention"),
    "olmo3": (4, "sliding_attention", "full_attention"),
    "minimax": (2, "full_attention", "linear_attention"),
}


def _default_layer_types(model_type: str, merged: Mapping[str, Any]) -> list[str] | None:
    rule = LAYER_TYPES_DEFAULTS.get(model_type)
    layers = merged.get("num_hidden_layers")
    if rule is None or "layer_types" in merged or "attn_type_list" in merged:
        return None
    if not isinstance(layers, int) or isinstance(layers, bool) or not 0 < layers <= MAX_LAYERS:
        return None  # the layer count's own check reports it
    period, first, nth = rule
    return [nth if (i + 1) % period == 0 else first for i in range(layers)]


HEAD_DIM_KEYS = ("head_dim", "kv_channels", "attention_head_dim", "hidden_size_per_head")


@functools.cache
def _head_dim_defaults() -> Mapping[str, Any]:
    data = json.loads((Path(__file__).parent / "data" / "head_dim_defaults.json").read_text())
    return data["defaults"]  # type: ignore[no-any-return]


def head_dim_default(model_type: str) -> int | None:
    """The head_dim a transformers config class sets when a config.json leaves it out (kvsize/data/
    head_dim_defaults.json, from scripts/extract_head_dim_defaults.py over transformers 5.25.0); None for the
    classes that set none (hidden_size / num_attention_heads applies)."""
    entry = _head_dim_defaults().get(model_type)
    return int(entry["head_dim"]) if entry else None


def class_defaults(model_type: str) -> dict[str, Any]:
    """The transformers class defaults of `model_type` a config may leave out: MODEL_TYPE_DEFAULTS, and the
    class's head_dim (head_dim_default) where the table names none. The parameter counter (kvsize/params.py)
    reads through the same defaults."""
    found = dict(MODEL_TYPE_DEFAULTS.get(model_type, {}))
    if "head_dim" not in found and (head_dim := head_dim_default(model_type)) is not None:
        found["head_dim"] = head_dim
    return found


MODEL_TYPE_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "hidden_size": 4096,
        "max_position_embeddings": 2048,
        "vocab_size": 32000,
        "intermediate_size": 11008,
        "tie_word_embeddings": False,
    },
    "mistral": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "hidden_size": 4096,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "vocab_size": 32000,
        "intermediate_size": 14336,
        "tie_word_embeddings": False,
    },
    "gemma": {
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "hidden_size": 3072,
        "max_position_embeddings": 8192,
        "vocab_size": 256000,
        "intermediate_size": 24576,
        "tie_word_embeddings": True,
    },
    # Gemma 2 alternates local and global layers: layer i slides when (i + 1) % 2 != 0.
    "gemma2": {
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_size": 2304,
        "max_position_embeddings": 8192,
        "sliding_window": 4096,
        "sliding_window_pattern": 2,
        "vocab_size": 256000,
        "intermediate_size": 9216,
        "tie_word_embeddings": True,
    },
    "gemma3_text": {
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_size": 2304,
        "max_position_embeddings": 131072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
        "vocab_size": 262208,
        "intermediate_size": 9216,
        "tie_word_embeddings": True,
    },
    "cohere2": {"sliding_window_pattern": 4},
    # ErgoConfig (transformers 5.25 configuration_ergo.py): a 512-token window (every 4th layer global:
    # GLOBAL_EVERY_N_FIELDS).
    "ergo": {"sliding_window": 512},
    # Gemma 4 (transformers 5.24 configuration_gemma4.py Gemma4TextConfig; the wrapper `gemma4` names the same
    # text class). global_head_dim is a constructor argument whose default 512 sizes the full layers' heads.
    **dict.fromkeys(("gemma4_text", "gemma4"), _GEMMA4_TEXT_DEFAULTS),
    # configuration_gemma4_unified.py Gemma4UnifiedTextConfig: the same fields, a 1,024 window, 262,144 positions.
    **dict.fromkeys(
        ("gemma4_unified_text", "gemma4_unified"),
        {**_GEMMA4_TEXT_DEFAULTS, "sliding_window": 1024, "max_position_embeddings": 262_144},
    ),
    # Gemma 3n (configuration_gemma3n.py Gemma3nTextConfig): the last 15 of 35 layers read earlier layers' KV.
    **dict.fromkeys(
        ("gemma3n_text", "gemma3n"),
        {
            "num_hidden_layers": 35,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 256,
            "hidden_size": 2048,
            "max_position_embeddings": 32_768,
            "sliding_window": 512,
            "num_kv_shared_layers": 15,
            "vocab_size": 262_400,
            "intermediate_size": 16_384,
            "tie_word_embeddings": True,
        },
    ),
    # MiMo-V2-Flash (configuration_mimo_v2_flash.py MiMoV2FlashConfig): K 192 / V 128; the default window 129 is
    # the hub's sliding_window_size 128 plus the query.
    "mimo_v2_flash": {
        "num_hidden_layers": 48,
        "num_attention_heads": 64,
        "num_key_value_heads": 4,
        "head_dim": 192,
        "v_head_dim": 128,
        "hidden_size": 4096,
        "max_position_embeddings": 131_072,
        "sliding_window": 129,
        "vocab_size": 152_576,
        "intermediate_size": 16_384,
        "tie_word_embeddings": False,
    },
    # DeepSeek-V4 (configuration_deepseek_v4.py DeepseekV4Config): one K = V head of head_dim 512, window 128, the
    # CSA indexer's keys 128 wide; compress rates 4 (CSA) / 128 (HCA) are DEEPSEEK_V4_RATES.
    "deepseek_v4": {
        "num_hidden_layers": 43,
        "num_attention_heads": 64,
        "head_dim": 512,
        "hidden_size": 4096,
        "max_position_embeddings": 1_048_576,
        "sliding_window": 128,
        "index_head_dim": 128,
        "vocab_size": 129_280,
        "moe_intermediate_size": 2048,
        "tie_word_embeddings": False,
    },
    # DSA (configuration_deepseek_v32.py DeepseekV32Config, configuration_glm_moe_dsa.py GlmMoeDsaConfig, 5.25):
    # every layer is "indexed_attention" and its indexer keys are index_head_dim wide, so a config that names no
    # index_* key still caches them (a GLM-5 config without them was sized 18% low).
    "deepseek_v32": {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 64},
    "glm_moe_dsa": {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 32},
    # Llama4TextConfig.attention_chunk_size = 8192: a config that names none still chunks its RoPE layers
    "llama4_text": {"no_rope_layer_interval": 4, "attention_chunk_size": 8192},
    "gpt2": {
        "n_layer": 12,
        "n_head": 12,
        "n_embd": 768,
        "n_positions": 1024,
        "vocab_size": 50257,
        "tie_word_embeddings": True,
    },
    "gpt_bigcode": {"multi_query": True},
    "starcoder2": {"tie_word_embeddings": True},
    "zamba2": {"tie_word_embeddings": True},
    "gpt_neox": {"tie_word_embeddings": False},
    "lfm2": {"conv_L_cache": 3},
    "lfm2_moe": {"conv_L_cache": 3},
}

# model_types whose configs this parser was written against; others are parsed from the standard fields
# with a note naming the fields used.
KNOWN_MODEL_TYPES = frozenset(MODEL_TYPE_DEFAULTS) | {
    "longcat_flash",
    "qwen2",
    "qwen2_moe",
    "qwen2_vl",
    "qwen2_5_vl",
    "qwen3",
    "qwen3_moe",
    "qwen3_next",
    "mixtral",
    "phi",
    "phi3",
    "phi-msft",
    "phimoe",
    "starcoder2",
    "gpt_neox",
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "glm_moe_dsa",
    "deepseek_v4",
    "exaone4",
    "gpt_oss",
    "llama4",
    "mllama",
    "mllama_text_model",
    "nemotron-nas",
    "nemotron_h",
    "zamba2",
    "mamba",
    "mamba2",
    "falcon_mamba",
    "jamba",
    "falcon",
    "falcon_h1",
    "smollm3",
    "recurrent_gemma",
    "step3p5",
    "step3p7",
    "minimax_m3",
    "minimax_m3_vl_text",
    "bamba",
    "granitemoehybrid",
    "mpt",
    "dbrx",
    "chatglm",
    "glm",
    "glm4",
    "gemma3",
    "gemma3n_text",
    "gemma3n",
    "gemma4",
    "gemma4_text",
    "gemma4_unified",
    "gemma4_unified_text",
    "mimo_v2_flash",
    "olmo",
    "olmo2",
    "granite",
    "cohere",
    "internlm2",
    "baichuan",
    "yi",
    "gptj",
    "gpt_neo",
    "opt",
    "bloom",
    "stablelm",
    "minicpm",
    "ernie4_5",
    "hunyuan_v1_dense",
    "minimax",
    "minimax_text_01",
    "minimax_m1",
    "minimax_m2",
    "openai-gpt",
    "kimi_linear",
    "lfm2",
    "lfm2_moe",
    # transformers 5.25 classes whose configs the registry's hand-worked layouts (tests/expected_kv.py) and the
    # meta-device oracle check: they no longer print "unknown model_type"
    "qwen3_vl_text",
    "qwen3_vl_moe_text",
    "qwen3_5_text",
    "qwen3_5_moe_text",
    "ministral3",
    "olmo3",
    "granitemoe",
    "glm4_moe",
    "glm4_moe_lite",
    "exaone4_5",
    "exaone4_5_text",
    "qwen2_vl_text",
    "qwen2_5_vl_text",
    "qwen2_5_omni_text",
    "laguna",
}

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads")
_HIDDEN_KEYS = ("hidden_size", "n_embd", "d_model")
# Every key an engine reads a context length from: vLLM 0.33's list (model_arch_config_convertor.py
# derive_max_model_len_and_key), which holds SGLang 0.5.23's (hf_transformers/common.py CONTEXT_LENGTH_KEYS).
CONTEXT_LENGTH_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
_CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
)


class _Fields:
    """Typed reads of one config dict, remembering which keys were used."""

    def __init__(self, data: Mapping[str, Any], *, source: str, where: str = "") -> None:
        self.data = data
        self.source = source
        self.where = where  # "text_config." for nested language models
        self.used: list[str] = []

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.data.get(key)

    def error(self, key: str, problem: str) -> ConfigError:
        return ConfigError(
            f"{self.source}: field '{self.where}{key}' {problem}",
            hint="Fix the config.json, or pass a config that describes a decoder model.",
        )

    def integer(self, *keys: str, minimum: int = 1, maximum: int = MAX_DIM) -> int | None:
        """The first of `keys` present and not null, as a checked int; None if none is present."""
        for key in keys:
            value = self.data.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(key, f"must be an integer, got {shown(value)}")
            if isinstance(value, float):
                if not math.isfinite(value) or not value.is_integer():
                    raise self.error(key, f"must be an integer, got {shown(value)}")
                value = int(value)
            if not minimum <= value <= maximum:
                raise self.error(key, f"must be between {minimum} and {maximum}, got {value}")
            self.used.append(key)
            return int(value)
        return None

    def need_int(self, *keys: str, minimum: int = 1, maximum: int = MAX_DIM) -> int:
        value = self.integer(*keys, minimum=minimum, maximum=maximum)
        if value is None:
            names = " / ".join(f"'{self.where}{k}'" for k in keys)
            raise ConfigError(
                f"{self.source}: missing field {names}",
                hint="kvsize needs it to size the cache; add it to the config.json.",
            )
        return value

    def flag(self, key: str) -> bool | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {shown(value)}")
        self.used.append(key)
        return value

    def str_list(self, key: str, length: int) -> list[str] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "must be a list of strings")
        if len(value) != length:  # transformers rejects both shorter and longer lists
            raise self.error(key, f"lists {len(value)} layers but the model has {length}")
        self.used.append(key)
        return list(value)

    def int_list(self, key: str) -> list[int] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise self.error(key, "must be a list of integers")
        self.used.append(key)
        return list(value)


def parse_config(
    raw: object,
    *,
    source: str = "config.json",
    encoder_tokens: int | None = None,
    assume_standard_attention: bool = False,
) -> ArchSpec:
    """Build the architecture spec of a config.json dict.

    Args:
        source: names the config in error messages ("./config.json", "registry:meta-llama/Llama-3.1-8B").
        encoder_tokens: tokens each cross-attention layer attends to; defaults to one image's tokens.
        assume_standard_attention: size a config whose cache-relevant fields kvsize does not understand
            (kvsize.cache_fields) from its standard fields, ignoring those fields and naming them in a note;
            without it such a config is refused (`UnmodelledFields`, exit 2).
    """
    try:
        return _parse(raw, source=source, encoder_tokens=encoder_tokens, assume=assume_standard_attention)
    except InvalidRecord as exc:  # fields that parse one by one but describe no cache (a 0-wide head)
        raise ConfigError(f"{source}: the fields describe an impossible layer ({exc})") from None


def _parse(raw: object, *, source: str, encoder_tokens: int | None, assume: bool) -> ArchSpec:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: a config.json must hold a JSON object, got {type(raw).__name__}")
    top = _Fields(raw, source=source)
    data, where = _text_config(raw, source)
    if where and "model_type" not in data and (text_type := WRAPPER_TEXT_TYPES.get(str(raw.get("model_type")))):
        data = {**data, "model_type": text_type}  # the wrapper's sub-config class, as transformers builds it
    model_type = data.get("model_type") or raw.get("model_type") or "unknown"
    if not isinstance(model_type, str) or not _PLAIN_NAME.fullmatch(model_type):
        raise top.error("model_type", f"must be a plain name (letters, digits, '_', '-', '.'), got {shown(model_type)}")
    raw, data = _attribute_mapped(raw, data, where, model_type, source)
    findings = unknown_cache_fields(raw, data, where, model_type, KNOWN_MODEL_TYPES)
    if findings:  # never sized silently: refused, or sized without them and said so on every answer
        if not assume:
            raise refusal(source, model_type, findings)
        raw, data = _without(raw, data, where, findings)
        spec = _parse_known(raw, data, where, model_type=model_type, source=source, encoder_tokens=encoder_tokens)
        return msgspec.structs.replace(spec, notes=(ignored_note(findings), *spec.notes))
    return _parse_known(raw, data, where, model_type=model_type, source=source, encoder_tokens=encoder_tokens)


@dataclass(frozen=True)
class QwenWindowRule:
    """Which layers of a Qwen-family model slide when its config sets use_sliding_window, and the class defaults a
    config may leave out (transformers 5.25 configuration_<type>.py: the fields and __post_init__)."""

    layers: Literal["from", "even_below", "every"]
    """from: layers i >= max_window_layers (layer_types "sliding_attention if sliding_window is not None and
    i >= max_window_layers"); even_below: the even layers below it (Qwen2MoeConfig: "(i + 1) % 2 and
    i < max_window_layers", from transformers 5.0; 4.57.1 has no layer_types); every: each layer (Qwen3MoeConfig has no
    max_window_layers and no layer_types, so every layer's config keeps the window: cache_utils.py
    get_layer_types_and_kwargs)."""
    window: int
    """sliding_window's class default, used when the key is absent (an explicit null slides nothing)."""
    max_window_layers: int | None
    """max_window_layers' class default; None where the class has no such field (the key is not read)."""


QWEN_WINDOW_RULES: dict[str, QwenWindowRule] = {
    **dict.fromkeys(("qwen2", "qwen3"), QwenWindowRule("from", 4096, 28)),
    **dict.fromkeys(("qwen2_vl", "qwen2_vl_text", "qwen2_5_vl", "qwen2_5_vl_text"), QwenWindowRule("from", 4096, 80)),
    "qwen2_5_omni_text": QwenWindowRule("from", 32768, 28),
    "qwen2_moe": QwenWindowRule("even_below", 4096, 28),
    "qwen3_moe": QwenWindowRule("every", 4096, None),
}


def _qwen_window_default(model_type: str, merged: Mapping[str, Any]) -> int | None:
    """The class's sliding_window for a Qwen-family config that turns use_sliding_window on and names no window."""
    rule = QWEN_WINDOW_RULES.get(model_type)
    if rule is None or merged.get("use_sliding_window") is not True or "sliding_window" in merged:
        return None
    return rule.window


# Every n-th layer global, the rest sliding where (i + 1) % n (AfmoeConfig.__post_init__, transformers 5.24;
# ErgoConfig.__post_init__, 5.25): the field each family names n with, and its default.
GLOBAL_EVERY_N_FIELDS = {"afmoe": ("global_attn_every_n_layers", 4), "ergo": ("global_attention_every_n_layers", 4)}

# transformers config classes' `attribute_map`s that rename a cache field kvsize reads: the released configs
# spell the key on the left, the class stores it as the one on the right.
ATTRIBUTE_MAPS: dict[str, dict[str, str]] = {
    "ergo": {"local_attention_window": "sliding_window"},  # ErgoConfig.attribute_map (transformers 5.25)
}


def _attribute_mapped(
    raw: Mapping[str, Any], data: Mapping[str, Any], where: str, model_type: str, source: str
) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    """The config with each mapped key renamed to the field the class stores (refused where both disagree)."""
    renames = {k: v for k, v in ATTRIBUTE_MAPS.get(model_type, {}).items() if data.get(k) is not None}
    if not renames:
        return raw, data
    text = dict(data)
    for alias, field in renames.items():
        value = text.pop(alias)
        if text.get(field) is not None and text[field] != value:
            raise ConfigError(
                f"{source}: {where}{alias} ({shown(value)}) and {where}{field} ({shown(text[field])}) name one "
                f"field of {model_type} with different values",
                hint=f"Keep one of them ({alias} is what {model_type}'s configs call {field}).",
            )
        text[field] = value
    if where:
        return {**raw, where.removesuffix("."): text}, text
    return text, text


_NESTED_FIELD = re.compile(r"(attn_config)\.(.+)|block_configs\[(\d+)\]\.attention\.(.+)")


def _without(
    raw: Mapping[str, Any], data: Mapping[str, Any], where: str, findings: list[Finding]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Copies of the config and its language model without the fields kvsize does not understand."""
    text = dict(data)
    wrapper = dict(raw)
    for finding in findings:
        if where and not finding.field.startswith(where):  # a field of the wrapper around the language model
            wrapper.pop(finding.field, None)
            continue
        name = finding.field.removeprefix(where)
        nested = _NESTED_FIELD.fullmatch(name)
        if nested is None:
            text.pop(name, None)
        elif nested.group(1):
            text["attn_config"] = {k: v for k, v in text["attn_config"].items() if k != nested.group(2)}
        else:
            index, key = int(nested.group(3)), nested.group(4)
            blocks = list(text["block_configs"])
            attention = {k: v for k, v in blocks[index]["attention"].items() if k != key}
            blocks[index] = {**blocks[index], "attention": attention}
            text["block_configs"] = blocks
    if where:
        wrapper[where.removesuffix(".")] = text
        return wrapper, text
    return text, text


def _parse_known(
    raw: Mapping[str, Any],
    data: Mapping[str, Any],
    where: str,
    *,
    model_type: str,
    source: str,
    encoder_tokens: int | None,
) -> ArchSpec:
    if raw.get("is_encoder_decoder") is True:
        return _encoder_decoder(raw, model_type=model_type, source=source, encoder_tokens=encoder_tokens)
    merged = {**MODEL_TYPE_DEFAULTS.get(model_type, {}), **data}
    if not any(k in merged for k in HEAD_DIM_KEYS) and (default := head_dim_default(model_type)) is not None:
        merged["head_dim"] = default  # the config class's own (not hidden / heads), as transformers and vLLM use
    if (generated := _default_layer_types(model_type, merged)) is not None:
        merged["layer_types"] = generated  # the class's own pattern, as transformers and vLLM build the model
    if (window := _qwen_window_default(model_type, merged)) is not None:
        merged["sliding_window"] = window
    if model_type in PER_LAYER_SHAPE_TYPES or model_type in QWEN_WINDOW_RULES:
        merged.setdefault("model_type", model_type)  # a wrapper whose text_config names no type: its family's rules
    fields = _Fields(merged, source=source, where=where)
    notes: list[str] = []
    if "auto_map" in raw:
        notes.append("config names custom code (auto_map); none was run: sized from the config's fields alone")

    blocks = fields.raw("layers_block_type")
    if fields.raw("model_type") == "nemotron_h" and isinstance(blocks, list) and not any(map(fields.has, _LAYER_KEYS)):
        # transformers 5.24 NemotronHConfig.num_hidden_layers: len(layers_block_type) (Nemotron-3 Ultra names no count).
        num_layers = len(blocks)
    else:
        num_layers = fields.need_int(*_LAYER_KEYS, maximum=MAX_LAYERS)
    if fields.raw("model_type") == "longcat_flash":
        num_layers = _longcat_cache_layers(fields, notes)
    layer_kinds = _layer_kinds(fields, num_layers, notes)
    needs_attention = any(
        kind not in ("mamba", "none", "linear", "kda", "short_conv", "rg_lru") for kind in layer_kinds
    )
    attention = _attention_params(fields, notes) if needs_attention else None
    if attention is not None:
        attention.per_layer = _per_layer_shapes(fields, layer_kinds, attention, notes)
    state = (
        _state_spec(fields, _model_dtype(raw, data))
        if any(k.startswith(("mamba", "linear")) for k in layer_kinds)
        else None
    )
    if "kda" in layer_kinds:
        state = _kda_state(fields, _model_dtype(raw, data))
    if "rg_lru" in layer_kinds:
        state = _rg_lru_state(fields, _model_dtype(raw, data))
    if "short_conv" in layer_kinds:
        state = _short_conv_state(fields, _model_dtype(raw, data))
    if "lightning" in layer_kinds:
        assert attention is not None
        state = _lightning_state(attention, _model_dtype(raw, data))

    layers = _layers(layer_kinds, attention, state, fields, notes, encoder_tokens)
    _apply_kv_sharing(layers, fields, notes)
    _apply_shared_indexers(layers, fields, notes)
    _apply_minimax_m3_indexer(layers, fields, notes)

    if model_type not in KNOWN_MODEL_TYPES:
        used = ", ".join(dict.fromkeys(fields.used))
        notes.insert(0, f"unknown model_type '{model_type}': sized from the standard fields {used}")
    max_context = fields.integer(*_CONTEXT_KEYS, maximum=MAX_POSITIONS)
    defaulted = [k for k in dict.fromkeys(fields.used) if k not in data]
    if defaulted:
        notes.append(f"not in the config, taken from transformers' {model_type} defaults: {', '.join(defaulted)}")
    dtype = _model_dtype(raw, data)
    if dtype is None:
        notes.append("config names no dtype: assumed bf16 weights")
    hidden_size = fields.integer(*_HIDDEN_KEYS)
    try:
        return ArchSpec(
            model_type=model_type,
            layers=tuple(layers),
            num_attention_heads=attention.num_heads if attention else None,
            max_context=max_context,
            hidden_size=hidden_size,
            intermediate_size=_scalar_int(fields, "intermediate_size", "ffn_hidden_size", "n_inner"),
            vocab_size=fields.integer("vocab_size", "padded_vocab_size", maximum=1 << 30),
            experts_per_token=_moe_top_k(data),
            moe_intermediate_size=_moe_width(data),
            model_dtype=(dtype or KvDtype.BF16).value,
            notes=tuple(dict.fromkeys(notes)),
            context_lengths=_context_lengths(merged),
            **_identity(raw, data, source),
            vision_dummy=vision_dummy(raw, hidden_size),
            rope_table=_rope_table(merged, layers, model_type),
            tied_embeddings=_tied_embeddings(raw, data, model_type),
            mxfp4_experts=_mxfp4_experts(raw, data),
        )
    except InvalidRecord as exc:  # a combination of fields the spec rejects (e.g. zero-sized attention)
        raise ConfigError(f"{source}: {exc}") from None


def _encoder_decoder(raw: Mapping[str, Any], *, model_type: str, source: str, encoder_tokens: int | None) -> ArchSpec:
    """T5, BART and Whisper style models: each decoder layer caches its own K/V per generated token and the
    K/V of the encoder's output for cross-attention, fixed per request (transformers EncoderDecoderCache)."""
    f = _Fields(raw, source=source)
    layers = f.need_int("decoder_layers", "num_decoder_layers", "num_layers", maximum=MAX_LAYERS)
    heads = f.need_int("decoder_attention_heads", "num_heads", "num_attention_heads")
    head_dim = f.integer("d_kv", "head_dim")
    if head_dim is None:
        hidden = f.need_int("d_model", "hidden_size")
        if hidden % heads:
            raise f.error("decoder_attention_heads", f"({heads}) must divide d_model ({hidden})")
        head_dim = hidden // heads
    notes: list[str] = []
    if encoder_tokens is None:
        # Whisper: 30 s of audio = max_source_positions (1500) frames; text encoders: their maximum input.
        encoder_tokens = f.integer(
            "max_source_positions", "max_position_embeddings", "n_positions", maximum=MAX_POSITIONS
        )
        if encoder_tokens is None:
            raise ConfigError(f"{source}: no encoder length in the config", hint="Pass --encoder-len.")
        notes.append(
            f"cross-attention holds the encoder's maximum input of {encoder_tokens:,} tokens per request "
            "(--encoder-len to change)"
        )
    self_attn = AttentionSpec(kind=AttentionKind.FULL, num_kv_heads=heads, head_dim=head_dim, head_dim_v=head_dim)
    cross = AttentionSpec(
        kind=AttentionKind.CROSS,
        num_kv_heads=heads,
        head_dim=head_dim,
        head_dim_v=head_dim,
        encoder_tokens=encoder_tokens,
    )
    dtype = _model_dtype(raw, raw)
    first = LayerSpec(index=0, attention=self_attn, cross=cross)
    return ArchSpec(
        model_type=model_type,
        layers=tuple(first.renumbered(i) if i else first for i in range(layers)),
        num_attention_heads=heads,
        max_context=f.integer("max_target_positions", "max_position_embeddings", "n_positions", maximum=MAX_POSITIONS),
        model_dtype=(dtype or KvDtype.FP32).value,
        hidden_size=f.integer("d_model", "hidden_size"),
        vocab_size=f.integer("vocab_size", maximum=1 << 30),
        notes=(*notes, *(() if dtype else ("config names no dtype: assumed fp32 weights",))),
        is_encoder_decoder=True,
        context_lengths=_context_lengths(raw),
    )


def _context_lengths(data: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """The context-length keys the config states as positive integers, each at most MAX_POSITIONS (a
    tokenizer-style 1e30 `model_max_length` means no limit; kept as the largest kvsize sizes)."""
    return tuple(
        (key, min(value, MAX_POSITIONS))
        for key in CONTEXT_LENGTH_KEYS
        if (value := _positive_int(data.get(key))) is not None
    )


def _positive_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _moe_top_k(data: Mapping[str, Any]) -> int | None:
    """Experts per token of a MoE config (num_experts_per_tok, moe_topk, top_k), None for dense models."""
    experts = next(
        (
            _positive_int(data.get(k))
            for k in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
            if _positive_int(data.get(k))
        ),
        None,
    )
    if experts is None or experts <= 1:
        return None
    return next(
        (
            _positive_int(data.get(k))
            for k in ("num_experts_per_tok", "moe_topk", "top_k", "num_experts_per_token")
            if _positive_int(data.get(k))
        ),
        None,
    )


def _mxfp4_experts(raw: Mapping[str, Any], data: Mapping[str, Any]) -> int | None:
    """The experts per layer of an MXFP4-quantized MoE checkpoint (quant_method "mxfp4"); None otherwise."""
    quant = raw.get("quantization_config", data.get("quantization_config"))
    if not isinstance(quant, Mapping) or quant.get("quant_method") != "mxfp4" or _moe_top_k(data) is None:
        return None
    return _positive_int(data.get("num_local_experts")) or _positive_int(data.get("num_experts"))


def _moe_width(data: Mapping[str, Any]) -> int | None:
    """One expert's MLP width: moe_intermediate_size, else intermediate_size (Mixtral, Llama 4 experts)."""
    if _moe_top_k(data) is None:
        return None
    return _positive_int(data.get("moe_intermediate_size")) or _positive_int(data.get("intermediate_size"))


def _identity(raw: Mapping[str, Any], data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The class names, the hybrid-SWA opt-in and the vision tower: what engines key model-level rules on."""
    archs = raw.get("architectures")
    architectures = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
    vision = raw.get("vision_config")
    fields: dict[str, Any] = {
        "architectures": architectures,
        "declares_hybrid_swa": data.get("is_hybrid_swa") is True or raw.get("is_hybrid_swa") is True,
        "lists_layer_types": isinstance(data.get("layer_types"), list),
        "is_multimodal": isinstance(vision, Mapping),
    }
    if isinstance(vision, Mapping):
        v = _Fields(vision, source=source, where="vision_config.")
        fields["vision_layers"] = _scalar_int(v, "num_hidden_layers", "depth")
        fields["vision_hidden_size"] = _scalar_int(v, "hidden_size", "embed_dim")
    fields["rope_scaling"] = _rope_scaling(data, raw)
    return fields


def _rope_scaling(data: Mapping[str, Any], raw: Mapping[str, Any]) -> tuple[RopeScaling, ...]:
    """RoPE scaling entries: `rope_scaling` (transformers 4) or `rope_parameters` (transformers 5, nested one
    per layer type for Gemma 3 and the like), from the language model's config, else the wrapper's. Entries
    that are not objects, and factors that are not positive numbers, are left out (the engines then read no
    factor)."""
    for container in (data, raw):
        for key in ("rope_scaling", "rope_parameters"):
            value = container.get(key)
            if not isinstance(value, Mapping) or not value:
                continue
            entries = list(value.values()) if _nested(value) else [value]
            found = []
            for entry in entries:
                kind = entry.get("rope_type", entry.get("type", "default"))
                raw_factor = entry.get("factor")
                factor = None
                if isinstance(raw_factor, (int, float)) and not isinstance(raw_factor, bool):
                    with contextlib.suppress(OverflowError):  # a 400-digit integer
                        factor = float(raw_factor)
                found.append(
                    RopeScaling(
                        rope_type=kind if isinstance(kind, str) else "default",
                        factor=factor.as_integer_ratio() if factor is not None and 0 < factor < 1e6 else None,
                        has_original_max="original_max_position_embeddings" in entry,
                        original_max=_positive_int(entry.get("original_max_position_embeddings")),
                        mrope="mrope_section" in entry,
                    )
                )
            return tuple(found)
    return ()


# Keys that say a config's model rotates its queries and keys (GPT-2, BLOOM, MPT, Mamba state none of them).
_ROPE_KEYS = (
    "rope_theta",
    "rope_scaling",
    "rope_parameters",
    "rotary_emb_base",
    "rotary_dim",
    "rotary_pct",
    "partial_rotary_factor",
    "qk_rope_head_dim",
)


# Families whose configs may state no RoPE key although the model rotates (transformers' config classes default
# rope_parameters), with their default partial_rotary_factor (Glm4MoeConfig: 0.5).
_ROPE_BY_DEFAULT = {
    **dict.fromkeys(
        ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text", "internlm"), 1.0
    ),
    "glm4_moe": 0.5,
}
# vLLM gemma3.py Gemma3Attention: sliding layers build their own default RoPE (rope_local_base_freq).
_LOCAL_ROPE_FAMILIES = frozenset({"gemma3", "gemma3_text"})


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rope_table(data: Mapping[str, Any], layers: Sequence[LayerSpec], model_type: str) -> RopeTable | None:
    """What sizes the precomputed RoPE tables (kvsize/rope_tables.py): the positions the model files pass to
    get_rope (`max_position_embeddings`) and the rotated width of a head. None where the config states no RoPE,
    no maximum position, or no attention head to rotate."""
    if not any(data.get(k) is not None for k in _ROPE_KEYS) and model_type not in _ROPE_BY_DEFAULT:
        return None
    max_position = _positive_int(data.get("max_position_embeddings"))
    heads = [layer.attention for layer in layers if layer.attention is not None]
    if max_position is None or not heads:
        return None
    mla_rope = _positive_int(data.get("qk_rope_head_dim"))
    rotary = mla_rope or _positive_int(data.get("rotary_dim"))
    if rotary is None:
        head = max(heads, key=lambda a: a.kind is AttentionKind.FULL).head_dim
        entry = data.get("rope_parameters")
        nested = entry.get("partial_rotary_factor") if isinstance(entry, Mapping) else None
        share = next(
            (
                f
                for f in (_number(data.get("partial_rotary_factor")), _number(nested), _number(data.get("rotary_pct")))
                if f is not None
            ),
            _ROPE_BY_DEFAULT.get(model_type, 1.0),
        )
        if not 0 < share <= 1:
            return None
        rotary = int(head * share)  # get_rope: rotary_dim = int(head_size * partial_rotary_factor)
    if rotary < 2:
        return None
    return RopeTable(
        max_position=min(max_position, MAX_POSITIONS),
        rotary_dim=rotary,
        local_table=data.get("rope_local_base_freq") is not None or model_type in _LOCAL_ROPE_FAMILIES,
        original_max=_positive_int(data.get("original_max_position_embeddings")),
        mla=mla_rope is not None,
        per_layer_type=any(_nested(data.get(key)) for key in ("rope_parameters", "rope_scaling")),
    )


def _nested(value: Any) -> bool:
    """A RoPE dict keyed by layer type (every value an object)."""
    return isinstance(value, Mapping) and bool(value) and all(isinstance(v, Mapping) for v in value.values())


def _tied_embeddings(raw: Mapping[str, Any], data: Mapping[str, Any], model_type: str) -> bool:
    """The parameter counter's reading of tie_word_embeddings (kvsize/params.py), passing over a value that is not
    true or false: the KV cache does not depend on it, and the parameter count refuses it by name."""
    from kvsize.params import tie_word_embeddings  # params imports this module

    return tie_word_embeddings(data, raw, model_type, strict=False)


def _scalar_int(f: _Fields, *keys: str) -> int | None:
    """A width that some families give per layer (Gemma 3n lists intermediate_size): the widest layer's, which
    sets the profile run's activation peak (budget.py); None when the list holds anything but positive integers."""
    present = [k for k in keys if f.has(k)]
    if present and isinstance(f.raw(present[0]), list):
        widths = f.raw(present[0])
        ok = widths and all(isinstance(w, int) and not isinstance(w, bool) and 0 < w <= 1 << 30 for w in widths)
        return max(widths) if ok else None
    return f.integer(*keys, maximum=1 << 30)


def _text_config(raw: Mapping[str, Any], source: str) -> tuple[Mapping[str, Any], str]:
    for key in TEXT_CONFIG_KEYS:
        nested = raw.get(key)
        if nested is not None and not isinstance(nested, Mapping):
            raise ConfigError(
                f"{source}: field '{key}' must be an object, got {type(nested).__name__}",
                hint="Fix the config.json: a nested language-model config is a JSON object.",
            )
        if isinstance(nested, Mapping):
            merged = dict(nested)
            # Fields the language model leaves out but the wrapper sets (dtype, context) still apply.
            for inherited in ("torch_dtype", "dtype", "vision_config", *_CONTEXT_KEYS):
                if inherited not in merged and inherited in raw:
                    merged[inherited] = raw[inherited]
            return merged, f"{key}."
    return raw, ""


def _model_dtype(raw: Mapping[str, Any], data: Mapping[str, Any]) -> KvDtype | None:
    """The checkpoint's dtype: the root config's, then the language model's (vLLM 0.19
    transformers_utils/model_arch_config_convertor.py get_torch_dtype: "Fallbacks for multi-modal models if the
    root config does not define dtype"; transformers' from_pretrained reads the root config too). Gemma 3 12B's
    hub config says bfloat16 at the root and float32 in its text_config."""
    for container in (raw, data):
        for key in ("torch_dtype", "dtype"):
            dtype = dtype_from_torch_name(container.get(key))
            if dtype is not None:
                return dtype
    return None


# --- which layer is what -------------------------------------------------------------------------------

# layer_types spellings (transformers `layer_types`, Nemotron-H pattern characters, layers_block_type).
_LAYER_TYPE_KIND = {
    "full_attention": "full",
    "attention": "full",
    "global": "full",
    "sliding_attention": "sliding",
    "local": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
    "mamba": "mamba",
    "hybrid": "mamba+full",
    "mlp": "none",
    "moe": "none",
    # transformers 5.24 DeepseekV32Config / GlmMoeDsaConfig write it for every DSA layer (DynamicIndexedLayer):
    # MLA with an indexer, read from kv_lora_rank and index_head_dim like a config that lists no layer types
    "indexed_attention": "full",
    "deepseek_sparse_attention": "full",  # the name before transformers 5.x remapped it to indexed_attention
    "minimax_m3_sparse": "full",  # MiniMax-M3: full attention plus an indexer key (_apply_minimax_m3_indexer)
}
_PATTERN_CHAR_KIND = {"*": "full", "M": "mamba", "-": "none", "E": "none"}


def _longcat_cache_layers(f: _Fields, notes: list[str]) -> int:
    """LongCat-Flash: two MLA sublayers per decoder layer, each with its own cache (transformers 5.25
    LongcatFlashDecoderLayer `self_attn = ModuleList([LongcatFlashMLA(config, layer_idx * 2 + i) for i in [0, 1]])`,
    LongcatFlashConfig.num_hidden_layers = 2 x num_layers; vLLM 0.34 models/longcat_flash.py self_attn.0 / .1)."""
    blocks = f.need_int("num_layers", maximum=MAX_LAYERS // 2)
    stated = f.integer("num_hidden_layers")
    if stated is not None and stated != 2 * blocks:
        raise f.error("num_hidden_layers", f"({stated}) must be 2 x num_layers ({blocks}) for LongCat-Flash")
    notes.append(f"LongCat-Flash: two MLA sublayers in each of its {blocks} layers: {2 * blocks} caches")
    return 2 * blocks


def _layer_kinds(f: _Fields, n: int, notes: list[str]) -> list[str]:
    """One of full / sliding / chunked / cross / linear / mamba / mamba+full / none per layer."""
    if isinstance(f.raw("block_configs"), list):
        return _nas_layer_kinds(f, n)
    pattern = f.raw("hybrid_override_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or len(pattern) != n or set(pattern) - set(_PATTERN_CHAR_KIND):
            raise f.error("hybrid_override_pattern", f"must be a string of {n} characters from '*M-E'")
        f.used.append("hybrid_override_pattern")
        return [_PATTERN_CHAR_KIND[c] for c in pattern]
    lists_types = any(f.raw(key) is not None for key in ("layers_block_type", "layer_types"))
    if f.raw("model_type") == "nemotron_h" and not lists_types:
        # NemotronHConfig.__post_init__ (transformers 5.25) falls back to a fixed 4-layer list (Mamba, MoE,
        # attention, MLP) and ignores num_hidden_layers: no checkpoint is built that way.
        raise f.error(
            "hybrid_override_pattern",
            "is missing (and so is layers_block_type): Nemotron-H's layers cannot be told without it; copy it from "
            "the checkpoint's config.json",
        )
    if f.raw("model_type") == "granitemoehybrid" and not lists_types:
        # GraniteMoeHybridConfig.__post_init__ (5.25): layer_types None -> ["linear_attention"] * layers (Mamba-2),
        # which vLLM's granitemoehybrid.py builds as it reads them (ALL_DECODER_LAYER_TYPES, 0.34).
        notes.append("config names no layer_types: every layer is Mamba-2, as GraniteMoeHybridConfig builds it")
        return ["mamba"] * n
    if f.raw("model_type") == "kimi_linear":
        return _kimi_layer_kinds(f, n)
    if f.raw("model_type") == "recurrent_gemma":
        return _recurrent_gemma_layer_kinds(f, n)
    if f.raw("model_type") == "gpt_neo":
        return _gpt_neo_layer_kinds(f, n)
    if f.raw("model_type") in LFM2_MODEL_TYPES:
        return _lfm2_layer_kinds(f, n)
    if f.raw("model_type") in GEMMA4_MODEL_TYPES or f.raw("model_type") in GEMMA3N_MODEL_TYPES:
        return _gemma_layer_kinds(f, n, notes)
    if f.raw("model_type") in MIMO_V2_MODEL_TYPES:
        return _mimo_layer_kinds(f, n)
    if f.raw("model_type") in DEEPSEEK_V4_MODEL_TYPES:
        return _deepseek_v4_layer_kinds(f, n, notes)
    codes = f.raw("attn_type_list")
    if codes is not None:
        # MiniMax-Text-01 / M1 / M2: 0 = lightning (linear) attention, 1 = softmax attention
        # (vLLM minimax_text_01.py MiniMaxText01DecoderLayer: attn_type_list[layer_id] == 0 -> linear).
        if not isinstance(codes, list) or len(codes) != n or any(c not in (0, 1) or isinstance(c, bool) for c in codes):
            raise f.error("attn_type_list", f"must list 0 (linear) or 1 (softmax) for each of the {n} layers")
        f.used.append("attn_type_list")
        return ["full" if c == 1 else "lightning" for c in codes]
    for key in ("layers_block_type", "layer_types"):
        names = f.str_list(key, n)
        if names is not None:
            unknown = sorted({t for t in names if t not in _LAYER_TYPE_KIND})
            if unknown:
                raise f.error(key, f"has layer types kvsize does not know: {', '.join(unknown)}")
            kinds = [_LAYER_TYPE_KIND[t] for t in names]
            if str(f.raw("model_type")).startswith("minimax"):
                # transformers MiniMaxConfig: "linear_attention" layers are lightning attention (no conv,
                # one head_dim x head_dim state per head; modeling_minimax.py MiniMaxLightningAttention).
                kinds = ["lightning" if k == "linear" else k for k in kinds]
            elif f.raw("model_type") != "kimi_linear" and mamba_named_linear(f.data):
                # transformers 5.x saves Mamba layers as "linear_attention" (_LEGACY_LAYER_TYPE_REMAP)
                kinds = ["mamba" if k == "linear" else k for k in kinds]
            if "sliding" in kinds and not f.has("sliding_window"):
                raise f.error("sliding_window", "is missing but layer_types lists sliding layers")
            return kinds
    if f.raw("model_type") == "falcon_h1":
        # Falcon-H1 runs attention and a Mamba-2 mixer side by side in every layer; no field says so
        # (transformers FalconH1Config: layers_block_type = ["hybrid"] * num_hidden_layers).
        return ["mamba+full"] * n
    indices = f.int_list("attn_layer_indices")
    if indices is None and f.raw("model_type") == "bamba":
        indices = []  # BambaConfig.layers_block_type: no list, no attention layer
    if indices is not None:  # Bamba: attention at these layers, Mamba-2 elsewhere (BambaConfig.layers_block_type)
        if any(not 0 <= i < n for i in indices):
            raise f.error("attn_layer_indices", f"names a layer outside 0..{n - 1}")
        return ["full" if i in indices else "mamba" for i in range(n)]
    period = f.integer("attn_layer_period")
    if period is not None:  # Jamba: one attention layer every `period`, at `offset`
        offset = f.integer("attn_layer_offset", minimum=0) or 0
        return ["full" if i % period == offset else "mamba" for i in range(n)]
    interval = f.integer("full_attention_interval")
    if interval is not None:  # Qwen3-Next: every interval-th layer is full attention, the rest linear
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
    if not any(f.has(k) for k in _HEAD_KEYS) and any(f.has(k) for k in _SSM_STATE_KEYS):
        return ["mamba"] * n  # attention-free state-space model (Mamba, Mamba-2)
    return _attention_layer_kinds(f, n, notes)


LFM2_MODEL_TYPES = ("lfm2", "lfm2_moe")
GEMMA4_MODEL_TYPES = ("gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text")
GEMMA3N_MODEL_TYPES = ("gemma3n", "gemma3n_text")
MIMO_V2_MODEL_TYPES = ("mimo_v2_flash",)
PER_LAYER_SHAPE_TYPES = (*GEMMA4_MODEL_TYPES, *GEMMA3N_MODEL_TYPES, *MIMO_V2_MODEL_TYPES)
DEEPSEEK_V4_MODEL_TYPES = ("deepseek_v4",)
DSA_MODEL_TYPES = ("deepseek_v32", "glm_moe_dsa")  # MODEL_TYPE_DEFAULTS gives both their indexer

# DeepSeek-V4 layer types (transformers 5.24 configuration_deepseek_v4.py): the kvsize kind of each, the legacy
# `compress_ratios` value that selects it (_COMPRESS_RATIO_TO_LAYER_TYPE), and the default compress rate
# (DeepseekV4Config.default_compress_rates) with its legacy scalar override.
_V4_SLIDING, _V4_CSA, _V4_HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"
_V4_KIND = {_V4_SLIDING: "sliding", _V4_CSA: "v4:csa", _V4_HCA: "v4:hca"}
_V4_BY_RATIO = {0: _V4_SLIDING, 4: _V4_CSA, 128: _V4_HCA}
DEEPSEEK_V4_RATES = {_V4_CSA: (4, "compress_rate_csa"), _V4_HCA: (128, "compress_rate_hca")}


def _deepseek_v4_layer_kinds(f: _Fields, n: int, notes: list[str]) -> list[str]:
    """DeepseekV4Config.__post_init__: `layer_types`, else the legacy per-layer `compress_ratios` (0 / 4 / 128, cut
    to num_hidden_layers: hub configs list the MTP layer too, which transformers does not build), else two HCA
    layers then CSA and HCA alternating (CSA at odd positions after the first two)."""
    names = f.str_list("layer_types", n)
    ratios = f.int_list("compress_ratios") if names is None else None
    if ratios is not None:
        if len(ratios) < n or set(ratios) - set(_V4_BY_RATIO):
            raise f.error(
                "compress_ratios",
                f"must list 0, 4 or 128 for each of the {n} layers (transformers 5.24 "
                "maps only these to layer types: configuration_deepseek_v4.py)",
            )
        if len(ratios) > n:
            notes.append(
                f"compress_ratios lists {len(ratios)} layers for {n}: transformers reads the first {n} (hub "
                "configs list the MTP layer too, which it does not build)"
            )
        names = [_V4_BY_RATIO[r] for r in ratios[:n]]
    if names is None:
        names = [_V4_HCA] * min(n, 2) + [_V4_CSA if i % 2 else _V4_HCA for i in range(max(n - 2, 0))]
    if set(names) - set(_V4_KIND):
        raise f.error("layer_types", f"must list only {', '.join(_V4_KIND)} for DeepSeek-V4")
    return [_V4_KIND[t] for t in names]


def _deepseek_v4_attention(kind: str, attn: _AttentionParams, f: _Fields, notes: list[str]) -> AttentionSpec:
    """One K = V head of head_dim (DeepseekV4Attention: kv_proj to head_dim whatever num_key_value_heads says),
    the last sliding_window raw tokens; CSA / HCA layers add one compressed entry of head_dim per compress rate
    tokens (DeepseekV4CSACompressor / DeepseekV4HCACompressor), CSA also one indexer key of index_head_dim per
    entry (DeepseekV4Indexer). The rate: `compress_rates[type]`, overridden by the legacy compress_rate_csa /
    compress_rate_hca, else 4 / 128 (DeepseekV4Config.__post_init__)."""
    if attn.num_kv_heads != 1:
        notes.append(f"num_key_value_heads {attn.num_kv_heads} ignored: DeepSeek-V4 caches one K = V head")
    window = f.need_int("sliding_window", maximum=MAX_POSITIONS)
    if kind == "sliding":
        return AttentionSpec(
            kind=AttentionKind.SLIDING, num_kv_heads=1, head_dim=attn.head_dim, head_dim_v=0, window=window
        )
    layer_type = _V4_CSA if kind == "v4:csa" else _V4_HCA
    default, legacy = DEEPSEEK_V4_RATES[layer_type]
    rates = f.raw("compress_rates")
    if rates is not None:
        if not isinstance(rates, Mapping) or set(rates) - set(DEEPSEEK_V4_RATES):
            raise f.error("compress_rates", f"must map {' / '.join(DEEPSEEK_V4_RATES)} to integers")
        f.used.append("compress_rates")
        sub = _Fields(rates, source=f.source, where=f"{f.where}compress_rates.")
        default = sub.integer(layer_type, maximum=MAX_POSITIONS) or default
    ratio = f.integer(legacy, maximum=MAX_POSITIONS) or default
    csa = layer_type == _V4_CSA
    return AttentionSpec(
        kind=AttentionKind.COMPRESSED,
        num_kv_heads=1,
        head_dim=attn.head_dim,
        head_dim_v=0,
        window=window,
        compress_ratio=ratio,
        compress_overlap=csa,
        index_head_dim=f.need_int("index_head_dim") if csa else None,
    )


def _gemma_layer_kinds(f: _Fields, n: int, notes: list[str]) -> list[str]:
    """Gemma 3n / 4: `layer_types`, else every 5th (3n) / 6th (4) layer full and the rest sliding (transformers
    5.24 Gemma3nTextConfig / Gemma4TextConfig.__post_init__). Gemma 4 makes the last layer full attention even
    where a stated layer_types says otherwise (the same __post_init__, with a warning)."""
    gemma4 = f.raw("model_type") in GEMMA4_MODEL_TYPES
    names = f.str_list("layer_types", n)
    if names is None:
        period = 6 if gemma4 else 5
        names = ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n)]
    if set(names) - {"full_attention", "sliding_attention"}:
        raise f.error("layer_types", "must list only full_attention and sliding_attention for Gemma 3n / 4")
    kinds = ["full" if t == "full_attention" else "sliding" for t in names]
    if gemma4 and kinds[-1] != "full":
        kinds[-1] = "full"
        notes.append("last layer sized as full attention: transformers' Gemma4TextConfig forces it")
    return kinds


def _mimo_layer_kinds(f: _Fields, n: int) -> list[str]:
    """MiMo-V2-Flash: `hybrid_layer_pattern` (0 full, 1 sliding: vLLM 0.33 mimo_v2.py MiMoV2DecoderLayer
    is_sliding_window_layer), which transformers 5.24 does not read; it derives layer_types as full at layer 0 and
    every 6th layer (MiMoV2FlashConfig.__post_init__), the hub model's own pattern. A stated layer_types wins and
    must agree with the pattern."""
    pattern = f.int_list("hybrid_layer_pattern")
    from_pattern = None
    if pattern is not None:
        if len(pattern) != n or set(pattern) - {0, 1}:
            raise f.error("hybrid_layer_pattern", f"must list 0 (full) or 1 (sliding) for each of the {n} layers")
        from_pattern = ["sliding" if p else "full" for p in pattern]
    names = f.str_list("layer_types", n)
    if names is None:
        return from_pattern or ["full" if i == 0 or (i + 1) % 6 == 0 else "sliding" for i in range(n)]
    if set(names) - {"full_attention", "sliding_attention"}:
        raise f.error("layer_types", "must list only full_attention and sliding_attention for MiMo-V2")
    kinds = ["full" if t == "full_attention" else "sliding" for t in names]
    if from_pattern is not None and from_pattern != kinds:
        raise f.error("hybrid_layer_pattern", "disagrees with layer_types")
    return kinds


# (kv heads, K head dim, V head dim) of a layer whose attention differs from the config's standard fields.
Shape = tuple[int, int, int]


def _per_layer_shapes(f: _Fields, kinds: list[str], attn: _AttentionParams, notes: list[str]) -> dict[int, Shape]:
    """Layers whose KV heads or head sizes differ from the standard fields, by index: Gemma 4's full layers,
    MiMo-V2's sliding layers. Empty for every other family."""
    model_type = f.raw("model_type")
    if model_type in GEMMA4_MODEL_TYPES:
        if f.has("per_layer_config"):
            return _per_layer_config(f, len(kinds), attn)
        return _gemma4_global_shapes(f, kinds, attn, notes)
    if model_type in MIMO_V2_MODEL_TYPES:
        # Sliding layers: swa_num_key_value_heads x (swa_head_dim K, swa_v_head_dim V), the model's own fields
        # (vLLM 0.33 mimo_v2.py MiMoV2DecoderLayer). transformers 5.24 MiMoV2FlashAttention builds
        # 2 x num_key_value_heads with head_dim / v_head_dim there (the hub model's values); the defaults follow it.
        shape = (
            f.integer("swa_num_key_value_heads") or 2 * attn.num_kv_heads,
            f.integer("swa_head_dim") or attn.head_dim,
            f.integer("swa_v_head_dim") or attn.head_dim_v,
        )
        _check_groups(f, attn.num_heads, shape[0], "swa_num_key_value_heads")
        return {i: shape for i, kind in enumerate(kinds) if kind == "sliding"}
    return {}


def _gemma4_global_shapes(f: _Fields, kinds: list[str], attn: _AttentionParams, notes: list[str]) -> dict[int, Shape]:
    """Gemma 4's full layers (transformers 5.24 Gemma4TextConfig.__post_init__ per_layer_config): head_dim is
    global_head_dim (default 512); KV heads are num_global_key_value_heads only with attention_k_eq_v. K = V
    layers still cache both (modeling_gemma4.py Gemma4TextAttention.forward: value_states = v_norm(k_proj(x)),
    key_states = rope(k_norm(k_proj(x))), both handed to cache.update)."""
    head_dim = f.need_int("global_head_dim")
    kv = attn.num_kv_heads
    if f.flag("attention_k_eq_v"):
        kv = f.integer("num_global_key_value_heads") or kv
    elif f.has("num_global_key_value_heads"):
        notes.append("num_global_key_value_heads ignored: attention_k_eq_v is off (transformers Gemma4TextConfig)")
    _check_groups(f, attn.num_heads, kv, "num_global_key_value_heads")
    return {i: (kv, head_dim, head_dim) for i, kind in enumerate(kinds) if kind == "full"}


def _per_layer_config(f: _Fields, n: int, attn: _AttentionParams) -> dict[int, Shape]:
    """A stated per_layer_config (what transformers 5.24 writes when it saves a Gemma 4 config): layer index ->
    head_dim / num_key_value_heads overrides; global_head_dim and num_global_key_value_heads are then not read
    (Gemma4TextConfig.__post_init__ builds per_layer_config only when none is given). The guard refuses other
    override keys (kvsize.cache_fields READ_NESTED)."""
    overrides = f.raw("per_layer_config")
    if not isinstance(overrides, Mapping):
        raise f.error("per_layer_config", "must be an object of layer index -> overrides")
    f.used.append("per_layer_config")
    shapes: dict[int, Shape] = {}
    for key, over in overrides.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else key
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise f.error("per_layer_config", f"names layer {shown(key)}, outside 0..{n - 1}")
        if not isinstance(over, Mapping):
            raise f.error(f"per_layer_config.{key}", "must be an object")
        sub = _Fields(over, source=f.source, where=f"{f.where}per_layer_config.{key}.")
        head_dim = sub.integer("head_dim") or attn.head_dim
        kv = sub.integer("num_key_value_heads") or attn.num_kv_heads
        _check_groups(sub, attn.num_heads, kv, "num_key_value_heads")
        shapes[index] = (kv, head_dim, head_dim)
    return shapes


def _check_groups(f: _Fields, num_heads: int, kv: int, key: str) -> None:
    if num_heads % kv:
        raise f.error(key, f"({kv}) must divide num_attention_heads ({num_heads})")


def _kimi_layer_kinds(f: _Fields, n: int) -> list[str]:
    """Kimi Linear: the 1-based `linear_attn_config.kda_layers` are KDA, `full_attn_layers` MLA (transformers
    KimiLinearConfig.__post_init__ builds layer_types from both lists; vLLM KimiLinearConfig.is_kda_layer reads
    kda_layers). The two lists must cover every layer once; a stated `layer_types` takes precedence."""
    names = f.str_list("layer_types", n)
    if names is not None:
        if set(names) - {"full_attention", "linear_attention"}:
            raise f.error("layer_types", "must list only full_attention and linear_attention for kimi_linear")
        return ["full" if t == "full_attention" else "kda" for t in names]
    if not f.has("linear_attn_config"):
        # transformers 5.24 KimiLinearConfig.__post_init__ without the hub's sub-dict: full attention at layers
        # i > 0 with i % 4 == 0, KDA elsewhere
        return ["full" if i and i % 4 == 0 else "kda" for i in range(n)]
    sub = _linear_attn_config(f)
    kda, full = sub.int_list("kda_layers"), sub.int_list("full_attn_layers")
    if kda is None or full is None:
        raise sub.error("kda_layers", "and full_attn_layers must both be given (1-based layer numbers)")
    if sorted(kda + full) != list(range(1, n + 1)):
        raise sub.error("kda_layers", f"and full_attn_layers must together list layers 1..{n} once each")
    kda_set = set(kda)
    return ["kda" if i + 1 in kda_set else "full" for i in range(n)]


def _linear_attn_config(f: _Fields) -> _Fields:
    sub = f.raw("linear_attn_config")
    if not isinstance(sub, Mapping):
        raise f.error("linear_attn_config", "must be an object (Kimi Linear's KDA layers)")
    f.used.append("linear_attn_config")
    return _Fields(sub, source=f.source, where=f"{f.where}linear_attn_config.")


def _lfm2_layer_kinds(f: _Fields, n: int) -> list[str]:
    """LFM2: "conv" layers are gated short convolutions, "full_attention" layers standard GQA; without
    layer_types the layers in `full_attn_idxs` (default all) attend (transformers Lfm2Config.__post_init__)."""
    names = f.str_list("layer_types", n)
    if names is None:
        idxs = f.int_list("full_attn_idxs")
        attending = set(range(n)) if idxs is None else set(idxs)
        names = ["full_attention" if i in attending else "conv" for i in range(n)]
    if set(names) - {"full_attention", "conv"}:
        raise f.error("layer_types", "must list only conv and full_attention for LFM2")
    return ["full" if t == "full_attention" else "short_conv" for t in names]


def _nas_layer_kinds(f: _Fields, n: int) -> list[str]:
    blocks = f.raw("block_configs")
    if len(blocks) != n:
        raise f.error("block_configs", f"lists {len(blocks)} blocks but the model has {n} layers")
    f.used.append("block_configs")
    kinds = []
    for i, block in enumerate(blocks):
        attn = block.get("attention") if isinstance(block, Mapping) else None
        if not isinstance(attn, Mapping):
            raise f.error(f"block_configs[{i}].attention", "must be an object")
        kinds.append("none" if attn.get("no_op") or attn.get("replace_with_linear") else f"nas:{i}")
    return kinds


def _gpt_neo_layer_kinds(f: _Fields, n: int) -> list[str]:
    """GPT-Neo: `attention_types` [[["global", "local"], 12]] expands to one entry per layer
    (GPTNeoConfig.expand_attention_types_params, transformers 5.24; default [[["global", "local"], 12]]); "local"
    layers attend within window_size (256). `attention_layers`, when saved, is that expansion."""
    layers = f.raw("attention_layers")
    if layers is None:
        types = f.raw("attention_types")
        if types is None:
            types = [[["global", "local"], 12]]
        layers = []
        for item in types if isinstance(types, list) else [None]:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], list) and _count(item[1])):
                raise f.error("attention_types", 'must list [["global", "local"], repeats] pairs')
            layers += list(item[0]) * item[1]
    else:
        f.used.append("attention_layers")
    if not isinstance(layers, list) or len(layers) != n or set(layers) - {"global", "local"}:
        raise f.error("attention_types", f"must expand to 'global' or 'local' for each of the {n} layers")
    return ["full" if t == "global" else "sliding" for t in layers]


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_LAYERS


def _recurrent_gemma_layer_kinds(f: _Fields, n: int) -> list[str]:
    """RecurrentGemma: `block_types` repeated over the layers, "recurrent" (an RG-LRU block) or "attention" (local
    attention within attention_window_size) (RecurrentGemmaConfig.layers_block_type, transformers 5.24; default
    ("recurrent", "recurrent", "attention"))."""
    blocks = f.raw("block_types")
    if blocks is None:
        blocks = ["recurrent", "recurrent", "attention"]
    elif not isinstance(blocks, list) or not blocks or any(b not in ("recurrent", "attention") for b in blocks):
        raise f.error("block_types", "must be a non-empty list of 'recurrent' and 'attention'")
    else:
        f.used.append("block_types")
    return ["rg_lru" if blocks[i % len(blocks)] == "recurrent" else "sliding" for i in range(n)]


def _rg_lru_state(f: _Fields, model_dtype: KvDtype | None) -> StateSpec:
    """A RecurrentGemma recurrent block keeps its conv1d's last conv1d_width - 1 inputs over hidden_size channels
    and one recurrent vector of lru_width (modeling_recurrent_gemma.py RecurrentGemmaRecurrentBlock._setup_cache:
    conv1d_state (batch, hidden_size, conv1d_width - 1), rg_lru.recurrent_states (batch, lru_width) in float32)."""
    hidden = f.need_int("hidden_size")
    return StateSpec(
        kind=StateKind.RG_LRU,
        conv_channels=hidden,
        conv_kernel=f.integer("conv1d_width") or 4,  # RecurrentGemmaConfig default
        ssm_shape=(f.integer("lru_width") or hidden,),  # RecurrentGemmaConfig: lru_width None -> hidden_size
        dtype=(model_dtype or KvDtype.BF16).value,
    )


def _smollm3_layer_kinds(f: _Fields, n: int) -> list[str]:
    """SmolLM3 with no layer_types (SmolLM3Config.__post_init__, transformers 5.24): the NoPE layers
    (no_rope_layers[i] == 0; default every no_rope_layer_interval-th) slide when use_sliding_window and a window
    are set; max_window_layers is not read. Every other layer, RoPE or not, caches the whole context."""
    rope = f.int_list("no_rope_layers")
    if rope is None:
        interval = f.integer("no_rope_layer_interval") or 4  # SmolLM3Config default
        rope = [int((i + 1) % interval != 0) for i in range(n)]
    if len(rope) != n:
        raise f.error("no_rope_layers", f"lists {len(rope)} layers but the model has {n}")
    window = f.integer("sliding_window", minimum=0, maximum=MAX_POSITIONS)
    slides = bool(f.flag("use_sliding_window")) and bool(window)
    return ["sliding" if slides and not rope[i] else "full" for i in range(n)]


def _attention_layer_kinds(f: _Fields, n: int, notes: list[str]) -> list[str]:
    if f.raw("model_type") == "smollm3":
        return _smollm3_layer_kinds(f, n)
    kinds = ["full"] * n
    chunk = f.integer("attention_chunk_size")
    if chunk is not None:  # Llama 4: RoPE layers attend within chunks, NoPE layers globally
        rope_layers = f.int_list("no_rope_layers")
        if rope_layers is None:
            interval = f.need_int("no_rope_layer_interval")
            rope_layers = [int((i + 1) % interval != 0) for i in range(n)]
        if len(rope_layers) < n:
            raise f.error("no_rope_layers", f"lists {len(rope_layers)} layers but the model has {n}")
        kinds = ["chunked" if rope_layers[i] else "full" for i in range(n)]
    window = f.integer("sliding_window", minimum=0, maximum=MAX_POSITIONS)
    use_window = f.flag("use_sliding_window")
    every_n = GLOBAL_EVERY_N_FIELDS.get(str(f.raw("model_type")))
    if window and every_n:
        every = f.integer(every_n[0], maximum=MAX_LAYERS) or every_n[1]
        return ["sliding" if (i + 1) % every else "full" for i in range(n)]
    if window and use_window is not True and str(f.raw("model_type")) in QWEN_WINDOW_RULES:
        # the Qwen classes keep sliding_window only `if use_sliding_window` (False by default, null as well)
        notes.append(f"sliding_window {window} ignored: use_sliding_window is not true")
    elif window and use_window is False:
        notes.append(f"sliding_window {window} ignored: use_sliding_window is false")
    elif window:
        kinds = _windowed(f, kinds, n)
    cross = f.int_list("cross_attention_layers")
    for i in cross or ():
        if not 0 <= i < n:
            raise f.error("cross_attention_layers", f"names layer {i}, outside 0..{n - 1}")
        kinds[i] = "cross"
    return kinds


def _windowed(f: _Fields, kinds: list[str], n: int) -> list[str]:
    """Mark the sliding-window layers of a model whose config sets `sliding_window`."""
    if f.flag("use_sliding_window"):  # the Qwen families: QWEN_WINDOW_RULES
        rule = QWEN_WINDOW_RULES.get(str(f.raw("model_type")))
        layers = rule.layers if rule is not None else "from"
        if layers == "every":
            return ["sliding" if k == "full" else k for k in kinds]
        bound = f.integer("max_window_layers", minimum=0, maximum=MAX_LAYERS)
        if bound is None:
            bound = rule.max_window_layers if rule is not None and rule.max_window_layers is not None else 0
        if layers == "even_below":
            return ["sliding" if i % 2 == 0 and i < bound else k for i, k in enumerate(kinds)]
        return ["sliding" if i >= bound else k for i, k in enumerate(kinds)]
    pattern = f.raw("sliding_window_pattern")
    if isinstance(pattern, str):  # EXAONE 4: "LLLG" repeats, L = local, G = global
        if not pattern or set(pattern) - {"L", "G"}:
            raise f.error("sliding_window_pattern", f"must use only L and G, got {shown(pattern)}")
        f.used.append("sliding_window_pattern")
        return ["sliding" if pattern[i % len(pattern)] == "L" else k for i, k in enumerate(kinds)]
    period = f.integer("sliding_window_pattern")
    if period is not None:  # Gemma 2/3, Cohere 2: every period-th layer is global
        return ["sliding" if (i + 1) % period != 0 else k for i, k in enumerate(kinds)]
    return ["sliding" if k == "full" else k for k in kinds]  # Mistral, Phi-3, Starcoder2: every layer


# --- attention numbers ---------------------------------------------------------------------------------


class _AttentionParams:
    def __init__(
        self,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        head_dim_v: int,
        mla: tuple[int, int, int | None, int | None] | None,
    ) -> None:
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.head_dim_v = head_dim_v
        self.mla = mla
        self.per_layer: dict[int, Shape] = {}
        """Layers whose (KV heads, K head dim, V head dim) differ from the fields above, by index."""


def _attention_params(f: _Fields, notes: list[str]) -> _AttentionParams:
    attn_config = f.raw("attn_config")
    if isinstance(attn_config, Mapping) and attn_config.get("kv_n_heads") is not None:  # MPT, DBRX
        sub = _Fields(attn_config, source=f.source, where=f"{f.where}attn_config.")
        kv_from_attn_config: int | None = sub.integer("kv_n_heads")
    else:
        kv_from_attn_config = None
    # GPTNeoConfig.attribute_map: num_attention_heads -> num_heads
    num_heads = f.need_int(*_HEAD_KEYS, *(("num_heads",) if f.raw("model_type") == "gpt_neo" else ()))
    kv_lora_rank = f.integer("kv_lora_rank")
    if kv_lora_rank is not None:
        # MLA caches one latent per token: kv_lora_rank + qk_rope_head_dim elements, shared by all heads
        # (DeepSeek-V2 paper §2.1.2). num_key_value_heads and head_dim in these configs do not size it.
        rope = f.need_int("qk_rope_head_dim", minimum=0)
        nope = f.integer("qk_nope_head_dim", minimum=0)
        v_dim = f.integer("v_head_dim")
        return _AttentionParams(num_heads, 1, kv_lora_rank + rope, 0, (kv_lora_rank, rope, nope, v_dim))

    num_kv_heads = _num_kv_heads(f, num_heads, kv_from_attn_config)
    head_dim = f.integer(*HEAD_DIM_KEYS)
    if f.raw("model_type") in ("zamba", "zamba2"):
        # Zamba2's shared block attends over [hidden state, input embeddings]: 2 x hidden per head
        # (transformers Zamba2Config.attention_head_dim = 2 * hidden_size // num_attention_heads).
        head_dim = 2 * f.need_int(*_HIDDEN_KEYS) // num_heads
        notes.append(f"hybrid blocks attend over [hidden, embeddings]: head_dim {head_dim}")
    if head_dim is None:
        hidden = f.need_int(*_HIDDEN_KEYS)
        if hidden % num_heads:
            raise f.error("num_attention_heads", f"({num_heads}) must divide hidden_size ({hidden})")
        head_dim = hidden // num_heads
    if num_heads % num_kv_heads:
        raise f.error("num_key_value_heads", f"({num_kv_heads}) must divide num_attention_heads ({num_heads})")
    head_dim_v = f.integer("v_head_dim") or head_dim
    return _AttentionParams(num_heads, num_kv_heads, head_dim, head_dim_v, None)


def _num_kv_heads(f: _Fields, num_heads: int, from_attn_config: int | None) -> int:
    if from_attn_config is not None:
        return from_attn_config
    multi_query = f.flag("multi_query")
    if multi_query and not f.flag("new_decoder_architecture"):
        return 1  # Falcon-7B, GPT-BigCode: one K/V head
    if f.flag("multi_query_attention") is not False and f.has("multi_query_group_num"):
        return f.need_int("multi_query_group_num")  # ChatGLM / GLM
    # CogVLM2 names its KV heads num_multi_query_heads (8 beside 32 query heads; its remote code's
    # VisionExpertAttention builds Attention(num_kv_heads=num_multi_query_heads), head_dim = hidden / heads).
    kv = f.integer("n_head_kv", "num_kv_heads", "num_key_value_heads", "num_attention_groups", "num_multi_query_heads")
    return num_heads if kv is None else kv  # absent: multi-head attention


# --- recurrent state -----------------------------------------------------------------------------------

_SSM_STATE_KEYS = ("ssm_state_size", "state_size", "mamba_d_state", "d_state")


def _lightning_state(attn: _AttentionParams, model_dtype: KvDtype | None) -> StateSpec:
    """MiniMax lightning attention keeps one K^T V matrix of head_dim x head_dim per attention head and no
    convolution (transformers MiniMaxLightningAttention: attn_weights_inter (batch, heads, head_dim, head_dim);
    vLLM MambaStateShapeCalculator.linear_attention_state_shape: (heads / tp, head_dim, head_dim))."""
    return StateSpec(
        kind=StateKind.LIGHTNING,
        conv_channels=1,
        conv_kernel=1,  # keeps conv_kernel - 1 = 0 inputs: no convolution state
        ssm_shape=(attn.num_heads, attn.head_dim, attn.head_dim),
        dtype=(model_dtype or KvDtype.BF16).value,
    )


def _kda_state(f: _Fields, model_dtype: KvDtype | None) -> StateSpec:
    """Kimi delta attention: a short conv over q, k and v (3 x num_heads x head_dim channels) and one
    head_dim x head_dim delta-rule matrix per head (vLLM mamba_utils.py MambaStateShapeCalculator.kda_state_shape;
    transformers KimiLinearDeltaAttention: conv_dim = 3 x qkv_dim, recurrent state (heads, head_dim, head_dim))."""
    if f.has("linear_attn_config"):  # the hub's spelling; it wins over the flat fields (KimiLinearConfig)
        sub = _linear_attn_config(f)
        heads = sub.need_int("num_heads")
        head_dim = sub.need_int("head_dim")
        kernel = sub.need_int("short_conv_kernel_size")
    else:  # transformers 5.24's flat fields, with KimiLinearConfig's defaults
        heads = f.integer("linear_num_heads") or 32
        head_dim = f.integer("linear_head_dim") or 128
        kernel = f.integer("linear_conv_kernel_dim") or 4
    return StateSpec(
        kind=StateKind.KDA,
        conv_channels=3 * heads * head_dim,
        conv_kernel=kernel,
        ssm_shape=(heads, head_dim, head_dim),
        dtype=(model_dtype or KvDtype.BF16).value,
    )


def _short_conv_state(f: _Fields, model_dtype: KvDtype | None) -> StateSpec:
    """LFM2's gated short convolution keeps the last inputs of a depthwise conv over hidden_size channels and
    nothing else (transformers Lfm2ShortConv: Conv1d(hidden_size, kernel_size=conv_L_cache); vLLM ShortConv with
    dim = conv_dim, mamba_utils.py short_conv_state_shape). A conv_dim unlike hidden_size is refused by the guard."""
    return StateSpec(
        kind=StateKind.SHORT_CONV,
        conv_channels=f.need_int(*_HIDDEN_KEYS),
        conv_kernel=f.need_int("conv_L_cache"),
        ssm_shape=(),
        dtype=(model_dtype or KvDtype.BF16).value,
    )


def _state_spec(f: _Fields, model_dtype: KvDtype | None) -> StateSpec:
    dtype = (model_dtype or KvDtype.BF16).value
    if f.has("linear_num_value_heads"):  # Gated DeltaNet (Qwen3-Next)
        k_heads = f.need_int("linear_num_key_heads")
        v_heads = f.need_int("linear_num_value_heads")
        k_dim = f.need_int("linear_key_head_dim")
        v_dim = f.need_int("linear_value_head_dim")
        # Conv over the concatenated q, k and v projections; recurrent state one k_dim x v_dim matrix per
        # value head (transformers Qwen3NextGatedDeltaNet: conv_dim = 2 * key_dim + value_dim).
        return StateSpec(
            kind=StateKind.GATED_DELTANET,
            conv_channels=2 * k_heads * k_dim + v_heads * v_dim,
            conv_kernel=f.need_int("linear_conv_kernel_dim"),
            ssm_shape=(v_heads, k_dim, v_dim),
            dtype=dtype,
            ssm_dtype=_named_ssm_dtype(f),
        )
    d_state = f.need_int(*_SSM_STATE_KEYS)
    conv_kernel = f.need_int("conv_kernel", "mamba_d_conv", "d_conv", "conv_dimension")
    # The mixer width: explicit fields before derived ones. Falcon-H1 names it (mamba_d_ssm); attention-free
    # Mamba / FalconMamba / Mamba-2 configs give it as intermediate_size (they have no MLP), which the weights
    # follow even where expand x hidden_size disagrees (falcon-mamba-7b: expand 16 x 4096 = 65536, but
    # intermediate_size 8192; vLLM mamba.py MambaMixer(intermediate_size=config.intermediate_size)). Hybrids
    # with an MLP use intermediate_size for the MLP, so only expand x hidden_size sizes their mixer.
    attention_free = not any(f.has(k) for k in _HEAD_KEYS)
    head_dim = f.integer("mamba_head_dim", "mamba_headdim", "mamba_d_head") or (
        f.integer("head_dim") if not f.has("num_attention_heads") else None
    )
    explicit_heads = f.integer("mamba_num_heads", "mamba_n_heads", "n_mamba_heads") or (
        f.integer("num_heads") if not f.has("num_attention_heads") else None
    )
    expand = f.integer("expand", "mamba_expand", "expansion_factor")  # read (and checked) even when not needed
    d_inner = f.integer("mamba_d_ssm")
    if d_inner is None and explicit_heads and head_dim:
        # Mamba-2 heads x head dim, both given (vLLM nemotron_h.py: mamba_num_heads * mamba_head_dim).
        d_inner = explicit_heads * head_dim
    if d_inner is None and attention_free:
        d_inner = _scalar_int(f, "intermediate_size")
    if d_inner is None:
        d_inner = expand * f.need_int(*_HIDDEN_KEYS) if expand else f.need_int("intermediate_size")
    if head_dim is None and f.raw("model_type") != "mamba2":
        # Mamba-1: conv over d_inner channels, state d_inner x d_state (transformers MambaCache).
        return StateSpec(
            kind=StateKind.MAMBA,
            conv_channels=d_inner,
            conv_kernel=conv_kernel,
            ssm_shape=(d_inner, d_state),
            dtype=dtype,
        )
    head_dim = head_dim or 64
    n_groups = f.integer("n_groups", "mamba_n_groups", "mamba_ngroups", "ngroups") or 1
    num_heads = explicit_heads or d_inner // head_dim
    # Mamba-2: conv over x, B and C (d_inner + 2 * n_groups * d_state channels); SSM state of
    # num_heads x head_dim x d_state (transformers Mamba2Cache, vLLM MambaStateShapeCalculator).
    # Explicit Mamba heads fix d_inner = heads x head_dim (transformers NemotronHMamba2Mixer intermediate_size;
    # vLLM nemotron_h.py): Nemotron-3-Nano has expand x hidden = 5376 but 64 x 64 = 4096.
    if f.integer("mamba_num_heads"):  # Nemotron-H only (Falcon-H1 and Zamba2 size the conv by their d_inner)
        d_inner = num_heads * head_dim
    return StateSpec(
        kind=StateKind.MAMBA2,
        conv_channels=d_inner + 2 * n_groups * d_state,
        conv_kernel=conv_kernel,
        ssm_shape=(num_heads, head_dim, d_state),
        dtype=dtype,
        n_groups=n_groups,
        chunk_size=f.integer("mamba_chunk_size", "chunk_size"),
        ssm_dtype=_named_ssm_dtype(f),
    )


def _named_ssm_dtype(f: _Fields) -> str | None:
    """The SSM-state dtype a config names: Qwen3.5 `mamba_ssm_dtype`, Nemotron-H `mamba_ssm_cache_dtype`."""
    named = f.raw("mamba_ssm_dtype") or f.raw("mamba_ssm_cache_dtype")
    return named if isinstance(named, str) else None


# --- assembling layers ---------------------------------------------------------------------------------


def _layers(
    kinds: list[str],
    attn: _AttentionParams | None,
    state: StateSpec | None,
    f: _Fields,
    notes: list[str],
    encoder_tokens: int | None,
) -> list[LayerSpec]:
    """One layer per kind (and per shape, where layers of a kind differ: `_per_layer_shapes`); each one's caches
    are built and validated once and shared by its layers (a 100,000-layer config must parse in a fraction of a
    second)."""
    first_of_kind: dict[tuple[str, Shape | None], LayerSpec] = {}
    layers: list[LayerSpec] = []
    for index, kind in enumerate(kinds):
        key = (kind, attn.per_layer.get(index) if attn is not None else None)
        first = first_of_kind.get(key)
        if first is None:
            first = first_of_kind[key] = _layer(index, kind, attn, state, f, notes, encoder_tokens)
            layers.append(first)
        else:
            layers.append(first.renumbered(index))
    return layers


def _layer(
    index: int,
    kind: str,
    attn: _AttentionParams | None,
    state: StateSpec | None,
    f: _Fields,
    notes: list[str],
    encoder_tokens: int | None,
) -> LayerSpec:
    if kind == "none":
        return LayerSpec(index=index)
    if kind == "mamba":
        return LayerSpec(index=index, state=state)
    if kind in ("linear", "lightning", "kda", "short_conv", "rg_lru"):
        return LayerSpec(index=index, state=state)
    assert attn is not None
    with_state = kind.startswith("mamba+")
    kind = kind.removeprefix("mamba+")
    if kind.startswith("nas:"):  # Nemotron-NAS: kv heads per block = heads // n_heads_in_group
        block = f.raw("block_configs")[int(kind[4:])]["attention"]
        sub = _Fields(block, source=f.source, where=f"{f.where}block_configs[{kind[4:]}].attention.")
        group = sub.need_int("n_heads_in_group")
        if attn.num_heads % group:
            raise sub.error("n_heads_in_group", f"({group}) must divide num_attention_heads ({attn.num_heads})")
        spec = AttentionSpec(
            kind=AttentionKind.FULL,
            num_kv_heads=attn.num_heads // group,
            head_dim=attn.head_dim,
            head_dim_v=attn.head_dim_v,
        )
        return LayerSpec(index=index, attention=spec)
    if f.raw("model_type") in DEEPSEEK_V4_MODEL_TYPES:
        return LayerSpec(index=index, attention=_deepseek_v4_attention(kind, attn, f, notes))
    if attn.mla is not None and f.raw("model_type") in DSA_MODEL_TYPES:
        for key in ("index_topk", "index_head_dim"):
            if key in f.data and f.data[key] is None:  # the class default would apply only to a missing key
                raise f.error(
                    key,
                    "is null: every DSA layer caches its indexer key (DeepseekV32Config / "
                    "GlmMoeDsaConfig refuse null); give the checkpoint's value or leave the key out",
                )
    if attn.mla is not None:
        spec = AttentionSpec(
            kind=AttentionKind.MLA,
            num_kv_heads=1,
            head_dim=attn.head_dim,
            head_dim_v=0,
            kv_lora_rank=attn.mla[0],
            qk_rope_head_dim=attn.mla[1],
            qk_nope_head_dim=attn.mla[2],
            v_head_dim=attn.mla[3],
            num_query_heads=attn.num_heads,
            # DeepSeek-V3.2 sparse attention: a lightning indexer keyed by index_topk / index_head_dim.
            index_head_dim=f.integer("index_head_dim") if f.has("index_topk") else None,
        )
        return LayerSpec(index=index, attention=spec, state=state if with_state else None)
    window: int | None = None
    if kind == "sliding" and f.raw("model_type") in MIMO_V2_MODEL_TYPES and f.has("sliding_window_size"):
        # MiMoV2FlashConfig.__post_init__ (transformers 5.24): sliding_window = sliding_window_size + 1, the
        # sliding_window_size previous tokens the reference SGLang code attends to plus the query.
        window = f.need_int("sliding_window_size", maximum=MAX_POSITIONS - 1) + 1
    elif kind == "sliding" and f.raw("model_type") == "gpt_neo":
        window = f.integer("window_size", maximum=MAX_POSITIONS) or 256  # GPTNeoConfig default
    elif kind == "sliding" and f.raw("model_type") == "recurrent_gemma":
        # RecurrentGemmaConfig.attribute_map: sliding_window -> attention_window_size (default 2048)
        window = f.integer("attention_window_size", maximum=MAX_POSITIONS) or 2048
    elif kind == "sliding":
        window = f.need_int("sliding_window", maximum=MAX_POSITIONS)
    elif kind == "chunked":
        window = f.need_int("attention_chunk_size", maximum=MAX_POSITIONS)
    tokens = None
    if kind == "cross":
        tokens = encoder_tokens if encoder_tokens is not None else _image_tokens(f, notes)
    kv_heads, head_dim, head_dim_v = attn.per_layer.get(index, (attn.num_kv_heads, attn.head_dim, attn.head_dim_v))
    spec = AttentionSpec(
        kind=AttentionKind(kind),
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        head_dim_v=head_dim_v,
        window=window,
        encoder_tokens=tokens,
    )
    return LayerSpec(index=index, attention=spec, state=state if with_state else None)


def _image_tokens(f: _Fields, notes: list[str]) -> int:
    """Vision tokens one image contributes to cross-attention layers (Mllama: tiles x (patches + 1))."""
    vision = f.raw("vision_config")
    if not isinstance(vision, Mapping):
        raise ConfigError(
            f"{f.source}: cross-attention layers need 'vision_config' to size the image tokens",
            hint="Pass --encoder-len to give the encoder's token count.",
        )
    v = _Fields(vision, source=f.source, where="vision_config.")
    tiles = v.integer("max_num_tiles") or 1
    side = v.need_int("image_size") // v.need_int("patch_size")
    tokens = tiles * (side * side + 1)
    notes.append(
        f"cross-attention layers hold one image: {tiles} tiles x ({side}x{side} patches + 1) = "
        f"{tokens:,} tokens per request"
    )
    return tokens


def _apply_kv_sharing(layers: list[LayerSpec], f: _Fields, notes: list[str]) -> None:
    """The last `num_kv_shared_layers` layers read the cache of the last earlier layer of their kind
    (Gemma 3n; vLLM gemma3n.py kv_sharing_target_layer_name) and store nothing themselves."""
    shared = f.integer("num_kv_shared_layers", minimum=0, maximum=MAX_LAYERS)
    if not shared:
        return
    first_shared = len(layers) - shared
    if first_shared <= 0:
        raise f.error("num_kv_shared_layers", f"({shared}) leaves no layer to share from")
    for i in range(first_shared, len(layers)):
        attn = layers[i].attention
        if attn is None:
            continue
        target = next(
            (
                j
                for j in range(first_shared - 1, -1, -1)
                if (a := layers[j].attention) is not None and a.kind is attn.kind
            ),
            None,
        )
        if target is None:
            continue
        layers[i] = LayerSpec(
            index=i,
            attention=AttentionSpec(
                kind=AttentionKind.SHARED, num_kv_heads=0, head_dim=0, head_dim_v=0, shares_kv_with=target
            ),
        )
    notes.append(f"last {shared} layers reuse earlier layers' KV (num_kv_shared_layers)")


MINIMAX_M3_MODEL_TYPES = ("minimax_m3", "minimax_m3_vl_text")


def _apply_minimax_m3_indexer(layers: list[LayerSpec], f: _Fields, notes: list[str]) -> None:
    """MiniMax-M3's sparse layers keep, beside their K and V, one lightning-indexer key of index_head_dim per token
    (transformers 5.24 MiniMaxM3VLSparseCacheLayer.update_index: idx_keys [B, 1, S, index_head_dim], in the
    activation dtype). Which layers: layer_types "minimax_m3_sparse", else the hub's
    sparse_attention_config.sparse_attention_freq (1 = sparse; MiniMaxM3VLTextConfig.__post_init__); the key width
    is sparse_attention_config.sparse_index_dim, else index_head_dim (default 128)."""
    if str(f.raw("model_type")) not in MINIMAX_M3_MODEL_TYPES:
        return
    n = len(layers)
    cfg = f.raw("sparse_attention_config")
    sub = _Fields(cfg if isinstance(cfg, Mapping) else {}, source=f.source, where=f"{f.where}sparse_attention_config.")
    if cfg is not None and not isinstance(cfg, Mapping):
        raise f.error("sparse_attention_config", "must be an object")
    if sub.flag("use_sparse_attention") is False:
        raise sub.error(
            "use_sparse_attention", "is false, which transformers ignores (it still builds the sparse layers)"
        )
    names = f.str_list("layer_types", n)
    if names is not None:
        sparse = [t == "minimax_m3_sparse" for t in names]
    else:
        freq = sub.int_list("sparse_attention_freq")
        if freq is None:
            return  # MiniMaxM3VLTextConfig: every layer full_attention
        if len(freq) != n or set(freq) - {0, 1}:
            raise sub.error("sparse_attention_freq", f"must list 0 or 1 for each of the {n} layers")
        sparse = [bool(x) for x in freq]
    disabled = sub.int_list("sparse_disable_index_value")
    if disabled is not None and (len(disabled) != n or any(s and not d for s, d in zip(sparse, disabled, strict=True))):
        # vLLM 0.33 minimax_m3/nvidia/model.py: M3 sets it on every sparse layer (no index value projection);
        # an index value cache on a layer is a layout no engine kvsize reads keeps
        raise sub.error("sparse_disable_index_value", "must be 1 on every sparse layer (no index value cache)")
    width = sub.integer("sparse_index_dim") or f.integer("index_head_dim") or 128
    count = 0
    for i, is_sparse in enumerate(sparse):
        attn = layers[i].attention
        if is_sparse and attn is not None and attn.kind is AttentionKind.FULL:
            keyed = msgspec.structs.replace(attn, index_head_dim=width)
            layers[i] = msgspec.structs.replace(layers[i], attention=keyed)
            count += 1
    if count:
        notes.append(f"{count} sparse layers keep an indexer key of {width} per token beside K and V (MiniMax-M3)")


def _apply_shared_indexers(layers: list[LayerSpec], f: _Fields, notes: list[str]) -> None:
    """GLM-5.2: DSA layers that reuse the previous full layer's top-k run no indexer of their own, so they keep
    no indexer key (transformers 5.24 GlmMoeDsaAttention: `indexer` None where indexer_types says "shared";
    vLLM 0.24+ deepseek_v2.py DeepseekV2MLAAttention builds no Indexer where `_skip_topk`).

    transformers reads `indexer_types`, else derives it (GlmMoeDsaConfig.__post_init__) from
    `index_topk_pattern` ("F"/"S" per layer) or from `index_topk_freq` and `index_skip_topk_offset`: layer i is
    full where max(i - offset + 1, 0) % freq == 0. vLLM always derives it, so a list that disagrees with the
    schedule is refused (the engines would key different layers)."""
    if str(f.raw("model_type")) not in DSA_SHARING_TYPES:
        return
    dsa = [i for i, layer in enumerate(layers) if (a := layer.attention) is not None and a.index_head_dim]
    if not dsa or any(layers[i].attention.kind is not AttentionKind.MLA for i in dsa):  # type: ignore[union-attr]
        return
    n = len(layers)
    pattern = f.raw("index_topk_pattern")
    if pattern is not None:
        if not isinstance(pattern, str) or len(pattern) != n or set(pattern) - {"F", "S"}:
            raise f.error("index_topk_pattern", f"must be a string of {n} characters F (full) or S (shared)")
        f.used.append("index_topk_pattern")
        scheduled = [c == "S" for c in pattern]
    else:
        freq = f.integer("index_topk_freq") or 1
        offset = f.integer("index_skip_topk_offset", minimum=0, maximum=MAX_LAYERS)
        offset = 2 if offset is None else offset
        scheduled = [max(i - offset + 1, 0) % freq != 0 for i in range(n)]
    listed = f.str_list("indexer_types", n)
    if listed is not None:
        if set(listed) - {"full", "shared"}:
            raise f.error("indexer_types", "must list 'full' or 'shared' for each layer")
        if [t == "shared" for t in listed] != scheduled:
            raise f.error(
                "indexer_types",
                "disagrees with index_topk_freq / index_skip_topk_offset / index_topk_pattern: transformers "
                "reads the list and vLLM the schedule, so they would key different layers; make them agree",
            )
    shared = [i for i in dsa if scheduled[i]]
    if not shared:
        return
    if 0 in shared:
        raise f.error("indexer_types", "makes layer 0 shared: there is no earlier layer's top-k to reuse")
    for i in shared:
        attn = layers[i].attention
        assert attn is not None
        layers[i] = msgspec.structs.replace(layers[i], attention=msgspec.structs.replace(attn, index_shared=True))
    notes.append(
        f"{len(shared)} of {len(dsa)} DSA layers reuse an earlier layer's top-k and keep no indexer key "
        "(indexer_types 'shared'; engines that key every layer say so)"
    )


def config_fingerprint(spec: ArchSpec) -> Sequence[str]:
    """Short human descriptions of each layer group, for summaries and logs."""
    return [f"{n} x {layer.kind}" for layer, n in spec.layer_groups()]
