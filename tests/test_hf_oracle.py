"""Oracle: `--engine hf` against the cache transformers really builds, to the byte, for the registry's models.

By default one representative per (model_type, layer kinds) runs, the group's smallest model, so the suite stays
quick; KVSIZE_ORACLE_ALL=1 runs every buildable registry config (slow: several minutes).

Each registry config is built with transformers on the meta device (`AutoModelForCausalLM.from_config`, or
`AutoModelForImageTextToText` for the Llava / Qwen2.5-VL wrappers; never trust_remote_code), run ONCE with
use_cache=True over T=40 tokens for B=2 requests, and the returned cache's tensors are summed (numel x
element_size over every tensor attribute of every cache layer: keys, values, conv and recurrent states, ...).
On meta the shapes and dtypes are the real ones and no memory is used. Windows and chunks are shrunk to 16 in
the config (for both sides), so sliding layers are tested past their window (they must hold W-1 = 15 tokens).
All models are built at full depth: no layer count is reduced.

Registry models transformers cannot build this way (also in docs/verification.md):
- microsoft/phi-1_5: model_type 'phi-msft' exists only as custom code (auto_map); transformers' own Phi class is
  model_type 'phi', which this config does not name.
- nvidia/Llama-3_3-Nemotron-Super-49B-v1: model_type 'nemotron-nas' (DeciLM) exists only as custom code.
- Other remote-code model types (NOT_BUILDABLE below): baichuan, chatglm, deepseek (v1 MoE), internlm, internlm2,
  kimi_k2, mimo.
- openai-community/openai-gpt: transformers builds it but keeps no cache (NO_TRANSFORMERS_CACHE).
- T5, BART, Whisper: encoder-decoder; this oracle drives decoder-only forward passes (ENCODER_DECODER).
One is built with a patch:
- Zyphra/Zamba2-7B: the config predates transformers' Zamba2Config field names; without `n_mamba_heads` the class
  default 8 contradicts `mamba_headdim` 64 with d_inner 7168 and the forward fails on a reshape. Patched with
  n_mamba_heads = 7168 / 64 = 112 (kvsize derives the same head count), then checked like the others.
0-dim int64 bookkeeping tensors (`_sliding_window_tensor`, `cumulative_length`) and fp8 scales are not cache
payload: they are checked to be 0-dim and left out of the sum (see kvsize/engines/hf.py).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import torch
import transformers
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.engines.hf import HfEngine
from kvsize.registry import load_registry_config, registry_entries
from kvsize.spec import ArchSpec

T = 40
B = 2
WINDOW = 16
ENCODER_TOKENS = 12  # vision tokens fed to Mllama's cross-attention layers

NOT_BUILDABLE: dict[str, str | None] = {
    "microsoft/phi-1_5": "phi-msft",
    "nvidia/Llama-3_3-Nemotron-Super-49B-v1": "nemotron-nas",
    # Remote-code model types (auto_map only; transformers has no class of that model_type):
    "baichuan-inc/Baichuan2-7B-Chat": "baichuan",
    "THUDM/chatglm3-6b": "chatglm",
    "deepseek-ai/deepseek-moe-16b-chat": "deepseek",
    "internlm/internlm-chat-7b": "internlm",
    "internlm/internlm2-chat-7b": "internlm2",
    "internlm/internlm2_5-7b-chat": "internlm2",
    "moonshotai/Kimi-K2-Instruct": "kimi_k2",
    "moonshotai/Kimi-K2-Thinking": "kimi_k2",
    "XiaomiMiMo/MiMo-7B-Base": "mimo",
    # The hub's flat "minimax_m3" config: transformers 5.24 has only minimax_m3_vl, whose text model's cache
    # tests/test_families_round5.py builds and compares (MiniMaxM3VLSparseCacheLayer).
    "MiniMaxAI/MiniMax-M3": "minimax_m3",
    # no model_type (remote code, modeling_cogvlm.py): its language model is Llama's with num_multi_query_heads KV
    # heads, sized by hand in tests/expected_kv.py and tests/test_families_2026.py
    "THUDM/cogvlm2-llama3-caption": None,
}
# Sized by kvsize's hf engine all the same: Kimi-K2's remote code is DeepSeek-V3's (architectures
# DeepseekV3ForCausalLM), which transformers has; MiniMax-M3's layers are minimax_m3_vl's text model's
# (MiniMaxM3VLSparseCacheLayer: K, V and the index key), which transformers 5.24 has.
HF_ENGINE_SIZES = {
    "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Kimi-K2-Thinking",
    "MiniMaxAI/MiniMax-M3",
    "THUDM/cogvlm2-llama3-caption",
}
# transformers builds them but cannot run them on the meta device: Gemma 4's wrapper calls .item() on its position
# ids. Tiny models of the same layouts run on the CPU in tests/test_families_round4.py.
NOT_ON_META = {"gemma4": "Gemma4 masks call Tensor.item()"}
# transformers builds it but keeps no cache at all (OpenAIGPTLMHeadModel returns no past_key_values), so there is
# nothing to compare: its expected values are checked by tests/expected_kv.py only.
NO_TRANSFORMERS_CACHE = {"openai-community/openai-gpt": "openai-gpt"}
# Encoder-decoder models: this oracle drives decoder-only forward passes; their self- and cross-attention caches
# (transformers EncoderDecoderCache) are checked by the expected-values test only.
ENCODER_DECODER = {"t5", "bart", "whisper"}
PATCHES: dict[str, dict[str, Any]] = {"Zyphra/Zamba2-7B": {"n_mamba_heads": 112}}
TORCH_DTYPES = {KvDtype.FP32: torch.float32, KvDtype.FP16: torch.float16, KvDtype.BF16: torch.bfloat16}


def _oracle_models() -> tuple[list[str], list[str]]:
    """(one representative per (model_type, layer kinds), the rest): the first runs by default, the rest with
    KVSIZE_ORACLE_ALL=1 (slow: every registry config at full depth). The representative is the group's smallest
    model by layers x experts x hidden, so the default run stays quick."""
    groups: dict[tuple[str, tuple[str, ...]], list[tuple[int, str]]] = {}
    for entry in registry_entries().values():
        raw = load_registry_config(entry)
        text = text_part(raw)
        skipped = entry.hub_id in NOT_BUILDABLE or entry.hub_id in NO_TRANSFORMERS_CACHE
        if skipped or raw.get("model_type") in ENCODER_DECODER or raw.get("model_type") in NOT_ON_META:
            continue
        spec = parse_config(raw, source=entry.hub_id)
        experts = max(int(text.get(k) or 1) for k in ("num_experts", "n_routed_experts", "num_local_experts"))
        size = len(spec.layers) * experts * int(text.get("hidden_size") or 1)
        key = (str(raw.get("model_type")), tuple(layer.kind for layer, _ in spec.layer_groups()))
        groups.setdefault(key, []).append((size, entry.hub_id))
    chosen = sorted(min(members)[1] for members in groups.values())
    rest = sorted(h for members in groups.values() for _, h in members if h not in chosen)
    return chosen, rest


# --- building and summing ---------------------------------------------------------------------------------


def text_part(raw: dict[str, Any]) -> dict[str, Any]:
    for key in ("text_config", "language_config", "llm_config"):
        if isinstance(raw.get(key), dict):
            nested: dict[str, Any] = raw[key]
            return nested
    return raw


def oracle_config(hub_id: str) -> dict[str, Any]:
    """The registry config with windows and chunks shrunk to WINDOW and any documented patch applied."""
    raw = copy.deepcopy(load_registry_config(registry_entries()[hub_id.lower()]))
    text = text_part(raw)
    for key in ("sliding_window", "attention_chunk_size"):
        if isinstance(text.get(key), int) and text[key] > WINDOW:
            text[key] = WINDOW
    if isinstance(text.get("sliding_window_size"), int) and text["sliding_window_size"] >= WINDOW:
        text["sliding_window_size"] = WINDOW - 1  # MiMo-V2-Flash: its window is sliding_window_size + 1
    text.update(PATCHES.get(hub_id, {}))
    return raw


def build_meta_model(raw: Mapping[str, Any], dtype: KvDtype) -> Any:
    config = CONFIG_MAPPING[raw["model_type"]].from_dict({k: v for k, v in raw.items() if k != "auto_map"})
    with torch.device("meta"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=TORCH_DTYPES[dtype])
        except ValueError:  # a vision-language wrapper with no causal-LM class
            model = transformers.AutoModelForImageTextToText.from_config(config, dtype=TORCH_DTYPES[dtype])
    return model.eval()


def forward(model: Any, tokens: int, cache: Any = None, cross: int | None = None) -> Any:
    kwargs: dict[str, Any] = {"use_cache": True}
    if cache is not None:
        kwargs["cache"] = cache
    if cross:
        hidden = model.config.get_text_config().hidden_size
        kwargs["cross_attention_states"] = torch.zeros((B, cross, hidden), dtype=model.dtype, device="meta")
    ids = torch.zeros((B, tokens), dtype=torch.long, device="meta")
    with torch.no_grad():
        out = model(input_ids=ids, **kwargs)
    return out.cache if getattr(out, "cache", None) is not None else out.past_key_values


def tensors(value: Any) -> Iterator[tuple[str, torch.Tensor]]:
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for name, item in items:
        if isinstance(item, torch.Tensor):
            yield str(name), item
        elif isinstance(item, (Mapping, list, tuple)):
            yield from ((f"{name}.{sub}", t) for sub, t in tensors(item))


# 0-dim int64 counters: DynamicSlidingWindowLayer, StaticLayer and (5.25) LinearAttentionLayer (cache_utils.py).
BOOKKEEPING = ("_sliding_window_tensor", "cumulative_length", "cumulative_length_linear")


def held_bytes(cache: Any) -> list[int]:
    """numel x element_size of every tensor attribute of every cache layer, each tensor once (DeepSeek-V4's
    compressed layers keep `values is keys`: one buffer, held once); 0-dim bookkeeping checked and left out."""
    out = []
    for layer in cache.layers:
        held: dict[int, int] = {}
        for name, t in tensors(vars(layer)):
            if t.dim() == 0:
                assert name in BOOKKEEPING or name.startswith("_quantized_"), name
                continue
            held[id(t)] = t.numel() * t.element_size()
        out.append(sum(held.values()))
    # MiniMaxCache keeps each lightning layer's K^T V state apart, in `linear_cache` (modeling_minimax.py), and
    # has no cache layer for a trailing lightning layer.
    for i, state in enumerate(getattr(cache, "linear_cache", [])):
        if i == len(out):
            out.append(0)
        if isinstance(state, torch.Tensor):
            out[i] += state.numel() * state.element_size()
    return out


def predicted(spec: ArchSpec, raw: Mapping[str, Any], dtype: KvDtype, ctx: int, **options: Any) -> list[int]:
    engine = get_engine("hf", None, raw_config=raw, **options)
    assert isinstance(engine, HfEngine)
    return engine.layer_bytes(spec, ctx=ctx, batch=B, kv_dtype=dtype)


def setup(hub_id: str) -> tuple[dict[str, Any], ArchSpec, KvDtype, int | None]:
    raw = oracle_config(hub_id)
    spec = parse_config(raw, source=hub_id, encoder_tokens=ENCODER_TOKENS)
    cross = ENCODER_TOKENS if any(layer.kind == "cross" for layer in spec.layers) else None
    return raw, spec, KvDtype(spec.model_dtype), cross


# --- the oracle -------------------------------------------------------------------------------------------


def _all_requested() -> bool:
    return bool(os.environ.get("KVSIZE_ORACLE_ALL"))


REPRESENTATIVES, OTHERS = _oracle_models()
BUILDABLE = REPRESENTATIVES + [
    pytest.param(h, marks=[pytest.mark.slow, pytest.mark.skipif(not _all_requested(), reason="KVSIZE_ORACLE_ALL")])
    for h in OTHERS
]


@pytest.mark.parametrize("hub_id", BUILDABLE)
def test_dynamic_cache_matches_hf_engine(hub_id: str) -> None:
    raw, spec, dtype, cross = setup(hub_id)
    model = build_meta_model(raw, dtype)
    measured = held_bytes(forward(model, T, cross=cross))
    assert measured == predicted(spec, raw, dtype, T), hub_id
    assert sum(measured) > 0
    windows = [layer.attention.window for layer in spec.layers if layer.attention and layer.attention.window]
    assert all(w <= WINDOW for w in windows), "every window is exercised past its length"


STATIC_MODELS = [
    "meta-llama/Llama-3.1-8B",
    "google/gemma-3-1b-it",
    "openai/gpt-oss-20b",
    "deepseek-ai/DeepSeek-V3",
    "Qwen/Qwen3-Next-80B-A3B-Thinking",
]


@pytest.mark.parametrize("hub_id", STATIC_MODELS)
def test_static_cache_matches_hf_engine(hub_id: str) -> None:
    raw, spec, dtype, _ = setup(hub_id)
    model = build_meta_model(raw, dtype)
    cache = transformers.StaticCache(config=model.config, max_cache_len=T + 8)
    measured = held_bytes(forward(model, T, cache=cache))
    assert measured == predicted(spec, raw, dtype, T, cache_implementation="static", max_cache_len=T + 8)


DECODE_MODELS = ["google/gemma-2-2b", "meta-llama/Llama-4-Scout-17B-16E-Instruct", "Zyphra/Zamba2-7B"]


@pytest.mark.parametrize("hub_id", DECODE_MODELS)
def test_decode_steps_keep_the_rule(hub_id: str) -> None:
    """After the prefill, three one-token steps: sliding/chunked layers stay at W-1, full layers grow."""
    raw, spec, dtype, _ = setup(hub_id)
    model = build_meta_model(raw, dtype)
    cache = forward(model, T)
    for _ in range(3):
        cache = forward(model, 1, cache=cache)
    assert held_bytes(cache) == predicted(spec, raw, dtype, T + 3)


@pytest.mark.parametrize("hub_id", ["meta-llama/Llama-3.2-1B-Instruct", "deepseek-ai/DeepSeek-V2"])
def test_fp8_quantized_cache_matches_hf_engine(hub_id: str) -> None:
    raw, spec, dtype, _ = setup(hub_id)
    model = build_meta_model(raw, dtype)
    cache = transformers.QuantizedCache(backend="fp8", config=model.config)
    cache = forward(model, T, cache=cache)
    cache = forward(model, 1, cache=cache)
    assert held_bytes(cache) == predicted(spec, raw, KvDtype.FP8_E4M3, T + 1)


def test_fp8_refused_for_sliding_models_by_both() -> None:
    raw, spec, dtype, _ = setup("google/gemma-2-2b-it")
    model = build_meta_model(raw, dtype)
    with pytest.raises(ValueError, match="only full attention"):
        transformers.QuantizedCache(backend="fp8", config=model.config)
    with pytest.raises(UnsupportedArchitecture, match="all full attention"):
        predicted(spec, raw, KvDtype.FP8_E4M3, T)


@pytest.mark.parametrize(("hub_id", "model_type"), sorted(NOT_BUILDABLE.items()))
def test_unbuildable_models_are_refused_with_the_reason(hub_id: str, model_type: str | None) -> None:
    raw = load_registry_config(registry_entries()[hub_id.lower()])
    assert raw.get("model_type") == model_type
    assert model_type is None or model_type not in CONFIG_MAPPING  # transformers has no class for it
    if hub_id in HF_ENGINE_SIZES:
        return  # see HF_ENGINE_SIZES
    spec = parse_config(raw, source=hub_id)
    with pytest.raises(UnsupportedArchitecture, match="no built-in class"):
        get_engine("hf").estimate(spec, ctx=T, batch=B, kv_dtype=KvDtype.BF16)


# --- families the registry does not carry: transformers' default configs ---------------------------------

# Granite 4.0-H's shape cut to 8 layers (attention at 3 and 7); BambaConfig takes the same Mamba-2 fields.
GRANITE_4: dict[str, Any] = {
    "num_hidden_layers": 8,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "mamba_n_heads": 16,
    "mamba_d_head": 64,
    "mamba_d_state": 128,
    "intermediate_size": 256,
}
GRANITE_LAYERS = ["attention" if i in (3, 7) else "mamba" for i in range(8)]

ERGO_SMALL = {
    "num_hidden_layers": 8,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 64,
    "first_dense_intermediate_size": 128,
    "shared_intermediate_size": 64,
}
BEYOND_REGISTRY: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    # name: (model_type, config-class kwargs, raw-dict patch; keys starting "kvsize:" are for kvsize's parser only)
    "mamba (Mamba-1 state)": ("mamba", {}, {}),
    "mamba2": ("mamba2", {}, {}),
    "jamba (attention 1 in 8)": ("jamba", {}, {}),
    "falcon new decoder architecture (query heads to 5.24, KV heads from 5.25)": (
        "falcon",
        {"new_decoder_architecture": True, "num_kv_heads": 8, "num_attention_heads": 64, "hidden_size": 4096},
        {},
    ),
    "falcon multi-query": ("falcon", {}, {}),
    "mpt with kv_n_heads (transformers ignores it)": ("mpt", {}, {"attn_config": {"kv_n_heads": 8}}),
    "gpt_bigcode multi-query": ("gpt_bigcode", {}, {}),
    "cohere2 (sliding 3 in 4)": ("cohere2", {}, {}),
    "lfm2 (conv layers)": ("lfm2", {}, {}),
    "qwen3_5_text (gated deltanet)": ("qwen3_5_text", {}, {}),
    # Falcon-H1 configs carry no layer list: every layer runs attention and a Mamba-2 mixer side by side
    # (transformers FalconH1Config.layers_block_type = ["hybrid"] * num_hidden_layers), which kvsize's parser knows.
    "falcon_h1 (attention and mamba2 in every layer)": ("falcon_h1", {}, {}),
    # Granite 4.0-H: the hub's layer_types spell "mamba" / "attention"; transformers 5.x saves them as
    # "linear_attention" / "full_attention" (configuration_utils.py _LEGACY_LAYER_TYPE_REMAP). Both are Mamba-2.
    "granitemoehybrid (hub spelling)": ("granitemoehybrid", GRANITE_4, {"layer_types": GRANITE_LAYERS}),
    "granitemoehybrid (transformers 5 spelling)": (
        "granitemoehybrid",
        {
            **GRANITE_4,
            "layer_types": ["full_attention" if t == "attention" else "linear_attention" for t in GRANITE_LAYERS],
        },
        {},
    ),
    # Bamba: attention at attn_layer_indices, Mamba-2 elsewhere (BambaConfig.layers_block_type)
    "bamba (attn_layer_indices)": ("bamba", {**GRANITE_4, "attn_layer_indices": [3, 7]}, {}),
    # GPT-Neo: local layers only mask; transformers keeps every token on them (a full DynamicLayer each)
    "gpt_neo (global and local layers)": (
        "gpt_neo",
        {"num_layers": 4, "attention_types": [[["global", "local"], 2]], "window_size": WINDOW, "hidden_size": 256},
        {},
    ),
    # AFMoE (Arcee Trinity): every 4th layer global, the rest sliding; without layer_types kvsize derives them from
    # global_attn_every_n_layers as AfmoeConfig.__post_init__ does
    "afmoe (global every 4th, no layer_types)": ("afmoe", {}, {"layer_types": None}),
    # Laguna: per-layer query heads, the same KV heads on every layer
    "laguna (num_attention_heads_per_layer)": (
        "laguna",
        {"num_hidden_layers": 4, "num_attention_heads_per_layer": [16, 32, 16, 32], "num_attention_heads": 32},
        {},
    ),
    # MiniMax-Text-01: lightning attention (one K^T V state per head) and softmax attention alternating
    "minimax (lightning and softmax layers)": ("minimax", {"num_hidden_layers": 4, "num_local_experts": 2}, {}),
    # Ergo (transformers 5.25): every n-th layer global, derived without layer_types (ErgoConfig.__post_init__)
    "ergo (global every 3rd)": ("ergo", {**ERGO_SMALL, "global_attention_every_n_layers": 3}, {"layer_types": None}),
    # MiniCPM5-MoE (transformers 5.25): GQA on every layer, MoE after the first dense layer
    "minicpm5_moe (5.25)": (
        "minicpm5_moe",
        {"num_hidden_layers": 3, "n_routed_experts": 4, "num_experts_per_tok": 2, "hidden_size": 256,
         "num_attention_heads": 4, "intermediate_size": 512, "moe_intermediate_size": 64},
        {},
    ),  # fmt: skip
    # SmolLM3 with no layer_types: its NoPE layers (every 4th) slide once use_sliding_window is set
    "smollm3 (NoPE layers slide)": ("smollm3", {"use_sliding_window": True, "sliding_window": WINDOW}, {}),
}


@pytest.mark.parametrize("name", sorted(BEYOND_REGISTRY))
def test_families_beyond_the_registry(name: str) -> None:
    model_type, kwargs, patch = BEYOND_REGISTRY[name]
    if model_type not in CONFIG_MAPPING:  # a family newer than the installed transformers (CI installs the newest)
        pytest.skip(f"transformers {transformers.__version__} has no {model_type}")
    raw = CONFIG_MAPPING[model_type](**kwargs).to_dict()
    for key in ("sliding_window", "attention_chunk_size"):
        if isinstance(raw.get(key), int) and raw[key] > WINDOW:
            raw[key] = WINDOW
    for key, value in patch.items():
        if not key.startswith("kvsize:"):
            raw[key] = {**raw[key], **value} if isinstance(value, dict) and isinstance(raw.get(key), dict) else value
    model = build_meta_model(raw, KvDtype.BF16)
    raw.update({key.removeprefix("kvsize:"): value for key, value in patch.items() if key.startswith("kvsize:")})
    spec = parse_config(raw, source=name)
    assert held_bytes(forward(model, T)) == predicted(spec, raw, KvDtype.BF16, T), name


def test_ergo_released_config_spelling() -> None:
    # Ergo's released configs name the window local_attention_window (ErgoConfig.attribute_map, transformers
    # 5.25) and give no layer_types: 6 of 8 layers slide over WINDOW - 5 = 11 tokens, layers 3 and 7 are global.
    if "ergo" not in CONFIG_MAPPING:
        pytest.skip(f"transformers {transformers.__version__} has no ergo")
    raw = CONFIG_MAPPING["ergo"](**ERGO_SMALL).to_dict()
    for key in ("layer_types", "mlp_layer_types", "sliding_window"):
        del raw[key]
    raw["local_attention_window"] = WINDOW - 5
    model = build_meta_model(raw, KvDtype.BF16)
    assert model.config.sliding_window == WINDOW - 5
    spec = parse_config(raw, source="ergo")
    kinds = [layer.attention.kind.value for layer in spec.layers if layer.attention is not None]
    assert kinds == ["sliding", "sliding", "sliding", "full"] * 2
    held = held_bytes(forward(model, T))
    # 2 KV heads x 64 x (K + V) x 2 B = 512 B per token per layer and request; B requests.
    assert held == [B * 512 * ((WINDOW - 5 - 1) if k == "sliding" else T) for k in kinds]
    assert held == predicted(spec, raw, KvDtype.BF16, T)
