"""How many bytes the model's weights take: published sizes, local safetensors, the hub, or an estimate."""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import msgspec

from kvsize.errors import ConfigError, KvsizeError, UsageError
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
MAX_INDEX_BYTES = 64 * 1024 * 1024  # real indexes are at most a few MiB


class WeightsSize(msgspec.Struct, frozen=True):
    bytes: int
    source: str
    """Where the figure comes from, in words."""
    estimated: bool = False
    """True when counted from the config rather than read from the weights' metadata."""


MAX_WEIGHTS_BYTES = 1 << 60  # 1 EiB (kvsize.units.MAX_BYTES): no checkpoint is larger


def _byte_count(value: Any) -> int | None:
    """`value` if it is a whole number of bytes from 0 to 1 EiB (bools are not numbers), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WEIGHTS_BYTES:
        return None
    return value


def weights_from_index(folder: Path) -> WeightsSize | None:
    """`metadata.total_size` of a local model.safetensors.index.json, if there is one (None when the index
    gives no total: the shards' headers are counted instead). An index that is not a JSON object, or a total
    that is not a positive byte count (negative, zero, a string, over 1 EiB), is bad input, not skipped."""
    from kvsize.safe_io import read_small_text

    index = folder / "model.safetensors.index.json"
    if not os.path.lexists(index):
        return None
    text = read_small_text(index, max_bytes=MAX_INDEX_BYTES, what="safetensors index")  # regular file, size cap
    hint = "Fix or remove the index file, or give the weights' size with --weights-mem."
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"{index}: the safetensors index is not valid JSON", hint=hint) from None
    metadata = data.get("metadata") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(metadata, (dict, type(None))):
        raise ConfigError(f"{index}: the safetensors index must be a JSON object with a metadata object", hint=hint)
    if metadata is None or "total_size" not in metadata:
        return None
    total = metadata["total_size"]
    if not _byte_count(total):
        raise ConfigError(
            f"{index}: metadata.total_size must be a positive number of bytes (at most 1 EiB), got {_shown(total)}",
            hint=hint,
        )
    return WeightsSize(total, f"{index} (metadata.total_size)")


_CORRUPT_HINT = "The file is corrupt or not a safetensors file; replace it, or give --weights-mem."


def _header_error(path: Path, problem: str) -> ConfigError:
    return ConfigError(f"{path}: {problem}", hint=_CORRUPT_HINT)


def read_safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """(the JSON header, the bytes of the data buffer after it) of one .safetensors file, read through
    kvsize.safe_io (a regular file only; only the header). Every way the header can be unusable is one
    ConfigError naming the file: fewer than 8 bytes, a length of 0, past the file's end or over the format's
    100 MiB limit (the length is an unsigned 64-bit count: a "negative" one reads as huge), bytes that are not
    UTF-8 (the format requires it), invalid JSON, or JSON that is not an object (a list, a number)."""
    from kvsize.safe_io import open_regular, read_prefix

    fd, file_bytes = open_regular(path, what="safetensors file")
    os.close(fd)
    if file_bytes < 8:
        raise _header_error(path, f"only {file_bytes} bytes: a safetensors file starts with an 8-byte header length")
    (header_len,) = struct.unpack("<Q", read_prefix(path, size=8, what="safetensors file"))
    if not 0 < header_len <= min(MAX_HEADER_BYTES, file_bytes - 8):
        raise _header_error(
            path,
            f"header length {header_len:,} does not fit: it must be 1 to {MAX_HEADER_BYTES:,} bytes and within the "
            f"file's {file_bytes - 8:,} bytes after the length",
        )
    raw = read_prefix(path, size=header_len, offset=8, what="safetensors file")
    if len(raw) != header_len:  # the file shrank while being read
        raise _header_error(path, f"header cut short ({len(raw):,} of {header_len:,} bytes)")
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise _header_error(path, f"header is not UTF-8 (byte {exc.start + 8})") from None
    except (ValueError, RecursionError) as exc:
        reason = f"line {exc.lineno}, column {exc.colno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else ""
        raise _header_error(path, f"header is not valid JSON ({reason or type(exc).__name__})") from None
    if not isinstance(header, dict):
        raise _header_error(path, f"header is a JSON {_json_kind(header)}, not an object of tensors")
    return header, file_bytes - 8 - header_len


def _json_kind(value: Any) -> str:
    kinds = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"), (list, "list"))
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def safetensors_data_bytes(path: Path) -> int:
    """Bytes of tensor data in one .safetensors file, from its header alone (no tensor is read). Offsets must
    be whole numbers with 0 <= begin <= end inside the file's data buffer (the safetensors format's own
    validation); a header that says otherwise is bad input, named with its file (read_safetensors_header)."""
    header, buffer_bytes = read_safetensors_header(path)
    total = 0
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        pair = offsets if isinstance(offsets, list) and len(offsets) == 2 else (None, None)
        begin, end = _byte_count(pair[0]), _byte_count(pair[1])
        if begin is None or end is None or not begin <= end <= buffer_bytes:
            raise _header_error(
                path,
                f"tensor {_shown(name)} has data_offsets {_shown(offsets)}; offsets must satisfy "
                f"0 <= begin <= end <= {buffer_bytes:,} (the file's data bytes)",
            )
        total += end - begin
    return total


def weights_from_safetensors(folder: Path) -> WeightsSize | None:
    """The data bytes of the folder's *.safetensors files. A file kvsize cannot count is an error naming it
    (read_safetensors_header), never skipped: a silent fallback would size the weights from another source
    without saying why (--weights-mem is the way past it)."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    total = sum(safetensors_data_bytes(f) for f in files)
    return WeightsSize(total, f"{len(files)} safetensors file(s) in {folder} (headers)")


def weights_from_hub_counts(counts: dict[str, int], repo: str) -> WeightsSize:
    bad = next(((d, n) for d, n in counts.items() if _byte_count(n) is None), None)
    if bad is not None:
        raise ConfigError(f"hub safetensors metadata of {repo}: {_shown(bad[0])} parameter count {_shown(bad[1])}")
    total = sum(n * SAFETENSORS_DTYPE_BYTES.get(dtype, 2) for dtype, n in counts.items())
    detail = ", ".join(f"{n:,} {dtype}" for dtype, n in sorted(counts.items()))
    unknown = sorted(dtype for dtype in counts if dtype not in SAFETENSORS_DTYPE_BYTES)
    if unknown:  # said, not assumed silently: a dtype newer than this table
        detail += f"; {', '.join(_shown(d) for d in unknown)} unknown to kvsize, taken as 2 bytes each"
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
    """Bits per weight of a dtype name: 'bf16', 'int4', ..., and the config spellings of the same formats
    ('float8_e4m3fn', 'float8_e5m2', 'fp8_e4m3': all 8 bits)."""
    from kvsize.dtypes import KvDtype, parse_kv_dtype

    key = name.strip().lower().removeprefix("torch.")
    key = key.replace("bfloat16", "bf16").replace("float16", "fp16").replace("float32", "fp32")
    if key not in WEIGHT_BITS:
        kv = parse_kv_dtype(key)
        if key.startswith(("float8", "fp8")) or kv in (KvDtype.FP8_E4M3, KvDtype.FP8_E5M2):
            key = "fp8"  # e4m3fn, e4m3fnuz, e5m2, e5m2fnuz: one byte per weight
        elif kv is not None and kv.value in WEIGHT_BITS:
            key = kv.value
    if key not in WEIGHT_BITS:
        raise UsageError(f"unknown weights dtype '{name}'", hint=f"Choose from: {', '.join(WEIGHT_BITS)}.")
    return WEIGHT_BITS[key]


MAX_QUANT_BLOCK = 1 << 20  # a group or block of over a million weights sharing one scale describes no real checkpoint


def _quant_int(quant: Mapping[str, Any], keys: tuple[str, ...], default: int, allowed: str) -> tuple[int, str]:
    """An integer field of quantization_config (the first of `keys` present), checked as data: a bool, a
    string or a float is refused with the field named."""
    key = next((k for k in keys if k in quant), keys[0])
    value = quant.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(
            f"quantization_config.{key} must be a whole number ({allowed}), got {_shown(value)}",
            hint="Fix the config.json's quantization_config.",
        )
    return value, key


def _shown(value: Any) -> str:
    from kvsize.text import clean

    text = clean(repr(value)) if not isinstance(value, int) or abs(value) < 10**30 else "a huge number"
    return text[:40] + "..." if len(text) > 40 else text


def _in_features(raw: Mapping[str, Any]) -> int | None:
    """The input width most linear layers share (hidden_size), for per-channel scales."""
    for container in (raw, raw.get("text_config")):
        if isinstance(container, Mapping):
            hidden = container.get("hidden_size")
            if isinstance(hidden, int) and not isinstance(hidden, bool) and 0 < hidden <= 1 << 24:
                return hidden
    return None


def _quantized_bits(raw: Mapping[str, Any]) -> tuple[Fraction, str, bool] | None:
    """(bits, description, experts only) from a config's quantization_config, its fields validated as data."""
    quant = raw.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8":
        # vLLM Fp8Config: weight_block_size is None (per-tensor scales) or [block_n, block_k], one fp32 scale per
        # block (vllm/model_executor/layers/quantization/fp8.py Fp8Config.__init__, 0.19).
        block = quant.get("weight_block_size")
        if block is None:
            return Fraction(8), "fp8 (quantization_config)", False
        valid = isinstance(block, list) and len(block) == 2
        valid = valid and all(
            isinstance(b, int) and not isinstance(b, bool) and 0 < b <= MAX_QUANT_BLOCK for b in block
        )
        if not valid:
            raise ConfigError(
                f"quantization_config.weight_block_size must be two positive whole numbers like [128, 128], "
                f"got {_shown(block)}",
                hint="Fix the config.json's quantization_config.",
            )
        scales = Fraction(32, block[0] * block[1])
        return Fraction(8) + scales, "fp8 (quantization_config, fp32 scale per block)", False
    if method in ("awq", "gptq"):
        # vLLM GPTQConfig accepts 2, 3, 4 or 8 bits and AWQConfig only 4 (quantization/gptq.py, awq.py, 0.19);
        # AWQ reads w_bit / q_group_size as well (AWQConfig.from_config).
        allowed_bits = (4,) if method == "awq" else (2, 3, 4, 8)
        bits, bits_key = _quant_int(quant, ("bits", "w_bit"), 4, "/".join(map(str, allowed_bits)))
        group, group_key = _quant_int(quant, ("group_size", "q_group_size"), 128, "-1 or a positive group size")
        if bits not in allowed_bits:
            raise ConfigError(
                f"quantization_config.{bits_key} must be {' or '.join(map(str, allowed_bits))} for {method}, "
                f"got {bits}",
                hint="Fix the config.json's quantization_config.",
            )
        if group == -1:
            # Per-channel: vLLM GPTQLinearMethod.create_weights sets group_size = input_size, so one fp16 scale
            # and one packed zero point per output channel: (16 + bits) / in_features extra bits per weight.
            in_features = _in_features(raw)
            overhead = Fraction(16 + bits, in_features) if in_features else Fraction(0)
            return Fraction(bits) + overhead, f"{method} int{bits}, per-channel scales", False
        if not 0 < group <= MAX_QUANT_BLOCK:
            raise ConfigError(
                f"quantization_config.{group_key} must be -1 (per channel) or a positive group size, got "
                f"{_shown(group)}",
                hint="Fix the config.json's quantization_config.",
            )
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
        except KvsizeError as exc:  # no safetensors on the hub (pytorch_model.bin only), or no network
            counted = weights_from_config(loaded, model_dtype=model_dtype)
            return msgspec.structs.replace(
                counted, source=f"{counted.source}; hub safetensors metadata unavailable: {exc}"
            )
    return weights_from_config(loaded, model_dtype=model_dtype)
