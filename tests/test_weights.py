"""Weights' size: registry figures, local safetensors metadata, hub metadata, and the labelled estimate."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from tiny_configs import registry_config

from kvsize.errors import UsageError
from kvsize.resolve import LoadedConfig, load_model_config
from kvsize.weights import find_weights, safetensors_data_bytes, weights_from_hub_counts

SMALL = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64,
         "intermediate_size": 128, "vocab_size": 1000, "torch_dtype": "bfloat16"}
# Parameters of SMALL, by hand: embeddings 1000 x 64 + lm_head 1000 x 64 (untied) + final norm 64
# + per layer: q,k,v,o 4 x 64 x 64 + gate/up/down 3 x 64 x 128 + 2 norms x 64 = 16384 + 24576 + 128 = 41088.
SMALL_PARAMS = 2 * 1000 * 64 + 64 + 2 * 41_088


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape, nbytes) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_registry_published_size() -> None:
    weights = find_weights(load_model_config("meta-llama/Llama-3.1-8B"))
    assert weights.bytes == 16_060_522_496 and not weights.estimated


def test_registry_published_parameters_times_dtype() -> None:
    # Meta-Llama-3-8B: 8,030,261,248 published parameters in bf16.
    weights = find_weights(load_model_config("meta-llama/Meta-Llama-3-8B"))
    assert weights.bytes == 2 * 8_030_261_248 and not weights.estimated


def test_local_index_total_size(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123_456}}))
    assert find_weights(load_model_config(str(tmp_path))).bytes == 123_456


def test_local_safetensors_headers(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    write_safetensors(tmp_path / "model-00001.safetensors", {"a": ("BF16", [2, 3], 12), "b": ("F32", [5], 20)})
    write_safetensors(tmp_path / "model-00002.safetensors", {"c": ("F8_E4M3", [7], 7)})
    assert safetensors_data_bytes(tmp_path / "model-00002.safetensors") == 7
    weights = find_weights(load_model_config(str(tmp_path)))
    assert weights.bytes == 12 + 20 + 7 and "headers" in weights.source


def test_hub_counts() -> None:
    weights = weights_from_hub_counts({"BF16": 100, "F8_E4M3": 50, "F32": 3}, "org/m")
    assert weights.bytes == 100 * 2 + 50 + 3 * 4


def test_hub_counts_served_in_float32_and_in_16_bits() -> None:
    # --dtype float32 on an unquantized checkpoint: every 16-bit parameter is built and held in 4 B; the default run
    # of a float32 checkpoint in bf16 holds its F32 parameters in 2 B.
    counts = {"BF16": 100, "F16": 10, "F32": 3}
    assert weights_from_hub_counts(counts, "org/m", "fp32").bytes == (100 + 10 + 3) * 4
    assert weights_from_hub_counts(counts, "org/m", "bf16").bytes == (100 + 10 + 3) * 2
    assert weights_from_hub_counts(counts, "org/m").bytes == 100 * 2 + 10 * 2 + 3 * 4
    # The source says so wherever a 16-bit count was widened, BF16 or F16 alone.
    for alone in ({"BF16": 10}, {"F16": 10}):
        assert "16-bit loaded as fp32" in weights_from_hub_counts(alone, "org/m", "fp32").source
    assert "loaded as" not in weights_from_hub_counts({"F32": 10}, "org/m", "fp32").source


def test_measured_sizes_scale_both_ways(tmp_path: Path) -> None:
    # A local index of a bf16 checkpoint: 123,456 B held as 246,912 B in float32; a float32 one halves in bf16.
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123_456}}))
    loaded = load_model_config(str(tmp_path))
    assert find_weights(loaded, model_dtype="bf16", served_dtype="fp32").bytes == 246_912
    assert find_weights(loaded, model_dtype="fp32", served_dtype="bf16").bytes == 61_728
    assert find_weights(loaded, model_dtype="bf16", served_dtype="fp16").bytes == 123_456
    # A weights_dtype re-pricing at a float width is not a quantized checkpoint: no refusal.
    assert find_weights(loaded, model_dtype="bf16", weights_dtype="fp32", served_dtype="fp32").estimated


def test_a_quantized_checkpoint_served_in_16_bits_keeps_its_size(tmp_path: Path) -> None:
    # torch_dtype float8 beside an fp8 quantization_config: vLLM serves it in bf16 (_resolve_auto_dtype), but the
    # fp8 weights stay fp8 and the rest is stored in 16 bits already: the measured size as it is. Under float32
    # only that rest would widen: refused.
    config = {**SMALL, "torch_dtype": "float8_e4m3fn", "quantization_config": {"quant_method": "fp8"}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 123_456}}))
    loaded = load_model_config(str(tmp_path))
    assert find_weights(loaded, model_dtype="fp8", served_dtype="bf16").bytes == 123_456
    with pytest.raises(UsageError, match="widens only the unquantized part"):
        find_weights(loaded, model_dtype="bf16", served_dtype="fp32")


def test_hub_metadata_used_for_hub_models(tmp_path: Path) -> None:
    loaded = LoadedConfig(model="org/m", raw=SMALL, source="hub", location="org/m@main", folder=tmp_path,
                          hub_id="org/m")
    weights = find_weights(loaded, fetch_hub=lambda repo: {"BF16": 1000})
    assert weights.bytes == 2000 and not weights.estimated


def test_estimate_from_config_is_labelled(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    weights = find_weights(load_model_config(str(tmp_path)), model_dtype="bf16")
    assert weights.estimated and "estimate" in weights.source
    assert weights.bytes == 2 * SMALL_PARAMS


def test_fp8_checkpoint_estimate(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({**SMALL, "quantization_config": {"quant_method": "fp8"}}))
    # FP8 checkpoints quantize decoder Linears only (2 layers x 40,960 = 81,920 weights at 1 byte, plus a 4-byte
    # per-tensor fp32 scale for each of the 7 linears per layer, vLLM fp8_utils.create_fp8_scale_parameter);
    # embeddings, lm_head and the 5 x 64 norm weights stay bf16: 81,920 + 2 x 7 x 4 + 2 x 128,320 = 338,616.
    # (Was SMALL_PARAMS + 128,000, which priced the norms at 1 byte and left out the scales.)
    assert find_weights(load_model_config(str(tmp_path))).bytes == 338_616


def test_fp8_weights_dtype_keeps_embeddings_16_bit(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SMALL))
    weights = find_weights(load_model_config(str(tmp_path)), weights_dtype="fp8")
    # 81,920 decoder-linear weights at 1 byte; embeddings, lm_head and norms (128,320) at 2 bytes (no scales
    # for a bare --weights-dtype): 338,560. (Was SMALL_PARAMS + 128,000: norms priced at 1 byte.)
    assert weights.bytes == 81_920 + 2 * 128_320


def test_gptq_per_channel_group_size(tmp_path: Path) -> None:
    # group_size -1 (per-channel scales, vLLM gptq.py create_weights: group = in_features = hidden 64): 4 + 20/64
    # bits per quantized weight, never negative; embeddings, lm_head and the 320 norm weights stay bf16:
    # (210,240 - 128,320) x (4 + 20/64) / 8 = 44,160, + 128,320 x 2 = 300,800 bytes (was 300,333: norms at 4 bits).
    quant = {"quant_method": "gptq", "bits": 4, "group_size": -1}
    (tmp_path / "config.json").write_text(json.dumps({**SMALL, "quantization_config": quant}))
    weights = find_weights(load_model_config(str(tmp_path)))
    assert SMALL_PARAMS == 210_240
    assert weights.bytes == 300_800


def test_a_tower_left_out_is_named_in_the_weights_line() -> None:
    # A tower kvsize has no counter for (here a made-up type on Gemma 3): the weights estimate says so rather than
    # passing as the whole model.
    from kvsize.resolve import LoadedConfig
    from kvsize.weights import weights_from_config

    raw = registry_config("google/gemma-3-27b-it")
    raw = {**raw, "vision_config": {**raw["vision_config"], "model_type": "made_up_vision"}}
    loaded = LoadedConfig(model="<config>", raw=raw, source="local", location="<dict>")
    size = weights_from_config(loaded, model_dtype="bf16")
    assert "vision tower (made_up_vision) not counted" in size.source
    gemma = LoadedConfig(model="<config>", raw=registry_config("google/gemma-4-E2B-it"), source="local", location="x")
    counted = weights_from_config(gemma, model_dtype="bf16").source
    assert "not counted" not in counted and "and projector counted" not in counted  # only what is left out
    assert counted.startswith("estimate: 5,104,298,432 parameters counted from the config at bf16 (16 bits)")
