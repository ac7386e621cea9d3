"""Every built-in config parses to the layer kinds and numbers worked out by hand in expected_kv.py."""

from __future__ import annotations

from collections import Counter

import pytest
from expected_kv import EXPECTED

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.registry import find_entry, load_registry_config, registry_entries
from kvsize.spec import ArchSpec, AttentionKind

PER_TOKEN = {AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.MLA}


def _spec(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None, hub_id
    return parse_config(load_registry_config(entry), source=hub_id)


def test_registry_holds_every_expected_model() -> None:
    assert {e.hub_id for e in registry_entries().values()} == set(EXPECTED)


@pytest.mark.parametrize("hub_id", sorted(EXPECTED))
def test_layers_match_hand_computed(hub_id: str) -> None:
    spec, expected = _spec(hub_id), EXPECTED[hub_id]
    assert dict(Counter(layer.kind for layer in spec.layers)) == expected.kinds
    assert spec.attention_label == expected.attention
    attn = [layer.attention for layer in spec.layers if layer.attention is not None]
    assert sum(a.elements_per_token for a in attn if a.kind in PER_TOKEN) == expected.elements_per_token
    windows = Counter(f"{a.kind.value}:{a.window}" for a in attn if a.window is not None)
    assert dict(windows) == expected.windows
    states = [layer.state for layer in spec.layers if layer.state is not None]
    assert sum(s.conv_elements + s.ssm_elements for s in states) == expected.state_elements_per_request
    # cross-attention: Mllama's cross layers (attention kind CROSS) and encoder-decoder layers' second attention
    cross = [a for a in attn if a.kind is AttentionKind.CROSS] + [x.cross for x in spec.layers if x.cross is not None]
    assert sum(a.elements_per_token for a in cross) == expected.cross_elements_per_token
    assert max((a.encoder_tokens or 0 for a in cross), default=0) == expected.encoder_tokens
    assert spec.max_context == expected.max_context


@pytest.mark.parametrize("hub_id", sorted(EXPECTED))
def test_formula_bytes_follow_from_elements(hub_id: str) -> None:
    """At bf16 and a context inside every window, bytes = 2 x (per-token elements x ctx + fixed elements)."""
    spec, expected = _spec(hub_id), EXPECTED[hub_id]
    ctx = 100  # below the smallest window of any registry model (gpt-oss: 128)
    est = get_engine("formula").estimate(spec, ctx=ctx, batch=3, kv_dtype=KvDtype.BF16)
    assert est.kv_bytes_per_token == 2 * expected.elements_per_token
    fixed = expected.state_elements_per_request + expected.cross_elements_per_token * expected.encoder_tokens
    assert est.kv_cache_bytes == 3 * 2 * (expected.elements_per_token * ctx + fixed)
