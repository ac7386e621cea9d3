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
    # zai-org/GLM-4.7-FP8 (registry config, no quantization_config; its hf_quant_config is not in the registry):
    # the decoder Linears (attention 12,540,968,960 + dense MLP 2,666,004,480 + experts 335,963,750,400 =
    # 351,170,723,840 parameters, kvsize/params.py's count) at 1 byte, the rest (embeddings and lm_head
    # 775,946,240 each, norms 947,200, routers 72,908,800) at bf16: 351,170,723,840 + 2 x 1,625,748,480 =
    # 354,422,220,800 B, not the config's bf16 705,592,944,640 B
    weights = find_weights(load_model_config("zai-org/GLM-4.7-FP8"))
    assert weights.bytes == 351_170_723_840 + 2 * (2 * 775_946_240 + 947_200 + 72_908_800) == 354_422_220_800
    assert weights.estimated
    assert "at fp8 (its name)" in weights.source and "no quantization_config" in weights.source


def test_the_checkpoints_hf_quant_config_in_the_registry_wins() -> None:
    # nvidia/Llama-3.1-70B-Instruct-FP8: kvsize/models/weights.json holds its hf_quant_config.json (ModelOpt FP8,
    # exclude_modules ["lm_head"]): 70,553,706,496 parameters, of which embeddings and lm_head 128,256 x 8,192 =
    # 1,050,673,152 each and norms 80 x 2 x 8,192 + 8,192 = 1,318,912 stay at bf16; the 560 decoder Linears
    # (80 layers x q, k, v, o, gate, up, down: 68,451,041,280 parameters) at 1 byte plus one fp32 scale each:
    # 68,451,041,280 + 560 x 4 + 2 x (2 x 1,050,673,152 + 1,318,912) = 72,656,373,952 B
    weights = find_weights(load_model_config("nvidia/Llama-3.1-70B-Instruct-FP8"))
    assert weights.bytes == 68_451_041_280 + 560 * 4 + 2 * (2 * 1_050_673_152 + 1_318_912) == 72_656_373_952
    assert "(modelopt)" in weights.source and "its name" not in weights.source


def test_a_stated_quantization_config_wins_over_the_name() -> None:
    # nvidia/GLM-5.1-NVFP4 carries ModelOpt's quantization_config, whose exclusions keep attention and the dense
    # MLPs in bf16: the name is not read
    weights = find_weights(load_model_config("nvidia/GLM-5.1-NVFP4"))
    assert "(modelopt)" in weights.source and "its name" not in weights.source


def test_nvfp4_hybrid_near_the_logged_load() -> None:
    # the case: nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 was priced at bf16 (58.8 GiB) where vLLM
    # logged 17.8 GiB; with its hf_quant_config (ModelOpt 0.29.0 NVFP4, the attention layers, the Mamba layers
    # beside them and every conv1d excluded) it is within 2% of the log
    weights = find_weights(load_model_config("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4"))
    assert "(modelopt)" in weights.source
    assert abs(weights.bytes / 1024**3 - 17.8) / 17.8 < 0.02
