"""Ergo (transformers 5.25 models/ergo): a sliding/global hybrid whose released configs use their own key names.

ErgoConfig.__post_init__: layer i slides over `sliding_window` tokens unless (i + 1) % global_attention_every_n_layers
== 0 (default 4); ErgoConfig.attribute_map: local_attention_window -> sliding_window (default 512);
ErgoAttention.__init__: head_dim = hidden_size // num_attention_heads. The meta-device oracle is
tests/test_hf_oracle.py (test_ergo_released_config_spelling and the "ergo" families).
"""

from __future__ import annotations

from typing import Any

import pytest

from kvsize.cache_fields import UnmodelledFields
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.errors import ConfigError
from kvsize.spec import AttentionKind

RELEASED: dict[str, Any] = {
    "model_type": "ergo",
    "num_hidden_layers": 10,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "local_attention_window": 1000,
    "global_attention_every_n_layers": 5,
    "max_position_embeddings": 65536,
}


def kinds(raw: dict[str, Any]) -> list[AttentionKind]:
    return [layer.attention.kind for layer in parse_config(raw).layers if layer.attention is not None]


def test_released_spelling_sizes_the_window_it_names() -> None:
    spec = parse_config(RELEASED)
    slide, full = AttentionKind.SLIDING, AttentionKind.FULL
    assert kinds(RELEASED) == [slide] * 4 + [full] + [slide] * 4 + [full]  # layers 4 and 9 global
    windows = {layer.attention.window for layer in spec.layers if layer.attention is not None}
    assert windows == {1000, None}
    # hf: 8 sliding layers x 999 tokens + 2 full x ctx, 4 KV heads x 128 x (K + V) x 2 B = 2,048 B per token.
    engine = get_engine("hf", "5.25.0")
    assert sum(engine.layer_bytes(spec, ctx=4000, batch=1, kv_dtype=KvDtype.BF16)) == 2048 * (8 * 999 + 2 * 4000)


def test_defaults_are_the_config_class_defaults() -> None:
    raw = {k: v for k, v in RELEASED.items() if k not in ("local_attention_window", "global_attention_every_n_layers")}
    spec = parse_config(raw)
    assert [i for i, k in enumerate(kinds(raw)) if k is AttentionKind.FULL] == [3, 7]  # every 4th
    assert {layer.attention.window for layer in spec.layers if layer.attention is not None} == {512, None}


def test_a_window_given_twice_must_agree() -> None:
    assert kinds({**RELEASED, "sliding_window": 1000}) == kinds(RELEASED)
    with pytest.raises(ConfigError, match="local_attention_window .* and sliding_window .* name one field"):
        parse_config({**RELEASED, "sliding_window": 2000})


def test_ergo_fields_elsewhere_are_not_understood() -> None:
    other = {**RELEASED, "model_type": "llama"}
    with pytest.raises(UnmodelledFields) as raised:
        parse_config(other)
    assert set(raised.value.fields) >= {"local_attention_window", "global_attention_every_n_layers"}


def test_a_zero_interval_is_refused() -> None:
    # (i + 1) % 0 has no meaning: a config error naming the field, not a crash.
    with pytest.raises(ConfigError, match="global_attention_every_n_layers"):
        parse_config({**RELEASED, "global_attention_every_n_layers": 0})
