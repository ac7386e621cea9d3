"""Configs shared by the tests: small hand-made ones, and the registry's by hub id (each test module keeps its
own hand-worked figures)."""

from __future__ import annotations

import copy
from typing import Any

from kvsize.registry import find_entry, load_registry_config


def registry_config(hub_id: str) -> dict[str, Any]:
    """A fresh copy of the built-in registry's config.json for `hub_id` (the test may change it)."""
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return copy.deepcopy(load_registry_config(entry))


def llama_8b_budget(version: str, gpu: str, **settings: Any) -> Any:
    """vLLM `version`'s KvBudget of meta-llama/Llama-3.1-8B (16,060,522,496 B of weights) on the profile `gpu`,
    with BudgetSettings(**settings)."""
    from kvsize.budget import BudgetSettings, kv_budget
    from kvsize.config import parse_config
    from kvsize.engines.context import Device
    from kvsize.profiles import resolve_gpu

    profile = resolve_gpu(gpu)
    return kv_budget(
        "vllm",
        version,
        parse_config(registry_config("meta-llama/Llama-3.1-8B")),
        memory_bytes=profile.memory_bytes,
        weights_bytes=16_060_522_496,
        settings=BudgetSettings(**settings),
        device=Device.from_profile(profile),
    )


# 4 layers, 8 KV heads of 128 (hidden 4096 / 32 heads): 2 x 4 x 8 x 128 x 2 B = 16,384 B per token in bf16.
TINY: dict[str, Any] = {
    "model_type": "llama",
    "num_hidden_layers": 4,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 32000,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
