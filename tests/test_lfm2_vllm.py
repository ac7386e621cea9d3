"""LFM2 under vLLM (issue 19: a family the serving engines refused). vLLM serves Lfm2ForCausalLM from 0.10.2
(models/lfm2.py, IsHybrid): its short-convolution layers keep MambaStateShapeCalculator.short_conv_state_shape(
tp, conv_dim, conv_L_cache) = (conv_dim / tp, conv_L_cache - 1) in the served dtype (short_conv_state_dtype,
mamba_cache_dtype auto), no recurrent state and no speculative columns; the attention layers page as usual and
the hybrid rules pad each state to one attention page (the same path as Mamba-2 hybrids)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.engines.base import UnsupportedArchitecture
from kvsize.spec import StateKind

CONFIG = Path(__file__).parent / "data" / "never_silent" / "LiquidAI--LFM2-1.2B.json"


def lfm2():  # type: ignore[no-untyped-def]
    return parse_config(json.loads(CONFIG.read_text(encoding="utf-8")), source=str(CONFIG))


def test_short_conv_state_bytes_per_layer() -> None:
    # LFM2-1.2B: conv_dim = hidden_size 2,048, conv_L_cache 3: 2,048 x 2 elements x 2 B (bf16) = 8,192 B per layer;
    # tp 2 shards the channels (divide): 1,024 x 2 x 2 = 4,096
    spec = lfm2()
    state = next(layer.state for layer in spec.layers if layer.state is not None)
    assert state.kind is StateKind.SHORT_CONV
    engine = get_engine("vllm", "0.33.0")
    assert engine.state_bytes(spec, state) == 2048 * 2 * 2 == 8192
    assert engine.state_bytes(spec, state, tp=2) == 1024 * 2 * 2


def test_lfm2_from_vllm_0_10_2() -> None:
    # 0.10.1 ran state models on V0 (its own state cache outside the pool): refused; 0.10.2 sizes it
    with pytest.raises(UnsupportedArchitecture, match="V0"):
        get_engine("vllm", "0.10.1").estimate(lfm2(), ctx=1024, batch=1, kv_dtype=KvDtype.BF16)
    get_engine("vllm", "0.10.2").estimate(lfm2(), ctx=1024, batch=1, kv_dtype=KvDtype.BF16)


def test_lfm2_per_request_under_vllm_0_33() -> None:
    # 6 full-attention layers (full_attn_idxs 2, 5, 8, 10, 12, 14) of 8 KV heads x 64 x 2 x 2 B = 2,048 B per token;
    # at 32,768 tokens: 6 x 2,048 blocks x 16 x 2,048 B = 402,653,184 B. The 10 conv layers' 8,192 B state is padded
    # to one attention page (16 x 2,048 = 32,768 B) and, with prefix caching on (mamba_cache_mode "align":
    # MambaSpec.max_memory_usage_bytes 2 blocks), takes 2 pages: 10 x 2 x 32,768 = 655,360 B
    est = get_engine("vllm", "0.33.0").estimate(lfm2(), ctx=32_768, batch=1, kv_dtype=KvDtype.BF16)
    by_kind = {layer.kind: layer.bytes for layer in est.layers}
    assert by_kind["full"] == 6 * 2048 * 16 * 2048 == 402_653_184
    assert by_kind["short_conv"] == 10 * 2 * 32_768 == 655_360
