"""Pure sizing: an ArchSpec and a scenario (context, requests, dtype) -> integer bytes.

Engines differ in how many tokens a layer holds and how a token's bytes are laid out; those rules live in
`kvsize.engines`. This module holds the result types and the arithmetic every engine shares.
"""

from __future__ import annotations

from kvsize.dtypes import KvDtype
from kvsize.record import Record


class LayerGroupCost(Record, frozen=True, kw_only=True):
    """The cost of a run of identical layers in one scenario."""

    kind: str
    """full, sliding, chunked, mla, cross, shared, mamba2, gated_deltanet, mamba2+full, none, ..."""
    count: int
    """Layers in the group."""
    tokens_held: int
    """Token slots each layer of the group allocates per request at this context (block rounding included;
    0 for state-only layers)."""
    bytes_per_token: int
    """Cache bytes one token slot costs in one layer of the group, on one tensor-parallel rank."""
    state_bytes: int
    """Fixed recurrent-state bytes per layer per request, on one rank (engine padding included)."""
    bytes: int
    """All layers of the group, all requests, all tensor-parallel ranks."""


class KvEstimate(Record, frozen=True, kw_only=True):
    """KV-cache size of one scenario under one engine's rules."""

    engine: str
    engine_version: str
    """The release sized: the one asked for, or the newest kvsize has read."""
    engine_rules: str | None = None
    """The era of releases whose rules were applied (`0.21-0.25`); None for engines with named rule sets."""
    rule: str
    """The allocation rule applied, in words, with its source."""
    ctx: int
    batch: int
    kv_dtype: KvDtype
    kv_dtype_storage: str
    """How the dtype is stored: bytes per element, or per block of elements with its scales."""
    tp: int = 1
    pp: int = 1
    block_size: int | None = None
    """Tokens per cache block (paged engines); None where the engine does not allocate in blocks."""
    kv_bytes_per_token: int
    """Bytes one token of context adds across all layers (and ranks) that cache per token, while windows
    still fill; no block rounding."""
    state_bytes_per_request: int
    """Fixed bytes per request (recurrent states, cross-attention to encoder tokens), all ranks."""
    bytes_per_request: int
    """Cache bytes of one request of `ctx` tokens, all ranks, block rounding included."""
    kv_cache_bytes: int
    """All `batch` requests on all ranks: batch x bytes_per_request (replicated heads counted per rank)."""
    kv_cache_bytes_per_gpu: int
    """The largest rank's share of kv_cache_bytes (the pipeline stage with the most cache)."""
    layers: tuple[LayerGroupCost, ...]
    notes: tuple[str, ...] = ()
    """What the engine's rule changed or assumed for this model (windows promoted, states padded...)."""
