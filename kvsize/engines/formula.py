"""The engine-independent formula: the bytes the model's attention needs, with no engine overhead.

    per token per layer = num_kv_heads x (head_dim_k + head_dim_v) x bytes per element   (K and V)
    MLA                 = (kv_lora_rank + qk_rope_head_dim) x bytes per element           (one latent)
    MLA with DSA        = (kv_lora_rank + qk_rope_head_dim + index_head_dim) x bytes       (+ the indexer key)
    total               = batch x sum over layers of (tokens held x per-token bytes + fixed state)

DeepSeek-V4 compressed layers (CSA / HCA) hold their window of raw tokens (one K = V row each) plus
floor(ctx / compress_ratio) compressed entries of head_dim (CSA: and one indexer key of index_head_dim per
entry); the compressor's partial window in flight is engine bookkeeping, not counted.
Full and MLA layers hold the whole context; sliding-window and chunked layers at most their window;
cross-attention layers the encoder's tokens; recurrent layers a fixed state (conv_kernel - 1 inputs of the
short convolution plus the SSM / delta-rule matrix) in the model's dtype; shared layers nothing. With
tensor parallelism KV heads split across ranks (at least one per rank) and an MLA latent is replicated.
"""

from __future__ import annotations

from kvsize.dtypes import KvDtype
from kvsize.engines.base import Engine
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, LayerSpec, StateKind


class FormulaEngine(Engine):
    name = "formula"
    title = "formula (engine-independent)"
    serves_encoder_decoder = True
    sized_state_kinds = frozenset(StateKind)  # every state: conv_kernel - 1 inputs plus the recurrent matrix

    @property
    def rule(self) -> str:
        return (
            "2 x layers x kv_heads x head_dim x bytes (MLA: kv_lora_rank + qk_rope_head_dim, one latent, "
            "+ index_head_dim with DeepSeek sparse attention); "
            "windowed layers hold min(ctx, window); recurrent state once per request; no block rounding"
        )

    def attention_bytes_per_token(self, attn: AttentionSpec, dtype: KvDtype, tp: int = 1) -> int:
        """DeepSeek sparse attention (DeepSeek-V3.2, GLM-5): an MLA layer also keeps its indexer's key of
        index_head_dim per token (transformers cache_utils.py DynamicIndexedLayer), in the cache dtype here; a
        layer that shares an earlier layer's top-k (GLM-5.2) runs no indexer and keeps none."""
        extra = self.row_bytes(attn.own_indexer_dim, dtype)
        return super().attention_bytes_per_token(attn, dtype, tp) + extra

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        if attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.COMPRESSED):
            assert attn.window is not None
            return min(ctx, attn.window)
        if attn.kind is AttentionKind.CROSS:
            assert attn.encoder_tokens is not None
            return attn.encoder_tokens
        if attn.kind is AttentionKind.SHARED:
            return 0
        return ctx

    def layer_request_bytes(
        self, spec: ArchSpec, layer: LayerSpec, ctx: int, dtype: KvDtype, tp: int
    ) -> tuple[int, int, int]:
        """A compressed layer's window is its per-token part; its compressed entries (and CSA indexer keys)
        at this context are counted with the state (one entry per compress_ratio tokens, not per token)."""
        attn = layer.attention
        if attn is None or attn.kind is not AttentionKind.COMPRESSED:
            return super().layer_request_bytes(spec, layer, ctx, dtype, tp)
        assert attn.compress_ratio is not None
        entry = self.row_bytes(attn.head_dim, dtype) + self.row_bytes(attn.index_head_dim or 0, dtype)
        per_token = self.attention_bytes_per_token(attn, dtype, tp)  # one K = V head: replicated on every rank
        return per_token, self.tokens_allocated(attn, ctx), ctx // attn.compress_ratio * entry

    def estimate_notes(self, spec: ArchSpec) -> tuple[str, ...]:
        if not any(a is not None and a.kind is AttentionKind.COMPRESSED for a in _attentions(spec)):
            return ()
        return (
            "formula: DeepSeek-V4 compressed layers hold min(ctx, window) raw tokens (K = V, one row) and "
            "floor(ctx / compress_ratio) entries of head_dim (CSA: + index_head_dim indexer key), counted as the "
            "layer's state at this context; the compressor's partial window is not counted",
        )

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    shares_prefixes = True
    recomputes_last_prompt_token = False

    def prefix_sharing_rule(self) -> str:
        return (
            "formula: the prefix's N tokens stored exactly once (windowed layers: those inside the window; "
            "compressed layers' entries: once per request)"
        )

    def prefix_shared_tokens(self, spec: ArchSpec, attn: AttentionSpec, hit: int, ctx: int, block: int) -> int:
        if attn.kind in (AttentionKind.CROSS, AttentionKind.SHARED):
            return 0
        if attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED, AttentionKind.COMPRESSED):
            assert attn.window is not None  # compressed layers: the window's raw tokens; entries per request
            return max(0, min(hit, ctx) - max(0, ctx - attn.window))
        return min(hit, ctx)


def _attentions(spec: ArchSpec) -> list[AttentionSpec | None]:
    return [layer.attention for layer, _ in spec.layer_groups()]
