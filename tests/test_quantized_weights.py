"""Quantized checkpoints priced module by module (kvsize.weights.quant_scheme / weights_from_config): only the
decoder's Linear layers are quantized, with their scales; embeddings, lm_head, norms, routers and whatever the
quantization_config excludes stay 16-bit. Values worked by hand from the config and the engines' sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvsize.errors import ConfigError
from kvsize.resolve import load_model_config
from kvsize.weights import module_matches, weights_from_config

# Llama-3.1-8B (registry config): per layer q,k,v,o = 4096 x (4096 + 1024 + 1024 + 4096) = 41,943,040 and
# gate/up/down = 3 x 4096 x 14,336 = 176,160,768, so 32 layers hold 32 x 218,103,808 = 6,979,321,856 Linear
# weights. Kept at bf16: embeddings 128,256 x 4096 = 525,336,576, lm_head as many (untied), norms
# 65 x 4096 = 266,240: 1,050,939,392 parameters = 2,101,878,784 bytes.
LLAMA_LINEAR = 6_979_321_856
LLAMA_KEPT_BYTES = 2_101_878_784


def priced(tmp_path: Path, base: str, quant: dict[str, Any]) -> int:
    raw = {**load_model_config(base).raw, "quantization_config": quant}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    return weights_from_config(load_model_config(str(tmp_path)), model_dtype="bf16").bytes


def test_llama_fp8_compressed_tensors_per_channel_ignore_lm_head(tmp_path: Path) -> None:
    # FP8_DYNAMIC (llm-compressor): fp8 weights, one fp32 scale per output channel (vLLM fp8_utils.py
    # create_fp8_scale_parameter: ChannelQuantScaleParameter, float32), counted as 32 bits per 4096 weights:
    # 6,979,321,856 x 32 / 4096 / 8 = 6,815,744 bytes. Total 6,979,321,856 + 6,815,744 + 2,101,878,784.
    # The true scale count is sum(out) = 32 x 43,008 rows x 4 B = 5,505,024 B: 1,310,720 B (0.01%) over.
    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
        },
        "ignore": ["lm_head"],
    }
    assert priced(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", quant) == 9_088_016_384


def test_llama_awq_int4_group_128(tmp_path: Path) -> None:
    # AWQ int4 g128: 4 bits + an fp16 scale and a 4-bit zero per 128 weights (auto_awq.py create_weights):
    # 6,979,321,856 x (4 + 20/128) / 8 = 3,625,975,808; lm_head and embeddings at bf16: + 2,101,878,784.
    quant = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}
    assert priced(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", quant) == 3_625_975_808 + LLAMA_KEPT_BYTES


def test_llama_modelopt_nvfp4(tmp_path: Path) -> None:
    # NVFP4 (modelopt.py KNvfp4Static.create_weights): 4 bits + one e4m3 scale per 16 = 4.5 bits per weight,
    # and fp32 weight_scale_2 + input_scale (8 B) per linear: 6,979,321,856 x 9/16 = 3,925,868,544,
    # + 8 x 7 linears x 32 layers = 1,792, + 2,101,878,784 kept.
    quant = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16, "exclude_modules": ["lm_head"]}
    assert priced(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", quant) == 3_925_868_544 + 1_792 + LLAMA_KEPT_BYTES


def test_hf_quant_config_layout_reads_the_same(tmp_path: Path) -> None:
    # ModelOpt <= 0.29 writes {"quantization": {...}} in hf_quant_config.json (vLLM modelopt.py from_config).
    quant = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16}}
    assert priced(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", quant) == 3_925_868_544 + 1_792 + LLAMA_KEPT_BYTES


def test_ignored_attention_stays_16_bit(tmp_path: Path) -> None:
    # Attention excluded by regex (compressed-tensors re:, re.match): 32 x 41,943,040 = 1,342,177,280 weights
    # at 2 B; the 32 x 176,160,768 = 5,637,144,576 MLP weights at 1 B (per-tensor fp8: + 4 B x 3 x 32 = 384).
    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"}}
        },
        "ignore": ["lm_head", "re:.*self_attn.*"],
    }
    expected = 2 * 1_342_177_280 + 5_637_144_576 + 384 + LLAMA_KEPT_BYTES
    assert priced(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", quant) == expected


def test_router_regex_names_the_router_not_gate_proj() -> None:
    assert module_matches("model.layers.3.mlp.gate", r"re:.*mlp.gate$")
    assert not module_matches("model.layers.3.mlp.gate_proj", r"re:.*mlp.gate$")
    assert module_matches("model.layers.3.block_sparse_moe.gate", "gate")  # plain name: a whole component
    assert not module_matches("model.layers.3.mlp.gate_proj", "gate")
    assert module_matches("model.layers.0.self_attn.q_proj", "model.layers.0.self_attn*")  # ModelOpt fnmatch
    assert module_matches("model.vision_tower.blocks.0.attn", "model.vision_tower")  # prefix


def test_moe_int4_router_and_shared_experts(tmp_path: Path) -> None:
    # Qwen3-30B-A3B (registry): 48 MoE layers, 128 experts x 3 x 2048 x 768 = 603,979,776 expert weights each;
    # attention 2048 x (4096 + 512 + 512) + 4096 x 2048 = 18,874,368 (+ q/k norms 256) per layer; router
    # 128 x 2048 = 262,144. Ignore attention and the router (re:.*mlp.gate$): int4 g128 symmetric (16/128 bits
    # of scale) prices experts at 4.125 bits: 48 x 603,979,776 x 33 / 64 = 14,948,499,456 B. Everything else
    # at bf16: 30,532,122,624 - 28,991,029,248 experts = 1,541,093,376 parameters = 3,082,186,752 B.
    quant = {
        "quant_method": "compressed-tensors",
        "config_groups": {"g": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "group_size": 128}}},
        "ignore": ["lm_head", "re:.*self_attn.*", r"re:.*mlp.gate$"],
    }
    assert priced(tmp_path, "Qwen/Qwen3-30B-A3B", quant) == 14_948_499_456 + 3_082_186_752


def test_deepseek_v3_fp8_block_against_published_size() -> None:
    # DeepSeek-V3 (fp8, 128x128 blocks, fp32 scale_inv per block = 1/512 B per weight). kvsize counts the 61
    # serving layers; the published 688,586,727,753 B (weights.json) also holds the MTP layer: one more MoE
    # layer (187,107,328 attention + 44,040,192 shared + 11,274,289,152 experts at fp8 + scales) and at bf16
    # its norms 14,336, router 1,835,264, enorm/hnorm 2 x 7168, eh_proj 2 x 7168 x 7168 and its own embedding
    # and head (2 x 926,679,040).
    w = weights_from_config(load_model_config("deepseek-ai/DeepSeek-V3"), model_dtype="bf16")
    mtp_fp8 = 187_107_328 + 44_040_192 + 11_274_289_152
    mtp_bf16 = 14_336 + 1_835_264 + 2 * 7168 + 2 * 7168 * 7168 + 2 * 926_679_040
    expected = 688_586_727_753 - (mtp_fp8 + mtp_fp8 // 512) - 2 * mtp_bf16
    # Left over: kv_a_proj_with_mqa's 576 rows are not whole 128-row blocks (ceil adds scales), the fp32
    # e_score_correction_bias priced at bf16, and the source's 11,888,393-byte gap noted in weights.json.
    assert abs(w.bytes - expected) / expected < 1e-4


def test_unknown_method_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="quant_method"):
        priced(tmp_path, "meta-llama/Llama-3.1-8B-Instruct", {"quant_method": "made-up"})
