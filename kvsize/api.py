"""The sizing pipeline as a Python API: model reference -> config -> spec -> estimates -> GPU fit.

>>> import kvsize
>>> result = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx=131072, kv_dtype="bf16")
>>> result.scenarios[0].kv_cache_bytes
17179869184
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import product
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import msgspec
from typing_extensions import Unpack

from kvsize.budget import BudgetSettings
from kvsize.config import parse_config
from kvsize.dtypes import AUTO, KvDtype, dtype_from_torch_name, known_names, parse_kv_dtype
from kvsize.engines import DEFAULT_ENGINE, ENGINES, Device, Engine, EngineContext, get_engine
from kvsize.errors import KvsizeError, UsageError
from kvsize.fit import GpuFit, Hardware, LatencyBound, MeasuredAgainstBound, plan_fit
from kvsize.overrides import apply_overrides, parse_overrides
from kvsize.record import Record
from kvsize.resolve import LoadedConfig, load_model_config
from kvsize.serving import NO_SERVING, PrefixShare, Request, ServingSettings
from kvsize.sizing import KvEstimate
from kvsize.spec import ArchSpec
from kvsize.units import MAX_BYTES, MAX_LINK_GB_S, parse_count, parse_size, parse_tokens
from kvsize.weights import WeightsSize

if TYPE_CHECKING:
    from kvsize.advice import Rerun
    from kvsize.profiles import GpuProfile

DEFAULT_CONTEXTS = (4096, 32768, 131072, 1048576)
ALL_ENGINES = "all"
_T = TypeVar("_T")


class LayerGroupSummary(Record, frozen=True, kw_only=True):
    kind: str
    count: int
    num_kv_heads: int | None = None
    head_dim: int | None = None
    head_dim_v: int | None = None
    window: int | None = None
    elements_per_token: int = 0
    """Elements one token costs in one layer of the group (K and V, all KV heads; MLA: the latent)."""
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    index_head_dim: int | None = None
    """DeepSeek sparse attention: the indexer's key per token (also counted in elements_per_token)."""
    index_shared: bool = False
    """DSA: the layers reuse an earlier layer's top-k and keep no indexer key (GLM-5.2 indexer_types 'shared')."""
    encoder_tokens: int | None = None
    shares_kv_with: int | None = None
    state_elements: int = 0
    """Recurrent-state elements per layer per request (conv + SSM)."""
    state_dtype: str | None = None


class ArchitectureSummary(Record, frozen=True, kw_only=True):
    model_type: str
    attention: str
    num_layers: int
    num_attention_heads: int | None
    max_context: int | None
    model_dtype: str
    layers: tuple[LayerGroupSummary, ...]


class Scenario(KvEstimate, frozen=True, kw_only=True):
    gpu: GpuFit | None = None
    # --- serving-time memory (kvsize/serving.py); absent options leave them null ---
    prefix_len: int | None = None
    """Tokens every request shares (--prefix-len)."""
    shared_bytes: int | None = None
    """Bytes of the shared prefix stored once (all ranks); kv_cache_bytes counts them once."""
    prefix: PrefixShare | None = None
    prompt_len: int | None = None
    output_len: int | None = None
    kv_budget_tokens: int | None = None
    """Tokens per layer per request an eviction policy keeps (lossy): bytes sized at min(ctx, budget)."""
    allocation: str | None = None
    """paged (the engine's blocks) or contiguous (the whole ctx reserved per request)."""


class Estimate(Record, frozen=True, kw_only=True, omit_defaults=True):
    """The JSON contract of `kvsize MODEL --json` (`latency` only with --itl: the only field with a default)."""

    model: str
    source: str
    architecture: ArchitectureSummary
    notes: tuple[str, ...]
    scenarios: tuple[Scenario, ...]
    latency: tuple[LatencyBound, ...] = ()
    """--itl: lower bounds on TTFT and ITL per context x batch (first engine and KV dtype), kvsize.fit."""
    measured: tuple[MeasuredAgainstBound, ...] = ()
    """--bench-result: each benchmark run's measured ITL, TTFT and throughput beside the bounds of its load."""


def summarize(spec: ArchSpec) -> ArchitectureSummary:
    groups = []
    for layer, count in spec.layer_groups():
        a, s = layer.attention, layer.state
        groups.append(
            LayerGroupSummary(
                kind=layer.kind,
                count=count,
                num_kv_heads=a.num_kv_heads if a else None,
                head_dim=a.head_dim if a else None,
                head_dim_v=a.head_dim_v if a else None,
                window=a.window if a else None,
                # A DSA layer's indexer keeps one key of index_head_dim per token beside the latent.
                elements_per_token=a.elements_per_token + a.own_indexer_dim if a else 0,
                kv_lora_rank=a.kv_lora_rank if a else None,
                qk_rope_head_dim=a.qk_rope_head_dim if a else None,
                index_head_dim=a.own_indexer_dim or None if a else None,
                index_shared=a.index_shared if a else False,
                encoder_tokens=a.encoder_tokens if a else None,
                shares_kv_with=a.shares_kv_with if a else None,
                state_elements=s.conv_elements + s.ssm_elements if s else 0,
                state_dtype=s.dtype if s else None,
            )
        )
    return ArchitectureSummary(
        model_type=spec.model_type,
        attention=spec.attention_label,
        num_layers=spec.num_layers,
        num_attention_heads=spec.num_attention_heads,
        max_context=spec.max_context,
        model_dtype=spec.model_dtype,
        layers=tuple(groups),
    )


def resolve_kv_dtypes(names: Iterable[str], raw: Mapping[str, Any], spec: ArchSpec) -> tuple[list[KvDtype], list[str]]:
    """Parse dtype names; `auto` follows a KV-cache quantization scheme in the config, else the model dtype."""
    dtypes: list[KvDtype] = []
    notes: list[str] = []
    for name in names:
        if name.strip().lower() == AUTO:
            chosen, why = _auto_dtype(raw, spec)
            notes.append(f"kv dtype auto -> {chosen.value} ({why})")
        else:
            found = parse_kv_dtype(name)
            if found is None:
                raise UsageError(f"unknown KV dtype '{name}'", hint=f"Choose from: {', '.join(known_names())}.")
            chosen = found
        if chosen not in dtypes:
            dtypes.append(chosen)
    return dtypes, notes


def _auto_dtype(raw: Mapping[str, Any], spec: ArchSpec) -> tuple[KvDtype, str]:
    quant = raw.get("quantization_config")
    if isinstance(quant, Mapping):
        scheme = quant.get("kv_cache_scheme") or quant.get("kv_cache_quant_algo")
        if scheme:
            text = str(scheme).lower()
            if "fp8" in text or "float" in text and "8" in text:
                return KvDtype.FP8_E4M3, "quantization_config names an fp8 KV-cache scheme"
    dtype = dtype_from_torch_name(spec.model_dtype) or KvDtype.BF16
    return dtype, f"the model's dtype {spec.model_dtype}"


def default_contexts(spec: ArchSpec) -> list[int]:
    """A small grid up to the model's maximum context."""
    if spec.max_context is None:
        return list(DEFAULT_CONTEXTS[:3])
    return [c for c in DEFAULT_CONTEXTS if c < spec.max_context] + [spec.max_context]


# --- the API's readers -----------------------------------------------------------------------------------
# Every value a caller passes goes through the reader the CLI and capacity files use for it (kvsize.deployment
# READERS, kvsize.units, kvsize.workload_file.read_request), so the API refuses what they refuse, with the same
# message prefixed by the keyword (`weights_bytes: cannot read the size '-1'`). Only what a Python caller can
# pass besides text is added here: a float of bytes, a bool or a list where a number or a name belongs.

_BYTE_SETTINGS = frozenset({"gpu_mem", "reserve", "weights_mem", "weights_mem_per_gpu", "kv_memory", "cpu_mem"})
_ENGINE_COUNTS = {
    "block_size": "block_size",
    "max_num_batched_tokens": "max_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "n_ubatch": "ubatch_size",
    "n_batch": "batch_size",
}
_ENGINE_FLAGS = frozenset({"kv_unified", "flash_attn", "enable_prefix_caching", "swa_full", "vswa"})


def _shown(value: object) -> str:
    from kvsize.workload_file import shown

    return shown(value)


def _read(name: str, value: Any, reader: Callable[[Any], _T]) -> _T:
    """`reader(value)`; a KvsizeError becomes one UsageError line naming the keyword `name`."""
    try:
        return reader(value)
    except KvsizeError as exc:
        raise UsageError(f"{name}: {exc}", hint=exc.hint) from None


def _setting(name: str, value: Any, key: str, *, optional: bool = True) -> Any:
    """`value` (None: not given, where `optional`) through the reader of the CLI option / capacity-file key."""
    from kvsize.deployment import READERS

    if value is None and optional:
        return None
    if key in _BYTE_SETTINGS and isinstance(value, float):
        raise UsageError(f"{name}: give bytes as an int or a size such as '24GiB', not the float {_shown(value)}")
    return _read(name, value, READERS[key][0])


def _text(name: str, value: Any, *, optional: bool = True) -> Any:
    if isinstance(value, str) or (optional and value is None):
        return value
    raise UsageError(f"{name}: expected text{' or None' if optional else ''}, got {_shown(value)}")


def _flag(name: str, value: Any, *, optional: bool = False) -> Any:
    if isinstance(value, bool) or (optional and value is None):
        return value
    raise UsageError(f"{name}: expected True or False{' or None' if optional else ''}, got {_shown(value)}")


def _values(name: str, value: Any) -> list[Any] | None:
    """None, one value or a list / tuple of values as a list (never empty)."""
    if value is None:
        return None
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise UsageError(f"{name}: an empty list", hint="Give at least one value, or leave it out.")
    return items


def _names(name: str, value: Any) -> list[str]:
    """A name or a non-empty list / tuple of names (dtypes, engines)."""
    items = _values(name, value) or [None]
    return [_text(f"{name}[{i}]" if len(items) > 1 else name, item, optional=False) for i, item in enumerate(items)]


def _tokens(name: str, value: Any, *, allow_zero: bool = False) -> int | None:
    """A token count (None: not given) as --ctx, --prompt-len or --prefix-len (0 allowed there) read it."""
    return None if value is None else _read(name, value, lambda v: parse_tokens(v, allow_zero=allow_zero))


def _bytes_per_s(name: str, value: Any) -> int | None:
    if value is None:
        return None
    return _read(name, value, lambda v: parse_count(v, "bandwidth in bytes/s", maximum=MAX_LINK_GB_S * 10**9))


def _tier(name: str, value: Any) -> tuple[int, int | None] | None:
    """An offload tier: (size, bytes/s or None), sizes and bandwidths as the CLI's readers take them."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != 2 or value[0] is None:
        raise UsageError(f"{name}: expected (bytes, bytes per second or None), got {_shown(value)}")
    return _setting(f"{name}[0]", value[0], "cpu_mem"), _bytes_per_s(f"{name}[1]", value[1])


def _overhead(name: str, value: Any) -> int | None:
    """A measured overhead (activation, non-torch, CUDA graphs): whole bytes, within 1 EiB either way."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_BYTES):
        return value
    raise UsageError(f"{name}: expected whole bytes (an int within 1 EiB), got {_shown(value)}")


def _budget(value: Any) -> BudgetSettings | None:
    if value is None:
        return None
    if not isinstance(value, BudgetSettings):
        raise UsageError(f"budget: expected a kvsize.budget.BudgetSettings, got {_shown(value)}")
    return msgspec.structs.replace(
        value,
        gpu_util=_setting("budget.gpu_util", value.gpu_util, "gpu_util"),
        max_batched_tokens=_setting("budget.max_batched_tokens", value.max_batched_tokens, "max_batched_tokens"),
        max_num_seqs=_setting("budget.max_num_seqs", value.max_num_seqs, "max_num_seqs"),
        kv_memory_bytes=_setting("budget.kv_memory_bytes", value.kv_memory_bytes, "kv_memory"),
        reserve_bytes=_setting("budget.reserve_bytes", value.reserve_bytes, "reserve"),
        activation_bytes=_overhead("budget.activation_bytes", value.activation_bytes),
        non_torch_bytes=_overhead("budget.non_torch_bytes", value.non_torch_bytes),
        cuda_graph_bytes=_overhead("budget.cuda_graph_bytes", value.cuda_graph_bytes),
    )


def _engine_options(value: Any) -> dict[str, Any] | None:
    """Engine settings: counts through the CLI's readers, switches as bools; others (vLLM's skip layers, hf's
    cache implementation) are the engines' own to check."""
    from kvsize.text import clean

    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UsageError(f"engine_options: expected a mapping of engine settings, got {_shown(value)}")
    read: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise UsageError(f"engine_options: a setting's name must be text, got {_shown(key)}")
        name = f"engine_options[{clean(key)[:80]!r}]"
        if key in _ENGINE_COUNTS:
            item = _setting(name, item, _ENGINE_COUNTS[key])
        elif key in _ENGINE_FLAGS:
            item = _flag(name, item, optional=True)
        elif key == "num_speculative_tokens" and item is not None:
            item = _read(name, item, lambda v: parse_count(v, "count", allow_zero=True))
        elif key == "max_cache_len" and item is not None:
            item = _read(name, item, parse_tokens)
        elif key == "cache_implementation":
            item = _text(name, item)
        elif key == "dtype":
            item = _served_dtype(name, item)
        elif key == "kv_cache_dtype_skip_layers" and not _layer_list(item):
            raise UsageError(f"{name}: expected layer indices or 'sliding_window', got {_shown(item)}")
        read[key] = item
    return read


def _served_dtype(name: str, value: Any) -> str | None:
    """--dtype as vLLM and SGLang take it (kvsize.engines.context.SERVED_DTYPES), lower-cased; None: auto."""
    from kvsize.engines.context import SERVED_DTYPES

    text: str | None = _text(name, value)
    if text is None or text.strip().lower() == "auto":
        return None
    if text.strip().lower() not in SERVED_DTYPES:
        raise UsageError(
            f"{name}: unknown dtype {_shown(value)}",
            hint=f"vLLM's and SGLang's --dtype take {', '.join(SERVED_DTYPES)}.",
        )
    return text.strip().lower()


def _layer_list(value: Any) -> bool:
    """vLLM's --kv-cache-dtype-skip-layers as a caller may give it: text, or a list of texts and ints."""
    if value is None or isinstance(value, str):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(i, str) or type(i) is int for i in value)


def _workload(value: Any) -> list[tuple[int, int]] | None:
    """(prompt, output) rows, each read as a workload file's row (kvsize.workload_file.read_request)."""
    from kvsize.workload_file import MAX_WORKLOAD_ROWS, read_request

    if value is None:
        return None
    if not isinstance(value, (list, tuple)):
        raise UsageError(f"workload: expected a list of (prompt, output) rows, got {_shown(value)}")
    if not value:
        raise UsageError("workload: holds no (prompt, output) rows", hint="Give at least one row, or leave it out.")
    if len(value) > MAX_WORKLOAD_ROWS:
        raise UsageError(f"workload: more than {MAX_WORKLOAD_ROWS:,} rows", hint="Give a sample or percentiles.")
    return [read_request(row, f"workload[{i}]", UsageError) for i, row in enumerate(value)]


class EstimateOptions(TypedDict, total=False):
    """The keyword options of `estimate` and `estimate_loaded` (see `estimate_loaded` for their defaults)."""

    ctx: int | str | Sequence[int | str] | None
    batch: int | str | Sequence[int | str]
    kv_dtype: str | Sequence[str]
    engine: str | Sequence[str]
    engine_version: str | None
    tp: int
    pp: int
    gpu: str | None
    gpu_mem: int | None
    reserve_bytes: int | None
    weights_bytes: int | None
    weights_bytes_per_gpu: int | None
    encoder_len: int | None
    engine_options: Mapping[str, Any] | None
    budget: BudgetSettings | None
    weights_dtype: str | None
    offload: tuple[int, int | None] | None
    with_max_context: bool
    with_advice: bool
    prefix_len: int | None
    enable_prefix_caching: bool | None
    prompt_len: int | None
    output_len: int | None
    workload: Sequence[tuple[int, int]] | None
    kv_budget_tokens: int | None
    allocation: str
    disk: tuple[int, int | None] | None
    hf_overrides: str | Mapping[str, Any] | None
    environment: Mapping[str, str] | None
    assume_standard_attention: bool
    dtype: str | None
    itl_ms: float | None
    bench_result: str | None


def estimate(
    model: str | Mapping[str, Any],
    *,
    revision: str | None = None,
    token: str | None = None,
    **options: Unpack[EstimateOptions],
) -> Estimate:
    """KV-cache bytes of `model` for every ctx x batch x kv_dtype combination, and the fit on `gpu`.

    `model` is a hub id, a path to a config.json (or its folder), or a config dict. Contexts accept 8192,
    "32k", "1M"; `kv_dtype` accepts "auto", "bf16", "fp8", ...; `gpu` a profile id or alias, or give
    `gpu_mem` in bytes for a custom card. The other options are those of `estimate_loaded`.
    """
    _text("token", token)
    revision = _setting("revision", revision, "revision")
    if isinstance(model, Mapping):
        loaded = LoadedConfig(model="<config>", raw=dict(model), source="local", location="<dict>")
    elif isinstance(model, str):
        loaded = load_model_config(model, revision=revision, token=token)
    else:
        raise UsageError(
            f"model: expected a hub id, a path or a config dict, got {_shown(model)}",
            hint="For example kvsize.estimate('meta-llama/Llama-3.1-8B').",
        )
    return estimate_loaded(loaded, **options)


def estimate_loaded(
    loaded: LoadedConfig,
    *,
    ctx: int | str | Sequence[int | str] | None = None,
    batch: int | str | Sequence[int | str] = 1,
    kv_dtype: str | Sequence[str] = AUTO,
    engine: str | Sequence[str] = DEFAULT_ENGINE,
    engine_version: str | None = None,
    tp: int = 1,
    pp: int = 1,
    gpu: str | None = None,
    gpu_mem: int | None = None,
    reserve_bytes: int | None = None,
    weights_bytes: int | None = None,
    weights_bytes_per_gpu: int | None = None,
    encoder_len: int | None = None,
    engine_options: Mapping[str, Any] | None = None,
    budget: BudgetSettings | None = None,
    weights_dtype: str | None = None,
    offload: tuple[int, int | None] | None = None,
    with_max_context: bool = True,
    with_advice: bool = False,
    prefix_len: int | None = None,
    enable_prefix_caching: bool | None = None,
    prompt_len: int | None = None,
    output_len: int | None = None,
    workload: Sequence[tuple[int, int]] | None = None,
    kv_budget_tokens: int | None = None,
    allocation: str = "paged",
    disk: tuple[int, int | None] | None = None,
    hf_overrides: str | Mapping[str, Any] | None = None,
    environment: Mapping[str, str] | None = None,
    assume_standard_attention: bool = False,
    dtype: str | None = None,
    itl_ms: float | None = None,
    bench_result: str | None = None,
) -> Estimate:
    """Size every scenario; with a card, fit each on it. `with_advice` adds, to a scenario that does not fit or
    has little headroom, the single changes that would help (kvsize/advice.py), each sized again with every
    other option as given. `weights_bytes` is the whole model's weights; `weights_bytes_per_gpu` (wins over it)
    the weights on each GPU of the tp x pp group. `hf_overrides` (vLLM's --hf-overrides, SGLang's
    --json-model-override-args: JSON text or a mapping) is merged into the config first; `environment` (None:
    this process's) is where the engines' long-context switches are read (kvsize/overrides.py).
    `assume_standard_attention` sizes a config whose cache-relevant fields kvsize does not understand from its
    standard attention fields, every answer naming the fields ignored (kvsize/cache_fields.py); without it such a
    config is refused. `dtype` is vLLM's and SGLang's --dtype (auto, half, float16, bfloat16, float, float32): the
    dtype the engine serves the model in, which `kv_dtype` auto stores. `itl_ms` (an inter-token latency target)
    adds `latency`: roofline lower bounds on TTFT and ITL per ctx x batch and the most requests within it.
    `bench_result` (the path of a vllm bench serve or sglang.bench_serving result, kvsize/bench_result.py) adds
    `measured`: each run's figures beside the bounds of the load it ran (kvsize.fit measured_against_bounds)."""
    # Every value through the CLI's readers (see "the API's readers" above): refused as the CLI refuses it.
    tp, pp = _setting("tp", tp, "tp", optional=False), _setting("pp", pp, "pp", optional=False)
    gpu_mem = _setting("gpu_mem", gpu_mem, "gpu_mem")
    reserve_bytes = _setting("reserve_bytes", reserve_bytes, "reserve")
    weights_bytes = _setting("weights_bytes", weights_bytes, "weights_mem")
    weights_bytes_per_gpu = _setting("weights_bytes_per_gpu", weights_bytes_per_gpu, "weights_mem_per_gpu")
    encoder_len = _setting("encoder_len", encoder_len, "encoder_len")
    engine_options, budget = _engine_options(engine_options), _budget(budget)
    offload, disk, workload = _tier("offload", offload), _tier("disk", disk), _workload(workload)
    gpu, engine_version = _text("gpu", gpu), _text("engine_version", engine_version)
    weights_dtype, allocation = _text("weights_dtype", weights_dtype), _text("allocation", allocation, optional=False)
    kv_dtype_names, names = _names("kv_dtype", kv_dtype), _names("engine", engine)
    with_max_context, with_advice = _flag("with_max_context", with_max_context), _flag("with_advice", with_advice)
    enable_prefix_caching = _flag("enable_prefix_caching", enable_prefix_caching, optional=True)
    prefix_len = _tokens("prefix_len", prefix_len, allow_zero=True)
    prompt_len, output_len = _tokens("prompt_len", prompt_len), _tokens("output_len", output_len)
    kv_budget_tokens = _tokens("kv_budget_tokens", kv_budget_tokens)
    ctx_list = [_read("ctx", c, parse_tokens) for c in _values("ctx", ctx) or ()]
    batches = [_read("batch", b, lambda v: parse_count(v, "batch size")) for b in _values("batch", batch) or [1]]
    batches = list(dict.fromkeys(batches))
    overrides = parse_overrides(hf_overrides)
    if overrides:
        loaded = msgspec.structs.replace(loaded, raw=apply_overrides(loaded.raw, overrides))
    assume = _flag("assume_standard_attention", assume_standard_attention)
    spec = _parsed(loaded, encoder_len, assume)
    if weights_bytes_per_gpu is not None:  # the weights on each GPU of the tp x pp group (wins over the whole)
        weights_bytes = weights_bytes_per_gpu * tp * pp
    if [n.strip().lower() for n in names] == [ALL_ENGINES]:
        names = list(ENGINES)
    if enable_prefix_caching is not None:  # the engines' own switch (vLLM Mamba blocks, SGLang state slots)
        engine_options = {**(engine_options or {}), "enable_prefix_caching": enable_prefix_caching}
    served = _served_dtype("dtype", dtype)
    if served is not None:  # the served dtype (vLLM / SGLang --dtype), which their auto KV cache follows
        engine_options = {**(engine_options or {}), "dtype": served}
    card = _gpu_card(gpu, gpu_mem)
    context = engine_context(card.device if card is not None else None, engine_options, environment)
    engines = [
        get_engine(n, None if len(names) > 1 else engine_version, context, **(engine_options or {})) for n in names
    ]
    # Serving-time options (kvsize/serving.py): `prefix_len` tokens shared by every request (stored once where
    # the engine shares prefixes; `enable_prefix_caching` False turns that off), `prompt_len` + `output_len` or a
    # `workload` of (prompt, output) rows for steady-state figures (ctx defaults to prompt + output), a lossy
    # `kv_budget_tokens`, `allocation` paged or contiguous, and a `disk` tier (bytes, bytes/s) behind `offload`.
    serving = _serving_settings(
        prefix_len, enable_prefix_caching, prompt_len, output_len, workload, kv_budget_tokens, allocation, disk, offload
    )
    if not ctx_list and serving.prompt_len and serving.output_len:
        ctx_list = [_read("ctx", serving.prompt_len + serving.output_len, parse_tokens)]
    elif not ctx_list and serving.workload:
        ctx_list = [_read("ctx", max(r.prompt + r.output for r in serving.workload), parse_tokens)]
    contexts = list(dict.fromkeys(ctx_list)) if ctx_list else default_contexts(spec)
    dtypes, notes = resolve_kv_dtypes(kv_dtype_names, loaded.raw, spec)
    if served is not None and all(e.name in ("vllm", "sglang") for e in engines):
        # --dtype decides what auto stores: each engine's own note says so, not the config's dtype
        notes = [n for n in notes if not n.startswith("kv dtype auto -> ")]
    notes = [*spec.notes, *notes]
    if (engine_options or {}).get("dtype") and any(e.name not in ("vllm", "sglang") for e in engines):
        others = ", ".join(e.name for e in engines if e.name not in ("vllm", "sglang"))
        notes.append(f"--dtype is vLLM's and SGLang's; {others} size the config's dtype")
    if card is not None and gpu is not None and gpu.strip().lower() == "auto":  # what --gpu auto found
        from kvsize.local_gpu import auto_notes

        notes.extend(auto_notes())
    if overrides:
        from kvsize.text import clean

        notes.append(f"config overrides applied (--hf-overrides): {clean(', '.join(overrides))[:200]}")

    settings = budget or BudgetSettings()
    if reserve_bytes is not None:
        settings = msgspec.structs.replace(settings, reserve_bytes=reserve_bytes)
    if card is None and (settings != BudgetSettings() or weights_bytes is not None or weights_dtype or offload):
        raise UsageError(
            "budget settings (reserve, weights, utilisation, KV memory, --enforce-eager, --language-model-only, "
            "--enable-expert-parallel, --limit-mm-per-prompt, --skip-mm-profiling) only apply to a card",
            hint="Add --gpu or --gpu-mem.",
        )
    # Scheduler settings size the engine's cache and, on a card, its activation profile.
    if settings.max_batched_tokens is None and (engine_options or {}).get("max_num_batched_tokens"):
        settings = msgspec.structs.replace(
            settings, max_batched_tokens=(engine_options or {})["max_num_batched_tokens"]
        )
    if settings.max_num_seqs is None and (engine_options or {}).get("max_num_seqs"):
        settings = msgspec.structs.replace(settings, max_num_seqs=(engine_options or {})["max_num_seqs"])
    from kvsize.budget import drops_a_tower

    if settings.mm_limits is not None:
        notes.extend(_mm_limit_notes(spec, settings.mm_limits))

    if drops_a_tower(spec, settings) and not settings.tower_bytes and weights_bytes is None:
        settings = _with_towers(loaded.raw, spec, settings, notes)
    weights = None
    engine_weights: dict[str, WeightsSize] = {}  # by the dtype each engine runs the model in (Engine.run_dtype)
    if card is not None:
        from kvsize.weights import find_weights

        for rules in engines:
            try:
                run = rules.run_dtype(spec)
            except KvsizeError:  # an engine that refuses the --dtype: said in the loop below
                continue
            if run not in engine_weights:
                engine_weights[run] = (
                    WeightsSize(weights_bytes, "given")
                    if weights_bytes is not None
                    else find_weights(
                        loaded,
                        model_dtype=spec.model_dtype,
                        weights_dtype=weights_dtype,
                        served_dtype=run if run != spec.model_dtype else None,
                    )
                )
        weights = next(iter(engine_weights.values()), None)
        notes.extend(f"weights {w.source}" for w in engine_weights.values() if w.estimated)
    hardware = _hardware(loaded, spec, card, offload)

    scenarios = []
    names_asked = kv_dtype_names
    auto = _auto_dtype(loaded.raw, spec)[0] if any(n.strip().lower() == AUTO for n in names_asked) else None
    for rules in engines:
        try:
            rules.check_supported(spec)
            engine_dtypes = _engine_dtypes(rules, spec, dtypes, auto, names_asked)
            run_spec, run_weights = _as_run(rules, spec, engine_weights, weights)
            if auto is not None and auto not in engine_dtypes:  # the engine stores another dtype for auto
                served = rules.auto_kv_dtype(spec, auto)
                notes.append(
                    f"{rules.title}: kv dtype auto -> {served.value} for this model and card "
                    f"({rules.auto_kv_reason(spec, auto)})"
                )
            produced = [
                _scenario(
                    rules,
                    run_spec,
                    c,
                    b,
                    dtype,
                    tp,
                    pp,
                    card,
                    run_weights,
                    settings,
                    hardware,
                    with_max_context,
                    serving,
                )
                for dtype, c, b in product(engine_dtypes, contexts, batches)
            ]
        except KvsizeError as exc:
            if len(engines) == 1:
                raise
            notes.append(f"{rules.name}: {' '.join(str(exc).split())}")  # --engine all: show the rest
            continue
        scenarios.extend(produced)
        if card is not None and rules.name == "vllm" and settings.activation_bytes is None:
            from kvsize.engines.vllm import VllmEngine
            from kvsize.mm_profile import NO_LIMITS, unmodelled_note

            quiet = settings.language_model_only or settings.skip_mm_profiling
            era = rules.rules if isinstance(rules, VllmEngine) else None
            if not quiet and (flag := unmodelled_note(spec, settings.mm_limits or NO_LIMITS, era)) is not None:
                notes.append(f"vLLM: {flag}")

            if isinstance(rules, VllmEngine) and rules.measured_sizing:
                notes.append(
                    f"vLLM {rules.version} sizes the pool after warm-up and CUDA-graph capture; its start-up use and "
                    "captured graphs are taken from vLLM 0.19 H100 logs (no 0.34 log read): calibrate with kvsize log"
                )
        if card is not None and rules.name != "vllm" and (ignored := _vllm_switches(settings)):
            plural = "," in ignored
            notes.append(
                f"{rules.title}: {ignored} {'are vLLM flags' if plural else 'is a vLLM flag'}: "
                f"{'they change' if plural else 'it changes'} nothing here"
            )
        if rules.release_note:
            notes.append(rules.release_note)
        notes.extend(rules.estimate_notes(spec))
        if card is None:  # with a card, each scenario's gpu.context_limit says it (and the verdict follows)
            notes.extend(_past_maximum_notes(rules, spec, contexts))
    if with_advice and card is not None:
        rerun_options: dict[str, Any] = {
            "engine_version": engine_version,
            "pp": pp,
            "gpu": gpu,
            "gpu_mem": gpu_mem,
            "reserve_bytes": reserve_bytes,
            # The weights found once (a lookup can count parameters): reruns reuse them unless the weights'
            # precision is the change.
            "weights_bytes": (
                weights.bytes
                if weights is not None and weights_bytes_per_gpu is None and len(engine_weights) == 1
                else None  # engines that hold the checkpoint at other widths look their weights up again
            ),
            "weights_bytes_per_gpu": weights_bytes_per_gpu,  # per GPU whatever tp a suggestion pastes
            "weights_given": weights_bytes is not None,
            "encoder_len": encoder_len,
            "engine_options": engine_options,
            "budget": budget,
            "weights_dtype": weights_dtype,
            # Every other option the user gave, so that each suggestion's figures are what pasting its flags
            # onto the same command line gives (the scenario's ctx, batch, dtype, engine and tp come per scenario).
            "offload": offload,
            "prefix_len": prefix_len,
            "enable_prefix_caching": enable_prefix_caching,
            "prompt_len": prompt_len,
            "output_len": output_len,
            "workload": workload,
            "kv_budget_tokens": kv_budget_tokens,
            "allocation": allocation,
            "disk": disk,
            "assume_standard_attention": assume,
            "kv_dtype_names": names_asked,
        }
        rerun_options["several_engines"] = len(engines) > 1
        if len(engines) > 1:
            rerun_options["engine_version"] = None  # several engines: each at its default release, as above
        scenarios = [_advised(loaded, spec, s, rerun_options) for s in scenarios]
        if len(engines) > 1:
            scenarios = _judged_across_engines(loaded, spec, scenarios, rerun_options)
    latency = _latency(spec, scenarios, engines, hardware, contexts, batches, tp, pp, itl_ms)
    measured = _measured(loaded, spec, scenarios, engines, hardware, tp, pp, bench_result)
    return Estimate(
        model=loaded.model,
        source=loaded.source_label,
        architecture=summarize(spec),
        notes=tuple(dict.fromkeys(notes)),
        scenarios=tuple(scenarios),
        latency=tuple(latency),
        measured=tuple(measured),
    )


def _bound_inputs(
    what: str, scenarios: Sequence[Scenario], engines: Sequence[Engine], hardware: Hardware | None
) -> tuple[Scenario, Engine, Hardware]:
    """The scenario the bounds are drawn for (the first on a card), its engine, and the card's figures."""
    first = next((s for s in scenarios if s.gpu is not None), None)
    if first is None or first.gpu is None or hardware is None or not hardware.bandwidth_bytes_per_s:
        raise UsageError(
            f"{what} needs the card's memory bandwidth", hint="Add --gpu with a profile (kvsize gpus lists them)."
        )
    return first, next(e for e in engines if e.name == first.engine), hardware


def _measured(
    loaded: LoadedConfig,
    spec: ArchSpec,
    scenarios: Sequence[Scenario],
    engines: Sequence[Engine],
    hardware: Hardware | None,
    tp: int,
    pp: int,
    bench_result: str | None,
) -> list[MeasuredAgainstBound]:
    """--bench-result: every run in the file beside the bounds of its own load (first engine and KV dtype)."""
    if bench_result is None:
        return []
    path = _text("bench_result", bench_result)
    from kvsize.bench_result import read_bench_results
    from kvsize.calibration import same_model
    from kvsize.fit import measured_against_bounds, request_bytes
    from kvsize.resolve import printable

    runs = read_bench_results(path)
    first, engine, card = _bound_inputs("--bench-result", scenarios, engines, hardware)
    for run in runs:
        if run.model_id and loaded.model != "<config>" and not same_model(run.model_id, loaded.model):
            raise UsageError(
                f"--bench-result: '{run.label}' measured {printable(run.model_id)}, not {printable(loaded.model)}",
                hint="Size the model the benchmark ran, or give that model's result.",
            )
    gpu = first.gpu
    assert gpu is not None  # _bound_inputs chose a scenario on a card
    return [
        measured_against_bounds(
            run,
            weights_per_gpu=gpu.weights_bytes,
            kv_per_request=lambda c: request_bytes(engine, spec, c, first.kv_dtype, tp, pp),
            hardware=card,
            tp=tp,
        )
        for run in runs
    ]


def _latency(
    spec: ArchSpec,
    scenarios: Sequence[Scenario],
    engines: Sequence[Engine],
    hardware: Hardware | None,
    contexts: Sequence[int],
    batches: Sequence[int],
    tp: int,
    pp: int,
    itl_ms: float | None,
) -> list[LatencyBound]:
    """--itl: the first engine's and KV dtype's latency bounds on the card (kvsize.fit latency_bounds)."""
    if itl_ms is None:
        return []
    if isinstance(itl_ms, bool) or not isinstance(itl_ms, (int, float)) or not 0 < itl_ms < 1e9:
        raise UsageError(f"itl_ms must be a positive number of milliseconds, got {_shown(itl_ms)}")
    first, engine, card = _bound_inputs("--itl", scenarios, engines, hardware)
    from kvsize.fit import latency_bounds, request_bytes

    assert first.gpu is not None  # _bound_inputs chose a scenario on a card
    dtype = first.kv_dtype
    return latency_bounds(
        weights_per_gpu=first.gpu.weights_bytes,
        kv_per_request=lambda c: request_bytes(engine, spec, c, dtype, tp, pp),
        hardware=card,
        contexts=contexts,
        batches=batches,
        itl_ms=float(itl_ms),
        tp=tp,
    )


def _past_maximum_notes(rules: Engine, spec: ArchSpec, contexts: Sequence[int]) -> list[str]:
    """A context past the model's maximum as this engine derives it (RoPE scaling included; kvsize.fit
    engine_max_context), and what the engine does with it."""
    from kvsize.fit import context_limit

    notes = []
    for c in contexts:
        limit = context_limit(rules, spec, c)
        if limit is not None:
            notes.append(limit.reason)
    return notes


def _as_run(
    rules: Engine, spec: ArchSpec, engine_weights: Mapping[str, WeightsSize], weights: WeightsSize | None
) -> tuple[ArchSpec, WeightsSize | None]:
    """The model as `rules` runs it: the spec at the dtype its weights and activations are held in (vLLM and
    SGLang run float32 checkpoints in 16 bits), with the weights found for that dtype."""
    run = rules.run_dtype(spec)
    if run == spec.model_dtype:
        return spec, engine_weights.get(run, weights)
    return msgspec.structs.replace(spec, model_dtype=run), engine_weights.get(run, weights)


def _engine_dtypes(
    rules: Engine, spec: ArchSpec, dtypes: list[KvDtype], auto: KvDtype | None, names: Sequence[str]
) -> list[KvDtype]:
    """The dtypes sized for one engine: `auto` becomes what that engine stores (vLLM serves float32 checkpoints
    in 16 bits), unless the same dtype was also asked for by name."""
    if auto is None:
        return dtypes
    named = {parse_kv_dtype(n) for n in names if n.strip().lower() != AUTO}
    engine_auto = rules.auto_kv_dtype(spec, auto)
    if engine_auto == auto or auto in named:
        return dtypes
    return list(dict.fromkeys(engine_auto if d == auto else d for d in dtypes))


def _scenario(
    rules: Engine,
    spec: ArchSpec,
    c: int,
    b: int,
    dtype: KvDtype,
    tp: int,
    pp: int,
    card: _Card | None,
    weights: WeightsSize | None,
    settings: BudgetSettings,
    hardware: Hardware | None = None,
    with_max_context: bool = True,
    serving: ServingSettings = NO_SERVING,
) -> Scenario:
    from kvsize.serving_plan import sized_context

    est = rules.estimate(spec, ctx=sized_context(c, serving), batch=b, kv_dtype=dtype, tp=tp, pp=pp)
    if est.ctx != c:
        note = f"lossy: --kv-budget-tokens {serving.kv_budget_tokens} keeps that many tokens per layer per request"
        est = msgspec.structs.replace(est, ctx=c, notes=(*est.notes, note))
    fit = None
    if card is not None and weights is not None:
        fit = plan_fit(
            rules,
            spec,
            ctx=c,
            batch=b,
            kv_dtype=dtype,
            tp=tp,
            pp=pp,
            gpu_name=card.name,
            memory_bytes=card.memory_bytes,
            weights_bytes=weights.bytes,
            weights_source=weights.source,
            weights_estimated=weights.estimated,
            settings=settings,
            hardware=hardware,
            with_max_context=with_max_context,
            estimate=est,
        )
    if serving == NO_SERVING and (fit is None or fit.offload is None):
        return Scenario(**msgspec.structs.asdict(est), gpu=fit)
    from kvsize.serving_plan import serving_figures

    est, fit, share = serving_figures(
        rules, spec, est, fit, kv_dtype=dtype, tp=tp, pp=pp, hardware=hardware, settings=serving
    )
    return Scenario(
        **msgspec.structs.asdict(est),
        gpu=fit,
        prefix_len=serving.prefix_len,
        shared_bytes=share.shared_bytes if share else None,
        prefix=share,
        prompt_len=serving.prompt_len,
        output_len=serving.output_len,
        kv_budget_tokens=serving.kv_budget_tokens,
        allocation=serving.allocation,
    )


def _rerun(loaded: LoadedConfig, s: Scenario, options: dict[str, Any]) -> Rerun:
    """Size `s` again with some options changed and every other option as given: what pasting the change's
    flags onto the same command line gives (None: the engine cannot serve it, or the flags are bad input)."""
    # A dtype that `auto` chose stays `auto`: on another card or engine auto may choose another (fp16 on a V100).
    names = options["kv_dtype_names"]
    named = {parse_kv_dtype(n) for n in names if n.strip().lower() != AUTO}
    kv_dtype = s.kv_dtype.value if s.kv_dtype in named or AUTO not in (n.strip().lower() for n in names) else AUTO
    base = {**options, "ctx": [s.ctx], "batch": [s.batch], "kv_dtype": kv_dtype, "engine": s.engine, "tp": s.tp}
    for fact in ("weights_given", "kv_dtype_names", "several_engines"):  # facts for the advice, not options
        base.pop(fact)

    def rerun(changes: Mapping[str, Any]) -> tuple[Scenario, GpuFit] | None:
        merged = {**base, **changes}
        if "gpu" in changes:
            merged["gpu_mem"] = None
        if "weights_dtype" in changes:
            merged["weights_bytes"] = None  # looked up again at the new precision
        if isinstance(merged.get("ctx"), int):
            merged["ctx"] = [merged["ctx"]]
        try:
            again = estimate_loaded(loaded, **merged, with_max_context=False).scenarios[0]
        except KvsizeError:
            return None
        return (again, again.gpu) if again.gpu is not None else None

    return rerun


def _shortest_context(options: Mapping[str, Any]) -> int:
    """The shortest ctx the serving options accept: prompt + output, the longest workload row, the prefix."""
    shortest = 1
    if options.get("prompt_len") and options.get("output_len"):
        shortest = options["prompt_len"] + options["output_len"]
    for prompt, output in options.get("workload") or ():
        shortest = max(shortest, int(prompt) + int(output))
    return max(shortest, options.get("prefix_len") or 0)


def _advised(loaded: LoadedConfig, spec: ArchSpec, s: Scenario, options: dict[str, Any]) -> Scenario:
    """The scenario with `gpu.suggestions` filled in when it needs advice."""
    from kvsize.advice import AdviceFacts, needs_advice, suggest

    if s.gpu is None or not needs_advice(s, s.gpu):
        return s
    facts = AdviceFacts(
        num_attention_heads=spec.num_attention_heads,
        kv_heads=tuple({layer.attention.num_kv_heads for layer in spec.layers if layer.attention}),
        model_dtype=spec.model_dtype,
        weights_given=bool(options["weights_given"]),
        larger_cards=_larger_cards(options.get("gpu"), spec.model_dtype) if options.get("gpu_mem") is None else (),
        min_context=_shortest_context(options),
        engine_named=options["several_engines"],
    )
    found = suggest(s, s.gpu, facts, _rerun(loaded, s, options))
    return msgspec.structs.replace(s, gpu=msgspec.structs.replace(s.gpu, suggestions=found))


def _judged_across_engines(
    loaded: LoadedConfig, spec: ArchSpec, scenarios: list[Scenario], options: dict[str, Any]
) -> list[Scenario]:
    """--engine all: one pasted flag changes every engine, so every engine's scenario that needs advice is
    judged on every change suggested for another engine of the same ctx and batch (helpful or not)."""
    from kvsize.advice import judged_everywhere, needs_advice

    def advised(s: Scenario) -> bool:
        return s.gpu is not None and needs_advice(s, s.gpu)

    judged = []
    for s in scenarios:
        if not advised(s):
            judged.append(s)
            continue
        assert s.gpu is not None
        others = [
            sug
            for o in scenarios
            if o is not s and advised(o) and (o.ctx, o.batch) == (s.ctx, s.batch) and o.gpu is not None
            for sug in o.gpu.suggestions
        ]
        found = judged_everywhere(s.gpu.suggestions, others, _rerun(loaded, s, options))
        judged.append(msgspec.structs.replace(s, gpu=msgspec.structs.replace(s.gpu, suggestions=found)))
    return judged


LARGER_CARD_STEP = 105  # percent: a "larger" card has at least 5% more memory, not the same 80 GB of another kind


def _larger_cards(gpu: str | None, model_dtype: str | None = None) -> tuple[tuple[str, str, int], ...]:
    """Profiles of the same vendor and class with really more memory than `gpu` (LARGER_CARD_STEP), of no older
    generation (compute capability at least `gpu`'s, where both are known) and able to run the model's dtype
    natively (bf16 needs sm_80+); the same architecture first, then by memory."""
    from kvsize.engines.context import compute_capability
    from kvsize.profiles import load_profiles, resolve_gpu
    from kvsize.units import format_bytes

    if gpu is None:
        return ()
    this = resolve_gpu(gpu)
    here = compute_capability(this.arch)

    def candidate(p: GpuProfile) -> bool:
        theirs = compute_capability(p.arch)
        if p.vendor != this.vendor or p.segment != this.segment:
            return False
        if p.memory_bytes * 100 < this.memory_bytes * LARGER_CARD_STEP:
            return False
        if here is not None and theirs is not None and theirs < here:
            return False  # an older generation is no step up (a V100 for an L4)
        return not (model_dtype == "bf16" and theirs is not None and theirs < (8, 0))

    def family(p: GpuProfile) -> str:
        return (p.arch or "").split(",")[0]

    larger = sorted(
        (p for p in load_profiles().values() if candidate(p)),
        key=lambda p: (family(p) != family(this), p.memory_bytes, p.id),
    )
    return tuple((p.id, f"{p.name}, {format_bytes(p.memory_bytes)}", p.memory_bytes) for p in larger)


class _Card(msgspec.Struct, frozen=True):
    name: str
    memory_bytes: int
    bandwidth_bytes_per_s: int | None = None
    bf16_flops: float | None = None
    host_link_bytes_per_s: int | None = None
    host_link_source: str | None = None
    device: Device | None = None


def _mm_limit_notes(spec: ArchSpec, limits: Any) -> list[str]:
    """What --limit-mm-per-prompt cannot act on: a text model (vLLM builds no multimodal config for it), or a
    modality the model does not take (vLLM reads only the model's own, multimodal/processing/context.py
    allowed_mm_limits, and ignores the rest without a word)."""
    from kvsize.mm_profile import MODEL_MODALITIES, model_modalities

    if not spec.is_multimodal:
        return ["--limit-mm-per-prompt: a text model has no multimodal inputs, so it changes nothing"]
    if not set(spec.architectures) & MODEL_MODALITIES.keys():
        return []
    takes = model_modalities(spec.architectures)
    unknown = [m for m, _ in limits.counts if m not in takes]
    if not unknown:
        return []
    return [
        f"--limit-mm-per-prompt: this model takes {', '.join(takes)}, not {', '.join(unknown)}: vLLM ignores "
        f"{'it' if len(unknown) == 1 else 'them'} (check the spelling)"
    ]


def _vllm_switches(settings: BudgetSettings) -> str:
    """The vLLM-only switches the settings carry, as their flags ("" for none)."""
    given = [
        flag
        for flag, on in (
            ("--enforce-eager", settings.enforce_eager),
            ("--language-model-only", settings.language_model_only),
            ("--enable-expert-parallel", settings.expert_parallel),
            ("--skip-mm-profiling", settings.skip_mm_profiling),
            ("--limit-mm-per-prompt", settings.mm_limits is not None),
        )
        if on
    ]
    return ", ".join(given)


def _with_towers(raw: Mapping[str, Any], spec: ArchSpec, settings: BudgetSettings, notes: list[str]) -> BudgetSettings:
    """The settings with the towers' bytes (kvsize.weights.tower_bytes) that vLLM's --language-model-only, or a
    tower's modalities all limited to 0, leave unloaded; a note where none is counted."""
    from kvsize.weights import tower_bytes

    towers = tower_bytes(raw, spec.model_dtype)
    if not towers:
        flag = "--language-model-only" if settings.language_model_only else "--limit-mm-per-prompt"
        notes.append(f"{flag}: no tower counted in this config, so the weights are as found")
    return msgspec.structs.replace(
        settings, tower_bytes=towers, audio_tower_bytes=tower_bytes(raw, spec.model_dtype, ("audio",))
    )


def engine_context(
    device: Device | None, engine_options: Mapping[str, Any] | None, environment: Mapping[str, str] | None = None
) -> EngineContext:
    """The deployment the engines' rules are evaluated for: the card, the scheduler settings given and the
    engines' long-context switches set in `environment` (None: this process's environment)."""
    import os

    from kvsize.overrides import long_context_switch

    options = engine_options or {}
    env = os.environ if environment is None else environment
    switches = tuple((name, text) for name in ENGINES if (text := long_context_switch(name, env)) is not None)
    return EngineContext(
        device=device,
        max_num_batched_tokens=options.get("max_num_batched_tokens"),
        max_num_seqs=options.get("max_num_seqs"),
        enable_prefix_caching=options.get("enable_prefix_caching"),
        long_context_switches=switches,
        dtype=options.get("dtype"),
    )


def _gpu_card(gpu: str | None, gpu_mem: int | None) -> _Card | None:
    from kvsize.units import format_bytes

    profile = None
    if gpu is not None:  # the profiles' pydantic models are built only when a card is named (start-up time)
        from kvsize.profiles import resolve_gpu

        profile = resolve_gpu(gpu)
    if gpu_mem is not None and gpu_mem <= 0:
        raise UsageError(f"--gpu-mem must be positive, got {gpu_mem}")
    if profile is None:
        return _Card("custom", gpu_mem, device=Device(gpu_mem)) if gpu_mem is not None else None
    tflops = profile.dense_tflops.get("bf16") if profile.dense_tflops else None
    link, link_source = _host_link(profile)
    return _Card(
        f"{profile.id} with {format_bytes(gpu_mem)}" if gpu_mem is not None else profile.id,
        gpu_mem if gpu_mem is not None else profile.memory_bytes,
        profile.memory_bandwidth_bytes_per_s,
        float(tflops) * 1e12 if isinstance(tflops, (int, float)) else None,
        host_link_bytes_per_s=link,
        host_link_source=link_source,
        device=Device.from_profile(profile, gpu_mem),
    )


def _host_link(profile: Any) -> tuple[int | None, str | None]:
    """The profile's host link one way, in bytes/s: PCIe or NVLink-C2C; unified memory runs at the memory's
    bandwidth (the CPU tier is the same memory)."""
    inter = profile.interconnect
    if inter is None or inter.host_link_kind is None:
        return None, None
    if inter.host_link_kind == "unified":
        return profile.memory_bandwidth_bytes_per_s, f"{profile.id}: unified memory (offload adds no capacity)"
    if inter.host_link_gb_s_per_direction is None:
        return None, None
    gb = inter.host_link_gb_s_per_direction
    return int(gb * 1e9), f"{profile.id}: {inter.host_link_kind} {gb:g} GB/s per direction (GPU profile)"


# Specs and parameter counts of recently used configs, keyed by the config dict's identity: a capacity check
# sizes the same model for many deployments.
_PARSED: dict[tuple[int, int | None, bool], tuple[dict[str, Any], ArchSpec]] = {}
_ACTIVE: dict[int, tuple[dict[str, Any], tuple[int | None, int | None]]] = {}
_CACHE_LIMIT = 256


def _parsed(loaded: LoadedConfig, encoder_len: int | None, assume_standard_attention: bool = False) -> ArchSpec:
    key = (id(loaded.raw), encoder_len, assume_standard_attention)
    hit = _PARSED.get(key)
    if hit is not None and hit[0] is loaded.raw:
        return hit[1]
    spec = parse_config(
        loaded.raw,
        source=loaded.location,
        encoder_tokens=encoder_len,
        assume_standard_attention=assume_standard_attention,
    )
    if len(_PARSED) >= _CACHE_LIMIT:
        _PARSED.clear()
    _PARSED[key] = (loaded.raw, spec)
    return spec


def _parameters(raw: dict[str, Any]) -> tuple[int | None, int | None]:
    """(active, total) parameters of a config; active is the total for a dense model; (None, None) when they
    cannot be counted."""
    hit = _ACTIVE.get(id(raw))
    if hit is not None and hit[0] is raw:
        return hit[1]
    from kvsize.params import estimate_parameters

    counts: tuple[int | None, int | None]
    try:
        counted = estimate_parameters(raw)
        counts = (counted.active or counted.total, counted.total)
    except KvsizeError:
        counts = (None, None)
    if len(_ACTIVE) >= _CACHE_LIMIT:
        _ACTIVE.clear()
    _ACTIVE[id(raw)] = (raw, counts)
    return counts


def _hardware(
    loaded: LoadedConfig, spec: ArchSpec, card: _Card | None, offload: tuple[int, int | None] | None
) -> Hardware | None:
    if card is None:
        return None
    active, total = _parameters(loaded.raw) if card.bf16_flops or card.bandwidth_bytes_per_s else (None, None)
    heads = spec.num_attention_heads or 0
    head_dim = max((layer.attention.head_dim for layer in spec.layers if layer.attention), default=0)
    return Hardware(
        bandwidth_bytes_per_s=card.bandwidth_bytes_per_s,
        bf16_flops=card.bf16_flops,
        active_parameters=active,
        total_parameters=total,
        num_layers=sum(1 for layer in spec.layers if layer.attention is not None),
        attention_width=heads * head_dim,
        cpu_mem_bytes=offload[0] if offload else None,
        link_bytes_per_s=(offload[1] if offload else None) or card.host_link_bytes_per_s,
        link_source="--link-bandwidth" if offload and offload[1] else card.host_link_source,
        num_experts=_routed_experts(loaded.raw) if spec.experts_per_token else None,
        experts_per_token=spec.experts_per_token,
    )


def _routed_experts(raw: Mapping[str, Any]) -> int | None:
    """Routed experts per MoE layer, from the keys kvsize/params.py _moe_spec reads (text config first)."""
    for key in ("text_config", "language_config", "llm_config"):
        if isinstance(raw.get(key), Mapping):
            raw = raw[key]
            break
    for key in ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts"):
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def offload_settings(cpu_mem: str | None, link_gb_s: str | None) -> tuple[int, int | None] | None:
    """--cpu-mem and --link-bandwidth (GB/s) as bytes and bytes per second."""
    from kvsize.units import parse_bandwidth

    if cpu_mem is None:
        if link_gb_s is not None:
            raise UsageError("--link-bandwidth needs --cpu-mem", hint="Give the offload tier's size.")
        return None
    link = parse_bandwidth(link_gb_s) if link_gb_s is not None else None
    return parse_size(cpu_mem), link


def _serving_settings(
    prefix_len: int | None,
    enable_prefix_caching: bool | None,
    prompt_len: int | None,
    output_len: int | None,
    workload: Sequence[tuple[int, int]] | None,
    kv_budget_tokens: int | None,
    allocation: str,
    disk: tuple[int, int | None] | None,
    offload: tuple[int, int | None] | None,
) -> ServingSettings:
    # Each value was read by its reader in estimate_loaded; what is left are the combinations.
    if (prompt_len is None) != (output_len is None):
        raise UsageError("--prompt-len and --output-len go together", hint="Give both, or a --workload file.")
    if allocation not in ("paged", "contiguous"):
        raise UsageError(f"unknown allocation {_shown(allocation)}", hint="Choose paged or contiguous.")
    if disk is not None and offload is None:
        raise UsageError("--disk needs --cpu-mem", hint="The disk tier sits behind a CPU DRAM tier.")
    if prefix_len is not None and prompt_len is not None and prefix_len > prompt_len:
        raise UsageError(f"--prefix-len {prefix_len} exceeds --prompt-len {prompt_len}")
    rows = tuple(Request(int(p), int(o)) for p, o in workload) if workload else None
    return ServingSettings(
        prefix_len=prefix_len,
        enable_prefix_caching=enable_prefix_caching,
        prompt_len=prompt_len,
        output_len=output_len,
        workload=rows,
        kv_budget_tokens=kv_budget_tokens,
        allocation="contiguous" if allocation == "contiguous" else "paged",
        disk_bytes=disk[0] if disk else None,
        disk_bytes_per_s=disk[1] if disk else None,
    )


DEFAULT_DISK_BYTES_PER_S = 7_000_000_000
"""A PCIe Gen4 x4 NVMe SSD's sequential read (about 7 GB/s), when --disk-bandwidth is not given."""


def serving_options(
    *,
    prefix_len: str | None = None,
    enable_prefix_caching: bool | None = None,
    prompt_len: str | None = None,
    output_len: str | None = None,
    workload: str | None = None,
    kv_budget_tokens: str | None = None,
    allocation: str = "paged",
    disk: str | None = None,
    disk_bandwidth: str | None = None,
) -> dict[str, Any]:
    """The serving-time command-line options as `estimate_loaded` keywords (reads the --workload file)."""
    from kvsize.units import parse_bandwidth

    rows = None
    if workload is not None:
        from kvsize.workload_file import load_workload

        rows = load_workload(workload)
    disk_tier = None
    if disk is not None:
        speed = None
        if disk_bandwidth is not None:
            speed = _read("--disk-bandwidth", disk_bandwidth, lambda v: parse_bandwidth(v, "disk bandwidth"))
        disk_tier = (_setting("--disk", disk, "cpu_mem"), speed or DEFAULT_DISK_BYTES_PER_S)
    elif disk_bandwidth is not None:
        raise UsageError("--disk-bandwidth needs --disk", hint="Give the disk tier's size.")
    return {
        "prefix_len": _tokens("--prefix-len", prefix_len, allow_zero=True),
        "enable_prefix_caching": enable_prefix_caching,
        "prompt_len": _tokens("--prompt-len", prompt_len),
        "output_len": _tokens("--output-len", output_len),
        "workload": rows,
        "kv_budget_tokens": _tokens("--kv-budget-tokens", kv_budget_tokens),
        "allocation": allocation.strip().lower(),
        "disk": disk_tier,
    }
