"""Families issue 19 found refused and now sizes exactly: Kimi Linear (KDA + MLA), CogVLM2 (num_multi_query_heads),
LFM2 (short convolutions + GQA); and the gap an unknown type with heads and Mamba fields left open.

Every expected value is worked by hand from the fixture config (tests/data/never_silent, sources in its SOURCES.tsv)
and the modelling code named beside it.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import kvsize
from kvsize.cache_fields import UnmodelledFields
from kvsize.config import parse_config
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.errors import ConfigError
from kvsize.spec import AttentionKind, StateKind

NEVER_SILENT = Path(__file__).parent / "data" / "never_silent"
CTX = 32768


def _load(name: str) -> dict[str, Any]:
    return json.loads((NEVER_SILENT / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


KIMI = _load("moonshotai--Kimi-Linear-48B-A3B-Instruct.json")
COGVLM2 = _load("THUDM--cogvlm2-llama3-chat-19B.json")
LFM2 = _load("LiquidAI--LFM2-1.2B.json")


def _scenario(config: dict[str, Any], engine: str) -> Any:
    return kvsize.estimate(config, ctx=CTX, engine=engine).scenarios[0]


# --- Kimi Linear ---------------------------------------------------------------------------------------------------

# 27 layers: kda_layers (1-based) 20 of them, full_attn_layers [4, 8, 12, 16, 20, 24, 27] MLA.
# MLA latent per token: kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements x 2 B (bf16) = 1,152 B per layer
# (vLLM kimi_linear.py KimiMLAAttention; transformers KimiLinearAttention.forward caches kv_nope 512 + k_rot 64).
KIMI_PER_TOKEN = 7 * 576 * 2  # 8,064 B
# KDA (linear_attn_config num_heads 32, head_dim 128, short_conv_kernel_size 4): conv over q, k, v =
# 3 x 32 x 128 = 12,288 channels; delta-rule matrix 32 x 128 x 128 = 524,288 elements.
# formula: conv keeps kernel - 1 = 3 inputs, both in bf16: (12,288 x 3 + 524,288) x 2 = 1,122,304 B per layer.
KIMI_FORMULA_STATE = 20 * (12288 * 3 + 524288) * 2  # 22,446,080 B
# hf (modeling_kimi_linear.py KimiLinearDeltaAttention.forward: one conv state [B, 3 x 4096, kernel 4] in bf16,
# the chunk/recurrent KDA torch paths cast to float32, so the recurrent state is fp32):
# 12,288 x 4 x 2 + 524,288 x 4 = 98,304 + 2,097,152 = 2,195,456 B per layer.
KIMI_HF_STATE = 20 * (12288 * 4 * 2 + 524288 * 4)  # 43,909,120 B


def test_kimi_linear_layers_are_kda_and_mla_by_the_1_based_lists() -> None:
    spec = parse_config(KIMI)
    kinds = [layer.kind for layer in spec.layers]
    assert kinds[:4] == ["kda", "kda", "kda", "mla"]  # layer 4 (1-based) is the first full-attention layer
    assert kinds[26] == "mla" and kinds.count("kda") == 20
    state = spec.layers[0].state
    assert state is not None and state.kind is StateKind.KDA
    assert (state.conv_channels, state.conv_kernel, state.ssm_shape) == (12288, 4, (32, 128, 128))
    attn = spec.layers[3].attention
    assert attn is not None and attn.kind is AttentionKind.MLA and attn.elements_per_token == 576


@pytest.mark.parametrize(
    ("engine", "state"), [("formula", KIMI_FORMULA_STATE), ("hf", KIMI_HF_STATE)], ids=["formula", "hf"]
)
def test_kimi_linear_bytes(engine: str, state: int) -> None:
    s = _scenario(KIMI, engine)
    assert s.kv_bytes_per_token == KIMI_PER_TOKEN
    assert s.state_bytes_per_request == state
    assert s.bytes_per_request == KIMI_PER_TOKEN * CTX + state


def test_kimi_linear_lists_that_miss_a_layer_are_refused() -> None:
    config = copy.deepcopy(KIMI)
    config["linear_attn_config"]["full_attn_layers"] = [4, 8, 12, 16, 20, 24]  # layer 27 in neither list
    with pytest.raises(ConfigError, match="kda_layers"):
        parse_config(config)


def test_kimi_linear_config_child_kvsize_does_not_read_is_refused() -> None:
    config = copy.deepcopy(KIMI)
    config["linear_attn_config"]["num_k_heads"] = 16  # vLLM kda_state_shape would size k separately
    with pytest.raises(UnmodelledFields, match="linear_attn_config.num_k_heads"):
        parse_config(config)


def test_linear_attn_config_on_another_type_is_still_refused() -> None:
    config = {**copy.deepcopy(KIMI), "model_type": "deepseek_v3"}
    with pytest.raises(UnmodelledFields, match="linear_attn_config"):
        parse_config(config)


# --- CogVLM2 -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["formula", "hf"])
def test_cogvlm2_kv_heads_are_num_multi_query_heads(engine: str) -> None:
    # The remote code's VisionExpertAttention (ported to vLLM in tongxiao2002/vllm-for-LMMs
    # lmm_modeling/cogvlm2/modeling_cogvlm.py) builds Attention(num_kv_heads=num_multi_query_heads) with
    # head_dim = hidden 4096 / 32 heads = 128: 32 layers x 8 heads x (128 + 128) x 2 B = 131,072 B per token
    # (not 32 x 32 x 256 x 2 = 524,288 with the query heads).
    assert _scenario(COGVLM2, engine).kv_bytes_per_token == 32 * 8 * 256 * 2


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_cogvlm2_is_refused_where_the_engine_has_no_class(engine: str) -> None:
    with pytest.raises(UnsupportedArchitecture, match="CogVLMForCausalLM"):
        _scenario(COGVLM2, engine)


def test_num_multi_query_heads_on_a_known_type_is_refused() -> None:
    config = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 8, "hidden_size": 512}
    with pytest.raises(UnmodelledFields, match="num_multi_query_heads"):
        parse_config({**config, "num_multi_query_heads": 2})  # transformers' LlamaConfig ignores it


# --- LFM2 ----------------------------------------------------------------------------------------------------------

# 16 layers, attention at [2, 5, 8, 10, 12, 14]: 6 x 8 KV heads x (64 + 64) x 2 B = 12,288 B per token
# (head_dim = 2048 / 32). The other 10 layers keep a conv state over hidden_size 2,048 channels, conv_L_cache 3.
LFM2_PER_TOKEN = 6 * 8 * 128 * 2
# formula (= vLLM's rule, mamba_utils.py short_conv_state_shape: conv_kernel - 1 columns, model dtype):
# 2,048 x 2 x 2 B = 8,192 B per layer.
LFM2_FORMULA_STATE = 10 * 2048 * 2 * 2  # 81,920 B
# hf (cache_utils.py LinearAttentionLayer.update_conv_state keeps conv_kernel_size = L_cache columns;
# modeling_lfm2.py Lfm2ShortConv has no recurrent state): 2,048 x 3 x 2 B = 12,288 B per layer.
LFM2_HF_STATE = 10 * 2048 * 3 * 2  # 122,880 B


@pytest.mark.parametrize(
    ("engine", "state"), [("formula", LFM2_FORMULA_STATE), ("hf", LFM2_HF_STATE)], ids=["formula", "hf"]
)
def test_lfm2_bytes(engine: str, state: int) -> None:
    s = _scenario(LFM2, engine)
    assert s.kv_bytes_per_token == LFM2_PER_TOKEN
    assert s.state_bytes_per_request == state


def test_lfm2_layer_types_derived_from_full_attn_idxs() -> None:
    config = {k: v for k, v in LFM2.items() if k != "layer_types"}  # transformers Lfm2Config.__post_init__
    assert [layer.kind for layer in parse_config(config).layers] == [layer.kind for layer in parse_config(LFM2).layers]


def test_lfm2_conv_dim_unlike_hidden_size_is_refused() -> None:
    # transformers convolves hidden_size channels, vLLM ShortConv conv_dim: kvsize cannot pick one.
    with pytest.raises(UnmodelledFields, match="conv_dim"):
        parse_config({**LFM2, "conv_dim": 1024})
    parse_config({**LFM2, "conv_dim": 2048})


# --- engines that kvsize has not read for these states -------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "config"),
    [
        *((engine, KIMI) for engine in ("vllm", "sglang", "trtllm", "llamacpp")),
        # vLLM sizes LFM2's short conv (models/lfm2.py, 0.10.2+: tests/test_lfm2_vllm.py)
        *((engine, LFM2) for engine in ("sglang", "trtllm", "llamacpp")),
    ],
    ids=["kimi_linear-vllm", "kimi_linear-sglang", "kimi_linear-trtllm", "kimi_linear-llamacpp", "lfm2-sglang",
         "lfm2-trtllm", "lfm2-llamacpp"],
)
def test_engines_without_a_read_rule_refuse_the_new_states(engine: str, config: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedArchitecture):
        _scenario(config, engine)


# --- the Mamba gap --------------------------------------------------------------------------------------------------

MAMBA_FIELDS = {"d_state": 16, "d_conv": 4, "expand": 2}
UNKNOWN = {"model_type": "brand_new_hybrid", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}


def test_unknown_type_with_heads_and_mamba_fields_is_refused() -> None:
    # Nothing says which layers are recurrent: sizing it would be pure attention with the state silently dropped.
    with pytest.raises(UnmodelledFields, match="d_state"):
        parse_config({**UNKNOWN, **MAMBA_FIELDS})


def test_unknown_type_that_lays_out_its_mamba_layers_is_sized() -> None:
    config = {**UNKNOWN, **MAMBA_FIELDS, "layer_types": ["mamba", "mamba", "mamba", "full_attention"]}
    spec = parse_config(config)
    state = spec.layers[0].state
    # Mamba-1: d_inner = expand 2 x hidden 512 = 1,024; state 1,024 x d_state 16 (transformers MambaCache)
    assert state is not None and state.kind is StateKind.MAMBA and state.ssm_shape == (1024, 16)
    assert spec.layers[3].attention is not None


def test_the_hubs_lfm2_names_are_understood_only_at_their_copies() -> None:
    # The hub's LFM2 files (LiquidAI/LFM2-1.2B, the text_config of LiquidAI/LFM2.5-VL-1.6B) keep num_heads and
    # conv_dim_out beside num_attention_heads and hidden_size; no engine reads them (transformers 5.24
    # modeling_lfm2, vLLM 0.19 models/lfm2.py). Equal, they size; different, kvsize cannot say which is meant.
    import pytest as _pytest
    from tiny_configs import registry_config

    from kvsize.cache_fields import UnmodelledFields
    from kvsize.config import parse_config as _parse

    text = registry_config("LiquidAI/LFM2.5-VL-1.6B")["text_config"]
    assert text["num_heads"] == text["num_attention_heads"] and text["conv_dim_out"] == text["hidden_size"]
    spec = _parse(text)
    assert sum(layer.state is not None for layer in spec.layers) == 10
    with _pytest.raises(UnmodelledFields, match="num_heads"):
        _parse({**text, "num_heads": 16})
    with _pytest.raises(UnmodelledFields, match="conv_dim_out"):
        _parse({**text, "conv_dim_out": 1024})
