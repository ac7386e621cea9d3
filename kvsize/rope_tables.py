"""The rotary embedding's cos/sin tables that vLLM and SGLang precompute when they load a model. Pure.

Each distinct RoPE a model builds (get_rope caches one per set of arguments) holds a table of `positions x
rotary_dim` elements (cos and sin, rotary_dim / 2 each) as a buffer on every rank, so it is part of the memory
"Model loading took" and comes out of the KV budget. It is small for most models (Llama-3.1-8B: 131,072 x 128 x
2 B = 32 MiB) and large where the maximum position is: Llama 4 Scout's 10,485,760 positions take 2.5 GiB per rank,
Gemma 3's linear x8 scaling 0.5 GiB.

Positions by RoPE type, from the classes get_rope builds (vLLM model_executor/layers/rotary_embedding/, read in
0.8.5, 0.19.0 and 0.33.0; SGLang srt/layers/rotary_embedding.py, read in 0.4.2, 0.4.3 and 0.5.9):
- default, llama3, ntk, proportional, dynamic with `alpha`: max_position (RotaryEmbedding._compute_cos_sin_cache);
- linear: max_position x factor (LinearScalingRotaryEmbedding); dynamic with `factor`: the same
  (DynamicNTKScalingRotaryEmbedding);
- yarn, deepseek_yarn: original_max_position_embeddings x factor (get_rope passes the original maximum;
  YaRNScalingRotaryEmbedding / DeepseekScalingRotaryEmbedding arange(max_position_embeddings x scaling_factor));
- longrope: original + max_position (Phi3LongRoPEScaledRotaryEmbedding concatenates a short and a long table);
- mrope_section (multimodal RoPE): vLLM's MRotaryEmbedding sizes its table for 4x the positions
  (`cache_max_position_num = max_position_embeddings * 4`; from 0.32 Qwen3-VL and Qwen3.5 pass
  positions_factor 1, VllmRules.mrope_unit_factor_archs); SGLang's passes max_position through.
Elements: vLLM casts the table to the model's dtype (`cache.to(dtype)`, dtype = torch's default = the model's);
SGLang keeps float32 on CUDA from 0.4.3 ("cache needs to be in FP32 for numerical stability",
SglangRules.rope_table_fp32) and the model's dtype before. vLLM's DeepSeek models (MLA) build a scaled RoPE as
DeepseekScalingRotaryEmbedding, whose table stays float32 where FlashInfer applies it (0.14.0+,
VllmRules.deepseek_rope_fp32). Not counted: SGLang's DeepseekScalingRotaryEmbedding also keeps cos/sin copies
of the table (cos_cached_total, sin_cached_total), and the vision towers' own RoPE (patch grids, small).
"""

from __future__ import annotations

from typing import Literal

from kvsize.record import Record
from kvsize.spec import ArchSpec, RopeScaling, RopeTable

RopeEngine = Literal["vllm", "sglang"]

# "mrope": Qwen2-VL's legacy `type`, which transformers and vLLM's config patching read as "default"
_PLAIN = frozenset({"default", "mrope", "llama3", "ntk", "proportional", "mllama4", "xdrope"})
_SCALED = frozenset({"linear", "dynamic"})
_YARN = frozenset({"yarn", "deepseek_yarn", "deepseek_llama_scaling"})
MROPE_POSITIONS_FACTOR = 4  # vLLM mrope.py MRotaryEmbedding: max_position_embeddings * 4


class RopeTables(Record, frozen=True, kw_only=True):
    """The RoPE tables on each rank: their bytes and how they were counted."""

    bytes: int
    rule: str
    unread_types: tuple[str, ...] = ()
    """RoPE types kvsize has not read a table rule for (counted as max_position x rotary_dim)."""


def _scaled(positions: int, factor: tuple[int, int] | None) -> int:
    """torch.arange(positions x factor): ceil of the product, exact from the factor's ratio."""
    if factor is None:
        return positions
    num, den = factor
    return -(-positions * num // den)


def table_positions(
    entry: RopeScaling | None, table: RopeTable, engine: RopeEngine, mrope_factor: int = MROPE_POSITIONS_FACTOR
) -> tuple[int, bool]:
    """(positions of the table one RoPE entry builds, whether kvsize has read its type's rule)."""
    max_position = table.max_position
    if entry is None:
        return max_position, True
    kind = entry.rope_type
    original = entry.original_max or table.original_max
    mrope = mrope_factor if entry.mrope and engine == "vllm" else 1
    if kind in _YARN and original is not None:
        return _scaled(original * mrope, entry.factor), True
    if kind in _SCALED:
        return _scaled(max_position * mrope, entry.factor), True
    if kind == "longrope" and original is not None:
        return original + max_position, True
    return max_position * mrope, kind in _PLAIN


FLASHINFER_ROPE_HEADS = frozenset({64, 128, 256, 512})  # deepseek_scaling_rope.py use_flashinfer


def rope_table_bytes(
    spec: ArchSpec,
    *,
    engine: RopeEngine,
    element_bytes: int,
    deepseek_fp32: bool = False,
    mrope_factor: int = MROPE_POSITIONS_FACTOR,
) -> RopeTables:
    """The RoPE tables `engine` keeps on each rank for `spec` (no table when the config states no RoPE).
    `deepseek_fp32`: an MLA model's scaled table stays float32 (VllmRules.deepseek_rope_fp32, on CUDA);
    `mrope_factor`: vLLM's multimodal RoPE positions factor (1 for VllmRules.mrope_unit_factor_archs)."""
    table = spec.rope_table
    if table is None:
        return RopeTables(bytes=0, rule="no RoPE table (the config states no rotary embedding)")
    # one table per layer type's entry when the config nests them (their rope_theta tells them apart), else the
    # config's one RoPE, plus Gemma 3's local default RoPE (vllm gemma3.py: a transformers 4 config's sliding
    # layers get rope_type default at rope_local_base_freq)
    entries: list[RopeScaling | None] = list(spec.rope_scaling) or [None]
    if table.local_table and not table.per_layer_type:
        entries.append(None)
    total, parts, unread = 0, [], []
    for entry in entries:
        positions, read = table_positions(entry, table, engine, mrope_factor)
        if not read and entry is not None:
            unread.append(entry.rope_type)
        # vLLM deepseek_v2.py: an MLA model's scaled RoPE is built as deepseek_yarn (DeepseekScalingRotaryEmbedding)
        deepseek = table.mla and entry is not None and entry.rope_type in _YARN
        width = 4 if deepseek and deepseek_fp32 and table.rotary_dim in FLASHINFER_ROPE_HEADS else element_bytes
        total += positions * table.rotary_dim * width
        parts.append(f"{positions:,} x {table.rotary_dim} x {width} B ({entry.rope_type if entry else 'default'})")
    source = (
        "vLLM rotary_embedding/base.py RotaryEmbedding.__init__"
        if engine == "vllm"
        else "SGLang layers/rotary_embedding.py RotaryEmbedding.__init__"
    )
    unread_note = f"; RoPE type {', '.join(unread)} not read: counted as max_position x rotary_dim" if unread else ""
    return RopeTables(
        bytes=total, rule=f"RoPE tables {' + '.join(parts)} ({source}){unread_note}", unread_types=tuple(unread)
    )
