"""Pure sizing: an ArchSpec and a scenario (context, requests, dtype) -> integer bytes.

Engines differ in how many tokens a layer holds and how a token's bytes are laid out; those rules live in
`kvsize.engines`. This module holds the result types and the arithmetic every engine shares.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kvsize.dtypes import KvDtype


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LayerGroupCost(_Result):
    """The cost of a run of identical layers in one scenario."""

    kind: str
    """full, sliding, chunked, mla, cross, shared, mamba2, gated_deltanet, mamba2+full, none, ..."""
    count: int
    """Layers in the group."""
    tokens_held: int
    """Tokens each layer of the group keeps per request at this context (0 for state-only layers)."""
    bytes_per_token: int
    """Cache bytes one held token costs in one layer of the group."""
    state_bytes: int
    """Fixed recurrent-state bytes per layer per request."""
    bytes: int
    """All layers of the group, all requests."""


class KvEstimate(_Result):
    """KV-cache size of one scenario under one engine's rules."""

    engine: str
    rule: str
    """The allocation rule applied, in words, with its source."""
    ctx: int = Field(gt=0)
    batch: int = Field(gt=0)
    kv_dtype: KvDtype
    kv_bytes_per_token: int
    """Bytes one token of context adds across all layers that cache per token, while windows still fill."""
    state_bytes_per_request: int
    """Fixed bytes per request (recurrent states, cross-attention to encoder tokens)."""
    bytes_per_request: int
    """Cache bytes of one request of `ctx` tokens."""
    kv_cache_bytes: int
    """All `batch` requests: batch x bytes_per_request."""
    layers: tuple[LayerGroupCost, ...]
