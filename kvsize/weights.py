"""How many bytes the model's weights take: published sizes, local safetensors, the hub, or an estimate."""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
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


def weights_from_hub_counts(counts: dict[str, int], repo: str, served_dtype: str | None = None) -> WeightsSize:
    """The bytes of the hub's per-dtype parameter counts; with `served_dtype` 16-bit, the F32 parameters are
    priced at 2 bytes (an engine that runs a float32 checkpoint in 16 bits casts them on load)."""
    bad = next(((d, n) for d, n in counts.items() if _byte_count(n) is None), None)
    if bad is not None:
        raise ConfigError(f"hub safetensors metadata of {repo}: {_shown(bad[0])} parameter count {_shown(bad[1])}")
    cast = served_dtype is not None and weight_bits(served_dtype) == 16
    widen = served_dtype is not None and weight_bits(served_dtype) == 32
    width = dict(SAFETENSORS_DTYPE_BYTES)
    if cast:
        width["F32"] = 2
    if widen:  # an unquantized checkpoint under --dtype float32 (find_weights refuses quantized ones)
        width.update({"BF16": 4, "F16": 4})
    total = sum(n * width.get(dtype, 2) for dtype, n in counts.items())
    detail = ", ".join(f"{n:,} {dtype}" for dtype, n in sorted(counts.items()))
    unknown = sorted(dtype for dtype in counts if dtype not in SAFETENSORS_DTYPE_BYTES)
    if unknown:  # said, not assumed silently: a dtype newer than this table
        detail += f"; {', '.join(_shown(d) for d in unknown)} unknown to kvsize, taken as 2 bytes each"
    if cast and counts.get("F32"):
        detail += f"; F32 loaded as {served_dtype}"
    if widen and (counts.get("BF16") or counts.get("F16")):
        detail += f"; 16-bit loaded as {served_dtype}"
    return WeightsSize(total, f"hub safetensors metadata of {repo} ({detail})")


def _loaded_as(weights: WeightsSize, checkpoint_dtype: str, served_dtype: str | None) -> WeightsSize:
    """A measured size of an unquantized `checkpoint_dtype` checkpoint as an engine that runs it in
    `served_dtype` holds it: vLLM and SGLang build every parameter in the served dtype and cast each weight on
    load (vLLM model_loader/utils.py set_default_torch_dtype(model_config.dtype) around the model's
    construction), so float32 checkpoints shrink to 16 bits by default and a 16-bit one doubles under
    --dtype float32. Scaled by the widths, and said; the same width is kept."""
    if served_dtype is None:
        return weights
    stored, held = weight_bits(checkpoint_dtype), weight_bits(served_dtype)
    if held == stored:
        return weights
    return WeightsSize(
        math.ceil(weights.bytes * held / stored),
        f"{weights.source}, x {float(held):g}/{float(stored):g}: the engine loads this {checkpoint_dtype} "
        f"checkpoint in {served_dtype}",
        weights.estimated,
    )


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


def _bad_quant(field: str, wanted: str, value: Any) -> ConfigError:
    return ConfigError(
        f"quantization_config.{field} must be {wanted}, got {_shown(value)}",
        hint="Fix the config.json's quantization_config.",
    )


class _Format(msgspec.Struct, frozen=True):
    """How one quantized Linear is stored: bits per weight (its group or block scales included) and the bytes
    of the per-tensor scalars each checkpoint linear adds."""

    bits: Fraction
    name: str
    scalar_bytes: int = 0


class QuantScheme(msgspec.Struct, frozen=True):
    """What a checkpoint's quantization_config quantizes and how. A Linear is quantized when a group's
    targets match it (compressed-tensors / ModelOpt config_groups: a layer name first, the class "Linear"
    after, vLLM compressed_tensors/utils.py:find_matched_target@0.33.0) and no exclusion names it."""

    method: str
    groups: tuple[tuple[tuple[str, ...], _Format], ...]
    exclude: tuple[str, ...] = ()
    lm_head: bool = False
    """lm_head is a candidate: config_groups checkpoints (a Linear like any other), GPTQ/AWQ `lm_head: true`."""
    experts_only: bool = False


def module_matches(name: str, pattern: str) -> bool:
    """An exclusion or target as the engines read them: `re:` regexes by re.match (vLLM
    quantization/utils/config_utils.py:is_equal_or_regex_match@0.33.0), ModelOpt wildcards by fnmatch
    (modelopt.py:ModelOptQuantConfigBase.is_layer_excluded@0.33.0), and plain names as a whole dotted
    component path anywhere in the name: `lm_head`, `model.vision_tower` (a prefix), `gate` (the router
    `mlp.gate`, never `gate_proj`), `self_attn` (transformers' substring test on modules_to_not_convert)."""
    if pattern.startswith("re:"):
        try:
            return re.match(pattern[3:], name) is not None
        except re.error:
            raise _bad_quant("ignore", "valid regexes after 're:'", pattern) from None
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return f".{pattern}." in f".{name}."


def _targets_match(name: str, targets: tuple[str, ...]) -> bool:
    return any(t != "Linear" and module_matches(name, t) for t in targets)


def _strings(quant: Mapping[str, Any], *keys: str) -> tuple[str, ...]:
    out: list[str] = []
    for key in keys:
        value = quant.get(key)
        if value is None:
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _bad_quant(key, "a list of module names", value)
        out += value
    return tuple(out)


def _fp8_format(block: Any, *, per_channel: bool, in_features: int | None, what: str) -> _Format:
    """FP8 e4m3: 1 byte per weight and fp32 scales (vLLM utils/fp8_utils.py:create_fp8_scale_parameter@0.33.0:
    float32 unless e8m0): one per block of block_n x block_k (BlockQuantScaleParameter), one per output row
    (ChannelQuantScaleParameter; counted as 32 bits per hidden_size weights) or one per tensor (4 bytes)."""
    if block is not None:
        valid = isinstance(block, list) and len(block) == 2
        valid = valid and all(
            isinstance(b, int) and not isinstance(b, bool) and 0 < b <= MAX_QUANT_BLOCK for b in block
        )
        if not valid:
            raise _bad_quant("weight_block_size", "two positive whole numbers like [128, 128]", block)
        return _Format(
            Fraction(8) + Fraction(32, block[0] * block[1]), f"{what} fp8, fp32 scale per {block[0]}x{block[1]}"
        )
    if per_channel:
        extra = Fraction(32, in_features) if in_features else Fraction(0)
        return _Format(Fraction(8) + extra, f"{what} fp8, fp32 scale per channel")
    return _Format(Fraction(8), f"{what} fp8, per-tensor scale", scalar_bytes=4)


# NVFP4: packed e2m1 (4 bits), one float8_e4m3fn scale per 16 weights along the input, and the fp32
# weight_scale_2 and input_scale per linear (modelopt.py:KNvfp4Static.create_weights@0.33.0).
_NVFP4 = _Format(Fraction(4) + Fraction(8, 16), "nvfp4, e4m3 scale per 16", scalar_bytes=8)


def _group_format(weights: Mapping[str, Any], raw: Mapping[str, Any]) -> _Format:
    """A compressed-tensors / ModelOpt config group's `weights` args."""
    bits, kind = weights.get("num_bits"), weights.get("type", "int")
    group, strategy = weights.get("group_size"), str(weights.get("strategy") or "")
    if isinstance(bits, bool) or bits not in (2, 3, 4, 8):
        raise _bad_quant("config_groups.*.weights.num_bits", "2, 3, 4 or 8", bits)
    if kind == "float" and bits == 8:
        block = weights.get("block_structure") if strategy == "block" else None
        return _fp8_format(
            block, per_channel=strategy == "channel", in_features=_in_features(raw), what="compressed-tensors"
        )
    if kind == "float" and bits == 4:
        if group == 32:  # MXFP4: one e8m0 scale per 32 (compressed_tensors_w4a4_mxfp4.py:create_weights@0.33.0)
            return _Format(Fraction(4) + Fraction(8, 32), "mxfp4, e8m0 scale per 32")
        return _NVFP4
    # Integer weights (compressed_tensors_wNa16.py:CompressedTensorsWNA16.create_weights@0.33.0): packed int32,
    # a 16-bit scale per group (params_dtype) and, when not symmetric, a packed zero point per group.
    if group in (None, -1) or strategy == "channel":
        group = _in_features(raw)
    if isinstance(group, bool) or not isinstance(group, int) or not 0 < group <= MAX_QUANT_BLOCK:
        raise _bad_quant("config_groups.*.weights.group_size", "a positive group size", group)
    zero = 0 if weights.get("symmetric", True) else bits
    return _Format(Fraction(bits) + Fraction(16 + zero, group), f"int{bits}, group {group}")


def quant_scheme(raw: Mapping[str, Any]) -> QuantScheme | None:
    """The scheme of a config's quantization_config (or its text_config's), its fields validated as data; None
    for an unquantized config. An unknown quant_method is refused: pricing it at 16 bits would overcount."""
    quant = raw.get("quantization_config")
    text = raw.get("text_config")
    if not isinstance(quant, Mapping) and isinstance(text, Mapping):
        quant = text.get("quantization_config")
    if not isinstance(quant, Mapping):
        return None
    if isinstance(quant.get("quantization"), Mapping):  # ModelOpt hf_quant_config.json layout
        quant = {**quant["quantization"], "quant_method": "modelopt"}
    method = str(quant.get("quant_method", "")).lower()
    if isinstance(quant.get("config_groups"), Mapping):
        groups = []
        for name, group in quant["config_groups"].items():
            weights = group.get("weights") if isinstance(group, Mapping) else None
            if not isinstance(weights, Mapping):
                raise _bad_quant(f"config_groups.{name}.weights", "an object", weights)
            targets = _strings(group, "targets") or ("Linear",)  # no targets (ModelOpt 0.31 FP8): every Linear
            groups.append((targets, _group_format(weights, raw)))
        return QuantScheme(
            method or "compressed-tensors", tuple(groups), _strings(quant, "ignore", "exclude_modules"), lm_head=True
        )
    exclude = _strings(
        quant, "modules_to_not_convert", "ignored_layers", "ignore", "exclude_modules", "llm_int8_skip_modules"
    )
    linear = ("Linear",)
    if method == "fp8":  # vLLM fp8.py:Fp8Config.__init__@0.33.0 (weight_block_size None: per-tensor scales)
        fmt = _fp8_format(quant.get("weight_block_size"), per_channel=False, in_features=None, what="e4m3")
        return QuantScheme(method, ((linear, fmt),), exclude)
    if method == "modelopt":  # modelopt.py:ModelOptNvFp4Config / ModelOptFp8Config@0.33.0
        algo = str(quant.get("quant_algo", "")).upper()
        formats = {
            "NVFP4": _NVFP4,
            "W4A16_NVFP4": _NVFP4,
            "FP8": _fp8_format(None, per_channel=False, in_features=None, what="modelopt"),
            "FP8_PER_CHANNEL_PER_TOKEN": _fp8_format(
                None, per_channel=True, in_features=_in_features(raw), what="modelopt"
            ),
            "FP8_PB_WO": _fp8_format([128, 128], per_channel=False, in_features=None, what="modelopt"),
        }
        if algo not in formats:
            raise _bad_quant("quant_algo", f"one of {', '.join(formats)} (ModelOpt)", algo)
        return QuantScheme(method, ((linear, formats[algo]),), exclude)
    if method in ("awq", "gptq"):
        # vLLM auto_gptq.py:AutoGPTQLinearMethod.create_weights / auto_awq.py@0.33.0: packed int32 weights, a
        # params_dtype scale and a packed zero point per group along the input; GPTQ 2/3/4/8 bits, AWQ 4.
        allowed_bits = (4,) if method == "awq" else (2, 3, 4, 8)
        bits, bits_key = _quant_int(quant, ("bits", "w_bit"), 4, "/".join(map(str, allowed_bits)))
        group, group_key = _quant_int(quant, ("group_size", "q_group_size"), 128, "-1 or a positive group size")
        if bits not in allowed_bits:
            raise _bad_quant(bits_key, f"{' or '.join(map(str, allowed_bits))} for {method}", bits)
        if group == -1:  # per channel: one group of in_features
            in_features = _in_features(raw)
            fmt = _Format(
                Fraction(bits) + (Fraction(16 + bits, in_features) if in_features else 0),
                f"{method} int{bits}, per-channel scales",
            )
        elif 0 < group <= MAX_QUANT_BLOCK:
            fmt = _Format(Fraction(bits) + Fraction(16 + bits, group), f"{method} int{bits}, group {group}")
        else:
            raise _bad_quant(group_key, "-1 (per channel) or a positive group size", group)
        return QuantScheme(method, ((linear, fmt),), exclude, lm_head=quant.get("lm_head") is True)
    if method == "mxfp4":  # gpt-oss: MoE experts in MXFP4 (e8m0 scale per 32, mxfp4.py:Mxfp4MoEMethod.create_weights)
        fmt = _Format(Fraction(4) + Fraction(8, 32), "mxfp4 experts, e8m0 scale per 32")
        return QuantScheme(method, ((linear, fmt),), exclude, experts_only=True)
    if method == "bitsandbytes":
        # bitsandbytes functional.quantize_4bit: blocksize 64, an fp32 absmax per block; with double quant the
        # absmax is itself 8-bit with an fp32 absmax per 256 blocks. 8-bit: int8 and an fp32 scale per row.
        if quant.get("load_in_4bit") or quant.get("_load_in_4bit"):
            double = quant.get("bnb_4bit_use_double_quant") is True
            nf4 = Fraction(4) + (Fraction(8, 64) + Fraction(32, 64 * 256) if double else Fraction(32, 64))
            fmt = _Format(nf4, f"bitsandbytes 4-bit, block 64{', double quant' if double else ''}")
        else:
            in_features = _in_features(raw)
            fmt = _Format(Fraction(8) + (Fraction(32, in_features) if in_features else 0), "bitsandbytes int8")
        return QuantScheme(method, ((linear, fmt),), exclude)
    raise ConfigError(
        f"quantization_config.quant_method {_shown(method)} is not one kvsize can price",
        hint="Give the weights' size with --weights-mem, or the checkpoint's safetensors (a local folder).",
    )


# Where each family keeps its decoder layers (HF checkpoint names); exclusions are matched under each.
_LAYER_PREFIXES = ("model.layers", "model.language_model.layers", "language_model.model.layers", "backbone.layers")
_LM_HEADS = ("lm_head", "language_model.lm_head")


# DeepSeek-V4's attention linears, each under transformers 5.25's name (modeling_deepseek_v4.py
# DeepseekV4Attention) and the reference checkpoint's ("attn.fused_wqa_wkv", "attn.wq_b", "attn.wo_a", "attn.wo_b":
# the targets of RedHatAI's compressed-tensors export); its MoE is `mlp` in 5.25 and `ffn` there. "a|b" names one
# linear two ways (_price_any takes either).
DEEPSEEK_V4_ATTENTION = (
    "self_attn.q_a_proj|attn.fused_wqa_wkv",
    "self_attn.q_b_proj|attn.wq_b",
    "self_attn.kv_proj|attn.wkv",
    "self_attn.o_a_proj|attn.wo_a",
    "self_attn.o_b_proj|attn.wo_b",
)

# Gemma 4 MoE (modeling_gemma4.py Gemma4TextDecoderLayer, 5.25): `experts` and `router` sit on the layer itself,
# beside the layer's dense `mlp` (not shared experts), so a checkpoint names `layers.N.experts.E.gate_proj`.
GEMMA4_LAYER_EXPERTS = frozenset({"gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text"})


def _moe_names(model_type: str, text: Mapping[str, Any]) -> tuple[str, tuple[str, ...], str]:
    """(MoE block, one expert's linears, shared-expert container) of a family's checkpoint."""
    if model_type in ("mixtral", "minimax", "minimax_m2"):
        return "block_sparse_moe", ("w1", "w2", "w3"), "shared_expert"
    if model_type.startswith("llama4"):
        return "feed_forward", ("gate_up_proj", "down_proj"), "shared_expert"
    if model_type == "nemotron_h":
        return "mixer", ("up_proj", "down_proj"), "shared_experts"
    # DeepSeek / Kimi / GLM (n_shared_experts): shared_experts; Qwen MoE: shared_expert
    return (
        "mlp",
        ("gate_proj", "up_proj", "down_proj"),
        "shared_experts" if "n_shared_experts" in text else "shared_expert",
    )


def _component_names(
    kind: str, label: str, text: Mapping[str, Any], model_type: str, layer: Mapping[str, int]
) -> list[str]:
    """Names of the main Linear modules of one part of a layer, relative to the layer (`self_attn.q_proj`);
    small linears (Qwen3.5 in_proj_a/b) are priced with their part."""
    moe, expert, shared = _moe_names(model_type, text)
    mixer = "mixer" if model_type == "nemotron_h" else None
    projs: tuple[str, ...]
    if kind == "attention":
        if label == "linear_attention":
            projs = (
                ("in_proj_qkvz", "out_proj") if model_type == "qwen3_next" else ("in_proj_qkv", "in_proj_z", "out_proj")
            )
            return [f"linear_attn.{p}" for p in projs]
        if model_type == "deepseek_v4":
            return list(DEEPSEEK_V4_ATTENTION)
        mla = text.get("kv_lora_rank") is not None
        projs = (
            ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
            if mla
            else ("q_proj", "k_proj", "v_proj", "o_proj")
        )
        return [f"{mixer or 'self_attn'}.{p}" for p in projs]
    if kind == "mamba":
        return [f"{mixer or 'mamba'}.{p}" for p in ("in_proj", "out_proj")]
    if kind == "experts" and model_type == "deepseek_v4":
        return [f"mlp.experts.0.{p}|ffn.experts.0.{p}" for p in expert]
    if kind == "mlp" and "experts" in layer and model_type == "deepseek_v4":
        return [f"mlp.shared_experts.{p}|ffn.shared_experts.{p}" for p in expert]
    if kind == "experts" and model_type in GEMMA4_LAYER_EXPERTS:
        return [f"experts.0.{p}" for p in expert]
    if kind == "experts":
        return [f"{moe}.experts.0.{p}" for p in expert]
    if kind == "mlp" and "experts" in layer and model_type in GEMMA4_LAYER_EXPERTS:
        return [f"mlp.{p}" for p in expert]  # the layer's own dense MLP beside its experts
    if kind == "mlp" and "experts" in layer:  # the shared experts of a MoE layer
        projs = ("up_proj", "down_proj") if model_type == "nemotron_h" else ("gate_proj", "up_proj", "down_proj")
        return [f"{moe}.{shared}.{p}" for p in projs]
    if kind == "mlp":
        block = mixer or ("feed_forward" if model_type.startswith("llama4") else "mlp")
        projs = ("up_proj", "down_proj") if model_type == "nemotron_h" else ("gate_proj", "up_proj", "down_proj")
        return [f"{block}.{p}" for p in projs]
    return []  # norms, routers (`mlp.gate`: ReplicatedLinear(quant_config=None) in vLLM's MoE models), other


def _price(names: list[str], scheme: QuantScheme, base: Fraction) -> tuple[Fraction, int, bool]:
    """(bits per weight, per-tensor scalar bytes, quantized?) of one part, from its linears' names: the share
    of names a group quantizes and no exclusion names is priced at that group's format, the rest at `base`."""
    if not names:
        return base, 0, False
    total, scalars, hits = Fraction(0), 0, 0
    for name in names:
        fmt = None
        if not any(module_matches(name, p) for p in scheme.exclude):
            named = next((f for targets, f in scheme.groups if _targets_match(name, targets)), None)
            fmt = named or next((f for targets, f in scheme.groups if "Linear" in targets), None)
        total += fmt.bits if fmt else base
        scalars += fmt.scalar_bytes if fmt else 0
        hits += fmt is not None
    return total / len(names), scalars // len(names), hits > 0


def _priced_bits(
    loaded_raw: Mapping[str, Any], counted: Any, scheme: QuantScheme, base: Fraction
) -> tuple[Fraction, list[str]]:
    """Total bits of the checkpoint: each decoder layer's parts priced by the scheme (names from the family's
    checkpoint layout, matched under every layer prefix), embeddings, norms, routers and vision at `base`,
    lm_head by the scheme when it is a candidate. Returns (bits, the formats used)."""
    nested = loaded_raw.get("text_config")
    text: Mapping[str, Any] = nested if isinstance(nested, Mapping) else loaded_raw
    model_type = str(text.get("model_type") or loaded_raw.get("model_type") or "")
    used: set[str] = set()
    bits = Fraction(0)
    in_layers: dict[str, int] = {}
    cache: dict[tuple[int, str, str], tuple[Fraction, int, bool]] = {}
    for index, (label, layer) in enumerate(counted.layers):
        for kind, n in layer.items():
            in_layers[kind] = in_layers.get(kind, 0) + n
            if scheme.experts_only and kind != "experts":
                bits += n * base
                continue
            per_layer = _component_names(kind, label, text, model_type, layer)
            # Exclusions name layers by index: the names under each prefix, any of which may match.
            key = (index, kind, label)
            if key not in cache:
                candidates = [
                    [f"{prefix}.{index}.{alt}" for alt in name.split("|") for prefix in _LAYER_PREFIXES]
                    for name in per_layer
                ]
                cache[key] = _price_any(candidates, scheme, base)
            b, scalars, quantized = cache[key]
            bits += n * b + 8 * scalars * _linears(kind, text)
            if quantized:
                used.add(kind)
    for kind, n in counted.breakdown.items():
        rest = n - in_layers.get(kind, 0)
        if not rest:
            continue
        if kind == "lm_head" and scheme.lm_head:
            b, scalars, _ = _price_any([list(_LM_HEADS)], scheme, base)
            bits += rest * b + 8 * scalars
        elif kind in ("attention", "mlp", "experts", "mamba") and not counted.layers:
            b, scalars, _ = _price([f"model.layers.0.{kind}"], scheme, base)  # no layer list: by kind
            bits += rest * (base if scheme.experts_only and kind != "experts" else b)
        else:
            bits += rest * base
    return bits, sorted(used)


def _price_any(candidates: list[list[str]], scheme: QuantScheme, base: Fraction) -> tuple[Fraction, int, bool]:
    """_price over linears each known under several names: a linear counts as excluded when any of its
    names is excluded, else as quantized by the first name a group matches."""
    chosen = []
    for names in candidates:
        excluded = next((n for n in names if any(module_matches(n, p) for p in scheme.exclude)), None)
        named = next((n for n in names if any(_targets_match(n, t) for t, _ in scheme.groups)), None)
        chosen.append(excluded or named or names[0])
    return _price(chosen, scheme, base)


def _linears(kind: str, text: Mapping[str, Any]) -> int:
    """Checkpoint linears per layer part, for per-tensor scalars (experts: one set per expert)."""
    experts = next(
        (text[k] for k in ("n_routed_experts", "num_local_experts", "num_experts") if isinstance(text.get(k), int)), 1
    )
    return {"attention": 4, "mlp": 3, "mamba": 2, "experts": 3 * int(experts)}.get(kind, 0)


def weights_from_config(
    loaded: LoadedConfig,
    *,
    model_dtype: str,
    weights_dtype: str | None = None,
    num_parameters: int | None = None,
    dtype_origin: str = "--weights-dtype",
) -> WeightsSize:
    """The weights priced module by module from the config: every part at the model dtype, except the Linear
    layers the checkpoint's quantization (or --weights-dtype) stores in fewer bits, with their scales.
    Only decoder Linears are quantized; embeddings, norms, routers, vision towers, lm_head (unless the scheme
    lists it) and every module an exclusion names stay at the model dtype. An estimate."""
    from kvsize.params import estimate_parameters

    counted = estimate_parameters(loaded.raw)
    left_out = "".join(f"; {part}" for part in counted.left_out)
    base = weight_bits(model_dtype)
    if weights_dtype is not None and num_parameters and weight_bits(weights_dtype) < base:
        # A published count re-priced at another precision: embeddings and lm_head stay at the model dtype.
        bits = weight_bits(weights_dtype)
        kept = counted.breakdown.get("embeddings", 0) + counted.breakdown.get("lm_head", 0)
        size = math.ceil(((num_parameters - kept) * bits + kept * base) / 8)
        return WeightsSize(
            size,
            f"estimate: {num_parameters:,} parameters published at {weights_dtype} ({dtype_origin})",
            estimated=True,
        )
    if weights_dtype is not None:
        fmt = _Format(weight_bits(weights_dtype), weights_dtype)
        scheme: QuantScheme | None = QuantScheme(dtype_origin, ((("Linear",), fmt),)) if fmt.bits < base else None
        if scheme is None:
            base = fmt.bits
    else:
        scheme = quant_scheme(loaded.raw)
    origin = "counted from the config"
    if scheme is None:
        params = num_parameters or counted.total
        origin = "published" if num_parameters else origin
        size = math.ceil(params * base / 8)
        return WeightsSize(
            size,
            f"estimate: {params:,} parameters {origin} at {weights_dtype or model_dtype} ({float(base):g} bits)"
            + (left_out if origin != "published" else ""),
            estimated=True,
        )
    bits, used = _priced_bits(loaded.raw, counted, scheme, base)
    formats = ", ".join(sorted({f.name for _, f in scheme.groups}))
    rest = (
        "the rest"
        if used
        else "everything (no module matched: its targets name modules kvsize does not count, so this is an upper "
        "bound; --weights-mem gives the checkpoint's size)"
    )
    return WeightsSize(
        math.ceil(bits / 8),
        f"estimate: {counted.total:,} parameters {origin}, priced by module: {', '.join(used) or 'no'} Linear "
        f"layers at {formats} ({scheme.method}), {rest} at {model_dtype}{left_out}",
        estimated=True,
    )


# Checkpoints named for their format whose config.json carries no quantization_config: NVIDIA ModelOpt exports
# (<= 0.29) keep it in hf_quant_config.json, which vLLM reads (quantization/modelopt.py ModelOptNvFp4Config /
# ModelOptFp8Config) and the registry's copies of config.json lack. Pricing them at the config's bf16 would
# count 2-3.5x their size; the name's format is the better estimate, and the source says it was assumed.
NAMED_FORMATS = (
    (re.compile(r"nvfp4|(?<![a-z0-9])fp4(?![a-z0-9])", re.IGNORECASE), "nvfp4"),
    (re.compile(r"(?<![a-z0-9])fp8(?![a-z0-9])", re.IGNORECASE), "fp8"),
)


def named_format(hub_id: str | None) -> str | None:
    """The weight format a hub id's name states (NVFP4 or FP8 checkpoints), else None."""
    if not hub_id:
        return None
    name = hub_id.rsplit("/", 1)[-1]
    return next((dtype for pattern, dtype in NAMED_FORMATS if pattern.search(name)), None)


def _config_estimate(loaded: LoadedConfig, model_dtype: str) -> WeightsSize:
    """The parameter count priced from the config; a checkpoint named NVFP4 / FP8 with no quantization in its
    config is priced at that format, and its source says the format was assumed from the name."""
    named = named_format(loaded.hub_id) if quant_scheme(loaded.raw) is None else None
    if named is None:
        return weights_from_config(loaded, model_dtype=model_dtype)
    priced = weights_from_config(loaded, model_dtype=model_dtype, weights_dtype=named, dtype_origin="its name")
    return msgspec.structs.replace(
        priced,
        source=f"{priced.source}; its config.json has no quantization_config (ModelOpt keeps it in "
        f"hf_quant_config.json), so the {named} its name states is assumed: --weights-mem gives the real size",
    )


def find_weights(
    loaded: LoadedConfig,
    *,
    model_dtype: str = "bf16",
    weights_dtype: str | None = None,
    fetch_hub: Callable[[str], dict[str, int]] | None = None,
    served_dtype: str | None = None,
) -> WeightsSize:
    """In order: the registry's published size, a local index or safetensors headers, the hub's metadata
    (for hub models; `fetch_hub` replaces it in tests), and last a parameter count from the config.
    `weights_dtype` re-prices the parameters at another precision (a quantized deployment). `served_dtype` is
    the dtype the engine runs the model in (Engine.run_dtype) where it differs from the checkpoint's
    `model_dtype`: where it is narrower, unquantized weights are priced at it, measured sizes scaled to it
    (_loaded_as)."""
    if served_dtype is not None and weight_bits(served_dtype) == weight_bits(model_dtype):
        served_dtype = None  # bf16 <-> fp16: the same bytes
    if served_dtype is not None and weight_bits(served_dtype) > weight_bits(model_dtype):
        served_dtype = _widened(loaded, served_dtype, weights_dtype)
        if served_dtype is not None and weights_dtype is not None:
            weights_dtype = served_dtype  # a 16-bit pricing (_widened kept it) is cast whole, as the checkpoint is
    found = _find_weights(loaded, model_dtype, weights_dtype, fetch_hub, served_dtype)
    if found.estimated and served_dtype is not None:
        why = f"the engine runs this {model_dtype} checkpoint in {served_dtype}"
        return msgspec.structs.replace(found, source=f"{found.source} ({why})")
    return found


def _widened(loaded: LoadedConfig, served_dtype: str, weights_dtype: str | None) -> str | None:
    """The dtype an engine serving wider than the config's dtype holds the weights in: an unquantized checkpoint
    is cast whole (`served_dtype`); a quantized one keeps its quantized weights and its stored 16-bit rest in 16
    bits (None: the size as found), and under float32 widens only that rest, which kvsize cannot split from a
    size measured in total: refused."""
    if weights_dtype is not None:
        quantized = None if weight_bits(weights_dtype) >= 16 else weights_dtype
    elif quant_scheme(loaded.raw) is not None or named_format(loaded.hub_id):
        quantized = "quantized"
    else:
        quantized = None
    if quantized is None:
        return served_dtype
    if weight_bits(served_dtype) <= 16:
        return None
    raise UsageError(
        f"--dtype {served_dtype} widens only the unquantized part of this {quantized} checkpoint, which kvsize "
        "cannot split from its size",
        hint="Give the weights as the engine logs them with --weights-mem (vLLM: 'Model loading took ... GiB').",
    )


def _find_weights(
    loaded: LoadedConfig,
    checkpoint_dtype: str,
    weights_dtype: str | None,
    fetch_hub: Callable[[str], dict[str, int]] | None,
    served_dtype: str | None,
) -> WeightsSize:
    from kvsize.registry import registry_weights

    model_dtype = served_dtype or checkpoint_dtype  # what an estimate prices the unquantized weights at
    if weights_dtype is not None:
        published = registry_weights().get((loaded.hub_id or "").lower()) or {}
        return weights_from_config(
            loaded, model_dtype=model_dtype, weights_dtype=weights_dtype, num_parameters=published.get("num_parameters")
        )

    if loaded.hub_id is not None:
        published = registry_weights().get(loaded.hub_id.lower()) or {}
        quant = published.get("quantization_config")
        if isinstance(quant, dict) and "quantization_config" not in loaded.raw:
            # The hub repo's hf_quant_config.json (ModelOpt <= 0.29 keeps it out of config.json), with its source.
            loaded = msgspec.structs.replace(loaded, raw={**loaded.raw, "quantization_config": quant})
        # A published size is of the dtype it names (the checkpoint's where it names none or a mixed format).
        stored = str(published.get("weights_dtype"))
        stored = stored if stored in PUBLISHED_DTYPE_BYTES else checkpoint_dtype
        if published.get("weights_bytes"):
            return _loaded_as(
                WeightsSize(
                    int(published["weights_bytes"]),
                    f"registry: published safetensors size ({published['weights_dtype']})",
                ),
                stored,
                served_dtype,
            )
        per_param = PUBLISHED_DTYPE_BYTES.get(str(published.get("weights_dtype")))
        if published.get("num_parameters") and per_param:
            params = int(published["num_parameters"])
            return _loaded_as(
                WeightsSize(
                    params * per_param,
                    f"registry: published {params:,} parameters x {per_param} B ({published['weights_dtype']})",
                ),
                stored,
                served_dtype,
            )
    if loaded.folder is not None:
        found = weights_from_index(loaded.folder) or weights_from_safetensors(loaded.folder)
        if found is not None:
            return _loaded_as(found, checkpoint_dtype, served_dtype)
    if loaded.source == "hub" and loaded.hub_id is not None:
        try:
            if fetch_hub is None:
                from kvsize.hub import fetch_weights_from_hub

                counts = fetch_weights_from_hub(loaded.hub_id)
            else:
                counts = fetch_hub(loaded.hub_id)
            return weights_from_hub_counts(counts, loaded.hub_id, served_dtype)
        except KvsizeError as exc:  # no safetensors on the hub (pytorch_model.bin only), or no network
            counted = _config_estimate(loaded, model_dtype)
            return msgspec.structs.replace(
                counted, source=f"{counted.source}; hub safetensors metadata unavailable: {exc}"
            )
    return _config_estimate(loaded, model_dtype)


def tower_bytes(raw: Mapping[str, Any], model_dtype: str, kinds: tuple[str, ...] = ("vision", "audio")) -> int:
    """The towers' bytes at the model dtype (`kinds`: kvsize/params.py's breakdown keys), as kvsize/params.py
    counts them (0 where it has no rule for the config's towers, or the config has none)."""
    from kvsize.params import estimate_parameters

    try:
        counted = estimate_parameters(raw)
    except KvsizeError:
        return 0
    towers = sum(counted.breakdown.get(kind, 0) for kind in kinds)
    return int(towers * weight_bits(model_dtype)) // 8
