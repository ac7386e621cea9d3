"""Checkpoints named for their format whose config.json carries no quantization_config (NVIDIA ModelOpt keeps
it in hf_quant_config.json): priced at the format the name states, and said so, not at the config's bf16."""

from __future__ import annotations

import pytest

from kvsize.resolve import load_model_config
from kvsize.weights import find_weights, named_format


@pytest.mark.parametrize(
    ("hub_id", "expected"),
    [
        ("nvidia/Qwen3-30B-A3B-NVFP4", "nvfp4"),
        ("nvidia/DeepSeek-R1-FP4", "nvfp4"),
        ("nvidia/NVIDIA-Nemotron-3-Super-120B-NVFP4-FP8KV", "nvfp4"),  # FP8 KV cache, NVFP4 weights
        ("nvidia/Llama-3.1-70B-Instruct-FP8", "fp8"),
        ("Qwen/Qwen3-32B-FP8-Static-PerTensor", "fp8"),
        ("someone/Llama-3-8B-FP8KV", None),  # an FP8 KV cache only: the weights are the config's
        ("someone/fp8ish-7b", None),
        ("meta-llama/Llama-3.1-8B", None),
        ("fp8-org/Llama-3.1-8B", None),  # the organisation is not the checkpoint's name
        (None, None),
    ],
)
def test_named_format(hub_id: str | None, expected: str | None) -> None:
    assert named_format(hub_id) == expected


def test_fp8_named_checkpoint_is_priced_at_fp8() -> None:
    # nvidia/Llama-3.1-70B-Instruct-FP8 (registry config, no quantization_config): 70,553,706,496 parameters, of
    # which embeddings and lm_head 128,256 x 8,192 = 1,050,673,152 each and norms 80 x 2 x 8,192 + 8,192 =
    # 1,318,912 stay at bf16; the decoder Linears (70,553,706,496 - 2 x 1,050,673,152 - 1,318,912 =
    # 68,451,041,280) at 1 byte: 68,451,041,280 + 2 x (2,101,346,304 + 1,318,912) = 72,656,371,712 B, not the
    # 141,107,412,992 B of the config's bf16
    weights = find_weights(load_model_config("nvidia/Llama-3.1-70B-Instruct-FP8"))
    assert weights.bytes == 68_451_041_280 + 2 * (2 * 1_050_673_152 + 1_318_912) == 72_656_371_712
    assert weights.estimated
    assert "at fp8 (its name)" in weights.source and "no quantization_config" in weights.source


def test_a_stated_quantization_config_wins_over_the_name() -> None:
    # nvidia/GLM-5.1-NVFP4 carries ModelOpt's quantization_config, whose exclusions keep attention and the dense
    # MLPs in bf16: the name is not read
    weights = find_weights(load_model_config("nvidia/GLM-5.1-NVFP4"))
    assert "(modelopt)" in weights.source and "its name" not in weights.source


def test_nvfp4_named_hybrid_near_the_logged_load() -> None:
    # the case: nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 was priced at bf16 (58.8 GiB) where vLLM
    # logged 17.8 GiB; at NVFP4 (4 bits + an e4m3 scale per 16) for its Linears it is within 2% of the log
    weights = find_weights(load_model_config("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"))
    assert "nvfp4 (its name)" in weights.source
    assert abs(weights.bytes / 1024**3 - 17.8) / 17.8 < 0.02
