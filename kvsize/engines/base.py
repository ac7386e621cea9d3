"""What an engine model is: per-layer rules, and the summing every engine shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from kvsize.dtypes import KvDtype
from kvsize.sizing import KvEstimate, LayerGroupCost
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateSpec

# Layer kinds whose cache grows with the context (the others are fixed per request or empty).
PER_TOKEN_KINDS = frozenset({AttentionKind.FULL, AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.MLA})


class Engine(ABC):
    """An engine's allocation rules. Subclasses override only the rule that differs."""

    name: ClassVar[str]
    rule: ClassVar[str]

    @abstractmethod
    def tokens_held(self, attn: AttentionSpec, ctx: int) -> int:
        """Tokens one layer keeps for a request whose context is `ctx` tokens."""

    def attention_bytes_per_token(self, attn: AttentionSpec, dtype: KvDtype) -> int:
        """Bytes one cached token costs in one layer: every KV head's K row and V row, each packed on its
        own (block formats round each row up to whole blocks)."""
        if attn.kind is AttentionKind.SHARED:
            return 0
        storage = dtype.storage
        row_bytes = storage.bytes_for(attn.head_dim) + (storage.bytes_for(attn.head_dim_v) if attn.head_dim_v else 0)
        return attn.num_kv_heads * row_bytes

    def state_bytes(self, state: StateSpec) -> int:
        """Bytes of one layer's recurrent state per request."""
        return KvDtype(state.dtype).storage.bytes_for(state.conv_elements + state.ssm_elements)

    def layer_cost(self, layer: LayerSpec, count: int, ctx: int, batch: int, dtype: KvDtype) -> LayerGroupCost:
        per_token = tokens = 0
        if layer.attention is not None:
            per_token = self.attention_bytes_per_token(layer.attention, dtype)
            tokens = self.tokens_held(layer.attention, ctx)
        state = self.state_bytes(layer.state) if layer.state is not None else 0
        return LayerGroupCost(
            kind=layer.kind,
            count=count,
            tokens_held=tokens,
            bytes_per_token=per_token,
            state_bytes=state,
            bytes=count * batch * (per_token * tokens + state),
        )

    def estimate(self, spec: ArchSpec, *, ctx: int, batch: int, kv_dtype: KvDtype) -> KvEstimate:
        """Cache bytes of `batch` requests of `ctx` tokens each."""
        pairs = [(layer, self.layer_cost(layer, n, ctx, batch, kv_dtype)) for layer, n in spec.layer_groups()]
        groups = tuple(cost for _, cost in pairs)
        per_token = fixed = 0
        for layer, g in pairs:
            fixed += g.count * g.state_bytes
            kind = layer.attention.kind if layer.attention is not None else None
            if kind in PER_TOKEN_KINDS:
                per_token += g.count * g.bytes_per_token
            elif kind is AttentionKind.CROSS:  # the encoder's tokens: fixed per request
                fixed += g.count * g.bytes_per_token * g.tokens_held
        total = sum(g.bytes for g in groups)
        return KvEstimate(
            engine=self.name,
            rule=self.rule,
            ctx=ctx,
            batch=batch,
            kv_dtype=kv_dtype,
            kv_bytes_per_token=per_token,
            state_bytes_per_request=fixed,
            bytes_per_request=total // batch,
            kv_cache_bytes=total,
            layers=groups,
        )
