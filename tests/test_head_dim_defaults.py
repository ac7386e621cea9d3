"""A config.json without head_dim: transformers' config class sets its own default (`head_dim: int = 256` in
models/qwen3_next/configuration_qwen3_next.py, 128 in nemotron_h's, 5.25.0), which the model and vLLM (loading
the config through transformers) use, not hidden_size / num_attention_heads. kvsize/data/head_dim_defaults.json
holds them, extracted by scripts/extract_head_dim_defaults.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tiny_configs import registry_config

from kvsize.config import head_dim_default, parse_config

DATA = Path(__file__).resolve().parent.parent / "kvsize" / "data" / "head_dim_defaults.json"


@pytest.mark.parametrize(
    ("hub_id", "model_type", "default"),
    [
        ("Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3_next", 256),
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "nemotron_h", 128),
    ],
)
def test_a_missing_head_dim_is_the_class_default(hub_id: str, model_type: str, default: int) -> None:
    raw = registry_config(hub_id)
    assert raw["model_type"] == model_type and raw["head_dim"] == default
    # hidden / heads would give another width (Qwen3-Next: 2,048 / 16 = 128; Nemotron-3-Nano: 2,688 / 32 = 84)
    assert raw["hidden_size"] // raw["num_attention_heads"] != default
    without = {k: v for k, v in raw.items() if k != "head_dim"}
    full, bare = parse_config(raw), parse_config(without)
    assert [layer.attention for layer in bare.layers] == [layer.attention for layer in full.layers]
    assert any("defaults: head_dim" in note for note in bare.notes)


def test_no_class_default_keeps_hidden_over_heads() -> None:
    # LlamaConfig sets head_dim None (hidden_size // num_attention_heads): Llama-3.1-8B without it is 4,096 / 32
    assert head_dim_default("llama") is None
    raw = {k: v for k, v in registry_config("meta-llama/Llama-3.1-8B").items() if k != "head_dim"}
    heads = {layer.attention.head_dim for layer in parse_config(raw).layers if layer.attention is not None}
    assert heads == {128}


def test_another_head_width_key_is_not_overridden() -> None:
    # a config naming its width as kv_channels keeps it: the class default fills only a config naming none
    raw = {k: v for k, v in registry_config("Qwen/Qwen3-Next-80B-A3B-Thinking").items() if k != "head_dim"}
    spec = parse_config({**raw, "kv_channels": 64})
    assert {a.head_dim for layer in spec.layers if (a := layer.attention) is not None and a.head_dim} == {64}


def test_every_default_names_its_source_file() -> None:
    data = json.loads(DATA.read_text())
    assert data["transformers"] == "5.25.0"
    for model_type, entry in data["defaults"].items():
        assert entry["head_dim"] > 0 and entry["source"].startswith("transformers 5.25.0 models/"), model_type


# --- the layer pattern a config class generates (configuration_*.py __post_init__, transformers 5.25.0) -------


def _kinds(spec: object) -> list[str]:
    return [layer.attention.kind.value if layer.attention else "state" for layer in spec.layers]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("hub_id", "period"),
    [
        # gpt_oss: "sliding_attention" if bool((i + 1) % 2) else "full_attention"
        ("openai/gpt-oss-20b", 2),
        # olmo3: "sliding_attention" if (i + 1) % 4 != 0 else "full_attention"
        ("allenai/Olmo-3.1-32B-Instruct", 4),
    ],
)
def test_a_missing_layer_types_is_the_class_pattern(hub_id: str, period: int) -> None:
    raw = registry_config(hub_id)
    bare = {k: v for k, v in raw.items() if k != "layer_types"}
    n = raw["num_hidden_layers"]
    generated = ["full_attention" if (i + 1) % period == 0 else "sliding_attention" for i in range(n)]
    assert _kinds(parse_config(bare)) == _kinds(parse_config({**bare, "layer_types": generated}))
    kinds = _kinds(parse_config(bare))
    assert kinds.count("full") == n // period and kinds.count("sliding") == n - n // period  # not all sliding
    # 13 layers break the period: gpt-oss keeps 6 full (layers 1, 3, ..., 11)
    if period == 2:
        assert _kinds(parse_config({**bare, "num_hidden_layers": 13})).count("full") == 6


def test_minimax_without_a_layer_list_alternates_full_and_linear() -> None:
    # MiniMaxConfig: "full_attention" if bool((i + 1) % 2) else "linear_attention"; attn_type_list, where a
    # config gives it, is the checkpoint's own (vLLM minimax_text_01.py) and wins
    base = {
        "architectures": ["MiniMaxForCausalLM"],
        "model_type": "minimax",
        "hidden_size": 6144,
        "num_hidden_layers": 8,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 200064,
        "max_position_embeddings": 10240000,
        "intermediate_size": 9216,
        "num_local_experts": 32,
        "num_experts_per_tok": 2,
        "torch_dtype": "bfloat16",
    }
    kinds = _kinds(parse_config(base))
    assert kinds[0::2] == ["full"] * 4 and "full" not in kinds[1::2]
    listed = _kinds(parse_config({**base, "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1]}))
    assert listed.count("full") == 1


def test_llama4_chunks_at_the_class_default() -> None:
    # Llama4TextConfig.attention_chunk_size = 8192: a text_config without it chunks its RoPE layers as one with it
    raw = registry_config("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    text = {k: v for k, v in raw["text_config"].items() if k != "attention_chunk_size"}
    bare, full = parse_config({**raw, "text_config": text}), parse_config(raw)
    assert [layer.attention for layer in bare.layers] == [layer.attention for layer in full.layers]
    # an explicit null still turns chunking off
    off = parse_config({**raw, "text_config": {**text, "attention_chunk_size": None}})
    assert "chunked" not in _kinds(off) and "chunked" in _kinds(full)
