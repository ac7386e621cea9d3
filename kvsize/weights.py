"""How many bytes the model's weights take: published sizes, local safetensors, the hub, or an estimate."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from kvsize.errors import KvsizeError, UsageError
from kvsize.resolve import LoadedConfig

# Bytes per element of safetensors dtypes (safetensors format spec). 4-bit formats are stored packed in U8.
SAFETENSORS_DTYPE_BYTES = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
# Uniform checkpoint dtypes for which published parameters x bytes gives the weights' size.
PUBLISHED_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors reference implementation's limit


@dataclass(frozen=True)
class WeightsSize:
    bytes: int
    source: str
    """Where the figure comes from, in words."""
    estimated: bool = False
    """True when counted from the config rather than read from the weights' metadata."""


def weights_from_index(folder: Path) -> WeightsSize | None:
    """`metadata.total_size` of a local model.safetensors.index.json, if there is one."""
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        return None
    try:
        total = json.loads(index.read_text(encoding="utf-8"))["metadata"]["total_size"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(total, int) or total <= 0:
        return None
    return WeightsSize(total, f"{index} (metadata.total_size)")


def safetensors_data_bytes(path: Path) -> int:
    """Bytes of tensor data in one .safetensors file, from its header alone (no tensor is read)."""
    with path.open("rb") as fh:
        (header_len,) = struct.unpack("<Q", fh.read(8))
        if header_len > MAX_HEADER_BYTES:
            raise ValueError(f"header of {header_len} bytes")
        header = json.loads(fh.read(header_len))
    return sum(
        end - begin for name, t in header.items() if name != "__metadata__" for begin, end in [t["data_offsets"]]
    )


def weights_from_safetensors(folder: Path) -> WeightsSize | None:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    try:
        total = sum(safetensors_data_bytes(f) for f in files)
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    return WeightsSize(total, f"{len(files)} safetensors file(s) in {folder} (headers)")


def weights_from_hub_counts(counts: dict[str, int], repo: str) -> WeightsSize:
    total = sum(n * SAFETENSORS_DTYPE_BYTES.get(dtype, 2) for dtype, n in counts.items())
    detail = ", ".join(f"{n:,} {dtype}" for dtype, n in sorted(counts.items()))
    return WeightsSize(total, f"hub safetensors metadata of {repo} ({detail})")


# Bits per weight, scales included: AWQ / GPTQ int4 keep an fp16 scale and a 4-bit zero point per group of 128
# (AutoAWQ / GPTQ defaults); MXFP4 one E8M0 scale per 32 (OCP MX); NVFP4 one e4m3 scale per 16.
WEIGHT_BITS: dict[str, Fraction] = {
    "fp32": Fraction(32),
    "bf16": Fraction(16),
    "fp16": Fraction(16),
    "fp8": Fraction(8),
    "int8": Fraction(8),
    "int4": Fraction(4) + Fraction(16 + 4, 128),
    "awq": Fraction(4) + Fraction(16 + 4, 128),
    "gptq": Fraction(4) + Fraction(16 + 4, 128),
    "mxfp4": Fraction(4) + Fraction(8, 32),
    "nvfp4": Fraction(4) + Fraction(8, 16),
}


def weight_bits(name: str) -> Fraction:
    key = name.strip().lower().replace("bfloat16", "bf16").replace("float16", "fp16").replace("float32", "fp32")
    if key not in WEIGHT_BITS:
        raise UsageError(f"unknown weights dtype '{name}'", hint=f"Choose from: {', '.join(WEIGHT_BITS)}.")
    return WEIGHT_BITS[key]


def _quantized_bits(raw: Mapping[str, Any]) -> tuple[Fraction, str, bool] | None:
    """(bits, description, experts only) from a config's quantization_config."""
    quant = raw.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8":
        block = quant.get("weight_block_size")
        scales = Fraction(32, block[0] * block[1]) if isinstance(block, list) and len(block) == 2 else Fraction(0)
        return Fraction(8) + scales, "fp8 (quantization_config" + (", fp32 scale per block)" if scales else ")"), False
    if method in ("awq", "gptq"):
        bits, group = int(quant.get("bits", 4)), int(quant.get("group_size", 128))
        if group <= 0:  # group_size -1: one scale and zero point per output channel, a negligible share
            return Fraction(bits), f"{method} int{bits}, per-channel scales (group_size {group})", False
        return Fraction(bits) + Fraction(16 + bits, group), f"{method} int{bits}, group {group}", False
    if method == "mxfp4":  # gpt-oss: MoE experts in MXFP4, everything else in the model dtype
        return WEIGHT_BITS["mxfp4"], "mxfp4 experts (quantization_config)", True
    return None


def weights_from_config(
    loaded: LoadedConfig, *, model_dtype: str, weights_dtype: str | None = None, num_parameters: int | None = None
) -> WeightsSize:
    """Parameter count (published, else counted from the config) times the bits per weight: an estimate."""
    from kvsize.params import estimate_parameters

    counted = estimate_parameters(loaded.raw)
    params = num_parameters or counted.total
    origin = "published" if num_parameters else "counted from the config"
    base = weight_bits(model_dtype)
    if weights_dtype is not None:
        bits, why, experts_only = weight_bits(weights_dtype), f"{weights_dtype} (--weights-dtype)", False
    else:
        bits, why, experts_only = _quantized_bits(loaded.raw) or (base, model_dtype, False)
    # Quantized checkpoints (FP8, INT8, INT4, ...) keep the embeddings and lm_head in the model dtype: vLLM's
    # Fp8Config / compressed-tensors quantize Linear layers only (VocabParallelEmbedding and ParallelLMHead take
    # quant_config=None unless the checkpoint names them, model_executor/layers/vocab_parallel_embedding.py).
    kept = counted.breakdown.get("embeddings", 0) + counted.breakdown.get("lm_head", 0) if bits < base else 0
    if experts_only:
        experts = counted.breakdown.get("experts", 0)
        total_bits = experts * bits + (params - experts) * base
    else:
        total_bits = (params - kept) * bits + kept * base
    size = math.ceil(total_bits / 8)
    return WeightsSize(
        size, f"estimate: {params:,} parameters {origin} at {why} ({float(bits):g} bits)", estimated=True
    )


def find_weights(
    loaded: LoadedConfig,
    *,
    model_dtype: str = "bf16",
    weights_dtype: str | None = None,
    fetch_hub: Callable[[str], dict[str, int]] | None = None,
) -> WeightsSize:
    """In order: the registry's published size, a local index or safetensors headers, the hub's metadata
    (for hub models; `fetch_hub` replaces it in tests), and last a parameter count from the config.
    `weights_dtype` re-prices the parameters at another precision (a quantized deployment)."""
    from kvsize.registry import registry_weights

    if weights_dtype is not None:
        published = registry_weights().get((loaded.hub_id or "").lower()) or {}
        return weights_from_config(
            loaded, model_dtype=model_dtype, weights_dtype=weights_dtype, num_parameters=published.get("num_parameters")
        )

    if loaded.hub_id is not None:
        published = registry_weights().get(loaded.hub_id.lower()) or {}
        if published.get("weights_bytes"):
            return WeightsSize(
                int(published["weights_bytes"]), f"registry: published safetensors size ({published['weights_dtype']})"
            )
        per_param = PUBLISHED_DTYPE_BYTES.get(str(published.get("weights_dtype")))
        if published.get("num_parameters") and per_param:
            params = int(published["num_parameters"])
            return WeightsSize(
                params * per_param,
                f"registry: published {params:,} parameters x {per_param} B ({published['weights_dtype']})",
            )
    if loaded.folder is not None:
        found = weights_from_index(loaded.folder) or weights_from_safetensors(loaded.folder)
        if found is not None:
            return found
    if loaded.source == "hub" and loaded.hub_id is not None:
        try:
            if fetch_hub is None:
                from kvsize.hub import fetch_weights_from_hub

                counts = fetch_weights_from_hub(loaded.hub_id)
            else:
                counts = fetch_hub(loaded.hub_id)
            return weights_from_hub_counts(counts, loaded.hub_id)
        except KvsizeError:
            pass  # no safetensors on the hub: fall back to counting
    return weights_from_config(loaded, model_dtype=model_dtype)
