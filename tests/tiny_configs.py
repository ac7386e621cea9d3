"""Small configs shared by the subprocess tests (each test module keeps its own hand-worked figures)."""

from __future__ import annotations

from typing import Any

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
