"""The config parser on small synthetic configs: each naming variant and each error path."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kvsize.config import parse_config
from kvsize.errors import ConfigError
from kvsize.spec import ArchSpec, AttentionKind

BASE: dict[str, Any] = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "hidden_size": 512}


def parse(**fields: Any) -> ArchSpec:
    return parse_config({**BASE, **fields}, source="test.json")


def kinds(spec: ArchSpec) -> list[str]:
    return [layer.kind for layer in spec.layers]


def attn(spec: ArchSpec, i: int = 0) -> Any:
    return spec.layers[i].attention


def test_mha_when_no_kv_heads() -> None:
    spec = parse()
    assert (attn(spec).num_kv_heads, attn(spec).head_dim) == (8, 512 // 8)
    assert spec.attention_label == "MHA"


def test_gqa_and_explicit_head_dim() -> None:
    spec = parse(num_key_value_heads=2, head_dim=128)  # head_dim wins over 512 / 8 = 64
    assert (attn(spec).num_kv_heads, attn(spec).head_dim, attn(spec).elements_per_token) == (2, 128, 2 * 2 * 128)
    assert spec.attention_label == "GQA"


@pytest.mark.parametrize(
    "fields", [{"multi_query": True}, {"model_type": "gpt_bigcode"}, {"n_head_kv": 1}, {"num_kv_heads": 1}]
)
def test_mqa_spellings(fields: dict[str, Any]) -> None:
    spec = parse(**fields)
    assert attn(spec).num_kv_heads == 1
    assert spec.attention_label == "MQA"


def test_falcon_new_decoder_architecture_uses_kv_heads() -> None:
    spec = parse(model_type="falcon", multi_query=True, new_decoder_architecture=True, num_kv_heads=2)
    assert attn(spec).num_kv_heads == 2


def test_gpt2_names() -> None:
    spec = parse_config({"model_type": "gpt2", "n_layer": 3, "n_head": 4, "n_embd": 256, "n_positions": 512})
    assert spec.num_layers == 3 and attn(spec).head_dim == 64 and spec.max_context == 512


def test_mpt_attn_config() -> None:
    spec = parse_config(
        {
            "model_type": "mpt",
            "n_layers": 2,
            "n_heads": 8,
            "d_model": 1024,
            "max_seq_len": 2048,
            "attn_config": {"kv_n_heads": 2},
        }
    )
    assert (attn(spec).num_kv_heads, attn(spec).head_dim, spec.max_context) == (2, 128, 2048)


def test_glm_multi_query_groups_and_kv_channels() -> None:
    spec = parse_config(
        {
            "model_type": "chatglm",
            "num_layers": 28,
            "num_attention_heads": 32,
            "hidden_size": 4096,
            "multi_query_attention": True,
            "multi_query_group_num": 2,
            "kv_channels": 128,
            "seq_length": 32768,
        }
    )
    assert (spec.num_layers, attn(spec).num_kv_heads, attn(spec).head_dim, spec.max_context) == (28, 2, 128, 32768)


def test_mla_ignores_kv_heads_and_head_dim() -> None:
    # an MLA model type: a llama config's kv_lora_rank is refused (LlamaConfig ignores it; tests/test_never_silent.py)
    spec = parse(model_type="deepseek_v3", kv_lora_rank=512, qk_rope_head_dim=64, num_key_value_heads=8, head_dim=64)
    assert attn(spec).kind is AttentionKind.MLA and attn(spec).elements_per_token == 576
    assert spec.attention_label == "MLA"


def test_nested_text_config_inherits_dtype() -> None:
    spec = parse_config({"model_type": "llava", "torch_dtype": "float16", "text_config": {**BASE}})
    assert spec.model_dtype == "fp16" and spec.num_layers == 4


def test_qwen2_sliding_from_max_window_layers() -> None:
    spec = parse(use_sliding_window=True, sliding_window=1024, max_window_layers=2)
    assert kinds(spec) == ["full", "full", "sliding", "sliding"]


def test_qwen2_sliding_off() -> None:
    spec = parse(use_sliding_window=False, sliding_window=1024)
    assert kinds(spec) == ["full"] * 4
    assert any("use_sliding_window is false" in note for note in spec.notes)


def test_uniform_window_and_zero_window() -> None:
    assert kinds(parse(sliding_window=4096)) == ["sliding"] * 4
    assert kinds(parse(sliding_window=0)) == ["full"] * 4


def test_pattern_int_and_string() -> None:
    assert kinds(parse(sliding_window=8, sliding_window_pattern=2)) == ["sliding", "full"] * 2
    assert kinds(parse(sliding_window=8, sliding_window_pattern="LLLG")) == ["sliding"] * 3 + ["full"]


def test_layer_types_win() -> None:
    spec = parse(sliding_window=16, layer_types=["full_attention", "sliding_attention"] * 2)
    assert kinds(spec) == ["full", "sliding"] * 2 and attn(spec, 1).window == 16


def test_gemma3n_shared_layers_store_nothing() -> None:
    spec = parse(
        num_hidden_layers=6,
        sliding_window=8,
        num_kv_shared_layers=2,
        layer_types=["sliding_attention", "full_attention"] * 3,
    )
    assert kinds(spec) == ["sliding", "full", "sliding", "full", "shared", "shared"]
    assert (attn(spec, 4).shares_kv_with, attn(spec, 5).shares_kv_with) == (2, 3)


def test_jamba_period() -> None:
    spec = parse_config(
        {
            **BASE,
            "model_type": "jamba",  # recurrent fields on a llama config are refused (tests/test_never_silent.py)
            "num_hidden_layers": 8,
            "attn_layer_period": 4,
            "attn_layer_offset": 2,
            "mamba_d_state": 16,
            "mamba_d_conv": 4,
            "mamba_expand": 2,
        }
    )
    assert Counter(kinds(spec)) == {"mamba": 6, "full": 2} and kinds(spec)[2] == "full"
    state = spec.layers[0].state
    assert state is not None
    # Mamba-1: conv over d_inner = 2 x 512 channels, 3 kept inputs; SSM d_inner x 16.
    assert (state.conv_elements, state.ssm_elements) == (1024 * 3, 1024 * 16)


def test_unknown_model_type_names_fields_used() -> None:
    spec = parse(model_type="brand_new", num_key_value_heads=4)
    assert "unknown model_type 'brand_new'" in spec.notes[0]
    assert "num_hidden_layers" in spec.notes[0] and "num_key_value_heads" in spec.notes[0]


def test_auto_map_is_noted_not_run() -> None:
    spec = parse(auto_map={"AutoModel": "evil.Model"})
    assert any("no" in n and "auto_map" in n for n in spec.notes)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"num_hidden_layers": -1}, "num_hidden_layers' must be between"),
        ({"num_hidden_layers": 0}, "num_hidden_layers' must be between"),
        ({"num_hidden_layers": "32"}, "num_hidden_layers' must be an integer"),
        ({"num_hidden_layers": True}, "num_hidden_layers' must be an integer"),
        ({"num_hidden_layers": 3.5}, "num_hidden_layers' must be an integer"),
        ({"num_hidden_layers": 10**12}, "num_hidden_layers' must be between"),
        ({"num_attention_heads": None}, "missing field 'num_attention_heads'"),
        ({"hidden_size": 500}, "must divide hidden_size"),
        ({"num_key_value_heads": 3}, "must divide num_attention_heads"),
        ({"head_dim": 0}, "head_dim' must be between"),
        ({"layer_types": ["full_attention"]}, "lists 1 layers but the model has 4"),
        ({"layer_types": ["warp_attention"] * 4}, "cache-relevant field layer_types"),
        ({"is_encoder_decoder": True}, "missing field 'decoder_layers'"),
        ({"model_type": 7}, "model_type' must be a plain name"),
    ({"model_type": "[/]"}, "model_type' must be a plain name"),
        ({"sliding_window": -3}, "sliding_window' must be between"),
    ],
)
def test_bad_fields(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match="test.json") as info:
        parse(**fields)
    assert message in str(info.value)


def test_missing_layers_names_alternatives() -> None:
    with pytest.raises(ConfigError, match="missing field 'num_hidden_layers' / 'n_layer'"):
        parse_config({"model_type": "x", "num_attention_heads": 2}, source="test.json")


def test_not_an_object() -> None:
    with pytest.raises(ConfigError, match="JSON object, got list"):
        parse_config([1, 2], source="test.json")


def test_encoder_decoder_whisper() -> None:
    import json
    from pathlib import Path

    raw = json.loads((Path(__file__).parent / "data" / "configs" / "openai--whisper-large-v3.json").read_text())
    spec = parse_config(raw, source="whisper.json")
    # 32 decoder layers, each: self-attention 20 heads x 1280/20 = 64, cross-attention over 1500 encoder frames.
    assert spec.is_encoder_decoder and spec.num_layers == 32 and spec.max_context == 448
    layer = spec.layers[0]
    assert layer.kind == "full+cross" and layer.cross is not None
    assert (layer.cross.num_kv_heads, layer.cross.head_dim, layer.cross.encoder_tokens) == (20, 64, 1500)
    assert parse_config(raw, encoder_tokens=750).layers[0].cross.encoder_tokens == 750  # type: ignore[union-attr]


def test_encoder_decoder_t5_uses_d_kv() -> None:
    spec = parse_config(
        {
            "model_type": "t5",
            "is_encoder_decoder": True,
            "d_model": 512,
            "d_kv": 64,
            "num_heads": 8,
            "num_layers": 6,
            "n_positions": 512,
        }
    )
    assert spec.num_layers == 6 and spec.layers[0].attention.head_dim == 64  # type: ignore[union-attr]


def test_falcon_h1_every_layer_has_attention_and_mamba() -> None:
    spec = parse_config({"model_type": "falcon_h1", "num_hidden_layers": 4, "num_attention_heads": 8,
                         "num_key_value_heads": 2, "hidden_size": 512, "mamba_d_ssm": 1024, "mamba_n_heads": 16,
                         "mamba_d_head": 64, "mamba_n_groups": 1, "mamba_d_state": 128, "mamba_d_conv": 4})
    assert kinds(spec) == ["mamba2+full"] * 4
    state = spec.layers[0].state
    assert state is not None  # conv over 1024 + 2 x 1 x 128 channels, 3 kept; SSM 16 x 64 x 128
    assert (state.conv_elements, state.ssm_elements) == ((1024 + 256) * 3, 16 * 64 * 128)


def test_per_layer_intermediate_size_is_not_an_error() -> None:
    # Gemma 3n lists one MLP width per layer: the widest sets the profile run's activation peak
    spec = parse(intermediate_size=[1024, 3072, 2048, 1024])
    assert spec.intermediate_size == 3072 and spec.num_layers == 4
    assert parse(intermediate_size=[1024, "wide", 2048, 1024]).intermediate_size is None
    assert parse(intermediate_size=[1024, True, 2048, 1024]).intermediate_size is None
    assert parse(intermediate_size=[0, 2048, 2048, 1024]).intermediate_size is None
    assert parse(intermediate_size=[1 << 30, 1, 1, 1]).intermediate_size == 1 << 30
    assert parse(intermediate_size=[(1 << 30) + 1, 1, 1, 1]).intermediate_size is None
    assert parse(intermediate_size=[]).intermediate_size is None
