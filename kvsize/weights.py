"""How many bytes the model's weights take: published sizes, local safetensors, the hub, or an estimate."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kvsize.dtypes import KvDtype
from kvsize.errors import KvsizeError
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


def weights_from_config(loaded: LoadedConfig, *, model_dtype: str) -> WeightsSize:
    """Parameter count from the config times the weights' bytes per parameter: an estimate."""
    from kvsize.params import estimate_parameters

    params = estimate_parameters(loaded.raw).total
    quant = loaded.raw.get("quantization_config")
    if isinstance(quant, dict) and str(quant.get("quant_method", "")).lower() == "fp8":
        per_param, why = 1, "fp8 (quantization_config)"
    else:
        dtype = KvDtype(model_dtype)
        per_param, why = dtype.storage.block_bytes, dtype.value
    return WeightsSize(
        params * per_param,
        f"estimate: {params:,} parameters counted from the config x {per_param} B ({why})",
        estimated=True,
    )


def find_weights(
    loaded: LoadedConfig, *, model_dtype: str = "bf16", fetch_hub: Callable[[str], dict[str, int]] | None = None
) -> WeightsSize:
    """In order: the registry's published size, a local index or safetensors headers, the hub's metadata
    (for hub models; `fetch_hub` replaces it in tests), and last a parameter count from the config."""
    from kvsize.registry import registry_weights

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
