"""The formula engine: seed figures, dtype byte tables, windows and states, and the laws it must obey."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import arch_specs

from kvsize.config import parse_config
from kvsize.dtypes import KvDtype, parse_kv_dtype
from kvsize.engines import get_engine
from kvsize.errors import KvsizeError, UsageError
from kvsize.registry import find_entry, load_registry_config
from kvsize.spec import ArchSpec

FORMULA = get_engine("formula")
GIB = 1024**3


def registry_spec(hub_id: str) -> ArchSpec:
    entry = find_entry(hub_id)
    assert entry is not None
    return parse_config(load_registry_config(entry), source=hub_id)


def test_seed_llama_31_8b() -> None:
    # 2 (K,V) x 32 layers x 8 KV heads x 128 head_dim x 2 B = 131,072 B/token; x 131,072 tokens = 16 GiB.
    est = FORMULA.estimate(registry_spec("meta-llama/Llama-3.1-8B"), ctx=131072, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_bytes_per_token == 131_072
    assert est.kv_cache_bytes == 16 * GIB


def test_seed_llama_31_70b() -> None:
    # 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 B/token; x 131,072 = 40 GiB.
    est = FORMULA.estimate(
        registry_spec("meta-llama/Llama-3.1-70B-Instruct"), ctx=131072, batch=1, kv_dtype=KvDtype.BF16
    )
    assert est.kv_bytes_per_token == 327_680
    assert est.kv_cache_bytes == 40 * GIB


def test_seed_deepseek_v3_latent() -> None:
    # One latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements per layer, not x2:
    # 61 layers x 576 x 2 B = 70,272 B/token.
    spec = registry_spec("deepseek-ai/DeepSeek-V3")
    assert {layer.attention.elements_per_token for layer in spec.layers if layer.attention} == {576}
    est = FORMULA.estimate(spec, ctx=4096, batch=2, kv_dtype=KvDtype.BF16)
    assert est.kv_bytes_per_token == 70_272
    assert est.kv_cache_bytes == 2 * 4096 * 70_272


@pytest.mark.parametrize(
    ("dtype", "bytes_per_token"),
    [
        # Llama-3.1-8B: 32 layers x 8 KV heads x (K row + V row) of 128 elements each.
        (KvDtype.FP32, 32 * 8 * 2 * 128 * 4),  # 262,144
        (KvDtype.FP16, 32 * 8 * 2 * 128 * 2),  # 131,072
        (KvDtype.FP8_E4M3, 32 * 8 * 2 * 128),  # 65,536
        (KvDtype.FP8_E5M2, 32 * 8 * 2 * 128),
        (KvDtype.INT8, 32 * 8 * 2 * 128),
        (KvDtype.INT4, 32 * 8 * 2 * 64),  # 128 x 4 bit = 64 B per row
        (KvDtype.NVFP4, 32 * 8 * 2 * (64 + 8)),  # 64 B of e2m1 + 8 e4m3 scales (one per 16) = 72 B per row
        (KvDtype.MXFP4, 32 * 8 * 2 * (64 + 4)),  # 64 B + 4 E8M0 scales (one per 32) = 68 B per row
        (KvDtype.Q8_0, 32 * 8 * 2 * 4 * 34),  # 4 blocks of 32: 2 B fp16 scale + 32 int8 = 34 B each
        (KvDtype.Q4_0, 32 * 8 * 2 * 4 * 18),  # 2 B + 16 B per 32
        (KvDtype.Q4_1, 32 * 8 * 2 * 4 * 20),
        (KvDtype.Q5_0, 32 * 8 * 2 * 4 * 22),
        (KvDtype.Q5_1, 32 * 8 * 2 * 4 * 24),
        (KvDtype.IQ4_NL, 32 * 8 * 2 * 4 * 18),
    ],
)
def test_dtype_bytes_llama_8b(dtype: KvDtype, bytes_per_token: int) -> None:
    est = FORMULA.estimate(registry_spec("meta-llama/Llama-3.1-8B"), ctx=1000, batch=1, kv_dtype=dtype)
    assert est.kv_bytes_per_token == bytes_per_token
    assert est.kv_cache_bytes == 1000 * bytes_per_token


def test_block_format_rounds_each_row_up() -> None:
    # SmolLM2-135M: head_dim 576/9 = 64 -> q8_0 holds 64 elements in 2 blocks of 34 B = 68 B per row;
    # 30 layers x 3 KV heads x 2 rows x 68 B = 12,240 B/token.
    est = FORMULA.estimate(registry_spec("HuggingFaceTB/SmolLM2-135M-Instruct"), ctx=10, batch=1, kv_dtype=KvDtype.Q8_0)
    assert est.kv_bytes_per_token == 30 * 3 * 2 * 68


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        ("fp8", KvDtype.FP8_E4M3),
        ("FP4", KvDtype.NVFP4),
        ("bfloat16", KvDtype.BF16),
        ("float16", KvDtype.FP16),
        ("q8_0", KvDtype.Q8_0),
        ("fp8-e5m2", KvDtype.FP8_E5M2),
    ],
)
def test_dtype_spellings(name: str, dtype: KvDtype) -> None:
    assert parse_kv_dtype(name) is dtype


def test_unknown_dtype() -> None:
    assert parse_kv_dtype("fp7") is None


def test_sliding_layers_stop_at_window() -> None:
    # gemma-2-2b: 13 sliding (window 4096) + 13 full layers, 4 KV heads x 256 head_dim -> 2,048 elements/layer.
    # At 8,192 tokens: 13 x 2048 x 2 B x 4096 + 13 x 2048 x 2 B x 8192 = 654,311,424 B.
    spec = registry_spec("google/gemma-2-2b")
    est = FORMULA.estimate(spec, ctx=8192, batch=1, kv_dtype=KvDtype.BF16)
    assert est.kv_cache_bytes == 13 * 2048 * 2 * 4096 + 13 * 2048 * 2 * 8192 == 654_311_424


def test_chunked_layers_hold_one_chunk() -> None:
    # Llama 4 Scout: 36 chunked (8192) + 12 full layers, 8 KV heads x 128 -> 2,048 elements/layer.
    # At 1M tokens: 36 x 2048 x 2 x 8192 + 12 x 2048 x 2 x 1,048,576 B.
    est = FORMULA.estimate(
        registry_spec("meta-llama/Llama-4-Scout-17B-16E-Instruct"), ctx=1 << 20, batch=1, kv_dtype=KvDtype.BF16
    )
    assert est.kv_cache_bytes == 36 * 2048 * 2 * 8192 + 12 * 2048 * 2 * (1 << 20)


def test_mamba_state_is_per_request_not_per_token() -> None:
    # Mamba-Codestral: 64 Mamba-2 layers; conv (8192 + 2 x 8 x 128 = 10,240 channels) x (4 - 1) = 30,720
    # plus SSM 128 heads x 64 x 128 = 1,048,576 -> 1,079,296 elements x 2 B x 64 = 138,149,888 B per request.
    spec = registry_spec("mistralai/Mamba-Codestral-7B-v0.1")
    for ctx in (1, 4096, 1 << 20):
        est = FORMULA.estimate(spec, ctx=ctx, batch=4, kv_dtype=KvDtype.BF16)
        assert est.kv_bytes_per_token == 0
        assert est.kv_cache_bytes == 4 * 138_149_888


def test_hybrid_linear_attention() -> None:
    # Qwen3-Next: 12 full layers (2 KV heads x 256 x 2 = 1,024 elements) + 36 Gated DeltaNet layers with
    # conv (2 x 16 x 128 + 32 x 128 = 8,192 channels) x 3 + state 32 x 128 x 128 = 548,864 elements.
    est = FORMULA.estimate(registry_spec("Qwen/Qwen3-Next-80B-A3B-Thinking"), ctx=1000, batch=2, kv_dtype=KvDtype.BF16)
    assert est.kv_bytes_per_token == 12 * 1024 * 2
    assert est.state_bytes_per_request == 36 * 548_864 * 2
    assert est.kv_cache_bytes == 2 * (12 * 1024 * 2 * 1000 + 36 * 548_864 * 2) == 128_188_416


def test_cross_attention_layers_hold_the_image() -> None:
    # Llama-3.2-90B-Vision: 20 cross layers x 8 KV heads x 2 x 128 = 40,960 elements per image token;
    # one image = 4 tiles x (40 x 40 + 1) = 6,404 tokens; plus 80 self-attention layers at 100 tokens.
    est = FORMULA.estimate(
        registry_spec("meta-llama/Llama-3.2-90B-Vision-Instruct"), ctx=100, batch=1, kv_dtype=KvDtype.BF16
    )
    assert est.kv_cache_bytes == 80 * 8 * 2 * 128 * 2 * 100 + 40_960 * 2 * 6404


def test_unknown_engine() -> None:
    with pytest.raises(UsageError, match="unknown engine 'nope'"):
        get_engine("nope")


# --- laws ------------------------------------------------------------------------------------------------

ctxs = st.integers(min_value=1, max_value=1 << 22)
batches = st.integers(min_value=1, max_value=1024)


@settings(max_examples=150, deadline=None)
@given(arch_specs(), ctxs, batches)
def test_linear_in_requests(spec: ArchSpec, ctx: int, batch: int) -> None:
    one = FORMULA.estimate(spec, ctx=ctx, batch=1, kv_dtype=KvDtype.BF16)
    many = FORMULA.estimate(spec, ctx=ctx, batch=batch, kv_dtype=KvDtype.BF16)
    assert many.kv_cache_bytes == batch * one.kv_cache_bytes


@settings(max_examples=150, deadline=None)
@given(arch_specs(), st.integers(min_value=1, max_value=1 << 20), st.integers(min_value=0, max_value=1 << 20))
def test_monotone_and_linear_below_windows(spec: ArchSpec, ctx: int, extra: int) -> None:
    small = FORMULA.estimate(spec, ctx=ctx, batch=1, kv_dtype=KvDtype.BF16)
    large = FORMULA.estimate(spec, ctx=ctx + extra, batch=1, kv_dtype=KvDtype.BF16)
    assert large.kv_cache_bytes >= small.kv_cache_bytes
    smallest_window = min((a.window for layer in spec.layers if (a := layer.attention) and a.window), default=None)
    if smallest_window is None or ctx + extra <= smallest_window:
        assert large.kv_cache_bytes - small.kv_cache_bytes == extra * small.kv_bytes_per_token
        assert small.kv_cache_bytes == ctx * small.kv_bytes_per_token + small.state_bytes_per_request


@settings(max_examples=150, deadline=None)
@given(arch_specs(), ctxs, batches)
def test_fp8_is_half_of_bf16_and_fp32_double(spec: ArchSpec, ctx: int, batch: int) -> None:
    layers = tuple(layer for layer in spec.layers if layer.state is None)
    if not layers:
        return
    kv_only = msgspec.structs.replace(spec, layers=layers)
    bf16 = FORMULA.estimate(kv_only, ctx=ctx, batch=batch, kv_dtype=KvDtype.BF16).kv_cache_bytes
    assert FORMULA.estimate(kv_only, ctx=ctx, batch=batch, kv_dtype=KvDtype.FP8_E4M3).kv_cache_bytes * 2 == bf16
    assert FORMULA.estimate(kv_only, ctx=ctx, batch=batch, kv_dtype=KvDtype.FP32).kv_cache_bytes == 2 * bf16


@settings(max_examples=150, deadline=None)
@given(arch_specs(), ctxs, batches, st.sampled_from(list(KvDtype)))
def test_total_is_sum_of_layers_and_integer(spec: ArchSpec, ctx: int, batch: int, dtype: KvDtype) -> None:
    est = FORMULA.estimate(spec, ctx=ctx, batch=batch, kv_dtype=dtype)
    assert isinstance(est.kv_cache_bytes, int)
    assert est.kv_cache_bytes == sum(g.bytes for g in est.layers)
    assert est.kv_cache_bytes == batch * est.bytes_per_request
    assert sum(g.count for g in est.layers) == spec.num_layers


@settings(max_examples=100, deadline=None)
@given(arch_specs(), st.integers(min_value=1, max_value=1 << 16))
def test_windowed_layers_stop_growing(spec: ArchSpec, beyond: int) -> None:
    """Past every window, a model whose layers are all windowed (or stateful) costs the same per request."""
    if any(a.window is None for layer in spec.layers if (a := layer.attention)):
        return
    top = max((a.window for layer in spec.layers if (a := layer.attention) and a.window), default=1)
    at = FORMULA.estimate(spec, ctx=top, batch=1, kv_dtype=KvDtype.BF16).kv_cache_bytes
    assert FORMULA.estimate(spec, ctx=top + beyond, batch=1, kv_dtype=KvDtype.BF16).kv_cache_bytes == at


def test_encoder_decoder_cross_attention_per_request() -> None:
    """Whisper large-v3: 32 decoder layers x 20 heads x 64 x (K+V) x 2 B = 163,840 B per generated token, plus
    the encoder's 1500 frames held by every layer's cross-attention: 32 x 20 x 64 x 2 x 2 x 1500 = 245,760,000 B."""
    import json
    from pathlib import Path

    raw = json.loads((Path(__file__).parent / "data" / "configs" / "openai--whisper-large-v3.json").read_text())
    spec = parse_config(raw)
    est = FORMULA.estimate(spec, ctx=448, batch=4, kv_dtype=KvDtype.FP16)
    assert est.kv_bytes_per_token == 163_840 and est.state_bytes_per_request == 245_760_000
    assert est.kv_cache_bytes == 4 * (448 * 163_840 + 245_760_000)
    # vLLM 0.11: whole 16-token blocks: cdiv(448, 16) = 28 and cdiv(1500, 16) = 94 blocks per layer (the
    # encoder length is max_num_encoder_input_tokens for encoder-decoder models, VllmConfig.__post_init__).
    paged = get_engine("vllm", "0.11").estimate(spec, ctx=448, batch=1, kv_dtype=KvDtype.FP16)
    assert paged.kv_cache_bytes == 32 * 20 * 64 * 2 * 2 * (28 * 16 + 94 * 16)
    # vLLM 0.33.0 sizes cross-attention by SchedulerConfig.max_num_encoder_input_tokens = max_num_batched_tokens:
    # on the reference H100 (API server) max(448, 8192) = 8192 (no chunked prefill for encoder-decoder), then
    # min(1024 x 448, 8192) = 8192 -> cdiv(8192, 16) = 512 blocks per layer.
    paged = get_engine("vllm").estimate(spec, ctx=448, batch=1, kv_dtype=KvDtype.FP16)
    assert paged.kv_cache_bytes == 32 * 20 * 64 * 2 * 2 * (28 * 16 + 512 * 16)
    for name in ("sglang", "trtllm", "llamacpp"):
        with pytest.raises(KvsizeError, match="encoder-decoder"):
            get_engine(name).estimate(spec, ctx=448, batch=1, kv_dtype=KvDtype.FP16)
