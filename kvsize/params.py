"""Parameter count from a Hugging Face config.json dict, for when no weight-size metadata is available.

The count mirrors the `nn.Parameter`s the transformers implementation of each family creates (weights and
biases; no buffers such as rotary `inv_freq`), so for the families covered it is exact, not a rule of thumb.
Families are recognised by the fields a config carries (`block_configs`, `hybrid_override_pattern`,
`kv_lora_rank`, `num_local_experts`, ...) with `model_type` deciding only the small conventions a config does
not spell out (LayerNorm vs RMSNorm, gated vs plain MLP, which projections carry biases).

Pure: no I/O. Every assumption that changes the number is returned in `ParamEstimate.notes`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import msgspec

from kvsize.config import GEMMA3N_MODEL_TYPES, class_defaults
from kvsize.errors import ConfigError
from kvsize.text import shown

__all__ = ["ParamEstimate", "estimate_parameters"]


_WEIGHTS_HINT = "Give the weights' size with --weights-mem (15GiB, ...), or leave out --gpu to size the KV cache alone."


class ParamEstimate(msgspec.Struct, frozen=True):
    """Parameters of one checkpoint, counted from its config."""

    total: int
    """Every parameter: embeddings, lm_head unless tied, norms, biases, all MoE experts, vision if counted."""
    active: int | None
    """Per-token parameters of MoE models (top-k routed experts + shared + all dense parts); else None."""
    breakdown: dict[str, int]
    """total split by kind: embeddings, lm_head, attention, mlp, experts, mamba, norms, vision, audio, other."""
    notes: tuple[str, ...]
    """Assumptions made and parts left out (vision tower, MTP layers)."""
    left_out: tuple[str, ...] = ()
    """The parts of the checkpoint not counted (towers without a rule), as said in `notes`."""
    layers: tuple[tuple[str, dict[str, int]], ...] = ()
    """Per decoder layer: (its kind, its parameters by kind), for the families counted layer by layer (the
    Llama template, Jamba, Nemotron-H); the rest of `breakdown` is outside the layers. Empty for the others."""


# Where multimodal and wrapper configs keep their language model (transformers `get_text_config`).
_TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")

# transformers config-class defaults for the fields that size the weights, used only when a config leaves the
# field out (configuration_llama.py, configuration_gemma3.py, ...). llava-1.5's text_config names none of the
# Llama-2-7B dims, gemma-3-4b's names no head counts: both rely on these.
# One table of transformers class defaults serves the cache parser and this counter (config.class_defaults).
# PretrainedConfig's own default; the families above and most newer ones override it to False.
_TIE_DEFAULT_TRUE = frozenset(
    {
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "gemma4_text",
        "gpt2",
        "lfm2",
        "starcoder2",
        "zamba2",
        "t5",
        "bart",
        "whisper",
        "ernie4_5_moe",  # Ernie4_5_MoeConfig tie_word_embeddings = True
    }
)

# Families whose transformers modules differ from the Llama template in ways no config field says.
_LAYERNORM_TYPES = frozenset(
    {
        "gpt2",
        "gpt_neox",
        "phi",
        "phi-msft",
        "starcoder2",
        "gpt_bigcode",
        "gptj",
        "gpt_neo",
        "opt",
        "falcon",
        "stablelm",
        "bloom",
    }
)  # LayerNorm: weight + bias
_PLAIN_MLP_TYPES = frozenset(
    {
        "gpt2",
        "gpt_neox",
        "phi",
        "phi-msft",
        "starcoder2",
        "gpt_bigcode",
        "gptj",
        "gpt_neo",
        "opt",
        "falcon",
        "bloom",
        "nemotron",
    }
)  # up + down, no gate
_ALL_BIAS_TYPES = frozenset(
    {"gpt2", "gpt_neox", "phi", "phi-msft", "gpt_bigcode", "gptj", "gpt_neo", "opt", "bloom"}
)  # every projection has a bias
_QKV_BIAS_TYPES = frozenset({"qwen2", "qwen2_moe", "qwen2_vl", "qwen2_5_vl"})  # q, k, v biased, o not
_HEAD_QK_NORM_TYPES = frozenset(
    {"qwen3", "qwen3_moe", "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "gemma3", "gemma3_text", "exaone4"}
)
# q_proj emits queries and an output gate, 2 x heads x head_dim (modeling_qwen3_next.py Qwen3NextAttention,
# modeling_qwen3_5_moe.py Qwen3_5MoeAttention: the width is fixed in code, whatever attn_output_gate says).
_GATED_QUERY_TYPES = frozenset({"qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"})
_FOUR_NORM_TYPES = frozenset({"gemma2", "gemma3", "gemma3_text"})  # pre+post norm around attention and MLP
_ONE_NORM_TYPES = frozenset({"phi", "phi-msft", "gptj"})  # parallel attention + MLP behind one LayerNorm
_LEARNED_POSITION_TYPES = frozenset({"gpt2", "gpt_bigcode", "gpt_neo"})
_LM_HEAD_BIAS_TYPES = frozenset({"phi", "phi-msft"})

_MAX_DIM = 1 << 24
_MAX_LAYERS = 100_000


# ----------------------------------------------------------------------------------------------------------
# Reading fields
# ----------------------------------------------------------------------------------------------------------


class _Cfg:
    """Typed reads of one config dict; a missing or bad field raises ConfigError naming it."""

    def __init__(self, data: Mapping[str, Any], *, where: str = "", defaults: Mapping[str, Any] | None = None):
        self.data = data
        self.where = where  # "text_config." for nested language models
        self.defaults: Mapping[str, Any] = defaults or {}

    def raw(self, *keys: str) -> Any:
        for key in keys:
            if self.data.get(key) is not None:
                return self.data[key]
        for key in keys:
            if self.defaults.get(key) is not None:
                return self.defaults[key]
        return None

    def has(self, *keys: str) -> bool:
        return self.raw(*keys) is not None

    def opt_int(self, *keys: str, minimum: int = 0) -> int | None:
        value = self.raw(*keys)
        if value is None:
            return None
        key = next((k for k in keys if self.data.get(k) is not None), keys[0])
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value))
            or value != int(value)
        ):
            raise ConfigError(f"config field '{self.where}{key}' must be an integer, got {shown(value)}.")
        if not minimum <= int(value) <= _MAX_DIM * _MAX_DIM:
            raise ConfigError(f"config field '{self.where}{key}' is out of range: {shown(value)}.")
        return int(value)

    def int_(self, *keys: str, default: int | None = None, minimum: int = 1) -> int:
        value = self.opt_int(*keys, minimum=minimum)
        if value is not None:
            return value
        if default is not None:
            return default
        raise ConfigError(
            f"config.json has no '{self.where}{keys[0]}': cannot count the model's parameters", hint=_WEIGHTS_HINT
        )

    def float_(self, *keys: str, default: float | None = None) -> float:
        value = self.raw(*keys)
        if value is None:
            if default is not None:
                return default
            raise ConfigError(
                f"config.json has no '{self.where}{keys[0]}': cannot count the model's parameters", hint=_WEIGHTS_HINT
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"config field '{self.where}{keys[0]}' must be a number, got {shown(value)}.")
        return float(value)

    def bool_(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"config field '{self.where}{key}' must be true or false, got {shown(value)}.")
        return value

    def int_list(self, key: str) -> list[int] | None:
        value = self.raw(key)
        if value is None:
            return None
        if (
            not isinstance(value, Sequence)
            or isinstance(value, str)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        ):
            raise ConfigError(f"config field '{self.where}{key}' must be a list of integers, got {shown(value)}.")
        return list(value)

    def str_list(self, key: str) -> list[str] | None:
        value = self.raw(key)
        if value is None:
            return None
        if not isinstance(value, Sequence) or isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"config field '{self.where}{key}' must be a list of strings, got {shown(value)}.")
        return list(value)

    def layers(self) -> int:
        n = self.int_("num_hidden_layers", "n_layer", "num_layers", "n_layers")
        if n > _MAX_LAYERS:
            raise ConfigError(f"config field '{self.where}num_hidden_layers' is out of range: {n}.")
        return n

    def hidden(self) -> int:
        return self.int_("hidden_size", "n_embd", "d_model")

    def heads(self) -> int:
        return self.int_("num_attention_heads", "n_head", "n_heads")

    def kv_heads(self) -> int:
        return self.int_("num_key_value_heads", "n_head_kv", "num_kv_heads", default=self.heads())

    def head_dim(self) -> int:
        explicit = self.opt_int("head_dim", "attention_head_dim")
        if explicit is not None:
            return explicit
        hidden, heads = self.hidden(), self.heads()
        if hidden % heads:
            raise ConfigError(
                f"config.json has no '{self.where}head_dim' and hidden_size {hidden} is not divisible by "
                f"num_attention_heads {heads}."
            )
        return hidden // heads

    def vocab(self) -> int:
        return self.int_("vocab_size", "padded_vocab_size")


class _Acc:
    """Running total by kind, plus the routed-expert parameters a token does not use."""

    def __init__(self) -> None:
        self.parts: dict[str, int] = {}
        self.inactive = 0
        self.moe = False
        self.notes: list[str] = []
        self.left_out: list[str] = []
        self.layers: list[tuple[str, dict[str, int]]] = []

    def leave_out(self, note: str) -> None:
        """A part of the checkpoint the count does not include (a tower it has no rule for), said as a note."""
        self.notes.append(note)
        self.left_out.append(note.rstrip("."))

    def add(self, kind: str, n: int) -> None:
        if n:
            self.parts[kind] = self.parts.get(kind, 0) + n


def _count_layers(
    acc: _Acc, signatures: Sequence[Hashable], count_layer: Callable[[int], None], labels: Sequence[str] = ()
) -> int:
    """Add every layer's parameters, counting each distinct layer (by its signature) once.

    The first layer of each signature is counted by `count_layer(index)`, in order, so the breakdown's keys
    appear as they would layer by layer; the parts it added are then multiplied by its repeats. A
    100,000-layer config costs what its distinct layers do. Returns the last layer's parameters."""
    counted: dict[Hashable, tuple[dict[str, int], int]] = {}
    repeats: dict[Hashable, int] = {}
    for index, signature in enumerate(signatures):
        if signature in counted:
            repeats[signature] = repeats.get(signature, 0) + 1
            continue
        parts_before, inactive_before = dict(acc.parts), acc.inactive
        count_layer(index)
        added = {kind: n - parts_before.get(kind, 0) for kind, n in acc.parts.items() if n != parts_before.get(kind)}
        counted[signature] = (added, acc.inactive - inactive_before)
    # Each layer's parts (one shared dict per signature), labelled with its kind, for pricing layer by layer.
    acc.layers = [(labels[i] if labels else "", counted[sig][0]) for i, sig in enumerate(signatures)]
    for signature, times in repeats.items():
        added, inactive = counted[signature]
        for kind, n in added.items():
            acc.parts[kind] += n * times
        acc.inactive += inactive * times
    return sum(counted[signatures[-1]][0].values()) if signatures else 0


# ----------------------------------------------------------------------------------------------------------
# Public entry point
# ----------------------------------------------------------------------------------------------------------


def estimate_parameters(raw: Mapping[str, Any]) -> ParamEstimate:
    """Count the parameters of the model a config.json describes.

    total = embeddings + lm_head (unless tied) + sum over layers of (attention + MLP/experts/mixer + norms)
            + final norm (+ the vision tower where its config gives every size it needs).
    active (MoE only) = total - sum over MoE layers of (experts - top_k) x parameters of one expert.

    Raises:
        ConfigError: a field the count needs is missing or malformed (the message names it).
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"config.json must be a JSON object, got {type(raw).__name__}.")
    acc = _Acc()
    text_raw: Mapping[str, Any] = raw
    where = ""
    for key in _TEXT_CONFIG_KEYS:
        nested = raw.get(key)
        if isinstance(nested, Mapping):
            text_raw, where = nested, f"{key}."
            break
    model_type = str(text_raw.get("model_type") or raw.get("model_type") or "")
    cfg = _Cfg(text_raw, where=where, defaults=class_defaults(model_type))
    tie = tie_word_embeddings(cfg.data, raw, model_type)

    if model_type in GEMMA3N_MODEL_TYPES:
        # modeling_gemma3n.py: per-layer MLP widths, AltUp and LAuReL blocks in every layer, and towers built by
        # name (timm MobileNetV5, a Conformer audio encoder) whose sizes no config field gives.
        raise ConfigError(
            "kvsize cannot count Gemma 3n's weights from its config (per-layer intermediate_size, AltUp and LAuReL "
            "blocks, and vision and audio towers that timm and the modelling code build by name)",
            hint="Pass --weights-mem with the checkpoint's size, or give a hub id or local folder whose safetensors "
            "kvsize can read.",
        )
    if model_type == "t5":
        _count_t5(cfg, acc, tie=tie)
    elif model_type == "bart":
        _count_bart(cfg, acc, tie=tie)
    elif model_type == "whisper":
        _count_whisper(cfg, acc, tie=tie)
    elif cfg.has("block_configs"):
        _count_nemotron_nas(cfg, acc, tie=tie)
    elif cfg.has("hybrid_override_pattern") or model_type == "nemotron_h":
        _count_nemotron_h(cfg, acc, tie=tie)
    elif model_type == "zamba2" or cfg.has("num_mem_blocks"):
        _count_zamba2(cfg, acc, tie=tie)
    elif model_type in ("mamba2",) or (cfg.has("num_heads", "n_groups") and not cfg.has("num_attention_heads")):
        _count_mamba2(cfg, acc, tie=tie)
    elif model_type in ("mamba", "falcon_mamba"):
        _count_mamba1(cfg, acc, tie=tie)
    elif model_type == "jamba" or cfg.has("expert_layer_period"):
        _count_jamba(cfg, acc, tie=tie)
    elif model_type == "gemma4_text" and cfg.str_list("layer_types") is not None:
        _count_gemma4(cfg, acc, tie=tie)
    elif model_type == "lfm2":
        _count_lfm2(cfg, acc, tie=tie)
    else:
        _count_decoder(cfg, acc, model_type=model_type, tie=tie)
    _count_per_layer_embeddings(cfg, acc)

    _count_vision(raw, cfg, acc, model_type=str(raw.get("model_type") or ""))
    _count_audio(raw, cfg, acc)

    total = sum(acc.parts.values())
    active = total - acc.inactive if acc.moe else None
    return ParamEstimate(
        total=total,
        active=active,
        breakdown=dict(acc.parts),
        notes=tuple(acc.notes),
        left_out=tuple(acc.left_out),
        layers=tuple(acc.layers),
    )


def _count_lfm2(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """LFM2 / LFM2.5 (transformers 5.24 models/lfm2/modeling_lfm2.py), layer by layer from layer_types: a
    "full_attention" layer has bias-free q/k/v/out projections and q/k layernorms of head_dim; a "conv" layer is
    Lfm2ShortConv (in_proj hidden -> 3 hidden, a depthwise Conv1d of conv_L_cache taps, out_proj; biased when
    conv_bias). Every layer has the SwiGLU feed-forward (Lfm2MLP: with block_auto_adjust_ff_dim the width is
    int(2 x intermediate_size / 3), times block_ffn_dim_multiplier and rounded up to block_multiple_of when a
    multiplier is given) and two norms; embedding_norm at the end; embeddings tied by default (tie_embedding)."""
    hidden, layers = cfg.hidden(), cfg.layers()
    kinds = cfg.str_list("layer_types") or []
    if len(kinds) != layers or not set(kinds) <= {"conv", "full_attention"}:
        raise ConfigError(
            f"config field '{cfg.where}layer_types' must name {layers} layers, each 'conv' or 'full_attention'."
        )
    heads, kv, head_dim = cfg.heads(), cfg.kv_heads(), cfg.head_dim()
    inter = cfg.int_("intermediate_size", "block_ff_dim")
    if cfg.bool_("block_auto_adjust_ff_dim", True):
        inter = int(2 * inter / 3)
        # Lfm2Config's block_ffn_dim_multiplier defaults to 1.0; only an explicit null skips the rounding
        given = "block_ffn_dim_multiplier" in cfg.data
        if not given or cfg.raw("block_ffn_dim_multiplier") is not None:
            multiple = cfg.int_("block_multiple_of", default=256)
            inter = int(cfg.float_("block_ffn_dim_multiplier", default=1.0) * inter)
            inter = multiple * ((inter + multiple - 1) // multiple)
    conv_bias, taps = cfg.bool_("conv_bias", False), cfg.int_("conv_L_cache", default=3)
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)

    def count_layer(index: int) -> None:
        if kinds[index] == "full_attention":
            attn = 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim + 2 * head_dim
            acc.add("attention", attn)
        else:
            conv = _linear(hidden, 3 * hidden, conv_bias) + hidden * taps + (hidden if conv_bias else 0)
            acc.add("other", conv + _linear(hidden, hidden, conv_bias))
        acc.add("mlp", _mlp(hidden, inter, gated=True, bias=False))
        acc.add("norms", 2 * hidden)

    _count_layers(acc, kinds, count_layer, kinds)
    acc.add("norms", hidden)


def _count_gemma4(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """Gemma 4's language model (transformers 5.24 modeling_gemma4.py), layer by layer from layer_types:
    Gemma4TextAttention takes global_head_dim on full layers, and num_global_key_value_heads there with
    attention_k_eq_v (which also drops v_proj); q_norm and k_norm carry a weight, v_norm none; the last
    num_kv_shared_layers layers reuse earlier KV and have no k_proj, v_proj or k_norm, and with
    use_double_wide_mlp an MLP twice as wide. Four norms per layer; with enable_moe_block every layer adds a
    Gemma4TextRouter (proj, scale, per_expert_scale), Gemma4TextExperts (fused gate_up and down) and three norms."""
    hidden, layers = cfg.hidden(), cfg.layers()
    kinds = cfg.str_list("layer_types") or []
    if len(kinds) != layers:
        raise ConfigError(
            f"config field '{cfg.where}layer_types' has {len(kinds)} layers, num_hidden_layers is {layers}."
        )
    heads, kv, head_dim = cfg.heads(), cfg.kv_heads(), cfg.head_dim()
    global_dim = cfg.int_("global_head_dim", default=head_dim)
    k_eq_v = cfg.bool_("attention_k_eq_v", False)
    global_kv = cfg.int_("num_global_key_value_heads", default=kv) if k_eq_v else kv
    first_shared = layers - cfg.int_("num_kv_shared_layers", default=0, minimum=0)
    inter, bias = cfg.int_("intermediate_size"), cfg.bool_("attention_bias", False)
    wide = cfg.bool_("use_double_wide_mlp", False)
    moe = cfg.bool_("enable_moe_block", False)
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)

    def count_layer(index: int) -> None:
        full, shared = kinds[index] == "full_attention", index >= first_shared
        dim, kv_heads = (global_dim, global_kv) if full else (head_dim, kv)
        attention = _linear(hidden, heads * dim, bias) + dim + _linear(heads * dim, hidden, bias)  # q, q_norm, o
        if not shared:  # k_proj and k_norm; v_proj unless V is K
            attention += _linear(hidden, kv_heads * dim, bias) + dim
            attention += 0 if (k_eq_v and full) else _linear(hidden, kv_heads * dim, bias)
        acc.add("attention", attention)
        acc.add("mlp", _mlp(hidden, inter * (2 if wide and shared else 1), gated=True, bias=False))
        acc.add("norms", 4 * hidden)
        if moe:
            experts, expert_inter = cfg.int_("num_experts"), cfg.int_("moe_intermediate_size")
            top_k = min(cfg.int_("top_k_experts", "num_experts_per_tok"), experts)
            per_expert = 3 * expert_inter * hidden
            acc.add("experts", experts * per_expert)
            acc.inactive += (experts - top_k) * per_expert
            acc.add("other", hidden * experts + hidden + experts)  # router proj, scale, per_expert_scale
            acc.add("norms", 3 * hidden)
            acc.moe = True

    signatures = [(k, i >= first_shared) for i, k in enumerate(kinds)]
    _count_layers(acc, signatures, count_layer, kinds)
    acc.add("norms", hidden)


def _count_per_layer_embeddings(cfg: _Cfg, acc: _Acc) -> None:
    """Gemma 3n / Gemma 4 per-layer embeddings (hidden_size_per_layer_input P; transformers 5.24
    Gemma4TextModel / Gemma3nTextModel): embed_tokens_per_layer (vocab_size_per_layer_input x layers x P),
    per_layer_model_projection (hidden x layers x P) and its norm (P), and in every layer per_layer_input_gate
    (hidden x P), per_layer_projection (P x hidden) and post_per_layer_input_norm (hidden)."""
    width = cfg.opt_int("hidden_size_per_layer_input")  # 0 on the larger Gemma 4: no per-layer inputs
    if not width:
        return
    hidden, layers = cfg.hidden(), cfg.layers()
    vocab = cfg.int_("vocab_size_per_layer_input", "vocab_size")
    acc.add("embeddings", vocab * layers * width)
    acc.add("other", hidden * layers * width + width + layers * (2 * hidden * width + hidden))


def tie_word_embeddings(
    data: Mapping[str, Any], top: Mapping[str, Any], model_type: str, *, strict: bool = True
) -> bool:
    """tie_word_embeddings: the language config's value, else the wrapper's, else the family default. `strict`:
    a value that is not true or false is refused (the parameter count needs it); otherwise it is passed over."""
    for source in (data, top):
        # Lfm2Config reads `tie_embedding` as tie_word_embeddings (configuration_lfm2.py)
        value = source.get("tie_word_embeddings", source.get("tie_embedding") if model_type == "lfm2" else None)
        if value is not None:
            if not isinstance(value, bool):
                if not strict:
                    continue
                raise ConfigError(f"config field 'tie_word_embeddings' must be true or false, got {shown(value)}.")
            return value
    return model_type in _TIE_DEFAULT_TRUE or str(top.get("model_type")) in _TIE_DEFAULT_TRUE


def _embed_and_head(cfg: _Cfg, acc: _Acc, *, tie: bool, hidden: int, extra_rows: int = 0) -> None:
    vocab = cfg.vocab()
    acc.add("embeddings", (vocab + extra_rows) * hidden)
    if not tie:
        acc.add("lm_head", vocab * hidden)


# ----------------------------------------------------------------------------------------------------------
# Transformer decoders (Llama template and its relatives)
# ----------------------------------------------------------------------------------------------------------


class _Style(msgspec.Struct, frozen=True):
    norm: int  # parameters per norm element: 1 RMSNorm, 2 LayerNorm (weight + bias)
    norms_per_layer: int
    gated: bool
    q_bias: bool
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool


def _style(cfg: _Cfg, model_type: str) -> _Style:
    layernorm = model_type in _LAYERNORM_TYPES or cfg.raw("norm_type") == "layer_norm"
    all_bias = model_type in _ALL_BIAS_TYPES or cfg.bool_("use_bias", False)
    attention_bias = cfg.bool_("attention_bias", model_type == "gpt_neox")  # GPTNeoXConfig defaults it to True
    q_bias = all_bias or attention_bias or model_type in _QKV_BIAS_TYPES or cfg.bool_("qkv_bias", False)
    if model_type in _ONE_NORM_TYPES:
        norms = 1
    elif model_type in _FOUR_NORM_TYPES:
        norms = 4
    else:
        norms = 2
    return _Style(
        norm=2 if layernorm else 1,
        norms_per_layer=norms,
        gated=model_type not in _PLAIN_MLP_TYPES and cfg.raw("mlp_type") != "default",
        q_bias=q_bias,
        o_bias=all_bias or attention_bias,
        mlp_bias=all_bias or cfg.bool_("mlp_bias", False),
        qk_norm=model_type in _HEAD_QK_NORM_TYPES,
    )


def _linear(n_in: int, n_out: int, bias: bool) -> int:
    return n_in * n_out + (n_out if bias else 0)


def _mlp(hidden: int, inter: int, *, gated: bool, bias: bool) -> int:
    if gated:
        return 2 * _linear(hidden, inter, bias) + _linear(inter, hidden, bias)
    return _linear(hidden, inter, bias) + _linear(inter, hidden, bias)


def _attention(cfg: _Cfg, style: _Style, hidden: int, *, model_type: str) -> int:
    """One self-attention block: q, k, v, o projections (+ biases, q/k norms, sinks)."""
    if cfg.has("kv_lora_rank"):
        return _mla(cfg, hidden)
    heads, kv_heads, head_dim = cfg.heads(), cfg.kv_heads(), cfg.head_dim()
    q_out = heads * head_dim * (2 if model_type in _GATED_QUERY_TYPES else 1)
    n = _linear(hidden, q_out, style.q_bias) + 2 * _linear(hidden, kv_heads * head_dim, style.q_bias)
    n += _linear(heads * head_dim, hidden, style.o_bias)
    if style.qk_norm:
        n += 2 * head_dim
    if model_type == "gpt_oss":
        n += heads  # one learned attention-sink logit per head
    return n


def _mla(cfg: _Cfg, hidden: int) -> int:
    """DeepSeek multi-head latent attention (modeling_deepseek_v3.py DeepseekV3Attention)."""
    heads = cfg.heads()
    kv_rank = cfg.int_("kv_lora_rank")
    nope, rope, v_dim = cfg.int_("qk_nope_head_dim"), cfg.int_("qk_rope_head_dim"), cfg.int_("v_head_dim")
    bias = cfg.bool_("attention_bias", False)
    q_rank = cfg.opt_int("q_lora_rank")
    q_head = nope + rope
    # q_a_proj, q_a_layernorm and q_b_proj with a query LoRA rank; a plain q_proj without.
    n = _linear(hidden, q_rank, bias) + q_rank + q_rank * heads * q_head if q_rank else hidden * heads * q_head
    n += _linear(hidden, kv_rank + rope, bias) + kv_rank  # kv_a_proj_with_mqa, kv_a_layernorm
    n += kv_rank * heads * (nope + v_dim)  # kv_b_proj
    n += _linear(heads * v_dim, hidden, bias)  # o_proj
    return n


def _gated_delta_net(cfg: _Cfg, hidden: int) -> int:
    """Qwen3-Next linear-attention layer (modeling_qwen3_next.py Qwen3NextGatedDeltaNet)."""
    k_heads, v_heads = cfg.int_("linear_num_key_heads"), cfg.int_("linear_num_value_heads")
    k_dim, v_dim = cfg.int_("linear_key_head_dim"), cfg.int_("linear_value_head_dim")
    kernel = cfg.int_("linear_conv_kernel_dim")
    key, value = k_heads * k_dim, v_heads * v_dim
    conv_dim = 2 * key + value
    return (
        hidden * (2 * key + 2 * value)  # in_proj_qkvz
        + hidden * 2 * v_heads  # in_proj_ba
        + conv_dim * kernel  # depthwise conv1d, no bias
        + 2 * v_heads  # dt_bias, A_log
        + v_dim  # gated RMSNorm over one value head
        + value * hidden  # out_proj
    )


class _Moe(msgspec.Struct, frozen=True):
    experts: int
    top_k: int
    expert_inter: int
    shared_inter: int
    shared_gate: bool
    expert_bias: bool
    router_bias: bool
    score_bias: bool
    shared_bias: bool


def _moe_spec(cfg: _Cfg, model_type: str) -> _Moe | None:
    experts = cfg.opt_int("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
    if not experts:
        return None
    top_k = cfg.int_("num_experts_per_tok", "experts_per_token", "moe_top_k", "top_k", "moe_k")
    expert_inter = cfg.int_("moe_intermediate_size", "intermediate_size")
    shared_inter = 0
    if cfg.has("n_shared_experts"):  # DeepSeek: the shared experts form one wider MLP
        shared_inter = cfg.int_("n_shared_experts", minimum=0) * expert_inter
    elif cfg.has("shared_expert_intermediate_size"):  # Qwen2-MoE, Qwen3-Next
        shared_inter = cfg.int_("shared_expert_intermediate_size", minimum=0)
    elif cfg.has("moe_num_shared_experts"):  # ERNIE 4.5: one MLP of moe_intermediate_size x shared experts
        shared_inter = cfg.int_("moe_num_shared_experts", minimum=0) * expert_inter
    elif model_type == "llama4_text":  # Llama 4: one shared expert as wide as a routed one
        shared_inter = expert_inter
    return _Moe(
        experts=experts,
        top_k=min(top_k, experts),
        expert_inter=expert_inter,
        shared_inter=shared_inter,
        shared_gate=cfg.has("shared_expert_intermediate_size") and shared_inter > 0,
        expert_bias=model_type == "gpt_oss",
        router_bias=model_type == "gpt_oss",
        # DeepSeek-V3 e_score_correction_bias; ERNIE 4.5 Ernie4_5_MoeStatics.e_score_correction_bias, an
        # nn.Parameter (1 x experts) in every MoE layer (modeling_ernie4_5_moe.py)
        score_bias=cfg.raw("topk_method") == "noaux_tc" or model_type == "ernie4_5_moe",
        # ERNIE 4.5 shared experts are an Ernie4_5_MoeMLP, biased when use_bias is true; the others have none
        shared_bias=model_type == "ernie4_5_moe" and cfg.bool_("use_bias", False),
    )


def _moe_layers(cfg: _Cfg, layers: int, model_type: str) -> set[int]:
    """Indices of the layers whose MLP is a mixture of experts."""
    # transformers 5 configs name each layer's MLP ("dense" / "sparse"); MiniMax-M3's hub config lists it as
    # moe_layer_freq 0 / 1 per layer (MiniMaxM3VLTextConfig.__post_init__: mlp_layer_types from it)
    for key, sparse in (("mlp_layer_types", "sparse"), ("moe_layer_freq", 1)):
        named = cfg.raw(key)
        if isinstance(named, list):
            if len(named) != layers or any(v not in ("dense", "sparse", 0, 1) or isinstance(v, bool) for v in named):
                raise ConfigError(
                    f"config field '{cfg.where}{key}' must name dense or sparse for each of the {layers} layers."
                )
            return {i for i, v in enumerate(named) if v == sparse}
    if cfg.has("first_k_dense_replace") or cfg.has("moe_layer_freq"):  # DeepSeek
        first = cfg.int_("first_k_dense_replace", default=0, minimum=0)
        freq = cfg.int_("moe_layer_freq", default=1)
        return {i for i in range(layers) if i >= first and i % freq == 0}
    explicit = cfg.int_list("moe_layers")
    if explicit is not None:
        return set(explicit)
    if cfg.has("interleave_moe_layer_step"):  # Llama 4: every step-th layer, counting from step - 1
        step = cfg.int_("interleave_moe_layer_step")
        return set(range(step - 1, layers, step))
    if cfg.has("moe_layer_start_index") or cfg.has("moe_layer_interval"):
        # ERNIE 4.5 (modeling_ernie4_5_moe.py Ernie4_5_MoeDecoderLayer): (i + 1) % moe_layer_interval == 0 and
        # moe_layer_start_index <= i <= moe_layer_end_index (-1: the last layer, Ernie4_5_MoeConfig.__post_init__)
        start = cfg.int_("moe_layer_start_index", default=1, minimum=0)
        interval = cfg.int_("moe_layer_interval", default=1)
        end = cfg.raw("moe_layer_end_index")
        last = layers - 1 if end in (None, -1) else cfg.int_("moe_layer_end_index", minimum=0)
        return {i for i in range(layers) if (i + 1) % interval == 0 and start <= i <= last}
    if cfg.has("decoder_sparse_step") or cfg.has("mlp_only_layers"):  # Qwen2/3-MoE
        step = cfg.int_("decoder_sparse_step", default=1)
        dense_only = set(cfg.int_list("mlp_only_layers") or [])
        return {i for i in range(layers) if i not in dense_only and (i + 1) % step == 0}
    return set(range(layers))


def _moe_block(cfg: _Cfg, acc: _Acc, moe: _Moe, hidden: int, style: _Style) -> None:
    per_expert = _mlp(hidden, moe.expert_inter, gated=True, bias=False)
    if moe.expert_bias:
        per_expert += 2 * moe.expert_inter + hidden
    acc.add("experts", moe.experts * per_expert)
    acc.inactive += (moe.experts - moe.top_k) * per_expert
    acc.add("other", _linear(hidden, moe.experts, moe.router_bias) + (moe.experts if moe.score_bias else 0))
    if moe.shared_inter:
        acc.add("mlp", _mlp(hidden, moe.shared_inter, gated=True, bias=moe.shared_bias))
        if moe.shared_gate:
            acc.add("mlp", hidden)  # shared_expert_gate: Linear(hidden, 1)
    acc.moe = True


def _count_decoder(cfg: _Cfg, acc: _Acc, *, model_type: str, tie: bool) -> None:
    style = _style(cfg, model_type)
    hidden, layers = cfg.hidden(), cfg.layers()
    extra_rows = 8 if model_type == "mllama_text_model" else 0  # MllamaTextModel: vocab_size + 8 embeddings
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden, extra_rows=extra_rows)
    if not tie and (
        model_type in _LM_HEAD_BIAS_TYPES or (model_type == "ernie4_5_moe" and cfg.bool_("use_bias", False))
    ):
        acc.add("lm_head", cfg.vocab())  # ERNIE 4.5: lm_head = nn.Linear(..., bias=config.use_bias)
    if model_type in _LEARNED_POSITION_TYPES:
        acc.add("embeddings", cfg.int_("n_positions", "max_position_embeddings") * hidden)

    moe = _moe_spec(cfg, model_type)
    moe_layers = _moe_layers(cfg, layers, model_type) if moe else set()
    # Only layers without experts need the dense MLP width (Qwen3.5-MoE configs have no intermediate_size).
    dense_inter = _dense_inter(cfg, hidden, model_type) if any(i not in moe_layers for i in range(layers)) else 0
    cross = set(cfg.int_list("cross_attention_layers") or [])
    kinds = _layer_kinds(cfg, layers, model_type)
    attn = _attention(cfg, style, hidden, model_type=model_type)

    def count_layer(i: int) -> None:
        if kinds[i] == "linear_attention":
            acc.add("attention", _gated_delta_net(cfg, hidden))
        else:
            acc.add("attention", attn)
            if i in cross:  # Mllama cross-attention layer: q/k norms + attention and MLP tanh gates
                acc.add("attention", 2 * cfg.head_dim())
                acc.add("other", 2)
        if moe is not None and i in moe_layers:
            _moe_block(cfg, acc, moe, hidden, style)
        else:
            acc.add("mlp", _mlp(hidden, dense_inter, gated=style.gated, bias=style.mlp_bias))
        acc.add("norms", style.norms_per_layer * style.norm * hidden)

    # Layers alike (same kind, cross-attention, MoE) have the same parameters.
    signatures = [(kinds[i], i in cross, moe is not None and i in moe_layers) for i in range(layers)]
    last_layer = _count_layers(acc, signatures, count_layer, kinds)
    acc.add("norms", style.norm * hidden)  # final norm
    mtp = cfg.opt_int("num_nextn_predict_layers")
    if mtp:
        # DeepSeek-V3 MTP module: one more decoder layer + enorm, hnorm, eh_proj (2H -> H), shared_head norm,
        # and its own copies of the embedding and output head (the hub checkpoint stores them).
        per_module = last_layer + 3 * hidden + 2 * hidden * hidden + 2 * cfg.vocab() * hidden
        acc.notes.append(
            f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) not counted: "
            f"inference engines skip them; the published checkpoint stores about "
            f"{mtp * per_module / 1e9:.1f}B more parameters."
        )
    mtp_layers = cfg.opt_int("mtp_num_hidden_layers")
    if mtp_layers:  # Qwen3.5: transformers drops the checkpoint's mtp.* weights (_keys_to_ignore_on_load_unexpected)
        acc.notes.append(
            f"{mtp_layers} multi-token-prediction layer(s) (mtp_num_hidden_layers) not counted: inference engines "
            "skip them unless speculative decoding uses them."
        )
    if model_type == "llama4_text" and cfg.bool_("use_qk_norm", False):
        acc.notes.append("Llama 4 QK-norm is a weightless L2 norm: no parameters.")


def _dense_inter(cfg: _Cfg, hidden: int, model_type: str) -> int:
    if model_type == "llama4_text":
        return cfg.int_("intermediate_size_mlp", "intermediate_size")
    inter = cfg.opt_int("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim")
    if inter is not None:
        return inter
    if model_type in _PLAIN_MLP_TYPES or cfg.has("n_embd"):
        return 4 * hidden  # GPT-2 / phi-msft: n_inner None means 4 * n_embd
    return cfg.int_("intermediate_size")


def _layer_kinds(cfg: _Cfg, layers: int, model_type: str) -> list[str]:
    types = cfg.str_list("layer_types")
    if types is not None:
        if len(types) != layers:
            raise ConfigError(
                f"config field '{cfg.where}layer_types' lists {len(types)} layers, num_hidden_layers is {layers}."
            )
        return types
    if model_type in _GATED_QUERY_TYPES or cfg.has("linear_num_value_heads"):
        interval = cfg.int_("full_attention_interval", default=4)
        return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers)]
    return ["full_attention"] * layers


# ----------------------------------------------------------------------------------------------------------
# Nemotron-NAS (DeciLM): per-block attention and FFN sizes
# ----------------------------------------------------------------------------------------------------------


def _deci_ffn_size(ffn_mult: float, hidden: int) -> int:
    # DeciLM rule (modeling_decilm.py `_ffn_mult_to_intermediate_size`): int(2 * mult * hidden / 3),
    # rounded up to a multiple of 256. Llama-3.3-Nemotron-Super-49B: 5.25 * 8192 -> 28672.
    size = int(2 * ffn_mult * hidden / 3)
    return size + (-size) % 256


def _count_nemotron_nas(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    hidden, heads = cfg.hidden(), cfg.heads()
    head_dim = cfg.head_dim()
    blocks = cfg.raw("block_configs")
    if not isinstance(blocks, Sequence) or isinstance(blocks, str) or not blocks:
        raise ConfigError(f"config field '{cfg.where}block_configs' must be a non-empty list of blocks.")
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)
    for i, block in enumerate(blocks):
        if not isinstance(block, Mapping):
            raise ConfigError(f"config field '{cfg.where}block_configs[{i}]' must be an object.")
        attn = _Cfg(block.get("attention") or {}, where=f"{cfg.where}block_configs[{i}].attention.")
        ffn = _Cfg(block.get("ffn") or {}, where=f"{cfg.where}block_configs[{i}].ffn.")
        if not attn.bool_("no_op", False):
            acc.add("norms", hidden)  # input_layernorm
            if attn.bool_("replace_with_linear", False):
                acc.add("attention", hidden * hidden)
            else:
                kv_heads = heads // attn.int_("n_heads_in_group")
                acc.add("attention", 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim)
        if not ffn.bool_("no_op", False):
            acc.add("norms", hidden)  # post_attention_layernorm
            if ffn.bool_("replace_with_linear", False):
                acc.add("mlp", hidden * hidden)
            else:
                inter = _deci_ffn_size(ffn.float_("ffn_mult"), hidden)
                acc.add("mlp", _mlp(hidden, inter, gated=True, bias=cfg.bool_("mlp_bias", False)))
    acc.add("norms", hidden)


# ----------------------------------------------------------------------------------------------------------
# State-space and hybrid models
# ----------------------------------------------------------------------------------------------------------


def _mamba2_mixer(
    *, hidden: int, inner: int, heads: int, groups: int, state: int, kernel: int, bias: bool, conv_bias: bool
) -> int:
    """Mamba2 mixer (modeling_mamba2.py): in_proj, conv1d, dt_bias/A_log/D, gated norm, out_proj."""
    conv_dim = inner + 2 * groups * state
    return (
        _linear(hidden, inner + conv_dim + heads, bias)
        + conv_dim * kernel
        + (conv_dim if conv_bias else 0)
        + 3 * heads
        + inner
        + _linear(inner, hidden, bias)
    )


def _count_mamba2(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    hidden, layers = cfg.hidden(), cfg.layers()
    heads = cfg.int_("num_heads")
    head_dim = cfg.int_("head_dim", default=64)
    inner = heads * head_dim
    mixer = _mamba2_mixer(
        hidden=hidden,
        inner=inner,
        heads=heads,
        groups=cfg.int_("n_groups", default=1),
        state=cfg.int_("state_size"),
        kernel=cfg.int_("conv_kernel", default=4),
        bias=cfg.bool_("use_bias", False),
        conv_bias=cfg.bool_("use_conv_bias", True),
    )
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)
    acc.add("mamba", layers * mixer)
    acc.add("norms", (layers + 1) * hidden)


def _mamba1_mixer(
    hidden: int, inner: int, state: int, kernel: int, dt_rank: int, *, proj_bias: bool, conv_bias: bool
) -> int:
    """A Mamba-1 mixer (MambaMixer): in_proj, depthwise conv1d, x_proj, dt_proj (biased), A_log, D, out_proj."""
    return (
        _linear(hidden, 2 * inner, proj_bias)
        + inner * kernel
        + (inner if conv_bias else 0)
        + inner * (dt_rank + 2 * state)
        + _linear(dt_rank, inner, True)  # x_proj, dt_proj
        + inner * state
        + inner  # A_log, D
        + _linear(inner, hidden, proj_bias)
    )


def _count_mamba1(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    hidden, layers = cfg.hidden(), cfg.layers()
    inner = cfg.int_("intermediate_size", default=2 * hidden)
    state, kernel = cfg.int_("state_size", default=16), cfg.int_("conv_kernel", default=4)
    dt_rank = cfg.int_("time_step_rank", default=math.ceil(hidden / 16))
    bias, conv_bias = cfg.bool_("use_bias", False), cfg.bool_("use_conv_bias", True)
    mixer = _mamba1_mixer(hidden, inner, state, kernel, dt_rank, proj_bias=bias, conv_bias=conv_bias)
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)
    acc.add("mamba", layers * mixer)
    acc.add("norms", (layers + 1) * hidden)


def _count_jamba(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """Jamba (transformers modeling_jamba.py JambaModel, JambaAttentionDecoderLayer, JambaMambaDecoderLayer).

    Layer i is attention when i % attn_layer_period == attn_layer_offset, else a Mamba-1 mixer
    (JambaConfig.layers_block_type). Its feed-forward is a JambaSparseMoeBlock when
    `config.layers_num_experts[i] > 1`, i.e. num_experts > 1 and i % expert_layer_period == expert_layer_offset,
    else a dense gated JambaMLP (JambaConfig.layers_num_experts). Both layer kinds carry input_layernorm and
    pre_ff_layernorm (RMSNorm)."""
    hidden, layers = cfg.hidden(), cfg.layers()
    attn_period = cfg.int_("attn_layer_period", default=8)
    attn_offset = cfg.int_("attn_layer_offset", default=4, minimum=0)
    expert_period = cfg.int_("expert_layer_period", default=2)
    expert_offset = cfg.int_("expert_layer_offset", default=1, minimum=0)
    experts = cfg.int_("num_experts", "num_local_experts", default=16)
    top_k = min(cfg.int_("num_experts_per_tok", default=2), experts)
    inter = cfg.int_("intermediate_size", default=14336)
    heads, kv_heads, head_dim = cfg.heads(), cfg.kv_heads(), cfg.head_dim()
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim  # q, k, v, o: no biases

    # JambaMambaMixer: in_proj, depthwise conv1d, x_proj, dt_proj (biased), A_log, D, out_proj and the
    # dt/b/c RMSNorms. mamba_dt_rank "auto" is ceil(hidden / 16) (JambaConfig.__post_init__).
    inner = cfg.int_("mamba_expand", default=2) * hidden
    state, kernel = cfg.int_("mamba_d_state", default=16), cfg.int_("mamba_d_conv", default=4)
    dt_rank = math.ceil(hidden / 16) if cfg.raw("mamba_dt_rank") in (None, "auto") else cfg.int_("mamba_dt_rank")
    proj_bias, conv_bias = cfg.bool_("mamba_proj_bias", False), cfg.bool_("mamba_conv_bias", True)
    mixer = _mamba1_mixer(hidden, inner, state, kernel, dt_rank, proj_bias=proj_bias, conv_bias=conv_bias)
    mixer += dt_rank + 2 * state  # dt_layernorm, b_layernorm, c_layernorm
    per_expert = _mlp(hidden, inter, gated=True, bias=False)

    def is_attention(i: int) -> bool:
        return i % attn_period == attn_offset

    def is_moe(i: int) -> bool:
        return experts > 1 and i % expert_period == expert_offset

    def count_layer(i: int) -> None:
        if is_attention(i):
            acc.add("attention", attention)
        else:
            acc.add("mamba", mixer)
        if is_moe(i):
            acc.add("experts", experts * per_expert)
            acc.add("other", experts * hidden)  # JambaTopKRouter.weight, no bias
            acc.inactive += (experts - top_k) * per_expert
            acc.moe = True
        else:
            acc.add("mlp", per_expert)  # JambaMLP: gate, up, down
        acc.add("norms", 2 * hidden)

    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)
    labels = ["attention" if is_attention(i) else "mamba" for i in range(layers)]
    _count_layers(acc, [(is_attention(i), is_moe(i)) for i in range(layers)], count_layer, labels)
    acc.add("norms", hidden)  # final_layernorm


# hybrid_override_pattern letters and the transformers 5 layers_block_type names they stand for
# (configuration_nemotron_h.py _pattern_to_list).
_NEMOTRON_H_KINDS = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
_NEMOTRON_H_NAMES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "attention": "attention",
    "full_attention": "attention",
    "mlp": "mlp",
    "moe": "moe",
}


def _nemotron_h_kinds(cfg: _Cfg, layers: int) -> list[str]:
    names = cfg.str_list("layers_block_type")
    if names is not None and not cfg.has("hybrid_override_pattern"):
        if len(names) != layers or any(n not in _NEMOTRON_H_NAMES for n in names):
            raise ConfigError(
                f"config field '{cfg.where}layers_block_type' must list all {layers} layers as one of "
                f"{', '.join(sorted(_NEMOTRON_H_NAMES))}."
            )
        return [_NEMOTRON_H_NAMES[n] for n in names]
    pattern = cfg.raw("hybrid_override_pattern")
    if not isinstance(pattern, str):
        raise ConfigError(
            f"config.json has no '{cfg.where}hybrid_override_pattern' (or layers_block_type) string: cannot count "
            "the model's parameters."
        )
    if len(pattern) != layers:
        raise ConfigError(
            f"config field '{cfg.where}hybrid_override_pattern' has {len(pattern)} layers, "
            f"num_hidden_layers is {layers}."
        )
    for ch in pattern:
        if ch not in _NEMOTRON_H_KINDS:
            raise ConfigError(
                f"config field '{cfg.where}hybrid_override_pattern' has layer kind {shown(ch)}, which kvsize "
                "cannot count (known: M, *, -, E)."
            )
    return [_NEMOTRON_H_KINDS[ch] for ch in pattern]


def _count_nemotron_h(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """Nemotron-H (modeling_nemotron_h.py): one mixer per layer, chosen by hybrid_override_pattern
    (M Mamba2, * attention, - MLP, E mixture of experts), each behind one RMSNorm."""
    hidden = cfg.hidden()
    names = cfg.str_list("layers_block_type")
    # Nemotron-3 Ultra gives its layers only as layers_block_type (transformers 5.24 NemotronHConfig derives
    # num_hidden_layers from its length)
    layers = len(names) if names is not None and not cfg.has("num_hidden_layers") else cfg.layers()
    kinds = _nemotron_h_kinds(cfg, layers)
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)
    bias = cfg.bool_("attention_bias", False)
    mlp_bias = cfg.bool_("mlp_bias", False)

    def count_layer(index: int) -> None:
        kind = kinds[index]
        acc.add("norms", hidden)
        if kind == "mamba":
            heads = cfg.int_("mamba_num_heads")
            acc.add(
                "mamba",
                _mamba2_mixer(
                    hidden=hidden,
                    inner=heads * cfg.int_("mamba_head_dim"),
                    heads=heads,
                    groups=cfg.int_("n_groups", default=1),
                    state=cfg.int_("ssm_state_size"),
                    kernel=cfg.int_("conv_kernel", default=4),
                    bias=cfg.bool_("use_bias", False),
                    conv_bias=cfg.bool_("use_conv_bias", True),
                ),
            )
        elif kind == "attention":
            heads, kv_heads = cfg.heads(), cfg.kv_heads()
            q_width, kv_width = heads * cfg.head_dim(), kv_heads * cfg.head_dim()
            acc.add(
                "attention",
                _linear(hidden, q_width, bias) + 2 * _linear(hidden, kv_width, bias) + _linear(q_width, hidden, bias),
            )
        elif kind == "mlp":
            acc.add("mlp", _mlp(hidden, cfg.int_("intermediate_size"), gated=False, bias=mlp_bias))
        else:
            _nemotron_h_moe(cfg, acc, hidden=hidden, bias=mlp_bias)

    _count_layers(acc, kinds, count_layer, kinds)  # one count per distinct layer kind
    acc.add("norms", hidden)
    mtp = cfg.opt_int("num_nextn_predict_layers")
    if mtp:  # transformers drops the checkpoint's mtp.* weights (_keys_to_ignore_on_load_unexpected)
        acc.notes.append(f"{mtp} multi-token-prediction layer(s) (num_nextn_predict_layers) not counted.")


def _nemotron_h_moe(cfg: _Cfg, acc: _Acc, *, hidden: int, bias: bool) -> None:
    """NemotronHMoE: a router (experts x hidden; its e_score_correction_bias is a buffer, not a parameter),
    n_routed_experts plain up/down experts (no gate, no bias) working in moe_latent_size when the config gives
    one (then fc1/fc2_latent_proj map hidden <-> latent), and one plain shared MLP of
    moe_shared_expert_intermediate_size."""
    experts = cfg.int_("n_routed_experts", "num_local_experts")
    top_k = min(cfg.int_("num_experts_per_tok"), experts)
    inter = cfg.int_("moe_intermediate_size")
    latent = cfg.opt_int("moe_latent_size", minimum=1)
    width = latent or hidden
    per_expert = 2 * inter * width
    acc.add("experts", experts * per_expert)
    acc.inactive += (experts - top_k) * per_expert
    acc.add("other", experts * hidden)  # gate.weight
    if latent:
        acc.add("other", _linear(hidden, latent, bias) + _linear(latent, hidden, bias))
    acc.add("mlp", _mlp(hidden, cfg.int_("moe_shared_expert_intermediate_size"), gated=False, bias=bias))
    acc.moe = True


def _count_zamba2(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """Zamba2 (modular_zamba2.py): Mamba2 layers + num_mem_blocks shared transformer blocks + adapters."""
    hidden, layers = cfg.hidden(), cfg.layers()
    kinds = cfg.str_list("layers_block_type")
    if kinds is None or len(kinds) != layers:
        raise ConfigError(f"config field '{cfg.where}layers_block_type' must list all {layers} layers.")
    hybrid = sum(1 for k in kinds if k == "hybrid")
    expand = cfg.int_("mamba_expand", "expansion_factor", default=2)
    head_dim = cfg.int_("mamba_headdim", default=64)
    inner = expand * hidden
    heads = cfg.int_("n_mamba_heads", default=inner // head_dim)
    mixer = _mamba2_mixer(
        hidden=hidden,
        inner=inner,
        heads=heads,
        groups=cfg.int_("mamba_ngroups", default=1),
        state=cfg.int_("mamba_d_state", "state_size", default=64),
        kernel=cfg.int_("mamba_d_conv", "conv_dimension", default=4),
        bias=cfg.bool_("add_bias_linear", False),
        conv_bias=cfg.bool_("use_conv_bias", True),
    )
    _embed_and_head(cfg, acc, tie=tie, hidden=hidden)
    acc.add("mamba", layers * mixer)
    acc.add("norms", layers * hidden)  # each Mamba layer's input_layernorm
    # Shared blocks attend over concat(hidden, embeddings): 2 * hidden wide, head_dim = 2 * hidden / heads.
    blocks = cfg.int_("num_mem_blocks", default=1)
    attn_width = 2 * hidden
    attn_heads = cfg.heads()
    kv_heads = cfg.int_("num_key_value_heads", "num_query_groups", default=attn_heads)
    attn_head_dim = attn_width // attn_heads
    inter = cfg.int_("intermediate_size", "ffn_hidden_size", default=4 * hidden)
    rank = cfg.int_("adapter_rank", "lora_rank", default=128)
    per_block = (
        attn_width  # input_layernorm over the concatenation
        + attn_width * attn_heads * attn_head_dim
        + 2 * attn_width * kv_heads * attn_head_dim
        + attn_heads * attn_head_dim * hidden  # o_proj
        + hidden  # pre_ff_layernorm
        + _mlp(hidden, inter, gated=True, bias=False)
    )
    acc.add("attention", blocks * per_block)
    mlp_adapter = cfg.bool_("use_shared_mlp_adapter", cfg.bool_("use_shared_block_lora", True))
    attn_adapter = cfg.bool_("use_shared_attention_adapter", cfg.bool_("use_shared_attention_lora", False))
    per_hybrid = hidden * hidden  # the linear that maps the shared block's output into the Mamba layer
    if mlp_adapter:
        per_hybrid += rank * (hidden + 2 * inter)
    if attn_adapter:
        per_hybrid += 3 * rank * 2 * attn_width
    acc.add("other", hybrid * per_hybrid)
    acc.add("norms", hidden)  # final_layernorm
    acc.notes.append(f"Zamba2: {blocks} shared transformer block(s) counted once, reused by {hybrid} layers.")


# ----------------------------------------------------------------------------------------------------------
# Encoder-decoders: one token embedding shared by encoder, decoder and (tied) output head, stored once
# ----------------------------------------------------------------------------------------------------------


def _count_t5(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """T5 (modeling_t5.py T5ForConditionalGeneration): bias-free q/k/v/o, weight-only T5LayerNorm, a
    relative_attention_bias table (buckets x heads) in the first self-attention of each stack, DenseReluDense
    (wi, wo) or, for feed_forward_proj "gated-*", wi_0, wi_1, wo."""
    d_model, heads = cfg.int_("d_model"), cfg.int_("num_heads")
    inner = heads * cfg.int_("d_kv")
    enc_layers = cfg.int_("num_layers")
    dec_layers = cfg.int_("num_decoder_layers", default=enc_layers)
    proj = cfg.raw("feed_forward_proj") or "relu"
    if not isinstance(proj, str):
        raise ConfigError(f"config field '{cfg.where}feed_forward_proj' must be a string, got {shown(proj)}.")
    ffn = _mlp(d_model, cfg.int_("d_ff"), gated=proj.startswith("gated-"), bias=False)
    attn = 3 * d_model * inner + inner * d_model
    acc.add("embeddings", cfg.vocab() * d_model)  # shared, also encoder/decoder embed_tokens
    if not tie:
        # v1.1 / Flan-T5 checkpoints store lm_head.weight apart (tie_word_embeddings false); transformers 5
        # loads them into a tied head (configuration_t5.py forces tie_word_embeddings = True).
        acc.add("lm_head", cfg.vocab() * d_model)
    acc.add("attention", enc_layers * attn + dec_layers * 2 * attn)  # decoder: self + cross (EncDecAttention)
    acc.add("mlp", (enc_layers + dec_layers) * ffn)
    acc.add("other", 2 * cfg.int_("relative_attention_num_buckets", default=32) * heads)
    acc.add("norms", (2 * enc_layers + 3 * dec_layers + 2) * d_model)  # per sublayer + each final_layer_norm


def _enc_dec_stack(cfg: _Cfg, acc: _Acc, d_model: int, *, decoder: bool, k_bias: bool) -> None:
    """BART / Whisper encoder or decoder layers: biased q/k/v/out_proj (Whisper's k_proj has no bias), fc1/fc2
    with biases, one LayerNorm per sublayer; decoder layers add encoder_attn and its LayerNorm. Plus one more
    LayerNorm per stack (BART layernorm_embedding, Whisper layer_norm)."""
    side = "decoder" if decoder else "encoder"
    layers = cfg.int_(f"{side}_layers", minimum=0)
    attention = 4 * d_model * d_model + (4 if k_bias else 3) * d_model
    acc.add("attention", layers * (2 if decoder else 1) * attention)
    acc.add("mlp", layers * _mlp(d_model, cfg.int_(f"{side}_ffn_dim"), gated=False, bias=True))
    acc.add("norms", (layers * (3 if decoder else 2) + 1) * 2 * d_model)


def _count_bart(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """BART (modeling_bart.py BartForConditionalGeneration): shared embedding, learned positions with 2 extra
    rows per stack (BartLearnedPositionalEmbedding offset), layernorm_embedding per stack, no final norm.
    final_logits_bias is a buffer, not a parameter."""
    d_model, vocab = cfg.int_("d_model"), cfg.vocab()
    positions = cfg.int_("max_position_embeddings") + 2
    acc.add("embeddings", vocab * d_model + 2 * positions * d_model)
    if not tie:
        acc.add("lm_head", vocab * d_model)
    for decoder in (False, True):
        _enc_dec_stack(cfg, acc, d_model, decoder=decoder, k_bias=True)
    acc.notes.append(f"BART final_logits_bias ({vocab} values) is a buffer: not counted.")


def _count_whisper(cfg: _Cfg, acc: _Acc, *, tie: bool) -> None:
    """Whisper (modeling_whisper.py WhisperForConditionalGeneration): audio encoder behind two Conv1d (kernel 3,
    biased), learned encoder and decoder positions, LayerNorm after each stack, proj_out tied to embed_tokens."""
    d_model, vocab = cfg.int_("d_model"), cfg.vocab()
    mel = cfg.int_("num_mel_bins", default=80)
    acc.add("other", 3 * mel * d_model + d_model + 3 * d_model * d_model + d_model)  # conv1, conv2
    positions = cfg.int_("max_source_positions", default=1500) + cfg.int_("max_target_positions", default=448)
    acc.add("embeddings", vocab * d_model + positions * d_model)
    if not tie:
        acc.add("lm_head", vocab * d_model)
    for decoder in (False, True):
        _enc_dec_stack(cfg, acc, d_model, decoder=decoder, k_bias=False)


# ----------------------------------------------------------------------------------------------------------
# Vision towers
# ----------------------------------------------------------------------------------------------------------


# transformers 5.24 vision-config class defaults, for the fields a config leaves out
# (configuration_qwen3_vl.py Qwen3VLVisionConfig; Qwen3VLMoeVisionConfig has the same).
_QWEN3_VL_VISION_DEFAULTS: dict[str, Any] = {
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "in_channels": 3,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 3584,
    "num_position_embeddings": 2304,
    "deepstack_visual_indexes": [8, 16, 24],
}
_VISION_DEFAULTS: dict[str, Mapping[str, Any]] = dict.fromkeys(("qwen3_vl", "qwen3_vl_moe"), _QWEN3_VL_VISION_DEFAULTS)


def _count_vision(top: Mapping[str, Any], text: _Cfg, acc: _Acc, *, model_type: str) -> None:
    vision = top.get("vision_config")
    if not isinstance(vision, Mapping):
        return
    v = _Cfg(vision, where="vision_config.", defaults=_VISION_DEFAULTS.get(model_type))
    vtype = str(vision.get("model_type") or "")
    try:
        if vtype == "pixtral" and model_type in ("llava", "mistral3"):
            projector = (
                _mistral3_projector(top, v, text) if model_type == "mistral3" else _llava_projector(top, v, text)
            )
            n = _pixtral_vision(v) + projector
        elif model_type == "llava" or vtype == "clip_vision_model":
            n = _clip_vision(v) + _llava_projector(top, v, text)
        elif vtype == "siglip2_vision_model" and model_type == "lfm2_vl":
            n = _siglip2_vision(v) + _lfm2_vl_projector(top, v, text)
        elif vtype == "siglip_vision_model" and model_type == "gemma3":
            n = _siglip_vision(v) + v.hidden() * text.hidden() + v.hidden()  # mm_input_projection + soft-emb norm
        elif model_type in ("qwen2_5_vl", "qwen2_vl"):
            n = _qwen_vl_vision(v, text, model_type=model_type)
        elif model_type in ("qwen3_5", "qwen3_5_moe", "qwen3_vl", "qwen3_vl_moe"):
            n = _qwen3_5_vision(v, text)
        elif vtype == "mllama_vision_model":
            n = _mllama_vision(v, text)
        elif vtype == "llama4_vision_model":
            n = _llama4_vision(v, text)
        elif vtype == "gemma4_vision":
            n = _gemma4_vision(v) + v.hidden() * text.hidden()  # Gemma4MultimodalEmbedder.embedding_projection
        else:
            acc.leave_out(f"vision tower ({vtype or 'unknown type'}) not counted.")
            return
    except ConfigError as exc:
        acc.leave_out(f"vision tower not counted: {exc}")
        return
    acc.add("vision", n)
    acc.notes.append(f"vision tower ({vtype or model_type}) and projector counted.")


def _count_audio(top: Mapping[str, Any], text: _Cfg, acc: _Acc) -> None:
    """An audio tower beside the language model, for the families read (Gemma 4's Conformer); else a note."""
    audio = top.get("audio_config")
    if not isinstance(audio, Mapping):
        return
    atype = str(audio.get("model_type") or "")
    if atype != "gemma4_audio":
        acc.leave_out(f"audio tower ({atype or 'unknown type'}) not counted.")
        return
    a = _Cfg(audio, where="audio_config.")
    try:
        n = _gemma4_audio(a) + a.int_("output_proj_dims") * text.hidden()  # its Gemma4MultimodalEmbedder
    except ConfigError as exc:
        acc.leave_out(f"audio tower not counted: {exc}")
        return
    acc.add("audio", n)
    acc.notes.append(f"audio tower ({atype}) and projector counted.")


def _clipped_buffers(c: _Cfg, linears: int) -> int:
    """Gemma4ClippableLinear with use_clipped_linears keeps four scalar bounds (input/output min/max) as
    persistent buffers, so the checkpoint holds them."""
    return 4 * linears if c.bool_("use_clipped_linears", False) else 0


def _gemma4_vision(v: _Cfg) -> int:
    """transformers 5.24 models/gemma4/modeling_gemma4.py Gemma4VisionModel: the patch embedder (a bias-free
    3 x patch^2 -> hidden projection and a (2, position_embedding_size, hidden) position table), per layer q/k/v/o
    projections of heads x head_dim (bias-free), q_norm and k_norm of head_dim (v_norm has no scale), four
    RMSNorms of hidden and a gated bias-free MLP; the pooler has no weights; `standardize` adds std_bias and
    std_scale buffers of hidden."""
    width, layers = v.hidden(), v.layers()
    heads, kv = v.heads(), v.kv_heads()
    head_dim = v.int_("head_dim", default=width // heads)
    patch, positions = v.int_("patch_size"), v.int_("position_embedding_size")
    inter = v.int_("intermediate_size")
    attn = width * heads * head_dim * 2 + width * kv * head_dim * 2 + 2 * head_dim
    layer = attn + 4 * width + 3 * width * inter + _clipped_buffers(v, 7)
    std = 2 * width if v.bool_("standardize", False) else 0
    return 3 * patch * patch * width + 2 * positions * width + layers * layer + std


def _gemma4_audio(a: _Cfg) -> int:
    """transformers 5.24 modeling_gemma4.py Gemma4AudioModel: two 3x3 bias-free Conv2d (1 -> c0 -> c1) each with a
    bias-free LayerNorm, a (c0 // 4 x c1) -> hidden projection; per Conformer layer two feed-forward blocks
    (hidden -> 4 hidden -> hidden, two RMSNorms each), attention (q, k, v, post and relative_k_proj of hidden x
    hidden, per_dim_scale of head_dim), the light conv (hidden -> 2 hidden, hidden -> hidden, a depthwise kernel
    of conv_kernel_size, two RMSNorms) and three RMSNorms; output_proj hidden -> output_proj_dims with a bias."""
    width, layers = a.hidden(), a.layers()
    heads = a.heads()
    channels = a.int_list("subsampling_conv_channels")
    if channels is None or len(channels) != 2 or min(channels) < 1:
        raise ConfigError(f"config field '{a.where}subsampling_conv_channels' must be two positive integers.")
    c0, c1 = channels
    kernel, out = a.int_("conv_kernel_size"), a.int_("output_proj_dims")
    subsample = 9 * c0 + c0 + 9 * c0 * c1 + c1 + (c0 // 4) * c1 * width
    feed_forward = 2 * (8 * width * width + 2 * width)
    attention = 5 * width * width + width // heads
    light_conv = 3 * width * width + width * kernel + 2 * width
    layer = feed_forward + attention + light_conv + 3 * width + _clipped_buffers(a, 10)
    return subsample + layers * layer + width * out + out


def _vit_layer(width: int, inter: int, *, attn_bias: bool = True) -> int:
    """Pre-norm ViT layer with LayerNorms and a plain biased MLP."""
    return 2 * 2 * width + 4 * _linear(width, width, attn_bias) + _mlp(width, inter, gated=False, bias=True)


def _clip_vision(v: _Cfg) -> int:
    width, layers = v.hidden(), v.layers()
    patch, image, channels = v.int_("patch_size"), v.int_("image_size"), v.int_("num_channels", default=3)
    positions = (image // patch) ** 2 + 1
    embeddings = width + channels * patch * patch * width + positions * width  # class, patch conv, positions
    return embeddings + 2 * 2 * width + layers * _vit_layer(width, v.int_("intermediate_size"))  # pre/post LN


def _pixtral_vision(v: _Cfg) -> int:
    """transformers 5.24 models/pixtral/modeling_pixtral.py PixtralVisionModel: a bias-free patch Conv2d, ln_pre
    (RMSNorm), and per layer two RMSNorms, bias-free q/k/v/o of heads x head_dim and a gated bias-free MLP."""
    width, layers = v.hidden(), v.layers()
    heads = v.heads()
    head_dim = v.int_("head_dim", default=width // heads)
    patch, channels = v.int_("patch_size"), v.int_("num_channels", default=3)
    layer = 2 * width + 4 * width * heads * head_dim + 3 * width * v.int_("intermediate_size")
    return channels * patch * patch * width + width + layers * layer


def _mistral3_projector(top: Mapping[str, Any], v: _Cfg, text: _Cfg) -> int:
    """modeling_mistral3.py Mistral3MultiModalProjector: an RMSNorm of the vision width, the patch merger's
    bias-free (width x spatial_merge_size^2) -> width layer, then linear_1 and linear_2 (biased when
    multimodal_projector_bias, default true)."""
    merge = _Cfg(top, where="").int_("spatial_merge_size", default=2)
    bias = top.get("multimodal_projector_bias", True) is not False
    width = v.hidden()
    return (
        width
        + width * merge * merge * width
        + _linear(width, text.hidden(), bias)
        + _linear(text.hidden(), text.hidden(), bias)
    )


def _llava_projector(top: Mapping[str, Any], v: _Cfg, text: _Cfg) -> int:
    bias = top.get("multimodal_projector_bias", True) is not False
    return _linear(v.hidden(), text.hidden(), bias) + _linear(text.hidden(), text.hidden(), bias)


def _siglip_vision(v: _Cfg) -> int:
    width, layers = v.hidden(), v.layers()
    patch, image, channels = v.int_("patch_size"), v.int_("image_size"), v.int_("num_channels", default=3)
    positions = (image // patch) ** 2
    n = _linear(channels * patch * patch, width, True) + positions * width
    n += layers * _vit_layer(width, v.int_("intermediate_size")) + 2 * width  # post_layernorm
    if v.bool_("vision_use_head", True):
        raise ConfigError("SigLIP attention-pooling head is not modelled")
    return n


def _siglip2_vision(v: _Cfg) -> int:
    """transformers 5.24 models/siglip2/modeling_siglip2.py Siglip2VisionModel: a biased patch Linear of
    channels x patch^2, a num_patches x width position table, SigLIP's LayerNorm ViT layers and post_layernorm
    (the attention-pooling head, vision_use_head, is not modelled)."""
    width, layers = v.hidden(), v.layers()
    patch, channels = v.int_("patch_size"), v.int_("num_channels", default=3)
    if v.bool_("vision_use_head", True):
        raise ConfigError("SigLIP2 attention-pooling head is not modelled")
    n = _linear(channels * patch * patch, width, True) + v.int_("num_patches") * width
    return n + layers * _vit_layer(width, v.int_("intermediate_size")) + 2 * width


def _lfm2_vl_projector(top: Mapping[str, Any], v: _Cfg, text: _Cfg) -> int:
    """modeling_lfm2_vl.py Lfm2VlMultiModalProjector: the pixel-unshuffled width (vision width x
    downsample_factor^2), a LayerNorm of it when projector_use_layernorm, then linear_1 to projector_hidden_size
    and linear_2 to the text width (biased when projector_bias)."""
    c = _Cfg(top, where="")
    unshuffled = v.hidden() * c.int_("downsample_factor", default=2) ** 2
    inner = c.int_("projector_hidden_size")
    bias = c.bool_("projector_bias", True)
    norm = 2 * unshuffled if c.bool_("projector_use_layernorm", True) else 0
    return norm + _linear(unshuffled, inner, bias) + _linear(inner, text.hidden(), bias)


def _qwen_vl_vision(v: _Cfg, text: _Cfg, *, model_type: str) -> int:
    """Qwen2.5-VL vision tower (modeling_qwen2_5_vl.py): RMSNorm blocks, gated biased MLP, patch merger."""
    width, depth = v.hidden(), v.int_("depth")
    inter = v.int_("intermediate_size")
    patch, temporal = v.int_("patch_size"), v.int_("temporal_patch_size", default=2)
    channels = v.int_("in_chans", "in_channels", default=3)
    merge = v.int_("spatial_merge_size", default=2)
    out = v.int_("out_hidden_size", default=text.hidden())
    if model_type != "qwen2_5_vl":
        raise ConfigError("Qwen2-VL vision blocks are not modelled")
    block = 2 * width + _linear(width, 3 * width, True) + _linear(width, width, True)
    block += _mlp(width, inter, gated=True, bias=True)
    merged = width * merge * merge
    merger = width + _linear(merged, merged, True) + _linear(merged, out, True)
    return channels * temporal * patch * patch * width + depth * block + merger


def _qwen3_5_vision(v: _Cfg, text: _Cfg) -> int:
    """Qwen3.5 / Qwen3-VL vision tower (modeling_qwen3_5_moe.py Qwen3_5MoeVisionModel, modeling_qwen3_vl.py
    Qwen3VLVisionModel): LayerNorm blocks, plain biased MLP, a learned position table, one patch merger and, per
    deepstack_visual_indexes entry (Qwen3-VL; none in Qwen3.5), a deepstack merger whose LayerNorm takes the
    merged width (Qwen3VLVisionPatchMerger use_postshuffle_norm)."""
    width, depth = v.hidden(), v.int_("depth")
    patch, temporal = v.int_("patch_size"), v.int_("temporal_patch_size", default=2)
    channels = v.int_("in_channels", "in_chans", default=3)
    merged = width * v.int_("spatial_merge_size", default=2) ** 2
    out = v.int_("out_hidden_size", default=text.hidden())
    n = _linear(channels * temporal * patch * patch, width, True)  # Conv3d patch_embed with bias
    n += v.int_("num_position_embeddings") * width  # pos_embed
    n += depth * _vit_layer(width, v.int_("intermediate_size"))  # norm1/2, qkv + proj (biased), fc1/fc2
    n += 2 * width + _linear(merged, merged, True) + _linear(merged, out, True)  # merger: LayerNorm, fc1, fc2
    deepstack = v.int_list("deepstack_visual_indexes") or []
    n += len(deepstack) * (2 * merged + _linear(merged, merged, True) + _linear(merged, out, True))
    return n


def _mllama_vision(v: _Cfg, text: _Cfg) -> int:
    """Llama 3.2 Vision encoder (modeling_mllama.py MllamaVisionModel) + multi_modal_projector."""
    width, layers = v.hidden(), v.layers()
    global_layers = v.int_("num_global_layers")
    patch, image, channels = v.int_("patch_size"), v.int_("image_size"), v.int_("num_channels", default=3)
    tiles = v.int_("max_num_tiles")
    ratios = v.raw("supported_aspect_ratios")
    if not isinstance(ratios, Sequence):
        raise ConfigError("config.json has no 'vision_config.supported_aspect_ratios'")
    ratio_ids = len(ratios) + 1
    positions = (image // patch) ** 2 + 1
    n = channels * patch * patch * width + width  # patch conv (no bias), class embedding
    n += 1 + positions * width + ratio_ids * tiles * positions * width  # gated positional + tile embedding
    n += 2 * (1 + ratio_ids * tiles * width)  # pre/post tile positional embeddings (gate + table)
    n += 2 * 2 * width  # layernorm_pre, layernorm_post
    layer = _vit_layer(width, v.int_("intermediate_size"), attn_bias=False)
    n += layers * layer + global_layers * (layer + 2)  # global layers add attention and MLP gates
    n += _linear(v.int_("vision_output_dim"), text.hidden(), True)  # multi_modal_projector
    return n


def _llama4_vision(v: _Cfg, text: _Cfg) -> int:
    """Llama 4 vision encoder (modeling_llama4.py Llama4VisionModel) + multi_modal_projector."""
    width, layers = v.hidden(), v.layers()
    patch, image, channels = v.int_("patch_size"), v.int_("image_size"), v.int_("num_channels", default=3)
    inter = v.int_("intermediate_size")
    positions = (image // patch) ** 2 + 1
    n = channels * patch * patch * width + width + positions * width  # unfold-conv linear, class, positions
    n += 2 * 2 * width + layers * _vit_layer(width, inter)  # layernorm_pre/post
    proj_in, proj_out = v.int_("projector_input_dim"), v.int_("projector_output_dim")
    n += inter * proj_in + proj_out * proj_out  # pixel-shuffle MLP (fc1, fc2; no bias)
    n += v.int_("vision_output_dim") * text.hidden()  # multi_modal_projector (no bias)
    return n
