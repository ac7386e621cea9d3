"""`kvsize verify`: build the model with transformers, run it, and hold kvsize's numbers against the cache it keeps.

Two halves:

- pure (stdlib + pydantic): result models, `compare` (predicted vs measured bytes, layer by layer),
  `truncate_layers` (the first N decoder layers of a config), full-model extrapolation and the markdown report;
- torch (imported inside functions only, so `kvsize --help` stays light): building the transformers config and
  model, one prefill plus a few decode steps, and `measure_cache`, which sums numel x element_size over every
  tensor a cache layer holds (keys, values, conv and recurrent states, fp8 payloads, ...).

Cache size does not depend on the weights' values, so models without local weights are built from the config
with random weights (the output says so).
"""

from __future__ import annotations

import gc
import inspect
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Literal, Protocol

import msgspec

from kvsize.dtypes import KvDtype, dtype_from_torch_name
from kvsize.errors import ConfigError, EnvironmentProblem, KvsizeError, MissingExtra, UsageError
from kvsize.record import Record
from kvsize.resolve import LoadedConfig
from kvsize.spec import ArchSpec
from kvsize.units import format_bytes

DEFAULT_TOLERANCE = 0.02
DEFAULT_DECODE_STEPS = 4
DEFAULT_CONTEXTS = {"cuda": (4096,), "cpu": (256,), "meta": (4096,)}
CPU_PARAMETER_LIMIT = 1_500_000_000
"""Decoder-layer parameters above which a CPU build is refused (random init takes minutes); --layers N builds
fewer. The embeddings and lm_head are not counted: every build has them, whatever --layers is."""
INSTALL_HINT = 'Install the extra in the kvsize clone\'s folder (kvsize is not on PyPI): pip install -e ".[verify]"'
_LAYER_COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config", "decoder", "generator")

Device = Literal["cuda", "cpu", "meta"]


# ======================================================================================================
# Pure: results and comparison
# ======================================================================================================


class LayerComparison(Record, frozen=True, kw_only=True):
    index: int
    kind: str
    predicted_bytes: int
    measured_bytes: int | None
    difference_bytes: int | None
    storage_bytes: int | None = None
    """Bytes of the storage behind the layer's tensors (a sliding layer's keys are a view of the last concatenation)."""


class Verdict(msgspec.Struct, frozen=True):
    """The outcome of one comparison: logical bytes must match exactly, the allocator within a tolerance."""

    match: bool
    logical_match: bool
    predicted_bytes: int
    measured_bytes: int
    difference_bytes: int
    difference_pct: float
    allocator_delta_bytes: int | None
    allocator_difference_pct: float | None
    allocator_ok: bool | None
    layers: tuple[LayerComparison, ...]
    reasons: tuple[str, ...]


def _pct(difference: int, reference: int) -> float:
    return 100.0 * difference / reference if reference else (0.0 if difference == 0 else float("inf"))


def compare(
    predicted: Sequence[int],
    measured: Sequence[int],
    *,
    rel_tol: float,
    allocator_delta: int | None = None,
    kinds: Sequence[str] | None = None,
    storage: Sequence[int] | None = None,
) -> Verdict:
    """Hold per-layer predictions against per-layer measurements.

    Logical bytes (what the cache's tensors hold) must be equal layer by layer; the allocator's delta (CUDA
    memory_allocated after minus before, when given) may differ from the predicted total by `rel_tol`.
    """
    if rel_tol < 0:
        raise UsageError(f"--tolerance must not be negative, got {rel_tol}")
    reasons: list[str] = []
    if len(predicted) != len(measured):
        reasons.append(f"kvsize predicts {len(predicted)} cache layers, the cache holds {len(measured)}")
    rows = []
    for i in range(max(len(predicted), len(measured))):
        p = predicted[i] if i < len(predicted) else 0
        m = measured[i] if i < len(measured) else None
        kind = kinds[i] if kinds is not None and i < len(kinds) else "?"
        s = storage[i] if storage is not None and i < len(storage) else None
        rows.append(
            LayerComparison(
                index=i,
                kind=kind,
                predicted_bytes=p,
                measured_bytes=m,
                difference_bytes=None if m is None else m - p,
                storage_bytes=s,
            )
        )
    wrong = [r for r in rows if r.difference_bytes != 0]
    for r in wrong[:5]:
        reasons.append(
            f"layer {r.index} ({r.kind}): measured {r.measured_bytes:,} B, predicted {r.predicted_bytes:,} B"
            if r.measured_bytes is not None
            else f"layer {r.index} ({r.kind}): not measured, predicted {r.predicted_bytes:,} B"
        )
    if len(wrong) > 5:
        reasons.append(f"... and {len(wrong) - 5} more layers differ")
    total_p, total_m = sum(predicted), sum(measured)
    logical = not wrong and len(predicted) == len(measured)
    alloc_pct = alloc_ok = None
    if allocator_delta is not None:
        alloc_pct = _pct(allocator_delta - total_p, total_p)
        alloc_ok = abs(allocator_delta - total_p) <= rel_tol * max(total_p, 1)
        if not alloc_ok:
            reasons.append(
                f"allocator delta {allocator_delta} B is {alloc_pct:+.2f}% off the predicted {total_p} B "
                f"(tolerance {100 * rel_tol:.2f}%)"
            )
    return Verdict(
        match=logical and alloc_ok is not False,
        logical_match=logical,
        predicted_bytes=total_p,
        measured_bytes=total_m,
        difference_bytes=total_m - total_p,
        difference_pct=_pct(total_m - total_p, total_p),
        allocator_delta_bytes=allocator_delta,
        allocator_difference_pct=alloc_pct,
        allocator_ok=alloc_ok,
        layers=tuple(rows),
        reasons=tuple(reasons),
    )


class CacheMeasure(msgspec.Struct, frozen=True):
    """What one cache object holds, per decoder layer."""

    layer_bytes: tuple[int, ...]
    """Logical bytes (numel x element_size) of the tensors of each layer, 0-dim tensors excluded."""
    storage_bytes: tuple[int, ...]
    """Bytes of the storages behind those tensors (larger when a tensor is a view, as sliding layers keep)."""
    scalar_bytes: int
    """0-dim tensors: sliding-window and position bookkeeping, fp8 scales (per layer, not per request)."""

    @property
    def total(self) -> int:
        return sum(self.layer_bytes)


class FullModel(Record, frozen=True, kw_only=True):
    """With --layers N: the whole model's figures, the measured ones scaled from the N layers built."""

    layers_total: int
    predicted_bytes: int
    formula_bytes: int | None
    measured_bytes: int | None
    """Every layer of the full model taking the measured bytes of a built layer of identical spec; None when
    some layer kind was not among the layers built."""
    match: bool | None
    note: str


class ScenarioResult(Record, frozen=True, kw_only=True):
    ctx: int
    batch: int
    kv_dtype: str
    cache_implementation: str
    prefill_tokens: int
    decode_steps: int
    status: Literal["match", "mismatch", "oom"]
    match: bool | None
    predicted_bytes: int
    formula_bytes: int | None
    measured_bytes: int | None
    difference_bytes: int | None
    difference_pct: float | None
    storage_bytes: int | None = None
    scalar_bytes: int | None = None
    allocator_delta_bytes: int | None = None
    allocator_difference_pct: float | None = None
    allocator_peak_bytes: int | None = None
    """max_memory_allocated during the scenario minus memory_allocated before it: cache plus activation peak."""
    allocator_reserved_bytes: int | None = None
    full_model: FullModel | None = None
    finding: str | None = None
    reasons: tuple[str, ...] = ()
    layers: tuple[LayerComparison, ...] = ()


class VerifyResult(Record, frozen=True, kw_only=True):
    """The JSON contract of `kvsize verify --json`."""

    model: str
    source: str
    device: str
    weights: Literal["random", "loaded"]
    layers_built: int
    layers_total: int
    engine_rule: str
    transformers_version: str
    torch_version: str
    tolerance: float
    notes: tuple[str, ...]
    scenarios: tuple[ScenarioResult, ...]

    @property
    def passed(self) -> bool:
        return all(s.match is not False for s in self.scenarios)


# ======================================================================================================
# Pure: configs with fewer layers, extrapolation
# ======================================================================================================


def text_config_of(raw: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """The language model's config dict and the key it sits under (None: the config is flat)."""
    for key in _TEXT_CONFIG_KEYS:
        nested = raw.get(key)
        if isinstance(nested, Mapping):
            return nested, key
    return raw, None


def layer_count(raw: Mapping[str, Any]) -> int | None:
    text, _ = text_config_of(raw)
    for key in _LAYER_COUNT_KEYS:
        value = text.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def truncate_layers(raw: Mapping[str, Any], layers: int) -> tuple[dict[str, Any], list[str]]:
    """A copy of `raw` with only its first `layers` decoder layers: the layer count, every per-layer list and
    pattern string cut to length, layer-index lists filtered, and Gemma-3n-style KV sharing recounted."""
    text, where = text_config_of(raw)
    total = layer_count(raw)
    if total is None:
        raise UsageError("--layers needs a config with a layer count (num_hidden_layers)")
    if layers < 1:
        raise UsageError(f"--layers must be positive, got {layers}")
    if layers >= total:
        return dict(raw), []
    new = dict(text)
    cut: list[str] = []
    picked = _representative_layers(text, total, layers)
    keep = picked if picked is not None else list(range(layers))
    for key, value in text.items():
        if key in _LAYER_COUNT_KEYS and value == total:
            new[key] = layers
        elif isinstance(value, (list, str)) and len(value) == total and key != "model_type":
            kept = [value[i] for i in keep]
            new[key] = "".join(kept) if isinstance(value, str) else kept
            cut.append(key)
    for key in ("cross_attention_layers", "mlp_only_layers"):
        if isinstance(text.get(key), list):
            new[key] = [keep.index(i) for i in text[key] if isinstance(i, int) and i in keep]
            cut.append(key)
    shared = text.get("num_kv_shared_layers")
    if isinstance(shared, int) and shared:
        new["num_kv_shared_layers"] = max(0, layers - (total - shared))
    out = dict(raw)
    if where is None:
        out = new
    else:
        out[where] = new
    lists = f" (cut: {', '.join(cut)})" if cut else ""
    if picked is not None:
        return out, [
            f"built {layers} of {total} decoder layers, layers {', '.join(map(str, picked))}: the first {layers} "
            f"hold no attention layer, which transformers' hybrid cache needs to report its length{lists}"
        ]
    return out, [f"built only the first {layers} of {total} decoder layers{lists}"]


# Per-layer kind lists whose values name attention layers (Nemotron-H '*', layer_types, MiniMax attn_type_list 1).
_KIND_LIST_KEYS = ("hybrid_override_pattern", "layers_block_type", "layer_types", "attn_type_list")
_ATTENTION_KINDS = frozenset(
    {"*", "attention", "full_attention", "sliding_attention", "chunked_attention", "hybrid", 1}
)


def _representative_layers(text: Mapping[str, Any], total: int, layers: int) -> list[int] | None:
    """Indices to build when the first `layers` layers of a hybrid hold no attention layer but the model has one:
    transformers' hybrid caches read their length from an attention layer (`Cache.get_seq_length` raises
    "can only be called on Attention layers" otherwise), so the build keeps the first layer of each kind, the
    first attention layer included, then the earliest others. None: the first `layers` layers will do."""
    if isinstance(text.get("num_kv_shared_layers"), int) and text.get("num_kv_shared_layers"):
        return None
    kinds = next(
        (list(v) for k in _KIND_LIST_KEYS if isinstance(v := text.get(k), (list, str)) and len(v) == total), None
    )
    if kinds is None or not any(k in _ATTENTION_KINDS for k in kinds if isinstance(k, (str, int))):
        return None
    if any(k in _ATTENTION_KINDS for k in kinds[:layers] if isinstance(k, (str, int))):
        return None
    firsts = [kinds.index(k) for k in dict.fromkeys(k for k in kinds if isinstance(k, (str, int)))]
    attention = next(i for i, k in enumerate(kinds) if isinstance(k, (str, int)) and k in _ATTENTION_KINDS)
    picks = [attention] + [i for i in firsts if i != attention]
    picks = picks[:layers]
    rest = [i for i in range(total) if i not in picks][: layers - len(picks)]
    return sorted(picks + rest)


def extrapolate(full: ArchSpec, built: ArchSpec, measured: Sequence[int]) -> int | None:
    """The full model's measured bytes: each of its layers takes the bytes measured on a built layer with the
    same attention and state spec; None when a full-model layer kind was not among the built layers."""
    by_spec: dict[tuple[object, object], int] = {}
    for layer, value in zip(built.layers, measured, strict=False):
        by_spec.setdefault((layer.attention, layer.state), value)
    total = 0
    for layer in full.layers:
        found = by_spec.get((layer.attention, layer.state))
        if found is None:
            return None
        total += found
    return total


def missing_kinds(full: ArchSpec, built: ArchSpec) -> list[str]:
    have = {(layer.attention, layer.state) for layer in built.layers}
    return sorted({layer.kind for layer in full.layers if (layer.attention, layer.state) not in have})


# ======================================================================================================
# Pure: markdown
# ======================================================================================================


def _b(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render_markdown(result: VerifyResult) -> str:
    """The report `--report file.md` writes."""
    lines = [
        f"# kvsize verify: {result.model}",
        "",
        f"- source: {result.source}",
        f"- device: {result.device}; weights: {result.weights}; layers built: {result.layers_built} of "
        f"{result.layers_total}",
        f"- transformers {result.transformers_version}, torch {result.torch_version}",
        f"- rule: {result.engine_rule}",
        f"- tolerance (allocator): {100 * result.tolerance:.2f}%",
        f"- verdict: **{'PASS' if result.passed else 'FAIL'}**",
        "",
        "| ctx | batch | kv dtype | cache | predicted (B) | measured (B) | diff (B) | diff % | allocator delta (B) "
        "| alloc diff % | peak (B) | full model predicted | full model measured | result |",
        "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for s in result.scenarios:
        full = s.full_model
        lines.append(
            f"| {s.ctx} | {s.batch} | {s.kv_dtype} | {s.cache_implementation} | {_b(s.predicted_bytes)} "
            f"| {_b(s.measured_bytes)} | {_b(s.difference_bytes)} "
            f"| {'-' if s.difference_pct is None else f'{s.difference_pct:+.3f}'} | {_b(s.allocator_delta_bytes)} "
            f"| {'-' if s.allocator_difference_pct is None else f'{s.allocator_difference_pct:+.3f}'} "
            f"| {_b(s.allocator_peak_bytes)} | {_b(full.predicted_bytes) if full else '-'} "
            f"| {_b(full.measured_bytes) if full else '-'} | {s.status} |"
        )
    for s in result.scenarios:
        if s.finding or s.reasons:
            lines += ["", f"**ctx {s.ctx}, batch {s.batch}:** " + " ".join([*(s.reasons), s.finding or ""]).strip()]
    if result.scenarios and result.scenarios[0].layers:
        first = result.scenarios[0]
        lines += [
            "",
            f"## Layers (ctx {first.ctx}, batch {first.batch})",
            "",
            "| layer | kind | predicted (B) | measured (B) | diff (B) | storage (B) |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.index} | {r.kind} | {_b(r.predicted_bytes)} | {_b(r.measured_bytes)} | {_b(r.difference_bytes)} "
            f"| {_b(r.storage_bytes)} |"
            for r in first.layers
        ]
    if result.notes:
        lines += ["", "## Notes", ""] + [f"- {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


# ======================================================================================================
# Torch: loading the libraries, devices, configs and models
# ======================================================================================================


def load_torch() -> tuple[Any, Any]:
    """(torch, transformers), or MissingExtra with the install hint."""
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise MissingExtra(
            f"kvsize verify needs torch and transformers ({exc.name or exc} is missing)", hint=INSTALL_HINT
        ) from None
    return torch, transformers


def resolve_device(torch: Any, device: str | None) -> Device:
    """The device asked for, defaulting to CUDA when a GPU is visible, else the CPU."""
    name = (device or ("cuda" if torch.cuda.is_available() else "cpu")).strip().lower()
    if name not in ("cuda", "cpu", "meta"):
        raise UsageError(f"unknown device '{device}'", hint="Choose cuda, cpu or meta.")
    if name == "cuda" and not torch.cuda.is_available():
        raise EnvironmentProblem(
            "--device cuda: no CUDA GPU is visible to torch (torch.cuda.is_available() is False)",
            hint="Run on a GPU machine, or use --device cpu (with --layers) or --device meta.",
        )
    return name  # type: ignore[return-value]  # checked against the three literals above


TORCH_DTYPES = {KvDtype.FP32: "float32", KvDtype.FP16: "float16", KvDtype.BF16: "bfloat16"}


def run_dtype(kv_dtype: KvDtype, spec: ArchSpec) -> KvDtype:
    """The activation dtype to run the model in: the KV dtype itself, or for fp8 (QuantizedCache) the model's."""
    if kv_dtype in TORCH_DTYPES:
        return kv_dtype
    model = dtype_from_torch_name(spec.model_dtype) or KvDtype.BF16
    return model if model in TORCH_DTYPES else KvDtype.BF16


def hf_config(transformers: Any, raw: Mapping[str, Any], loaded: LoadedConfig, *, trust_remote_code: bool) -> Any:
    """A transformers config object for `raw`, from the built-in class of its model_type; custom code (auto_map)
    only with trust_remote_code."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = raw.get("model_type")
    clean = {k: v for k, v in raw.items() if k != "auto_map" or trust_remote_code}
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        try:
            return CONFIG_MAPPING[model_type].from_dict(clean)
        except Exception as exc:  # the class's own validation (layer-type lists, patterns): the config is at fault
            raise ConfigError(
                f"transformers {transformers.__version__} cannot read this config: {type(exc).__name__}: {exc}",
                hint="Fix the config.json, or size it without --verify.",
            ) from None
    if not trust_remote_code:
        raise KvsizeError(
            f"transformers {transformers.__version__} has no built-in class for model_type '{model_type}'",
            hint="Its config names custom code (auto_map); pass --trust-remote-code to run that code, if you trust it.",
        )
    auto_map = raw.get("auto_map")
    where = str(loaded.folder) if loaded.folder is not None else loaded.hub_id
    if not isinstance(auto_map, Mapping) or "AutoConfig" not in auto_map or where is None:
        raise KvsizeError(f"model_type '{model_type}' has no built-in class and its config names no AutoConfig code")
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config_class: Any = get_class_from_dynamic_module(auto_map["AutoConfig"], where)
    return config_class.from_dict(clean)


def local_weights(loaded: LoadedConfig) -> str | None:
    """A folder (or hub id with every shard in the HF cache) holding the checkpoint, else None."""
    if loaded.folder is not None and _has_checkpoint(loaded.folder):
        return str(loaded.folder)
    if loaded.hub_id is None:
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for name in ("model.safetensors.index.json", "model.safetensors"):
        found = try_to_load_from_cache(loaded.hub_id, name)
        if isinstance(found, str) and _has_checkpoint(Path(found).parent):
            return loaded.hub_id
    return None


def _has_checkpoint(folder: Path) -> bool:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        import json

        try:
            from kvsize.safe_io import read_small_text
            from kvsize.weights import MAX_INDEX_BYTES

            text = read_small_text(index, max_bytes=MAX_INDEX_BYTES, what="safetensors index")
            shards = set(json.loads(text)["weight_map"].values())
        except (KvsizeError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return False
        return all((folder / shard).is_file() for shard in shards)
    return (folder / "model.safetensors").is_file()


def _auto_classes(transformers: Any) -> list[Any]:
    return [transformers.AutoModelForCausalLM, getattr(transformers, "AutoModelForImageTextToText", None)]


def build_model(
    torch: Any,
    transformers: Any,
    config: Any,
    *,
    device: Device,
    dtype: KvDtype,
    weights: str | None,
    trust_remote_code: bool,
) -> Any:
    """The model on `device` in `dtype`: loaded from `weights` when given, else random weights from the config."""
    torch_dtype = getattr(torch, TORCH_DTYPES[dtype])
    torch.manual_seed(0)  # reproducible random weights (their values never change the cache's size)
    errors = []
    for auto in _auto_classes(transformers):
        if auto is None:
            continue
        try:
            if weights is not None and device != "meta":
                model = _load_checkpoint(auto, weights, config, torch_dtype, device, trust_remote_code)
            else:
                with torch.device(device):
                    model = auto.from_config(config, dtype=torch_dtype, trust_remote_code=trust_remote_code)
            return model.eval()
        except ValueError as exc:  # "Unrecognized configuration class ... for this kind of AutoModel"
            if "Unrecognized configuration class" not in str(exc):
                raise
            errors.append(auto.__name__)
    raise KvsizeError(
        f"transformers has no causal-LM or image-text-to-text class for {type(config).__name__}",
        hint=f"Tried {', '.join(errors)}.",
    )


def _load_checkpoint(auto: Any, weights: str, config: Any, torch_dtype: Any, device: Device, trust: bool) -> Any:
    """from_pretrained straight onto the GPU when accelerate is installed (transformers needs it for a
    device_map), else through host memory."""
    import importlib.util

    direct = device == "cuda" and importlib.util.find_spec("accelerate") is not None
    extra = {"device_map": device} if direct else {}
    model = auto.from_pretrained(
        weights, config=config, dtype=torch_dtype, local_files_only=True, trust_remote_code=trust, **extra
    )
    return model if direct or device == "cpu" else model.to(device)


# ======================================================================================================
# Torch: running and measuring
# ======================================================================================================


def _walk_tensors(torch: Any, value: Any) -> Iterator[Any]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _walk_tensors(torch, item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _walk_tensors(torch, item)


def _layer_objects(torch: Any, cache: Any) -> list[list[Any]]:
    """The tensors of each layer: `cache.layers` (transformers >= 4.56), or the per-layer lists older caches
    kept (key_cache / value_cache, conv_states / ssm_states)."""
    layers = getattr(cache, "layers", None)
    if layers is not None:
        found = [list(_walk_tensors(torch, vars(layer))) for layer in layers]
        # Caches that keep extra per-layer lists beside `layers` (MiniMaxCache.linear_cache: the lightning
        # attention state of each linear layer, [] for the others).
        for value in vars(cache).values():
            if isinstance(value, list) and value and any(isinstance(v, torch.Tensor) for v in value):
                found += [[] for _ in range(len(value) - len(found))]
                for i, item in enumerate(value):
                    found[i] += list(_walk_tensors(torch, item))
        return found
    lists = [v for v in vars(cache).values() if isinstance(v, list) and v and isinstance(v[0], torch.Tensor)]
    count = max((len(v) for v in lists), default=0)
    return [[v[i] for v in lists if i < len(v)] for i in range(count)]


def measure_cache(cache: Any) -> CacheMeasure:
    """Sum numel x element_size over every tensor of every layer of a transformers cache object."""
    import torch

    logical, storage = [], []
    scalars = 0
    seen: set[tuple[str, int]] = set()
    for tensors in _layer_objects(torch, cache) if cache is not None else []:
        data = stored = 0
        for t in tensors:
            size = t.numel() * t.element_size()
            if t.dim() == 0:
                scalars += size
                continue
            data += size
            store = t.untyped_storage()
            key = (str(t.device), store.data_ptr())
            if key[1] == 0 or key not in seen:
                seen.add(key)
                stored += store.nbytes()
        logical.append(data)
        storage.append(stored)
    return CacheMeasure(tuple(logical), tuple(storage), scalars)


class Progress(Protocol):
    def step(self, description: str) -> AbstractContextManager[None]: ...


class SilentProgress:
    @contextmanager
    def step(self, description: str) -> Iterator[None]:
        yield


class RunOutcome(msgspec.Struct):
    measure: CacheMeasure | None
    allocator_delta: int | None = None
    allocator_peak: int | None = None
    allocator_reserved: int | None = None
    oom: str | None = None


def _forward_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    params = inspect.signature(model.forward).parameters
    kwargs: dict[str, Any] = {"use_cache": True}
    if "logits_to_keep" in params:
        kwargs["logits_to_keep"] = 1  # the prefill's logits for every position would dwarf the cache
    if cache is not None:
        kwargs["cache" if "cache" in params else "past_key_values"] = cache
    return kwargs


def _returned_cache(out: Any) -> Any:
    """The cache a forward returned, or None for models that keep none (GPT-1: its output has neither `cache`
    nor `past_key_values`; transformers' deprecated `past_key_values` property then raises AttributeError)."""
    cache = getattr(out, "cache", None)
    if cache is not None:
        return cache
    try:
        return getattr(out, "past_key_values", None)
    except AttributeError:
        return None


def make_cache(transformers: Any, model: Any, *, kv_dtype: KvDtype, implementation: str, max_cache_len: int) -> Any:
    """None for the model's default DynamicCache; a StaticCache or the fp8 QuantizedCache when asked for."""
    if kv_dtype is KvDtype.FP8_E4M3:
        return transformers.QuantizedCache(backend="fp8", config=model.config)
    if implementation == "static":
        return transformers.StaticCache(config=model.config, max_cache_len=max_cache_len)
    return None


def warm_up(torch: Any, model: Any, device: Device) -> None:
    """One 8-token forward so that one-time allocations (cuBLAS workspaces, lazily built buffers) happen before
    any scenario's `memory_allocated` baseline is taken."""
    with torch.inference_mode():
        out = model(input_ids=_token_ids(torch, device, 1, 8, 2), **_forward_kwargs(model, None))
        del out
    gc.collect()


def run_scenario(
    torch: Any,
    model: Any,
    cache: Any,
    *,
    device: Device,
    ctx: int,
    batch: int,
    decode_steps: int,
    cross_tokens: int | None,
    progress: Progress,
) -> RunOutcome:
    """Prefill ctx - decode_steps synthetic tokens for `batch` requests, then decode one token at a time until the
    cache holds ctx tokens; measure the returned cache (and, on CUDA, the allocator around it)."""
    cuda = device == "cuda"
    if cuda:
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated() if cuda else 0
    vocab = int(getattr(model.config.get_text_config(), "vocab_size", 0) or 2)
    try:
        with torch.inference_mode():
            ids = _token_ids(torch, device, batch, ctx - decode_steps, vocab)
            extra = _cross_states(torch, model, device, batch, cross_tokens)
            with progress.step(f"ctx {ctx} x batch {batch}: prefill {ctx - decode_steps} tokens"):
                out = model(input_ids=ids, **extra, **_forward_kwargs(model, cache))
                cache = _returned_cache(out)
                del out, extra
            for step in range(decode_steps):
                with progress.step(f"ctx {ctx} x batch {batch}: decode step {step + 1}/{decode_steps}"):
                    out = model(input_ids=ids[:, -1:], **_forward_kwargs(model, cache))
                    cache = _returned_cache(out)
                    del out
            del ids
        if cuda:
            torch.cuda.synchronize()
            gc.collect()
            return RunOutcome(
                measure_cache(cache),
                allocator_delta=torch.cuda.memory_allocated() - before,
                allocator_peak=torch.cuda.max_memory_allocated() - before,
                allocator_reserved=torch.cuda.memory_reserved(),
            )
        return RunOutcome(measure_cache(cache))
    except Exception as exc:
        if cuda and isinstance(exc, torch.cuda.OutOfMemoryError):
            free, total = torch.cuda.mem_get_info()
            return RunOutcome(
                None, oom=f"CUDA out of memory ({format_bytes(free)} free of {format_bytes(total)} when it failed)"
            )
        if not cuda and isinstance(exc, (MemoryError, RuntimeError)):  # torch's CPU allocator, size overflow
            return RunOutcome(None, oom=f"the {device} run failed ({type(exc).__name__}: {' '.join(str(exc).split())})")
        if isinstance(exc, KvsizeError):
            raise
        # transformers' own code refusing the run (a cache that holds no attention layer, a pattern it cannot
        # build): said on one line, never a traceback
        raise EnvironmentProblem(
            f"transformers could not run the model at ctx {ctx} x batch {batch}: {type(exc).__name__}: {exc}",
            hint="Size it without --verify, or try another transformers release.",
        ) from None
    finally:
        cache = None
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()


def _token_ids(torch: Any, device: Device, batch: int, tokens: int, vocab: int) -> Any:
    if device == "meta":
        return torch.zeros((batch, tokens), dtype=torch.long, device="meta")
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, vocab, (batch, tokens), generator=generator).to(device)


def _cross_states(torch: Any, model: Any, device: Device, batch: int, tokens: int | None) -> dict[str, Any]:
    """Synthetic vision states for models whose forward takes them (Mllama's cross-attention layers)."""
    if not tokens or "cross_attention_states" not in inspect.signature(model.forward).parameters:
        return {}
    hidden = model.config.get_text_config().hidden_size
    return {"cross_attention_states": torch.zeros((batch, tokens, hidden), dtype=model.dtype, device=device)}


# ======================================================================================================
# Orchestration
# ======================================================================================================


class VerifyOptions(msgspec.Struct, frozen=True):
    contexts: Sequence[int] = ()
    batches: Sequence[int] = (1,)
    kv_dtypes: Sequence[str] = ("auto",)
    device: str | None = None
    layers: int | None = None
    tolerance: float = DEFAULT_TOLERANCE
    decode_steps: int = DEFAULT_DECODE_STEPS
    engine_version: str | None = None
    cache_implementation: str = "dynamic"
    max_cache_len: int | None = None
    trust_remote_code: bool = False
    encoder_len: int | None = None
    notes: list[str] = msgspec.field(default_factory=list)


class _Planned(msgspec.Struct, frozen=True):
    """One scenario, with its predictions made before anything is built (so bad settings fail fast)."""

    kv_dtype: KvDtype
    ctx: int
    batch: int
    decode_steps: int
    predicted: list[int]
    formula_bytes: int


class _Plan(msgspec.Struct, frozen=True):
    device: Device
    raw: Mapping[str, Any]
    spec: ArchSpec
    full_spec: ArchSpec
    engine: Any
    full_engine: Any
    scenarios: list[_Planned]
    weights: str | None
    notes: list[str]


def plan(loaded: LoadedConfig, options: VerifyOptions, device: Device) -> _Plan:
    """Parse, cut to --layers, resolve dtypes and contexts, and predict every scenario (no torch needed)."""
    from kvsize.api import resolve_kv_dtypes
    from kvsize.config import parse_config
    from kvsize.engines import get_engine
    from kvsize.engines.hf import HfEngine

    if options.tolerance < 0:
        raise UsageError(f"--tolerance must not be negative, got {options.tolerance}")
    if options.decode_steps < 0:
        raise UsageError(f"--decode-steps must not be negative, got {options.decode_steps}")
    full_spec = parse_config(loaded.raw, source=loaded.location, encoder_tokens=options.encoder_len)
    raw, notes = (loaded.raw, []) if options.layers is None else truncate_layers(loaded.raw, options.layers)
    spec = parse_config(raw, source=loaded.location, encoder_tokens=options.encoder_len)
    _check_cpu_size(device, options.layers, raw, loaded.raw)
    contexts = list(options.contexts) or list(DEFAULT_CONTEXTS[device])
    _check_run_size(device, spec, contexts, options.batches)
    dtypes, dtype_notes = resolve_kv_dtypes(options.kv_dtypes, loaded.raw, spec)
    engine_kw: dict[str, Any] = {
        "cache_implementation": options.cache_implementation,
        "max_cache_len": options.max_cache_len,
    }
    engine = HfEngine(options.engine_version, raw_config=raw, **engine_kw)
    formula = get_engine("formula")
    scenarios = []
    for kv_dtype in dtypes:
        for ctx in contexts:
            for batch in options.batches:
                predicted = engine.layer_bytes(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype)
                _check_cache_size(device, predicted, ctx, batch)
                formula_bytes = formula.estimate(spec, ctx=ctx, batch=batch, kv_dtype=kv_dtype).kv_cache_bytes
                steps = min(options.decode_steps, ctx - 1)
                scenarios.append(_Planned(kv_dtype, ctx, batch, steps, predicted, formula_bytes))
    weights = local_weights(loaded) if device != "meta" else None
    notes = [*options.notes, *notes, *dtype_notes]
    notes.append(
        f"weights loaded from {weights}" if weights else "random weights: cache size does not depend on the weights"
    )
    if device == "meta":
        notes.append("meta device: shapes and dtypes are real, no memory is allocated")
    if spec.num_layers < full_spec.num_layers:
        notes.append(
            "full-model figures scale the built layers: each layer of the model takes the bytes measured "
            "on a built layer of identical spec"
        )
    full_engine = HfEngine(options.engine_version, raw_config=loaded.raw, **engine_kw)
    return _Plan(device, raw, spec, full_spec, engine, full_engine, scenarios, weights, notes)


def verify(loaded: LoadedConfig, options: VerifyOptions, progress: Progress | None = None) -> VerifyResult:
    """Build, run and compare every ctx x batch x kv dtype scenario of `options` for the model of `loaded`."""
    from kvsize.engines import get_engine

    progress = progress or SilentProgress()
    torch, transformers = load_torch()
    device = resolve_device(torch, options.device)
    p = plan(loaded, options, device)
    config = hf_config(transformers, p.raw, loaded, trust_remote_code=options.trust_remote_code)
    formula = get_engine("formula")
    cross = _encoder_tokens(p.spec)
    results = []
    for kv_dtype in dict.fromkeys(s.kv_dtype for s in p.scenarios):
        act = run_dtype(kv_dtype, p.spec)
        with progress.step(f"building {loaded.model} ({p.spec.num_layers} layers, {act.value}, {device})"):
            model = _build_or_report(torch, transformers, config, device, act, p.weights, options.trust_remote_code)
        if device == "cuda":
            with progress.step("warm-up forward (cuBLAS workspaces and other one-time allocations)"):
                warm_up(torch, model, device)
        for s in (s for s in p.scenarios if s.kv_dtype is kv_dtype):
            cache = make_cache(
                transformers,
                model,
                kv_dtype=kv_dtype,
                implementation=options.cache_implementation,
                max_cache_len=options.max_cache_len or s.ctx,
            )
            outcome = run_scenario(
                torch,
                model,
                cache,
                device=device,
                ctx=s.ctx,
                batch=s.batch,
                decode_steps=s.decode_steps,
                cross_tokens=cross,
                progress=progress,
            )
            del cache
            full = _full_model(p.full_engine, formula, p.full_spec, p.spec, outcome, s.ctx, s.batch, kv_dtype)
            results.append(_scenario(p.spec, options, s, outcome, full))
        del model
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return VerifyResult(
        model=loaded.model,
        source=loaded.source_label,
        device=device if device != "cuda" else f"cuda ({torch.cuda.get_device_name()})",
        weights="loaded" if p.weights else "random",
        layers_built=p.spec.num_layers,
        layers_total=p.full_spec.num_layers,
        engine_rule=p.engine.rule,
        transformers_version=str(transformers.__version__),
        torch_version=str(torch.__version__),  # a TorchVersion (a str subclass) otherwise
        tolerance=options.tolerance,
        notes=tuple(dict.fromkeys([*p.notes, *p.spec.notes, *p.engine.estimate_notes(p.spec)])),
        scenarios=tuple(results),
    )


def _check_cpu_size(device: Device, layers: int | None, raw: Mapping[str, Any], full: Mapping[str, Any]) -> None:
    """Refuse to build too many decoder layers on the CPU (random init takes minutes). What is counted is the
    parameters of the layers that would really be built (`raw`, already cut to --layers; a --layers at or above
    the model's count builds it all), not the embeddings, lm_head or vision tower: every build has those, and
    no --layers shrinks them. The hint names a --layers that passes this check, or else only --device meta."""
    counted = _parameters(raw) if device == "cpu" else None
    if counted is None or counted[1] <= CPU_PARAMETER_LIMIT:
        return
    params, in_layers = counted
    total, built = layer_count(full), layer_count(raw)
    cost = f"on the CPU takes minutes and {format_bytes(2 * params)} of memory"
    if built is not None and total is not None and built < total:
        problem = f"building {built} of the {total} layers of this model {cost} ("
    else:
        which = f"all {total} layers" if total is not None else "all layers"
        problem = f"building {which} of this {params / 1e9:.1f}B-parameter model {cost} ("
        if layers is not None:
            problem += f"--layers {layers} is not fewer than the model has; "
    fewer = next((n for n in (2, 1) if total is not None and n < total and _layers_fit(full, n)), None)
    raise UsageError(
        f"{problem}{in_layers / 1e9:.1f}B parameters in the layers, over the CPU limit of "
        f"{CPU_PARAMETER_LIMIT / 1e9:.1f}B)",
        hint=f"Pass --layers {fewer} (the per-layer figures are scaled to the full model) or --device meta."
        if fewer is not None
        else "Check the shapes with --device meta (even one layer of this model is over the CPU limit), or run "
        "on a GPU.",
    )


_NOT_IN_LAYERS = ("embeddings", "lm_head", "vision", "audio")
"""Parameter kinds (ParamEstimate.breakdown) a build has whatever --layers is."""


def _parameters(raw: Mapping[str, Any]) -> tuple[int, int] | None:
    """(every parameter of `raw`, those in its decoder layers), or None when the config cannot be counted."""
    from kvsize.params import estimate_parameters

    try:
        estimate = estimate_parameters(raw)
    except KvsizeError:
        return None
    return estimate.total, estimate.total - sum(estimate.breakdown.get(kind, 0) for kind in _NOT_IN_LAYERS)


def _layers_fit(full: Mapping[str, Any], layers: int) -> bool:
    """Whether --layers `layers` of the model `full` passes the CPU limit."""
    try:
        counted = _parameters(truncate_layers(full, layers)[0])
    except KvsizeError:
        return False
    return counted is not None and counted[1] <= CPU_PARAMETER_LIMIT


CPU_RUN_BYTES_LIMIT = 16 * 1024**3
"""Above this rough bound on one CPU scenario's memory (cache, activations, attention scores), it is refused."""
META_ELEMENTS_LIMIT = 2**62
"""torch sizes storages in signed 64-bit bytes: a tensor past this many elements overflows on any device."""


def _check_run_size(device: Device, spec: ArchSpec, contexts: Sequence[int], batches: Sequence[int]) -> None:
    """Refuse, before anything is allocated, runs that cannot complete: on the CPU those whose activations would
    exhaust memory (--ctx 1M, --batch 100000), on meta those whose tensors torch cannot even size."""
    # (On CUDA only the sizing limit applies: the allocator reports out-of-memory itself, as a finding.)
    hidden = spec.hidden_size or 4096
    wide = max(spec.intermediate_size or 4 * hidden, hidden)
    for ctx in contexts:
        for batch in batches:
            tokens = batch * ctx
            # Scores of one attention call (batch x ctx x ctx) and the widest activations, at 4 bytes.
            elements = max(batch * ctx * ctx, tokens * (4 * hidden + 2 * wide))
            if elements > META_ELEMENTS_LIMIT:
                raise UsageError(
                    f"ctx {ctx:,} x batch {batch:,} is too large for torch to size (even on the meta device)",
                    hint="Give a smaller --ctx or --batch; 'kvsize MODEL --ctx ...' sizes any context without torch.",
                )
            if device == "cpu" and 4 * elements > CPU_RUN_BYTES_LIMIT:
                raise UsageError(
                    f"ctx {ctx:,} x batch {batch:,} on the CPU needs over {format_bytes(4 * elements)} of "
                    f"activations (the limit is {format_bytes(CPU_RUN_BYTES_LIMIT)})",
                    hint="Use a smaller --ctx or --batch on the CPU (the default is ctx 256), or --device meta.",
                )


def _check_cache_size(device: Device, predicted: Sequence[int], ctx: int, batch: int) -> None:
    if device == "cpu" and sum(predicted) > CPU_RUN_BYTES_LIMIT:
        raise UsageError(
            f"ctx {ctx:,} x batch {batch:,} on the CPU needs {format_bytes(sum(predicted))} of cache "
            f"(the limit is {format_bytes(CPU_RUN_BYTES_LIMIT)})",
            hint="Use a smaller --ctx or --batch, fewer --layers, or --device meta.",
        )


def _encoder_tokens(spec: ArchSpec) -> int | None:
    tokens = [
        layer.attention.encoder_tokens
        for layer in spec.layers
        if layer.attention is not None and layer.attention.encoder_tokens is not None
    ]
    return max(tokens) if tokens else None


def _build_or_report(
    torch: Any, transformers: Any, config: Any, device: Device, dtype: KvDtype, weights: str | None, trust: bool
) -> Any:
    try:
        return build_model(
            torch, transformers, config, device=device, dtype=dtype, weights=weights, trust_remote_code=trust
        )
    except Exception as exc:
        if device == "cuda" and isinstance(exc, torch.cuda.OutOfMemoryError):
            free, total = torch.cuda.mem_get_info()
            raise EnvironmentProblem(
                f"CUDA out of memory while building the model ({format_bytes(free)} free of {format_bytes(total)})",
                hint="Build fewer layers with --layers N, or check shapes only with --device meta.",
            ) from None
        if isinstance(exc, KvsizeError):
            raise
        if isinstance(exc, ImportError):
            raise MissingExtra(
                f"building the model needs a package that is missing: {exc}", hint=INSTALL_HINT
            ) from None
        raise KvsizeError(f"transformers could not build the model: {type(exc).__name__}: {exc}") from None


def _full_model(
    engine: Any,
    formula: Any,
    full: ArchSpec,
    built: ArchSpec,
    outcome: RunOutcome,
    ctx: int,
    batch: int,
    kv_dtype: KvDtype,
) -> FullModel | None:
    if full.num_layers == built.num_layers:
        return None
    predicted = sum(engine.layer_bytes(full, ctx=ctx, batch=batch, kv_dtype=kv_dtype))
    formula_bytes = formula.estimate(full, ctx=ctx, batch=batch, kv_dtype=kv_dtype).kv_cache_bytes
    measured = extrapolate(full, built, outcome.measure.layer_bytes) if outcome.measure else None
    missing = missing_kinds(full, built)
    note = (
        f"{full.num_layers} layers scaled from the {built.num_layers} built"
        if measured is not None
        else f"not extrapolated: layer kinds {', '.join(missing)} were not among the {built.num_layers} built"
    )
    return FullModel(
        layers_total=full.num_layers,
        predicted_bytes=predicted,
        formula_bytes=formula_bytes,
        measured_bytes=measured,
        match=None if measured is None else measured == predicted,
        note=note,
    )


def _scenario(
    spec: ArchSpec, options: VerifyOptions, s: _Planned, outcome: RunOutcome, full: FullModel | None
) -> ScenarioResult:
    predicted = s.predicted
    common: dict[str, Any] = {
        "ctx": s.ctx,
        "batch": s.batch,
        "kv_dtype": s.kv_dtype.value,
        "cache_implementation": ("quantized (fp8)" if s.kv_dtype is KvDtype.FP8_E4M3 else options.cache_implementation),
        "prefill_tokens": s.ctx - s.decode_steps,
        "decode_steps": s.decode_steps,
        "predicted_bytes": sum(predicted),
        "formula_bytes": s.formula_bytes,
        "full_model": full,
    }
    if outcome.measure is None:
        return ScenarioResult(
            **common,
            status="oom",
            match=None,
            measured_bytes=None,
            difference_bytes=None,
            difference_pct=None,
            finding=f"{outcome.oom}: kvsize predicts {format_bytes(sum(predicted))} of cache for this scenario, "
            "plus activations",
        )
    if not outcome.measure.layer_bytes and any(predicted):
        # RecurrentGemma keeps its RG-LRU states and local-attention KV in its modules (modeling_recurrent_gemma.py
        # RecurrentGemmaSdpaAttention / RecurrentGemmaRglru buffers), not in a cache object the forward returns
        raise EnvironmentProblem(
            f"transformers returned no cache object for {spec.model_type}: the model keeps its state in its own "
            "modules, which kvsize verify cannot measure",
            hint="Size it without verify (--engine hf states transformers' rule).",
        )
    verdict = compare(
        predicted,
        outcome.measure.layer_bytes,
        rel_tol=options.tolerance,
        allocator_delta=outcome.allocator_delta,
        kinds=[layer.kind for layer in spec.layers],
        storage=outcome.measure.storage_bytes,
    )
    storage = sum(outcome.measure.storage_bytes)
    finding = None
    if storage > verdict.measured_bytes:
        finding = (
            f"the storage behind the cache's tensors is {format_bytes(storage)} ({storage:,} B), more than the "
            f"{verdict.measured_bytes:,} B they show: sliding layers keep a view of the last concatenation"
        )
    return ScenarioResult(
        **common,
        status="match" if verdict.match else "mismatch",
        match=verdict.match,
        measured_bytes=verdict.measured_bytes,
        difference_bytes=verdict.difference_bytes,
        difference_pct=verdict.difference_pct,
        storage_bytes=storage,
        scalar_bytes=outcome.measure.scalar_bytes,
        allocator_delta_bytes=outcome.allocator_delta,
        allocator_difference_pct=verdict.allocator_difference_pct,
        allocator_peak_bytes=outcome.allocator_peak,
        allocator_reserved_bytes=outcome.allocator_reserved,
        finding=finding,
        reasons=verdict.reasons,
        layers=verdict.layers,
    )
