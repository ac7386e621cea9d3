"""An engine log against kvsize's model, figure by figure, and measured overheads kept for later runs. Pure.

`check_log` rebuilds the scenario a start-up log ran (kvsize.engine_log) and predicts each figure the log
printed, each from the figures before it, so that one error does not hide another:

- available KV memory: the budget from the card alone (kvsize.budget.kv_budget with the log's utilisation,
  batch settings and tp/pp, and kvsize's own weights);
- weights per rank: kvsize's weights (published size, safetensors, or a parameter count) split over tp x pp;
- pool tokens / blocks / maximum concurrency: the engine's paging arithmetic applied to the KV memory the log
  says was available;
- llama.cpp: each cache's cells (n_ctx; SWA caches min(n_ctx, pad(n_swa x n_seq_max + n_ubatch, 256)),
  src/llama-kv-cache-iswa.cpp) and size (cells x layers x n_head_kv x (n_embd_head_k + n_embd_head_v) x
  type size), from the hyper-parameters the log prints; no config needed.

A calibration records what one start-up measured (activation peak, non-torch memory, CUDA graphs, weights per
rank) for a model on a card, so that later sizing of the same deployment uses the measurement.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from kvsize.budget import (
    CUDA_CONTEXT_BYTES,
    BudgetSettings,
    KvBudget,
    kv_budget,
    load_rope_tables,
    vllm_loading_change,
    weights_on_busiest_rank,
)
from kvsize.dtypes import AUTO, KvDtype, parse_kv_dtype
from kvsize.engine_log import GIB, MIB, EngineLog
from kvsize.engines.context import Device, EngineContext
from kvsize.errors import KvsizeError, UsageError
from kvsize.mm_profile import MmLimits, parse_mm_limits
from kvsize.spec import ArchSpec

if TYPE_CHECKING:
    from kvsize.engines.vllm_releases import VllmRules

GGML_TYPE_BYTES: dict[str, tuple[int, int]] = {
    # (block elements, block bytes): ggml.c type traits
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q5_1": (32, 24),
    "q5_0": (32, 22),
    "q4_1": (32, 20),
    "q4_0": (32, 18),
    "iq4_nl": (32, 18),
}
LLAMACPP_SWA_PAD = 256  # llama_kv_cache_iswa: GGML_PAD(n_swa x n_seq_max + n_ubatch, n_pad), n_pad 256
DEFAULT_TOLERANCE_PCT = 1.0
COUNT_UNITS = ("tokens", "blocks", "cells", "B")


class Figure(msgspec.Struct, frozen=True):
    """One number the log printed, next to kvsize's prediction."""

    name: str
    logged: float
    predicted: float
    unit: str
    basis: str = ""
    """What the prediction was given (e.g. "the logged KV memory")."""
    part: bool = False
    """A part of the budget (activation peak, non-torch, ...), shown to tell which part differs; the verdict is
    on the figures the parts add up to (weights, KV memory, pool)."""

    @property
    def error_pct(self) -> float:
        if self.logged == 0:
            return 0.0 if self.predicted == 0 else math.inf
        return 100.0 * (self.predicted - self.logged) / self.logged

    def within(self, tolerance_pct: float) -> bool:
        return abs(self.error_pct) <= tolerance_pct

    def as_dict(self) -> dict[str, Any]:
        """The figure for JSON, which has no Infinity or NaN: a value that is not finite (the error against a
        logged 0) is None (null); `within` still fails such a figure."""

        def number(value: float) -> float | int | None:  # counts stay integers in the JSON
            if not math.isfinite(value):
                return None
            return int(value) if self.unit in COUNT_UNITS and float(value).is_integer() else value

        error = self.error_pct
        return {
            "name": self.name,
            "logged": number(self.logged),
            "predicted": number(self.predicted),
            "error_pct": round(error, 4) if math.isfinite(error) else None,
            "unit": self.unit,
            **({"part": True} if self.part else {}),
        }


class LogCheck(msgspec.Struct):
    engine: str
    engine_version: str | None
    model: str | None
    figures: list[Figure] = msgspec.field(default_factory=list)
    notes: list[str] = msgspec.field(default_factory=list)

    def passed(self, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> bool:
        return all(f.within(tolerance_pct) for f in self.figures if not f.part)

    def as_dict(self, tolerance_pct: float = DEFAULT_TOLERANCE_PCT) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "engine_version": self.engine_version,
            "model": self.model,
            "figures": [f.as_dict() for f in self.figures],
            "pass": self.passed(tolerance_pct),
            "notes": self.notes,
        }


class Deployment(msgspec.Struct, frozen=True):
    """What `check_log` needs besides the log: the model's spec, the card, the weights and any overrides."""

    spec: ArchSpec | None = None
    memory_bytes: int | None = None
    """The card's memory (a GPU profile's memory_bytes); None: the total the log printed."""
    device: Device | None = None
    """The card, for vLLM's batch defaults, its SM count and its interconnect."""
    weights_bytes: int | None = None
    """The whole model's weights, as kvsize finds them (split over tp x pp here)."""
    tp: int | None = None
    pp: int | None = None
    max_model_len: int | None = None
    gpu_util: float | None = None
    kv_dtype: str | None = None
    calibration: Calibration | None = None
    gpu_id: str | None = None
    """The GPU profile id given (--gpu), which a calibration must have been measured on."""
    model_id: str | None = None
    """The model the user named (--config's, or the log's resolved), which a calibration must have measured."""
    tower_bytes: int = 0
    """The whole model's vision and audio towers (kvsize.weights.tower_bytes): what a --language-model-only
    run does not load."""
    audio_tower_bytes: int = 0
    """The audio towers' part of tower_bytes (a tower limited to 0 alone is not loaded either)."""


def _logged_mm_limits(given: object) -> MmLimits | None:
    """The log's --limit-mm-per-prompt (kept as its JSON by kvsize/engine_log.py), parsed."""
    return parse_mm_limits(given) if isinstance(given, str) else None


# --- versions ---------------------------------------------------------------------------------------------


def vllm_log_release(version: str | None) -> str | None:
    """The vLLM release a log is sized with: the one it prints (its era's rules), else the newest kvsize has
    read. A version the table refuses (older than its oldest era) is refused here too, as bad input."""
    from kvsize.engines.vllm_releases import VLLM_RELEASES

    if not version:
        return None
    return VLLM_RELEASES.resolve(version).release


def unversioned_vllm_release(log: EngineLog) -> str | None:
    """The release a vLLM log that prints none is sized with: the newest read where the log shows 0.34's measured
    sizing ("Memory after warmup: ..."), else the newest whose pool is sized by profiling, as such a log's lines
    are (VllmRules.kv_sizing); None for a log that names its release, or another engine's."""
    from kvsize.engines.vllm_releases import VLLM_RELEASES

    if log.engine != "vllm" or log.engine_version:
        return None
    if log.settings.get("kv_sizing") == "measured":
        return VLLM_RELEASES.newest.last
    return next(e.last for e in reversed(VLLM_RELEASES.eras) if e.rules.kv_sizing == "profiled")


def vllm_log_rules(version: str | None) -> VllmRules:
    from kvsize.engines.vllm_releases import VLLM_RELEASES

    return VLLM_RELEASES.resolve(vllm_log_release(version)).era.rules


def _kv_dtype(name: object, spec: ArchSpec | None) -> KvDtype:
    text = str(name or AUTO).strip().lower()
    if text == AUTO:
        return KvDtype(spec.model_dtype) if spec is not None else KvDtype.BF16
    found = parse_kv_dtype(text)
    if found is None:
        raise UsageError(f"unknown KV cache dtype '{text}' in the log", hint="Pass --kv-dtype.")
    return found


# --- the scenario -----------------------------------------------------------------------------------------


class Scenario(msgspec.Struct, frozen=True):
    tp: int
    pp: int
    max_model_len: int | None
    gpu_util: float | None
    kv_dtype: KvDtype
    block_size: int | None
    max_num_batched_tokens: int | None
    max_num_seqs: int | None


def _int_setting(value: object) -> int | None:
    """A count the log printed (8192, '8192', '32k'); None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    from kvsize.units import parse_tokens

    try:
        return parse_tokens(str(value))
    except (UsageError, ValueError):
        return None


def _float_setting(value: object) -> float | None:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if 0 < number <= 1 else None


def _vllm_budget_parts(f: dict[str, float], budget: KvBudget, *, card_given: bool) -> list[Figure]:
    """The budget's parts next to the ones vLLM printed (v1/worker/gpu_worker.py determine_available_memory's
    debug line, 0.11+; V0's "Memory profiling results"): CUDA's total (when the card was given, not read from
    the log), the profile run's torch peak, the non-torch memory and, where the release subtracts it, the
    CUDA-graph estimate."""
    parts = [("CUDA total", "total_memory_gib", budget.visible_bytes)] if card_given else []
    parts += [
        ("activation peak", "activation_peak_gib", budget.activation_bytes),
        ("non-torch", "non_torch_gib", budget.non_torch_bytes),
    ]
    if budget.start_snapshot_bytes:  # 0.34's measured sizing: "Graph capturing finished ... took X GiB"
        parts.append(("CUDA graphs (captured)", "cuda_graph_gib", budget.cuda_graph_bytes))
        if "initial_free_gib" in f and "total_memory_gib" in f:
            start = round(f["total_memory_gib"] - f["initial_free_gib"], 2)
            parts.append(("start-up use", "start_use_gib", budget.start_snapshot_bytes))
            f = {**f, "start_use_gib": start}
    elif budget.cuda_graph_bytes:
        parts.append(("CUDA graphs (estimate)", "cuda_graph_estimate_gib", budget.cuda_graph_bytes))
    return [Figure(name, f[key], value / GIB, "GiB", "the card", part=True) for name, key, value in parts if key in f]


def _encoder_figures(
    log: EngineLog, dep: Deployment, settings: BudgetSettings, version: str | None, memory: int, tp: int
) -> list[Figure]:
    """The profile run's encoder budget and dummy items the log printed, next to kvsize's (budget.py
    vllm_encoder_profile), for the multimodal families it models: parts, which tell whether the encoder's share of
    the activation peak starts from the right batch."""
    f = log.figures
    if "mm_profile_items" not in f or dep.spec is None:
        return []
    from kvsize.budget import vllm_encoder_profile
    from kvsize.mm_profile import NotModelled

    try:
        mm = vllm_encoder_profile(dep.spec, memory, settings, version, dep.device, tp)
    except NotModelled:
        return []
    if mm is None:
        return []
    basis = f"the {log.settings.get('mm_profile_modality', 'item')} dummy"
    return [
        Figure("encoder budget", f["encoder_budget_tokens"], mm.encoder_budget_tokens, "tokens", basis, part=True),
        Figure("encoder items profiled", f["mm_profile_items"], mm.items, "items", basis, part=True),
    ]


def _weights_figure(logged: float, weights_rank: int, rope_bytes: int) -> Figure:
    """The load the engine measured against kvsize's weights on that rank and the RoPE tables loaded beside them."""
    basis = "kvsize's weights + RoPE tables" if rope_bytes else "kvsize's weights"
    return Figure("weights per rank", logged, (weights_rank + rope_bytes) / GIB, "GiB", basis)


def busiest_rank_weights(dep: Deployment, tp: int, pp: int, engine: str = "vllm") -> int:
    """kvsize's weights on the busiest GPU (budget.py weights_on_busiest_rank; an even split without a spec)."""
    assert dep.weights_bytes is not None
    if dep.spec is None:
        return -(-dep.weights_bytes // (tp * pp))
    return weights_on_busiest_rank(dep.spec, dep.weights_bytes, tp=tp, pp=pp, engine=engine).bytes


def vllm_scenario(log: EngineLog, dep: Deployment) -> Scenario:
    s = log.settings
    return Scenario(
        tp=dep.tp or _int_setting(s.get("tensor_parallel_size")) or 1,
        pp=dep.pp or _int_setting(s.get("pipeline_parallel_size")) or 1,
        max_model_len=dep.max_model_len or _int_setting(s.get("max_model_len")),
        gpu_util=dep.gpu_util or _float_setting(s.get("gpu_memory_utilization")),
        kv_dtype=_kv_dtype(dep.kv_dtype or s.get("kv_cache_dtype"), model_spec(log, dep.spec)),
        block_size=_int_setting(s.get("block_size")),
        max_num_batched_tokens=_int_setting(s.get("max_num_batched_tokens")),
        max_num_seqs=_int_setting(s.get("max_num_seqs")),
    )


def model_spec(log: EngineLog, spec: ArchSpec | None) -> ArchSpec | None:
    """`spec` with the dtype the engine ran the model in (vLLM --dtype), which `--kv-cache-dtype auto` and the
    activations follow."""
    names = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "half": "fp16"}
    dtype = names.get(str(log.settings.get("dtype")))
    if spec is not None and dtype is None and log.engine in ("vllm", "sglang"):
        # --dtype auto, or a log that prints none: the engine's own choice (Engine.run_dtype: float32
        # checkpoints run in 16 bits)
        from kvsize.engines import get_engine

        try:
            dtype = get_engine(log.engine, log.engine_version).run_dtype(spec)
        except KvsizeError:  # a release kvsize has not read: the checkpoint's dtype
            dtype = None
    if spec is None or dtype is None or dtype == spec.model_dtype:
        return spec
    return msgspec.structs.replace(spec, model_dtype=dtype)


def card_memory(log: EngineLog, dep: Deployment) -> int | None:
    """The card's memory: the GPU given, else the total the log printed (CUDA-visible, so the CUDA context is
    added back: kv_budget takes it off again)."""
    if dep.memory_bytes is not None:
        return dep.memory_bytes
    total = log.figures.get("total_memory_gib")
    return round(total * GIB) + CUDA_CONTEXT_BYTES if total else None


# --- per engine -------------------------------------------------------------------------------------------


def _check_vllm(log: EngineLog, dep: Deployment, out: LogCheck) -> None:
    from kvsize.engines.vllm import VllmEngine

    f = log.figures
    dep = msgspec.structs.replace(dep, spec=model_spec(log, dep.spec))
    if dep.device is None and log.settings.get("gpu_name") and "total_memory_gib" in f:
        # No --gpu: the card the log names, with the memory it printed (vLLM's tiers key on both).
        dep = msgspec.structs.replace(
            dep, device=Device(round(f["total_memory_gib"] * GIB), name=str(log.settings["gpu_name"]))
        )
    sc = vllm_scenario(log, dep)
    version = vllm_log_release(log.engine_version)
    cal = dep.calibration
    weights_rank = None
    measured_weights = cal is not None and cal.weights_per_rank_bytes is not None
    if cal is not None and cal.weights_per_rank_bytes is not None:
        weights_rank = cal.weights_per_rank_bytes
    elif dep.weights_bytes is not None:
        weights_rank = busiest_rank_weights(dep, sc.tp, sc.pp, "vllm")
    memory = card_memory(log, dep)
    settings = BudgetSettings(
        gpu_util=sc.gpu_util,
        max_batched_tokens=sc.max_num_batched_tokens,
        max_num_seqs=sc.max_num_seqs,
        max_model_len=sc.max_model_len,
        enforce_eager=log.settings.get("enforce_eager") is True,
        language_model_only=log.settings.get("language_model_only") is True,
        tower_bytes=dep.tower_bytes,
        audio_tower_bytes=dep.audio_tower_bytes,
        expert_parallel=log.settings.get("enable_expert_parallel") is True,
        skip_mm_profiling=log.settings.get("skip_mm_profiling") is True,
        mm_limits=_logged_mm_limits(log.settings.get("limit_mm_per_prompt")),
    )
    if "weights_gib" in f and weights_rank is not None:
        # "Model loading took" is the memory the load allocated: the weights as loaded (padded MXFP4 experts, no
        # towers under --language-model-only: budget.vllm_loading_change) and the RoPE tables beside them
        rope = 0 if measured_weights or dep.spec is None else load_rope_tables("vllm", version, dep.spec).bytes
        change = 0
        if not measured_weights and dep.spec is not None:
            change = vllm_loading_change(dep.spec, vllm_log_rules(version), dep.device, sc.tp, sc.pp, settings)[0]
        figure = _weights_figure(f["weights_gib"], weights_rank + change, rope)
        if change:
            basis = "kvsize's padded weights" if change > 0 else "kvsize's weights without towers"
            figure = msgspec.structs.replace(figure, basis=f"{basis} + RoPE tables")
        out.figures.append(figure)
    if "available_kv_gib" in f and dep.spec is not None and memory is not None and weights_rank is not None:
        if cal is not None:  # the measured overheads where the settings leave them to the model
            settings = cal.budget_settings(settings)
        budget = kv_budget(
            "vllm",
            version,
            dep.spec,
            memory_bytes=memory,
            weights_bytes=weights_rank,
            tp=sc.tp,
            pp=sc.pp,
            settings=settings,
            device=dep.device,
        )
        out.figures.extend(_vllm_budget_parts(f, budget, card_given=dep.memory_bytes is not None))
        out.figures.extend(_encoder_figures(log, dep, settings, version, memory, sc.tp))
        if "available_kv_min_gib" in f:  # pipeline stages: the smallest stage's, which sizes the pool
            out.figures.append(
                Figure(
                    "available KV memory (smallest worker)",
                    f["available_kv_min_gib"],
                    budget.kv_budget_bytes / GIB,
                    "GiB",
                    "the card",
                )
            )
        else:
            out.figures.append(
                Figure("available KV memory", f["available_kv_gib"], budget.kv_budget_bytes / GIB, "GiB", "the card")
            )
    elif "available_kv_gib" in f:
        out.notes.append("available KV memory not predicted: give --gpu and --config (or a registry model)")
    if "available_kv_gib" not in f or dep.spec is None or sc.max_model_len is None:
        if dep.spec is None:
            out.notes.append("pool not predicted: kvsize needs the model's config (--config)")
        return
    # The rules on the log's card: vLLM's scheduler defaults (the sliding windows' and Mamba groups' in-flight
    # blocks) and its attention backends key on the device, as in a sizing run (api.engine_context).
    engine = VllmEngine(
        version,
        block_size=sc.block_size,
        max_num_batched_tokens=sc.max_num_batched_tokens,
        max_num_seqs=sc.max_num_seqs,
    ).with_context(EngineContext(device=dep.device))
    available = f.get("available_kv_min_gib", f["available_kv_gib"])  # pipeline stages: the smallest
    pool = engine.pool(
        dep.spec,
        available_bytes=round(available * GIB),
        max_model_len=sc.max_model_len,
        kv_dtype=sc.kv_dtype,
        tp=sc.tp,
        pp=sc.pp,
    )
    basis = "the logged KV memory"
    if "pool_tokens" in f:
        out.figures.append(Figure("pool tokens", f["pool_tokens"], pool.kv_pool_tokens, "tokens", basis))
    if "gpu_blocks" in f:
        out.figures.append(Figure("GPU blocks", f["gpu_blocks"], pool.num_blocks, "blocks", basis))
    if "max_concurrency_x" in f:
        out.figures.append(Figure("max concurrency", f["max_concurrency_x"], round(pool.concurrency, 2), "x", basis))


def _check_sglang(log: EngineLog, dep: Deployment, out: LogCheck) -> None:
    from kvsize.engines.sglang import SglangEngine

    f, s = log.figures, log.settings
    dep = msgspec.structs.replace(dep, spec=model_spec(log, dep.spec))  # the dtype SGLang ran it in
    tp = dep.tp or _int_setting(s.get("tp_size")) or 1
    pp = dep.pp or _int_setting(s.get("pp_size")) or 1
    weights_rank = busiest_rank_weights(dep, tp, pp, "sglang") if dep.weights_bytes is not None else None
    if "weights_gb" in f and weights_rank is not None:
        # SGLang's "mem usage" after loading is the free memory it lost: the weights and the RoPE tables
        rope = 0 if dep.spec is None else load_rope_tables("sglang", log.engine_version, dep.spec, dep.device).bytes
        out.figures.append(_weights_figure(f["weights_gb"], weights_rank, rope))
    kv_gib = f.get("k_size_gb", 0.0) + f.get("v_size_gb", 0.0) or f.get("kv_size_gb", 0.0)
    memory = card_memory(log, dep)
    if kv_gib and dep.spec is not None and memory is not None and weights_rank is not None:
        fraction = dep.gpu_util or _float_setting(s.get("mem_fraction_static"))
        budget = kv_budget(
            "sglang",
            log.engine_version,  # the log's own release (its era's rules); None: the newest read
            dep.spec,
            memory_bytes=memory,
            weights_bytes=weights_rank,
            tp=tp,
            pp=pp,
            settings=BudgetSettings(gpu_util=float(fraction) if fraction else None),
            device=dep.device,
        )
        if dep.memory_bytes is not None and "free_before_load_gb" in f:
            # SGLang's budget is mem_fraction_static x this (model_executor/model_runner.py profile_max_num_token)
            free = budget.visible_bytes - budget.non_torch_bytes
            out.figures.append(
                Figure("free memory before loading", f["free_before_load_gb"], free / GIB, "GiB", "the card", part=True)
            )
        out.figures.append(Figure("KV memory (K + V)", kv_gib, budget.kv_budget_bytes / GIB, "GiB", "the card"))
    if kv_gib and dep.spec is not None and "pool_tokens" in f:
        engine = SglangEngine(log.engine_version, block_size=_int_setting(s.get("page_size"))).with_context(
            EngineContext(device=dep.device)
        )
        pool = engine.pool(
            dep.spec,
            available_bytes=round(kv_gib * GIB),
            kv_dtype=_kv_dtype(dep.kv_dtype or s.get("kv_cache_dtype"), dep.spec),
            tp=tp,
            pp=pp,
        )
        out.figures.append(
            Figure("pool tokens", f["pool_tokens"], pool.max_total_num_tokens, "tokens", "the logged K + V size")
        )
    elif dep.spec is None:
        out.notes.append("pool not predicted: kvsize needs the model's config (--config)")


def _check_trtllm(log: EngineLog, dep: Deployment, out: LogCheck) -> None:
    from kvsize.engines.trtllm import TrtllmEngine

    f = log.figures
    if dep.spec is None or "pool_tokens" not in f:
        out.notes.append("nothing predicted: kvsize needs the model's config (--config) and the logged token count")
        return
    tokens = int(f["pool_tokens"])
    dtype = _kv_dtype(dep.kv_dtype, dep.spec)
    est = TrtllmEngine().estimate(dep.spec, ctx=tokens, batch=1, kv_dtype=dtype, tp=dep.tp or 1, pp=dep.pp or 1)
    per_token = est.kv_bytes_per_token
    if "kv_allocated_bytes" in f:
        out.figures.append(
            Figure(
                "KV bytes for the logged tokens",
                f["kv_allocated_bytes"],
                per_token * tokens,
                "B",
                "the logged token count",
            )
        )
    if "kv_allocated_gib" in f:
        out.figures.append(
            Figure(
                "KV memory for the logged tokens",
                f["kv_allocated_gib"],
                per_token * tokens / GIB,
                "GiB",
                "the logged token count",
            )
        )


def _ggml_bytes(type_name: str, elements: int) -> int:
    blk, size = GGML_TYPE_BYTES.get(type_name.lower(), (1, 2))
    return elements // blk * size


def _check_llamacpp(log: EngineLog, dep: Deployment, out: LogCheck) -> None:
    h, s = log.hparams, log.settings
    need = ("n_head_kv", "n_embd_head_k", "n_embd_head_v", "n_layer")
    if not log.caches or any(k not in h for k in need) or "n_ctx" not in s:
        out.notes.append("nothing predicted: the log lacks print_info hyper-parameters, n_ctx or the cache lines")
        return
    n_ctx, seqs, ubatch = s["n_ctx"], s.get("n_seq_max", 1), s.get("n_ubatch", 512)
    total_logged = total_pred = 0.0
    for cache in log.caches:
        if cache.swa:
            cells = min(n_ctx, -(-(h.get("n_swa", 0) * seqs + ubatch) // LLAMACPP_SWA_PAD) * LLAMACPP_SWA_PAD)
            label = "SWA cache"
            layers = cache.layers  # the SWA / non-SWA split of the layers is read from the log
        elif cache.swa is False:
            cells, label, layers = n_ctx, "non-SWA cache", cache.layers
        else:
            cells, label, layers = n_ctx, "KV cache", h["n_layer"]
        per_cell = h["n_head_kv"] * (
            _ggml_bytes(cache.k_type, h["n_embd_head_k"]) + _ggml_bytes(cache.v_type, h["n_embd_head_v"])
        )
        size_mib = cells * layers * per_cell / MIB
        out.figures.append(Figure(f"{label} cells", cache.cells, cells, "cells", "n_ctx, n_swa, n_seq_max"))
        out.figures.append(Figure(f"{label} size", cache.size_mib, round(size_mib, 2), "MiB", "the hyper-parameters"))
        total_logged += cache.size_mib
        total_pred += size_mib
    if len(log.caches) > 1:
        out.figures.append(Figure("KV size", total_logged, round(total_pred, 2), "MiB", "the hyper-parameters"))


_CHECKS = {"vllm": _check_vllm, "sglang": _check_sglang, "trtllm": _check_trtllm, "llamacpp": _check_llamacpp}


def check_log(log: EngineLog, dep: Deployment) -> LogCheck:
    """Each figure the log printed that kvsize can predict, logged vs predicted."""
    if (release := unversioned_vllm_release(log)) is not None:
        log = msgspec.structs.replace(log, engine_version=release)
    out = LogCheck(engine=log.engine, engine_version=log.engine_version, model=log.model)
    if dep.calibration is not None:  # evidence about one deployment: this log's, or none
        s = log.settings
        target = calibration_target(
            dep.model_id or log.model or "(a model the log does not name)",
            gpu=dep.gpu_id or _card_of_log(log),
            engine=log.engine,
            engine_version=None,
            tp=dep.tp or _int_setting(s.get("tensor_parallel_size") or s.get("tp_size")) or 1,
            pp=dep.pp or _int_setting(s.get("pipeline_parallel_size") or s.get("pp_size")) or 1,
            weights_bytes=dep.weights_bytes,
        )
        # The release is the log's own, compared by the rules it maps to (a full version string such as 0.11.0).
        target = msgspec.structs.replace(target, engine_version=log.engine_version)
        require_match(dep.calibration, target, source="--calibration")
    _CHECKS[log.engine](log, dep, out)
    return out


# --- calibration files ------------------------------------------------------------------------------------


class Calibration(msgspec.Struct, frozen=True):
    """Overheads one start-up measured, per GPU; None where the log did not say."""

    model: str | None = None
    gpu: str | None = None
    engine: str = "vllm"
    engine_version: str | None = None
    tp: int = 1
    pp: int = 1
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cuda_graph_bytes: int | None = None
    weights_per_rank_bytes: int | None = None
    source: str | None = None
    overhead_bytes: int | None = None
    """Activation peak + non-torch + CUDA graphs together, per GPU: what a running server's pool implies
    (`kvsize probe --save-calibration`: the card's share minus the weights minus the served blocks' memory). A
    server does not tell the three apart, so they are applied as one (shown as the activation peak)."""

    def budget_settings(self, base: BudgetSettings) -> BudgetSettings:
        """`base` with the measured overheads filled in where `base` leaves them to the model; a combined overhead
        (a server's) stands as the activation peak, with no non-torch or CUDA-graph part beside it."""
        activation, non_torch, graphs = (
            (self.overhead_bytes, 0, 0)
            if self.overhead_bytes is not None
            else (self.activation_bytes, self.non_torch_bytes, self.cuda_graph_bytes)
        )
        return BudgetSettings(
            gpu_util=base.gpu_util,
            max_batched_tokens=base.max_batched_tokens,
            max_num_seqs=base.max_num_seqs,
            activation_bytes=base.activation_bytes if base.activation_bytes is not None else activation,
            non_torch_bytes=base.non_torch_bytes if base.non_torch_bytes is not None else non_torch,
            cuda_graph_bytes=base.cuda_graph_bytes if base.cuda_graph_bytes is not None else graphs,
            kv_memory_bytes=base.kv_memory_bytes,
            reserve_bytes=base.reserve_bytes,
            # measured weights per rank are the engine's whole load, RoPE tables included (vLLM "Model loading
            # took"; a probe's overhead holds them)
            rope_table_bytes=(
                base.rope_table_bytes
                if base.rope_table_bytes is not None
                else (0 if self.weights_per_rank_bytes is not None else None)
            ),
        )

    def whole_weights_bytes(self) -> int | None:
        """The whole model's weights that split over tp x pp gives the measured bytes per rank."""
        return self.weights_per_rank_bytes * self.tp * self.pp if self.weights_per_rank_bytes is not None else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kvsize_calibration": 1,
            "model": self.model,
            "gpu": self.gpu,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "tp": self.tp,
            "pp": self.pp,
            "activation_bytes": self.activation_bytes,
            "non_torch_bytes": self.non_torch_bytes,
            "cuda_graph_bytes": self.cuda_graph_bytes,
            "weights_per_rank_bytes": self.weights_per_rank_bytes,
            "source": self.source,
            **({"overhead_bytes": self.overhead_bytes} if self.overhead_bytes is not None else {}),
        }


_CAL_INT_KEYS = (
    "activation_bytes",
    "non_torch_bytes",
    "cuda_graph_bytes",
    "weights_per_rank_bytes",
    "overhead_bytes",
)
_CAL_TEXT_KEYS = ("model", "gpu", "engine", "engine_version", "source")
CALIBRATION_KEYS = frozenset({"kvsize_calibration", "tp", "pp", *_CAL_INT_KEYS, *_CAL_TEXT_KEYS})
MAX_CALIBRATION_BYTES = 1 << 50  # 1 PiB: no accelerator holds more; a larger "measurement" is a typo or an attack


def _card_of_log(log: EngineLog) -> str | None:
    """The GPU profile id of the card a log names (vLLM prints the device name), when kvsize knows it."""
    name = log.settings.get("gpu_name")
    if not isinstance(name, str) or not name.strip():
        return None
    from kvsize.profiles import resolve_gpu

    try:
        return resolve_gpu(name).id  # an id, an alias or the name the driver reports
    except KvsizeError:
        return None


def calibration_from_log(
    log: EngineLog, *, gpu: str | None, source: str | None = None, model: str | None = None
) -> Calibration | None:
    """The overheads a vLLM log measured; None when it printed none of them. A calibration is evidence about one
    deployment, so it must name its model and card: `model` and `gpu` (the user's --config / --gpu) win over what
    the log names; without either, UsageError."""
    if log.engine != "vllm":
        return None
    f, s = log.figures, log.settings

    def gib(name: str) -> int | None:
        return round(f[name] * GIB) if name in f else None

    # Releases whose budget subtracts the CUDA-graph estimate (VllmRules.cuda_graph_estimate); others print it.
    graphs = gib("cuda_graph_estimate_gib") if vllm_log_rules(log.engine_version).cuda_graph_estimate else 0
    cal = Calibration(
        model=model or log.model,
        gpu=gpu or _card_of_log(log),
        engine="vllm",
        engine_version=log.engine_version,
        tp=_int_setting(s.get("tensor_parallel_size")) or 1,
        pp=_int_setting(s.get("pipeline_parallel_size")) or 1,
        activation_bytes=gib("activation_peak_gib"),
        non_torch_bytes=gib("non_torch_gib"),
        cuda_graph_bytes=graphs,
        weights_per_rank_bytes=gib("weights_gib"),
        source=source,
    )
    if all(getattr(cal, k) is None for k in _CAL_INT_KEYS):
        return None
    missing = [what for what, value in (("model", cal.model), ("card", cal.gpu)) if not value]
    if cal.engine_version is None:
        missing.append("vLLM release")
    if missing:
        raise UsageError(
            f"the log does not name its {' or '.join(missing)}: a calibration must say which deployment it measured",
            hint="Pass --gpu with the card (and --config with the model) the log was run on.",
        )
    return cal


def calibration_from_mapping(data: object, *, source: str) -> Calibration:
    """A calibration file's contents (YAML or JSON, already parsed) checked and typed: every key known, every
    figure a whole number of bytes, and the deployment it measured (model, card, engine, release, tp, pp) named."""
    from kvsize.text import clean

    marker = data.get("kvsize_calibration") if isinstance(data, Mapping) else None
    if not isinstance(data, Mapping) or type(marker) is not int or marker != 1:  # not True, not 1.0
        raise UsageError(
            f"{source}: not a kvsize calibration file",
            hint="Write one with `kvsize log FILE --save-calibration CAL.yaml`.",
        )
    unknown = sorted(clean(k)[:40] for k in data if k not in CALIBRATION_KEYS)
    if unknown:
        raise UsageError(
            f"{source}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(repr(k) for k in unknown[:5])}",
            hint=f"A calibration file has only: {', '.join(sorted(CALIBRATION_KEYS))}.",
        )

    def shown(value: object) -> str:
        return clean(repr(value))[:40]

    values: dict[str, Any] = {}
    for key in _CAL_INT_KEYS:
        value = data.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_CALIBRATION_BYTES
        ):
            raise UsageError(f"{source}: {key} must be a whole number of bytes from 0 to 1 PiB, got {shown(value)}")
        values[key] = value
    for key in ("tp", "pp"):
        value = data.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 1024:
            raise UsageError(f"{source}: {key} must be a whole number from 1 to 1024, got {shown(value)}")
        values[key] = value
    for key in _CAL_TEXT_KEYS:
        value = data.get(key)
        if value is not None and (not isinstance(value, str) or not value.strip() or value != clean(value)):
            raise UsageError(f"{source}: {key} must be text on one line, got {shown(value)}")
        values[key] = value.strip() if isinstance(value, str) else None
    values["engine"] = values["engine"] or "vllm"
    if values["engine_version"] is not None:
        from packaging.version import InvalidVersion, Version

        try:
            Version(values["engine_version"])
        except InvalidVersion:
            raise UsageError(
                f"{source}: engine_version must be a release number (0.19.0), got {shown(values['engine_version'])}"
            ) from None
    for key, what in (("model", "model id"), ("gpu", "GPU profile"), ("engine_version", "engine release")):
        if values[key] is None:
            raise UsageError(
                f"{source}: names no {what} ({key}:); a calibration applies only to the deployment it measured",
                hint=f"Add '{key}: ...' as the run was, or write it again with `kvsize log FILE --gpu GPU "
                "--save-calibration CAL.yaml`.",
            )
    parts = [key for key in ("activation_bytes", "non_torch_bytes", "cuda_graph_bytes") if values[key] is not None]
    if values["overhead_bytes"] is not None and parts:
        raise UsageError(
            f"{source}: overhead_bytes (the three overheads together) and {', '.join(parts)} both given",
            hint="Keep overhead_bytes (from kvsize probe) or the parts (from kvsize log), not both.",
        )
    return Calibration(**values)


# --- where a calibration applies ---------------------------------------------------------------------------


class CalibrationTarget(msgspec.Struct, frozen=True):
    """The deployment a calibration is about to be applied to."""

    model: str
    gpu: str | None
    """A GPU profile id (None: a card known only by its memory, --gpu-mem)."""
    engines: tuple[str, ...]
    engine_version: str | None
    """--engine-version as given (None: the newest modelled release)."""
    tp: int = 1
    pp: int = 1
    weights_bytes: int | None = None
    """kvsize's own figure for the whole model's weights (registry, safetensors or a parameter count): a measured
    weights figure far from it means the calibration is about another model, whatever its name says."""


# A measured whole-model weights figure may differ from kvsize's by the checkpoint's own parts (a vision tower,
# unquantized layers) but not by a factor: outside [1/1.25, 1.25] of it, it is another model.
WEIGHTS_AGREEMENT = (4, 5)  # measured / kvsize's must lie within [4/5, 5/4]


def model_weights(loaded: Any, weights_dtype: str | None = None) -> int | None:
    """kvsize's figure for the weights of a loaded config (kvsize.weights.find_weights) as the engines a
    calibration is measured on hold them with --dtype auto (vLLM and SGLang run a float32 checkpoint in 16 bits:
    Engine.run_dtype), None when unknown."""
    from kvsize.config import parse_config
    from kvsize.weights import find_weights

    try:
        spec = parse_config(loaded.raw, source=loaded.location)
        served = "bf16" if spec.model_dtype == "fp32" else None
        found = find_weights(loaded, model_dtype=spec.model_dtype, weights_dtype=weights_dtype, served_dtype=served)
        return found.bytes
    except KvsizeError:
        return None


def calibration_target(
    model: str,
    *,
    gpu: str | None,
    engine: str | Sequence[str] | None,
    engine_version: str | None,
    tp: int = 1,
    pp: int = 1,
    weights_bytes: int | None = None,
) -> CalibrationTarget:
    """The target of a sizing run as the CLI, capacity files and the API name it: `gpu` an id or alias (resolved
    to the profile id), `engine` one name, several, or 'all'; with several, each engine's newest rules apply."""
    from kvsize.engines import DEFAULT_ENGINE, ENGINES
    from kvsize.profiles import resolve_gpu

    names = [engine] if isinstance(engine, str) else list(engine or [DEFAULT_ENGINE])
    names = [n.strip().lower() for n in names if n.strip()] or [DEFAULT_ENGINE]
    if names == ["all"]:
        names = list(ENGINES)
    return CalibrationTarget(
        model=model,
        gpu=resolve_gpu(gpu).id if gpu else None,
        engines=tuple(names),
        engine_version=engine_version if len(names) == 1 else None,
        tp=tp,
        pp=pp,
        weights_bytes=weights_bytes,
    )


def _model_key(name: str) -> str:
    return name.strip().rstrip("/").casefold()


def same_model(measured: str, target: str) -> bool:
    """Hub ids compare case-insensitively (the hub resolves either); a local folder matches the id it ends with
    at a '/' boundary ('/models/meta-llama/Llama-3.1-8B' is 'meta-llama/Llama-3.1-8B'), never a bare name that
    two organisations could share."""
    from kvsize.registry import aliases

    a, b = _model_key(measured), _model_key(target)
    if a == b or aliases().get(a, "").lower() == b:  # a renamed repository's two ids (ALIASES.tsv)
        return True
    short, long = sorted((a, b), key=len)
    return "/" in short and long.endswith("/" + short)


def rules_of(engine: str, version: str | None) -> str:
    """The kvsize rule set a release is sized with: its era's id (vLLM's eras, kvsize/engines/vllm_releases.py),
    or the named rule set."""
    from kvsize.engines import get_engine

    return get_engine(engine, version).rules_name


def calibration_mismatches(cal: Calibration, target: CalibrationTarget) -> list[str]:
    """Each way `target` differs from the deployment `cal` measured, in words; empty when it applies."""
    from kvsize.profiles import resolve_gpu

    out: list[str] = []
    if cal.model is None or not same_model(cal.model, target.model):
        out.append(f"model {clean_text(cal.model)} != {clean_text(target.model)}")
    card = None
    if cal.gpu is not None:
        try:
            card = resolve_gpu(cal.gpu).id
        except KvsizeError:
            card = cal.gpu
    if target.gpu is None or card != target.gpu:
        out.append(f"card {clean_text(card)} != {clean_text(target.gpu or 'a card given by its memory only')}")
    for engine in target.engines:
        if engine != cal.engine:
            out.append(f"engine {clean_text(cal.engine)} != {clean_text(engine)}")
            continue
        measured_rules = rules_of(engine, cal.engine_version) if cal.engine_version else None
        run_rules = rules_of(engine, target.engine_version)
        if measured_rules != run_rules:
            out.append(
                f"release {clean_text(cal.engine)} {clean_text(cal.engine_version)} (kvsize's {measured_rules} rules)"
                f" != the {run_rules} rules this run applies"
            )
    if (cal.tp, cal.pp) != (target.tp, target.pp):
        out.append(f"tp x pp {cal.tp} x {cal.pp} != {target.tp} x {target.pp}")
    measured, own = cal.whole_weights_bytes(), target.weights_bytes
    low, high = WEIGHTS_AGREEMENT
    if measured and own and not (own * low <= measured * high and measured * low <= own * high):
        from kvsize.units import format_bytes

        out.append(
            f"weights {format_bytes(measured)} measured != {format_bytes(own)} for this model's config "
            "(another model under that name)"
        )
    return out


def clean_text(value: object) -> str:
    from kvsize.text import clean

    return "none" if value is None else clean(value)[:80]


def require_match(cal: Calibration, target: CalibrationTarget, *, source: str) -> None:
    """UsageError (exit 2) naming every difference when `cal` was measured on another deployment: an 8B model's
    activation peak and weights say nothing about a 70B, nor one card's CUDA graphs about another's."""
    differences = calibration_mismatches(cal, target)
    if differences:
        hint = "Size that deployment, or measure this one: `kvsize log LOG --gpu GPU --save-calibration CAL.yaml`."
        if len(differences) == 1 and differences[0].startswith("release") and cal.engine_version:
            hint = f"Pass --engine-version {rules_of(cal.engine, cal.engine_version)} (the release it measured)."
        raise UsageError(
            f"calibration {clean_text(source)} was measured on another deployment: {'; '.join(differences)}",
            hint=hint,
        )


def apply_calibration(
    options: dict[str, Any], measured: Calibration, *, target: CalibrationTarget, source: str = "file"
) -> dict[str, Any]:
    """`estimate_loaded` keyword options with the measured overheads and weights filled in where the user left
    them to the model (an explicit --weights-mem or budget part still wins). Refused (UsageError) unless the
    calibration was measured on `target`'s model, card, engine, release and tp x pp."""
    require_match(measured, target, source=source)
    base = options.get("budget") or BudgetSettings()
    weights = options.get("weights_bytes")
    return {
        **options,
        "budget": measured.budget_settings(base),
        "weights_bytes": weights if weights is not None else measured.whole_weights_bytes(),
    }


# Flags that change what a calibration measured (the card, the layout, the engine's release, the weights): a
# suggestion that pastes one of them would be sized with the measurement of another deployment.
_BOUND_FLAGS = ("--gpu", "--tp", "--pp", "--engine", "--engine-version", "--weights-dtype")


def calibrated_advice(result: Any) -> Any:
    """`result` (an api.Estimate sized with a calibration) with the suggestions that leave the measured
    deployment dropped, and a note that says so; the rest (--kv-dtype, a shorter --ctx) keep it true."""
    dropped = 0
    scenarios = []
    for scenario in result.scenarios:
        gpu = scenario.gpu
        if gpu is not None and gpu.suggestions:
            kept = tuple(s for s in gpu.suggestions if not any(f in s.change.split() for f in _BOUND_FLAGS))
            dropped += len(gpu.suggestions) - len(kept)
            scenario = msgspec.structs.replace(scenario, gpu=msgspec.structs.replace(gpu, suggestions=kept))
        scenarios.append(scenario)
    notes = result.notes
    if dropped:
        notes = (
            *notes,
            "advice: changes of card, tp, pp, engine release or weights left out: the calibration measured this "
            "deployment only (size another without --calibration)",
        )
    return msgspec.structs.replace(result, scenarios=tuple(scenarios), notes=notes)


def read_calibration(path: str) -> Calibration:
    """A calibration file from disk: a regular file of at most 1 MiB (kvsize.safe_io), YAML through the strict
    safe loader (a key given twice is an error). The one I/O helper here, shared by the CLI and capacity files."""
    from pathlib import Path

    from kvsize.safe_io import read_small_text
    from kvsize.strict_yaml import load_yaml_data

    if not str(path).strip():
        raise UsageError(
            "--calibration: empty path", hint="Give the path of a file from `kvsize log --save-calibration`."
        )
    text = read_small_text(Path(path).expanduser(), max_bytes=1 << 20, what="calibration file")
    data = load_yaml_data(text, source=path, what="calibration file")
    return calibration_from_mapping(data, source=path)


def resolve_measured_model(ref: str | None, config: str | None, notes: list[str]) -> tuple[Any, Any]:
    """(spec, loaded config) of the model a log or a server names (`config` wins), or (None, None) with a note
    when kvsize cannot find it; a --config that cannot be read is the error itself."""
    from kvsize.config import parse_config
    from kvsize.errors import EnvironmentProblem
    from kvsize.resolve import load_model_config

    ref = config or ref
    if not ref:
        return None, None
    try:
        loaded = load_model_config(ref)
        return parse_config(loaded.raw, source=loaded.location), loaded
    except EnvironmentProblem as exc:
        if config is not None:
            raise
        notes.append(f"model '{ref}' not loaded ({exc}); pass --config")
    except KvsizeError as exc:
        if config is not None:
            raise
        notes.append(f"model '{ref}' not found ({exc}); pass --config")
    return None, None
