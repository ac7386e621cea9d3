"""Hybrid configs that name no layer pattern: sized as the transformers class builds them, or refused.

- GraniteMoeHybridConfig.__post_init__ (transformers 5.25): layer_types None -> every layer "linear_attention"
  (Mamba-2); vLLM's granitemoehybrid.py (0.34 ALL_DECODER_LAYER_TYPES) builds the same list.
- NemotronHConfig.__post_init__ (5.25): no hybrid_override_pattern and no layers_block_type -> a fixed 4-layer list
  that ignores num_hidden_layers. No checkpoint is built that way, so kvsize refuses it by name.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from transformers import DynamicCache
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

import kvsize
from kvsize.config import parse_config
from kvsize.errors import ConfigError
from tests.test_families_round5 import GRANITE_4_SHAPE
from tests.tiny_configs import registry_config


def test_granite_4_without_layer_types_is_all_mamba2() -> None:
    raw = {**GRANITE_4_SHAPE, "model_type": "granitemoehybrid"}
    spec = parse_config(raw)
    assert [layer.kind for layer in spec.layers] == ["mamba2"] * 8
    assert any("names no layer_types" in n for n in spec.notes)
    # GRANITE_4_SHAPE's Mamba-2 layer: (3 x 1,280 conv + 16 x 64 x 128 SSM) x 2 B = 269,824 B; 8 layers, no KV.
    scenario = kvsize.estimate(raw, ctx=1000, engine="formula", kv_dtype="bf16").scenarios[0]
    assert scenario.kv_bytes_per_token == 0
    assert scenario.state_bytes_per_request == 8 * (3 * 1280 + 16 * 64 * 128) * 2 == 2_158_592


def test_granite_4_without_layer_types_is_what_the_transformers_class_builds() -> None:
    # An all-Mamba model cannot run the meta-device forward (masking_utils needs an attention layer), so the oracle
    # is the config class and the cache it builds: eight linear-attention (Mamba) cache layers.
    config = CONFIG_MAPPING["granitemoehybrid"](**GRANITE_4_SHAPE)
    assert config.layer_types == ["linear_attention"] * 8
    cache = DynamicCache(config=config)
    assert [type(layer).__name__ for layer in cache.layers] == ["LinearAttentionLayer"] * 8


def nemotron_without_pattern() -> dict[str, object]:
    raw = dict(registry_config("nvidia/Nemotron-H-56B-Base-8K"))
    del raw["hybrid_override_pattern"]
    return raw


def test_nemotron_h_without_its_pattern_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="'hybrid_override_pattern' is missing"):
        parse_config(nemotron_without_pattern())
    # the transformers 5 spelling of the same list is read
    pattern = registry_config("nvidia/Nemotron-H-56B-Base-8K")["hybrid_override_pattern"]
    names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    listed = {**nemotron_without_pattern(), "layers_block_type": [names[c] for c in pattern]}
    assert sum(layer.kind == "full" for layer in parse_config(listed).layers) == pattern.count("*")


def test_nemotron_h_refusal_is_one_line_exit_2(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(nemotron_without_pattern()))
    run = subprocess.run([sys.executable, "-m", "kvsize", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1 and "hybrid_override_pattern" in run.stderr and "Traceback" not in run.stderr
