"""Qwen-family sliding windows with use_sliding_window on: which layers slide, per family and per engine.

transformers 5.25 (configuration_<type>.py __post_init__):
- Qwen2 / Qwen3 / Qwen2-VL: layers i >= max_window_layers (class default 28; 80 for Qwen2-VL / Qwen2.5-VL).
- Qwen2-MoE: the even layers below max_window_layers ("(i + 1) % 2 and i < max_window_layers").
- Qwen3-MoE: every layer (no max_window_layers field, no layer_types: cache_utils.py get_layer_types_and_kwargs
  reads each layer's sliding_window).
- A window left out is the class's 4096; an explicit null slides nothing.

vLLM pages Qwen2-MoE by the transformers release beside it (VllmRules.qwen2_moe_windows): models/qwen2_moe.py
takes the engine's one window, which engine/arg_utils.py sets only without mixed layer_types.
"""

from __future__ import annotations

from typing import Any

import pytest

import kvsize
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.spec import ArchSpec
from tests.test_hf_oracle import B, build_meta_model, forward, held_bytes, predicted
from tests.tiny_configs import registry_config

QWEN15_MOE = "tests/data/configs/Qwen--Qwen1.5-MoE-A2.7B.json"


def kinds(spec: ArchSpec) -> list[str]:
    return [layer.kind for layer in spec.layers]


def qwen15_moe(**changes: Any) -> dict[str, Any]:
    # Qwen1.5-MoE-A2.7B: 24 layers, 16 KV heads of 128 (2,048 / 16), max_window_layers 21, window 32,768 (off).
    import json

    with open(QWEN15_MOE) as f:
        raw: dict[str, Any] = json.load(f)
    return {**raw, **changes}


def test_qwen3_moe_slides_every_layer_and_reads_no_max_window_layers() -> None:
    # Qwen3-30B-A3B: 48 layers x 4 KV heads x 128, max_window_layers 48. Under the Qwen2 rule (i >= 48) no layer
    # would slide; Qwen3MoeConfig slides all 48 at 4,096.
    raw = {**registry_config("Qwen/Qwen3-30B-A3B"), "use_sliding_window": True, "sliding_window": 4096}
    spec = parse_config(raw, source="t")
    assert kinds(spec) == ["sliding"] * 48
    assert {layer.attention.window for layer in spec.layers if layer.attention} == {4096}
    s = kvsize.estimate(raw, ctx=32768, engine="formula")
    assert s.scenarios[0].bytes_per_request == 48 * 2 * 4 * 128 * 2 * 4096 == 402_653_184


def test_qwen2_moe_slides_its_even_layers_below_max_window_layers() -> None:
    # Layers 0, 2, ..., 20 (11) slide at 4,096; 1, 3, ..., 19 and 21-23 (13) are full. Per layer and token
    # 2 x 16 x 128 x 2 B = 8,192: 11 x 8,192 x 4,096 + 13 x 8,192 x 32,768 = 3,858,759,680 B.
    raw = qwen15_moe(use_sliding_window=True, sliding_window=4096)
    spec = parse_config(raw, source="t")
    assert kinds(spec) == ["sliding" if i % 2 == 0 and i < 21 else "full" for i in range(24)]
    assert kinds(spec).count("sliding") == 11
    s = kvsize.estimate(raw, ctx=32768, engine="formula")
    assert s.scenarios[0].bytes_per_request == 11 * 8192 * 4096 + 13 * 8192 * 32768 == 3_858_759_680
    # max_window_layers 22 adds no layer (21 is odd); 23 adds layer 22: the bound is "below", the parity even.
    assert kinds(parse_config({**raw, "max_window_layers": 22}, source="t")).count("sliding") == 11
    assert kinds(parse_config({**raw, "max_window_layers": 23}, source="t")).count("sliding") == 12
    # Without max_window_layers the class's 28 covers all 24 layers: the 12 even ones slide.
    no_bound = {k: v for k, v in raw.items() if k != "max_window_layers"}
    assert kinds(parse_config(no_bound, source="t")) == ["sliding" if i % 2 == 0 else "full" for i in range(24)]


def test_qwen2_class_defaults_when_the_config_leaves_them_out() -> None:
    # Qwen2.5-7B: 28 layers. Without max_window_layers the class's 28 leaves every layer full (i >= 28: none); a
    # 36-layer Qwen3-8B slides layers 28-35. A window left out is 4,096; an explicit null slides nothing.
    qwen3 = {**registry_config("Qwen/Qwen3-8B"), "use_sliding_window": True, "sliding_window": 4096}
    qwen3.pop("max_window_layers", None)
    assert kinds(parse_config(qwen3, source="t")) == ["full"] * 28 + ["sliding"] * 8
    every = {**qwen3, "max_window_layers": 0}
    del every["sliding_window"]
    spec = parse_config(every, source="t")
    assert kinds(spec) == ["sliding"] * 36
    assert {layer.attention.window for layer in spec.layers if layer.attention} == {4096}
    assert kinds(parse_config({**every, "sliding_window": None}, source="t")) == ["full"] * 36
    # Qwen2.5-VL's text class defaults max_window_layers to 80: a 28-layer Qwen2.5-VL-7B slides nothing.
    vl = {**registry_config("Qwen/Qwen2.5-VL-7B-Instruct"), "use_sliding_window": True, "sliding_window": 4096}
    vl.pop("max_window_layers", None)
    vl.get("text_config", {}).pop("max_window_layers", None)
    assert "sliding" not in kinds(parse_config(vl, source="t"))


def tiny(model_type: str, **fields: Any) -> dict[str, Any]:
    base = {
        "model_type": model_type,
        "num_hidden_layers": 6,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "hidden_size": 64,
        "intermediate_size": 128,
        "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 64,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "vocab_size": 128,
        "max_position_embeddings": 4096,
        "use_sliding_window": True,
        "sliding_window": 5,
        "torch_dtype": "bfloat16",
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (tiny("qwen3_moe", max_window_layers=3), ["sliding"] * 6),
        (tiny("qwen2_moe", max_window_layers=4), ["sliding", "full", "sliding", "full", "full", "full"]),
        (tiny("qwen2_moe", max_window_layers=5), ["sliding", "full", "sliding", "full", "sliding", "full"]),
        (tiny("qwen2", max_window_layers=4), ["full"] * 4 + ["sliding"] * 2),
    ],
    ids=["qwen3_moe", "qwen2_moe-4", "qwen2_moe-5", "qwen2-4"],
)
def test_the_transformers_cache_holds_what_kvsize_sizes(raw: dict[str, Any], expected: list[str]) -> None:
    """The meta-device oracle: the DynamicCache transformers 5.25 builds after 11 tokens, layer by layer, against
    the hand count and the hf engine (a 5-token window keeps 4 tokens between forwards, a full layer all 11)."""
    spec = parse_config(raw, source="t")
    assert kinds(spec) == expected
    held = held_bytes(forward(build_meta_model(raw, KvDtype.BF16), 11))
    per_token = B * 2 * 2 * 16 * 2  # the oracle's batch of 2; K and V, 2 heads x 16 x 2 B (bf16)
    assert held == [per_token * (4 if k == "sliding" else 11) for k in expected]
    assert held == predicted(spec, raw, KvDtype.BF16, 11)


def test_vllm_pages_qwen2_moe_by_its_transformers_release() -> None:
    raw = qwen15_moe(use_sliding_window=True, sliding_window=4096)
    all_sliding = {**raw, "layer_types": ["sliding_attention"] * 24}  # vLLM's one window on every layer
    all_full = {**raw, "use_sliding_window": False}

    def per_request(config: dict[str, Any], release: str) -> int:
        return kvsize.estimate(config, ctx=32768, engine="vllm", engine_version=release).scenarios[0].bytes_per_request

    # Through 0.19 (transformers 4.x: no layer_types) every layer takes the window.
    for release in ("0.10.1.1", "0.19.0"):
        assert per_request(raw, release) == per_request(all_sliding, release) < per_request(all_full, release)
    # 0.20-0.23 run on either major release of transformers: refused, naming both answers.
    for release in ("0.20.0", "0.23.0"):
        with pytest.raises(UnsupportedArchitecture, match="every layer slides under 4.x"):
            per_request(raw, release)
    # From 0.24 (transformers >= 5.5.3: mixed layer_types) no layer slides: 24 x 8,192 x 32,768 B.
    for release in ("0.24.0", "0.34.0"):
        assert per_request(raw, release) == per_request(all_full, release) == 24 * 8192 * 32768
    # A config that lists its own mixed layer_types gets no window in any release.
    listed = {
        **raw,
        "layer_types": ["sliding_attention" if i % 2 == 0 and i < 21 else "full_attention" for i in range(24)],
    }
    for release in ("0.19.0", "0.21.0", "0.34.0"):
        assert per_request(listed, release) == 24 * 8192 * 32768
    notes = kvsize.estimate(raw, ctx=32768, engine="vllm", engine_version="0.19.0").notes
    assert any("every layer of this Qwen2-MoE model in its sliding window" in n for n in notes)


def test_vllm_slides_every_qwen3_moe_layer() -> None:
    # Qwen3-MoE's config has no layer_types in any transformers release, so the engine's window reaches every
    # layer (models/qwen3_moe.py passes none of its own), as transformers slides them.
    raw = {**registry_config("Qwen/Qwen3-30B-A3B"), "use_sliding_window": True, "sliding_window": 4096}
    explicit = {**raw, "layer_types": ["sliding_attention"] * 48}
    for release in ("0.19.0", "0.21.0", "0.34.0"):
        a = kvsize.estimate(raw, ctx=32768, engine="vllm", engine_version=release).scenarios[0]
        b = kvsize.estimate(explicit, ctx=32768, engine="vllm", engine_version=release).scenarios[0]
        assert a.bytes_per_request == b.bytes_per_request < 48 * 2 * 4 * 128 * 2 * 32768


def test_an_untyped_text_config_keeps_its_wrappers_window_rule() -> None:
    # A Qwen2-VL wrapper whose text_config names no model_type: transformers builds it as Qwen2VLTextConfig
    # (max_window_layers 80), so of 100 layers 80 stay full and 20 slide; before, the bound fell to 0 (every layer).
    text = {
        "num_hidden_layers": 100,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "hidden_size": 1024,
        "vocab_size": 1000,
        "max_position_embeddings": 65536,
        "use_sliding_window": True,
        "sliding_window": 2048,
    }
    raw = {"model_type": "qwen2_vl", "text_config": text, "vision_config": {}}
    assert kinds(parse_config(raw, source="t")) == ["full"] * 80 + ["sliding"] * 20
    s = kvsize.estimate(raw, ctx=32768, engine="hf", kv_dtype="bf16").scenarios[0]
    assert s.bytes_per_request == 80 * 32768 * 2048 + 20 * 2047 * 2048 == 5_452_554_240


def test_a_null_use_sliding_window_slides_nothing_in_the_qwen_families() -> None:
    # Qwen2VLTextConfig: `self.sliding_window if self.use_sliding_window else None`: null is off, as false is
    raw = {**registry_config("Qwen/Qwen3-8B"), "use_sliding_window": None, "sliding_window": 1024}
    spec = parse_config(raw, source="t")
    assert kinds(spec) == ["full"] * 36
    assert any("sliding_window 1024 ignored" in n for n in spec.notes)
