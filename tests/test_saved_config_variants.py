"""Real configs of known families in the shapes other tools save them, found unseen by a hostile sweep (stop 37).

- A planner's trimmed GLM-5 config names no index_* key: GlmMoeDsaConfig's defaults (index_head_dim 128,
  configuration_glm_moe_dsa.py, transformers 5.25) still give every layer its indexer key. It was sized 18% low.
- DeepSeek-V4 saved by transformers 5.7 writes qk_nope_head_dim and compress_rope_parameters (DeepseekV4Config
  5.25 reads neither): the cache is the one nvidia's config gives. It was refused.
- EXAONE 4.5's text_config carries MTP keys (mtp_share_layers): modeling_exaone4_5.py builds no layer for them.
  It was refused.
- MiniMax-M3-VL's text_config names no model_type (MiniMaxM3VLConfig builds it as minimax_m3_vl_text). It was
  refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvsize
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.errors import ConfigError
from tests.test_hf_oracle import build_meta_model, forward, held_bytes, predicted
from tests.tiny_configs import registry_config

CONFIGS = Path(__file__).parent / "data" / "configs"


def config(name: str) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads((CONFIGS / f"{name}.json").read_text())
    return raw


def per_token(raw: dict[str, Any], engine: str = "formula") -> int:
    return kvsize.estimate(raw, ctx=4096, engine=engine, kv_dtype="bf16").scenarios[0].kv_bytes_per_token


def test_glm5_without_index_keys_still_caches_the_indexer_key() -> None:
    raw = config("zai-org--GLM-5-FP8")
    assert not any(k.startswith("index_") for k in raw)
    # 78 layers x (512 latent + 64 RoPE + 128 indexer key) x 2 B = 109,824 B per token (transformers'
    # DynamicIndexedLayer holds 1,408 B per token per layer); without the key it was 78 x 576 x 2 = 89,856.
    assert per_token(raw) == 78 * (512 + 64 + 128) * 2 == 109_824
    spec = parse_config(raw, source="t")
    assert any("index_head_dim" in note for note in spec.notes)  # says it took the class default
    assert per_token(raw) == per_token(registry_config("zai-org/GLM-5-FP8"))  # the hub's full config


def test_glm5_trimmed_config_matches_the_transformers_cache() -> None:
    raw = config("zai-org--GLM-5-FP8")
    spec = parse_config(raw, source="t")
    held = held_bytes(forward(build_meta_model(raw, KvDtype.BF16), 16))
    assert held == predicted(spec, raw, KvDtype.BF16, 16)
    assert held[0] == 2 * 16 * (512 + 64 + 128) * 2  # the oracle's batch of 2, 16 tokens, one layer


def test_deepseek_v32_without_index_keys_still_caches_the_indexer_key() -> None:
    # DeepseekV32Config (5.25): index_head_dim 128 by default; 61 layers x (576 + 128) x 2 B
    raw = {k: v for k, v in registry_config("deepseek-ai/DeepSeek-V3.2").items() if not k.startswith("index_")}
    assert per_token(raw) == 61 * (576 + 128) * 2 == 85_888


def test_deepseek_v4_saved_by_transformers_5_7_sizes_as_the_hub_config() -> None:
    redhat = config("RedHatAI--DeepSeek-V4-Flash-NVFP4-FP8")
    assert redhat["qk_nope_head_dim"] == 512 - 64 and "compress_rope_parameters" in redhat
    nvidia = registry_config("nvidia/DeepSeek-V4-Flash-NVFP4")
    for engine in ("formula", "hf"):
        assert per_token(redhat, engine) == per_token(nvidia, engine)
    # its near twin: a qk_nope_head_dim that is not head_dim less the RoPE part is refused by name
    with pytest.raises(ConfigError, match="qk_nope_head_dim"):
        parse_config({**redhat, "qk_nope_head_dim": 384}, source="t")


def test_exaone_4_5_ignores_its_mtp_layer() -> None:
    raw = config("LGAI-EXAONE--EXAONE-4.5-33B")
    assert raw["text_config"]["mtp_share_layers"] is True
    spec = parse_config(raw, source="t")
    assert [layer.kind for layer in spec.layers].count("sliding") == 48 and spec.num_layers == 64
    assert not any("unknown model_type" in n for n in spec.notes)
    # 64 layers x 8 KV heads x 128 x (K + V) x 2 B = 262,144 B per token; at 32k the hf engine keeps 4,095 tokens
    # of the 4,096-token window in the 48 sliding layers: 16 x 32,768 x 4,096 + 48 x 4,095 x 4,096.
    s = kvsize.estimate(raw, ctx=32768, engine="hf", kv_dtype="bf16").scenarios[0]
    assert s.kv_bytes_per_token == 262_144
    assert s.bytes_per_request == 16 * 32768 * 4096 + 48 * 4095 * 4096 == 2_952_593_408


def test_minimax_m3_vl_wrapper_without_a_text_model_type() -> None:
    # the wrapper as nvidia's MiniMax-M3-NVFP4 ships it (aiconfigurator blob 19e336f6), built here around the
    # registry's flat MiniMax-M3: the text_config names no model_type, the wrapper two keys transformers ignores
    flat = registry_config("MiniMaxAI/MiniMax-M3")
    text = {k: v for k, v in flat.items() if k != "model_type"}
    wrapper = {
        "model_type": "minimax_m3_vl",
        "architectures": ["MiniMaxM3SparseForConditionalGeneration"],
        "text_config": text,
        "img_token_compression_config": {"enable": True},
        "num_reward_heads": 1,
    }
    for engine in ("formula", "hf"):
        assert per_token(wrapper, engine) == per_token(flat, engine)
    # a wrapper of another type gets no such default: its text_config stays untyped and the sparse keys refused
    with pytest.raises(ConfigError, match="sparse_attention_config"):
        parse_config({**wrapper, "model_type": "some_vl"}, source="t")


@pytest.mark.parametrize(
    "hub_id",
    [
        "Qwen/Qwen3.5-27B",
        "Qwen/Qwen3.5-35B-A3B",
        "mistralai/Devstral-Small-2-24B-Instruct-2512",
        "zai-org/GLM-4.7-Flash",
    ],
)
def test_transformers_families_are_not_called_unknown(hub_id: str) -> None:
    spec = parse_config(registry_config(hub_id), source="t")
    assert not any(n.startswith("unknown model_type") for n in spec.notes), spec.notes


def test_hf_auto_keeps_the_model_dtype_beside_an_fp8_kv_scheme() -> None:
    # transformers 5.25 reads kv_cache_scheme only into CompressedTensorsConfig; generate() caches in the activation
    # dtype (HfEngine.auto_kv_dtype). vLLM serves the scheme's fp8 (its kv_cache_dtype "auto" follows the checkpoint).
    # MiniMax-M2.5 NVFP4: 62 layers x 8 KV heads x 128 x (K + V) = 126,976 elements per token.
    raw = registry_config("nvidia/MiniMax-M2.5-NVFP4")
    hf = kvsize.estimate(raw, ctx=4096, engine="hf")
    assert hf.scenarios[0].kv_bytes_per_token == 126_976 * 2
    assert any("kv dtype auto -> bf16" in n for n in hf.notes)
    vllm = kvsize.estimate(raw, ctx=4096, engine="vllm").scenarios[0]
    assert vllm.kv_bytes_per_token == 126_976


@pytest.mark.parametrize("key", ["index_topk", "index_head_dim"])
def test_a_null_dsa_index_key_is_refused(key: str) -> None:
    # the class default applies to a missing key only; DeepseekV32Config / GlmMoeDsaConfig refuse null, and kvsize
    # would otherwise drop the indexer key (78 x 576 x 2 B instead of 78 x 704 x 2 B for GLM-5)
    with pytest.raises(ConfigError, match=f"'{key}' is null"):
        parse_config({**config("zai-org--GLM-5-FP8"), key: None}, source="t")


def test_gemma4_moe_experts_take_the_checkpoints_nvfp4() -> None:
    # nvidia/Gemma-4-26B-A4B-NVFP4 (ModelOpt): the ignore list keeps every layer's mlp, router and self_attn in 16
    # bits, so only `layers.N.experts` are NVFP4 (Gemma4TextDecoderLayer holds them beside its dense mlp).
    # Before, no module matched and the whole checkpoint was priced at bf16 (48.07 GiB).
    s = kvsize.estimate("nvidia/Gemma-4-26B-A4B-NVFP4", ctx=8192, engine="hf", kv_dtype="bf16", gpu="h100")
    gpu = s.scenarios[0].gpu
    assert gpu is not None and gpu.weights_bytes is not None
    assert "priced by module: experts" in (gpu.weights_source or "")
    assert gpu.weights_bytes < 25_805_936_176 * 2 // 2  # under half the bf16 size: the experts are most of it


def test_deepseek_v4_reference_module_names_take_their_quantization() -> None:
    # RedHatAI's compressed-tensors targets name the reference checkpoint's modules ("re:.*attn.*(fused_wqa_wkv|wq_b|
    # wo_a|wo_b)$" FP8 blocks, "re:.*ffn.*(gate|up|down)_proj$" NVFP4). Before, no module matched and all 290.9e9
    # parameters were priced at bf16 (541.91 GiB): "does not fit" on a B200.
    s = kvsize.estimate(
        str(CONFIGS / "RedHatAI--DeepSeek-V4-Flash-NVFP4-FP8.json"), ctx=8192, engine="hf", kv_dtype="bf16", gpu="b200"
    )
    gpu = s.scenarios[0].gpu
    assert gpu is not None and gpu.weights_bytes is not None
    source = gpu.weights_source or ""
    assert "attention" in source and "experts" in source and "no module matched" not in source
    assert gpu.weights_bytes < 290_935_118_592 * 2 // 3  # far under bf16: the experts are NVFP4
    assert gpu.fits
