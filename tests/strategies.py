"""Hypothesis strategies for valid architecture specs."""

from __future__ import annotations

from hypothesis import strategies as st

from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateKind, StateSpec

dims = st.integers(min_value=1, max_value=512)
heads = st.integers(min_value=1, max_value=64)
windows = st.integers(min_value=1, max_value=1 << 20)


@st.composite
def attention_specs(draw: st.DrawFn) -> AttentionSpec:
    kind = draw(st.sampled_from([AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.MLA]))
    if kind is AttentionKind.MLA:
        rank, rope = draw(dims), draw(st.integers(min_value=0, max_value=128))
        return AttentionSpec(
            kind=kind, num_kv_heads=1, head_dim=rank + rope, head_dim_v=0, kv_lora_rank=rank, qk_rope_head_dim=rope
        )
    head_dim = draw(dims)
    window = draw(windows) if kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED) else None
    return AttentionSpec(kind=kind, num_kv_heads=draw(heads), head_dim=head_dim, head_dim_v=head_dim, window=window)


state_specs = st.builds(
    StateSpec,
    kind=st.sampled_from(list(StateKind)),
    conv_channels=st.integers(1, 4096),
    conv_kernel=st.integers(1, 5),
    ssm_shape=st.tuples(dims, dims),
    dtype=st.just("bf16"),
)


@st.composite
def arch_specs(draw: st.DrawFn, *, with_state: bool = True) -> ArchSpec:
    n = draw(st.integers(min_value=1, max_value=8))
    layers = []
    for i in range(n):
        attn = draw(st.one_of(st.none(), attention_specs())) if with_state else draw(attention_specs())
        state = draw(st.one_of(st.none(), state_specs)) if with_state and attn is None else None
        layers.append(LayerSpec(index=i, attention=attn, state=state))
    return ArchSpec(model_type="synthetic", layers=tuple(layers), num_attention_heads=64)
