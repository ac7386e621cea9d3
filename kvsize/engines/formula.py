"""The engine-independent formula: the bytes the model's attention needs, with no engine overhead.

    per token per layer = num_kv_heads x (head_dim_k + head_dim_v) x bytes per element   (K and V)
    MLA                 = (kv_lora_rank + qk_rope_head_dim) x bytes per element           (one latent)
    total               = batch x sum over layers of (tokens held x per-token bytes + fixed state)

Full and MLA layers hold the whole context; sliding-window and chunked layers at most their window;
cross-attention layers the encoder's tokens; recurrent layers a fixed state (conv_kernel - 1 inputs of the
short convolution plus the SSM / delta-rule matrix) in the model's dtype; shared layers nothing. With
tensor parallelism KV heads split across ranks (at least one per rank) and an MLA latent is replicated.
"""

from __future__ import annotations

from kvsize.engines.base import Engine
from kvsize.spec import ArchSpec, AttentionKind, AttentionSpec, StateKind


class FormulaEngine(Engine):
    name = "formula"
    title = "formula (engine-independent)"
    serves_encoder_decoder = True
    sized_state_kinds = frozenset(StateKind)  # every state: conv_kernel - 1 inputs plus the recurrent matrix

    @property
    def rule(self) -> str:
        return (
            "2 x layers x kv_heads x head_dim x bytes (MLA: kv_lora_rank + qk_rope_head_dim, one latent); "
            "windowed layers hold min(ctx, window); recurrent state once per request; no block rounding"
        )

    def tokens_allocated(self, attn: AttentionSpec, ctx: int) -> int:
        if attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED):
            assert attn.window is not None
            return min(ctx, attn.window)
        if attn.kind is AttentionKind.CROSS:
            assert attn.encoder_tokens is not None
            return attn.encoder_tokens
        if attn.kind is AttentionKind.SHARED:
            return 0
        return ctx

    # --- serving-time memory (kvsize/serving.py) ------------------------------------------------------

    shares_prefixes = True
    recomputes_last_prompt_token = False

    def prefix_sharing_rule(self) -> str:
        return "formula: the prefix's N tokens stored exactly once (windowed layers: those inside the window)"

    def prefix_shared_tokens(self, spec: ArchSpec, attn: AttentionSpec, hit: int, ctx: int, block: int) -> int:
        if attn.kind in (AttentionKind.CROSS, AttentionKind.SHARED):
            return 0
        if attn.kind in (AttentionKind.SLIDING, AttentionKind.CHUNKED):
            assert attn.window is not None
            return max(0, min(hit, ctx) - max(0, ctx - attn.window))
        return min(hit, ctx)
