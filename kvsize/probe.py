"""A running engine against kvsize's model, figure by figure (`kvsize probe URL`). Pure: the CLI fetches.

What each engine serves about its KV cache:

- vLLM: `/metrics` holds the `vllm:cache_config_info` gauge, whose labels are the engine's CacheConfig as text
  (vllm/config/cache.py:CacheConfig.metrics_info `{key: str(value) for key, value in self.__dict__.items()}`,
  v1/metrics/loggers.py:PrometheusStatLogger.log_metrics_info@0.8.5-0.33.0; one sample per engine index,
  label `engine`, from 0.11). `num_gpu_blocks` is set after profiling and, with data parallelism, summed over
  the engines (v1/engine/core_client.py:MPClient._wait_for_engine_startup@0.33.0); `kv_cache_size_tokens` and
  `kv_cache_max_concurrency` exist from 0.24 (v1/core/kv_cache_utils.py:update_kv_cache_capacity@0.33.0);
  V0 releases fill `num_cpu_blocks` = swap_space_bytes // cache block bytes
  (vllm/worker/worker.py:Worker.determine_num_available_blocks@0.8.5). `/v1/models` gives the model
  (ModelCard id, root) and its `max_model_len`; `/version` the release.
- SGLang: `/server_info` (`/get_server_info` before 0.5.x) returns the server arguments, the scheduler's
  `max_total_num_tokens` and, per DP rank, `internal_states[i].memory_usage` {weight, kvcache (GB), token_capacity}
  (srt/entrypoints/http_server.py:server_info, srt/managers/scheduler.py:Scheduler.get_internal_state@0.5.10);
  those are the figures SGLang's start-up log prints, so kvsize.calibration.check_log compares them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import msgspec

from kvsize.calibration import (
    Calibration,
    Deployment,
    Figure,
    LogCheck,
    _kv_dtype,
    busiest_rank_weights,
    check_log,
    vllm_log_release,
)
from kvsize.engine_log import GIB, EngineLog
from kvsize.errors import UsageError

CACHE_CONFIG_INFO = "vllm:cache_config_info"
ABSENT = ("", "None", "none", "null")


class VllmServer(msgspec.Struct, frozen=True):
    """What a vLLM server says about itself."""

    labels: dict[str, str]
    """The labels of one `vllm:cache_config_info` sample (the engines' are the same but for `engine`)."""
    engines: int = 1
    version: str | None = None
    model: str | None = None
    max_model_len: int | None = None


def cache_config_info(text: str) -> list[dict[str, str]]:
    """The label sets of the `vllm:cache_config_info` samples in Prometheus text (empty when there is none)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: list[dict[str, str]] = []
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == CACHE_CONFIG_INFO:
                    out.append(dict(sample.labels))
    except (ValueError, TypeError, IndexError) as exc:  # the parser's answer to text that is no exposition format
        raise UsageError(f"/metrics is not Prometheus text ({str(exc)[:80]})") from None
    return out


def vllm_server(
    samples: list[dict[str, str]], models: object = None, version: object = None, model_override: str | None = None
) -> VllmServer:
    """The server from its payloads: `samples` (cache_config_info), `/v1/models` and `/version` as parsed JSON."""
    if not samples:
        raise UsageError("/metrics has no vllm:cache_config_info gauge", hint="Is this a vLLM server?")
    card: Mapping[str, Any] = {}
    data = models.get("data") if isinstance(models, Mapping) else None
    if isinstance(data, list):
        cards = [c for c in data if isinstance(c, Mapping) and c.get("parent") in (None, "")]  # LoRA adapters: parent
        card = cards[0] if cards else {}
    model = model_override or _text(card.get("root")) or _text(card.get("id"))
    length = card.get("max_model_len")
    release = _text(version.get("version")) if isinstance(version, Mapping) else None
    engines = {s.get("engine", "") for s in samples}
    return VllmServer(
        labels={k: v for k, v in samples[0].items() if k != "engine"},
        engines=len(engines),
        version=release,
        model=model,
        max_model_len=length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None,
    )


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _label_number(labels: Mapping[str, str], key: str) -> float | None:
    """A numeric label ('2340', '0.9', '4294967296.0'); None when absent or 'None'."""
    value = labels.get(key)
    if value is None or value.strip() in ABSENT:
        return None
    try:
        return float(value)
    except ValueError:
        raise UsageError(f"cache_config_info label {key}={value[:40]!r} is not a number") from None


def _label_int(labels: Mapping[str, str], key: str) -> int | None:
    """A whole-number label; None when absent."""
    number = _label_number(labels, key)
    if number is None:
        return None
    if not math.isfinite(number) or number < 0 or not number.is_integer():
        raise UsageError(f"cache_config_info label {key}={labels[key][:40]!r} is not a whole number")
    return int(number)


def _label_float(labels: Mapping[str, str], key: str) -> float | None:
    number = _label_number(labels, key)
    return number if number is not None and math.isfinite(number) else None


def check_vllm_server(server: VllmServer, dep: Deployment) -> LogCheck:
    """Each figure the server serves that kvsize can predict. The pool figures (tokens, concurrency, CPU blocks)
    are predicted from the served blocks' memory; the GPU blocks from kvsize's budget for the card (--gpu), or
    from `kv_cache_memory_bytes` when the server was given one."""
    from kvsize.budget import BudgetSettings, kv_budget
    from kvsize.engines.base import pipeline_stages
    from kvsize.engines.vllm import VllmEngine

    lab = server.labels
    release = vllm_log_release(server.version)  # older than the oldest era read: refused (exit 2)
    out = LogCheck(engine="vllm", engine_version=server.version, model=server.model)
    if server.version is None:
        out.notes.append(
            "the server names no release (/version): sized with the rules of the newest release kvsize has read "
            "(pass --engine-version)"
        )
    blocks = _label_int(lab, "num_gpu_blocks")
    if not blocks:
        raise UsageError(
            "the server reports no num_gpu_blocks yet", hint="Probe it again once the engine has finished starting."
        )
    if server.engines > 1:
        out.notes.append(f"{server.engines} data-parallel engines: their summed num_gpu_blocks divided among them")
        blocks //= server.engines
    spec = dep.spec
    if spec is None:
        raise UsageError(
            f"kvsize cannot find the served model '{server.model or '?'}'", hint="Pass --config with its config.json."
        )
    length = dep.max_model_len or server.max_model_len
    if length is None:
        raise UsageError("the server gives no max_model_len (/v1/models)", hint="Pass --max-model-len.")
    tp, pp = dep.tp or 1, dep.pp or 1
    if dep.tp is None:
        out.notes.append("the server does not say its tensor-parallel size: tp 1 assumed (pass --tp)")
    dtype = _kv_dtype(dep.kv_dtype or lab.get("cache_dtype"), spec)
    served_bs = _label_int(lab, "block_size")
    own = VllmEngine(release)
    own_bs = own.block_size(spec, dtype, tp)
    engine = own
    if served_bs is not None and served_bs != own_bs:
        chosen = lab.get("user_specified_block_size") == "True" or (
            "user_specified_block_size" not in lab and own_bs == own.default_block(mla=own._mla(spec))
        )
        if chosen:  # the user's --block-size (a plain attention model's block is theirs to choose)
            out.notes.append(f"block size {served_bs} as the server was started with (--block-size)")
            engine = VllmEngine(release, block_size=served_bs)
        else:
            out.figures.append(Figure("block size", served_bs, own_bs, "tokens", "the model's layers"))
    elif served_bs is not None:
        out.figures.append(Figure("block size", served_bs, own_bs, "tokens", "the model's layers"))
    stages = pipeline_stages(spec.num_layers, pp)
    stage_layers = [spec.layers] if len(stages) == 1 else [[spec.layers[i] for i in s] for s in stages]
    per_block = max(engine.layout(spec, layers, length, dtype, tp, pp).bytes_per_block for layers in stage_layers)
    if per_block <= 0:
        raise UsageError("kvsize finds no paged KV cache in this model for vLLM (attention-free?)")
    served_kv = blocks * per_block  # the worker whose blocks are largest sets the count (min over workers)
    basis = "the served blocks' memory"

    given = _label_int(lab, "kv_cache_memory_bytes")  # --kv-cache-memory-bytes (0.10.2+): the pool, as given
    budget_bytes: int | None = None
    if given is not None:
        budget_bytes, budget_basis = given, "kv_cache_memory_bytes"
    elif dep.memory_bytes is not None:
        cal = dep.calibration
        weights = cal.weights_per_rank_bytes if cal is not None else None
        if weights is None and dep.weights_bytes is not None:
            weights = busiest_rank_weights(dep, tp, pp)
        if weights is None:
            out.notes.append("GPU blocks not predicted: kvsize does not know the weights (pass --weights-mem)")
        else:
            settings = BudgetSettings(gpu_util=dep.gpu_util or _label_float(lab, "gpu_memory_utilization"))
            if cal is not None:  # the measured overheads where the settings leave them to the model
                settings = cal.budget_settings(settings)
            budget = kv_budget(
                "vllm",
                release,
                spec,
                memory_bytes=dep.memory_bytes,
                weights_bytes=weights,
                tp=tp,
                pp=pp,
                settings=settings,
                device=dep.device,
            )
            budget_bytes, budget_basis = budget.kv_budget_bytes, "the card"
    else:
        out.notes.append("GPU blocks not predicted from a budget: give --gpu (the card the server runs on)")
    if budget_bytes is not None:
        out.figures.append(Figure("KV memory", served_kv / GIB, budget_bytes / GIB, "GiB", budget_basis))
        predicted = engine.pool(
            spec, available_bytes=budget_bytes, max_model_len=length, kv_dtype=dtype, tp=tp, pp=pp
        ).num_blocks
        out.figures.append(Figure("GPU blocks", blocks, predicted, "blocks", budget_basis))
    pool = engine.pool(spec, available_bytes=served_kv, max_model_len=length, kv_dtype=dtype, tp=tp, pp=pp)
    tokens = _label_int(lab, "kv_cache_size_tokens")
    if tokens is not None:
        out.figures.append(Figure("pool tokens", tokens, pool.kv_pool_tokens, "tokens", basis))
    concurrency = _label_float(lab, "kv_cache_max_concurrency")
    if concurrency is not None:
        out.figures.append(Figure("max concurrency", round(concurrency, 2), round(pool.concurrency, 2), "x", basis))
    swap, cpu_blocks = _label_int(lab, "swap_space_bytes"), _label_int(lab, "num_cpu_blocks")
    if swap and cpu_blocks:  # V0: int(swap_space_bytes // cache_block_size); V1 serves 0 or None
        out.figures.append(Figure("CPU blocks", cpu_blocks, swap // per_block, "blocks", "swap_space_bytes"))
    return out


def vllm_calibration(server: VllmServer, dep: Deployment, check: LogCheck, *, source: str) -> Calibration:
    """What a running vLLM server measured of its budget: the card's share, ceil(CUDA-visible x utilisation),
    minus the weights minus the served blocks' memory is the activation peak + non-torch + CUDA graphs together
    (v1/worker/gpu_worker.py determine_available_memory). The served blocks round the pool down by less than a
    block, so the figure is at most one block's bytes above the true sum, and applied to this deployment it
    predicts the served block count exactly. A server given --kv-cache-memory-bytes measured nothing of it."""
    from kvsize.budget import BudgetSettings, kv_budget

    missing = [
        what
        for what, value in (
            ("card (--gpu)", dep.gpu_id),
            ("model (--config)", dep.model_id),
            ("release (--engine-version)", server.version),
            ("tensor-parallel size (--tp)", dep.tp),
        )
        if value is None
    ]
    if missing:
        raise UsageError(
            f"a calibration must name the deployment it measured; the server does not say its {', '.join(missing)}",
            hint="Pass them as the server was started.",
        )
    if _label_int(server.labels, "kv_cache_memory_bytes") is not None:
        raise UsageError(
            "the server was given --kv-cache-memory-bytes: its pool was set, not measured, so it holds no overhead",
            hint="Calibrate from a server started with --gpu-memory-utilization, or from its start-up log.",
        )
    served = served_kv_bytes(check)
    tp, pp = dep.tp or 1, dep.pp or 1
    weights = busiest_rank_weights(dep, tp, pp) if dep.weights_bytes is not None else None
    if served is None or weights is None or dep.memory_bytes is None or dep.spec is None:
        raise UsageError(
            "the served pool could not be set against the card's budget", hint="Pass --gpu and --weights-mem."
        )
    share = kv_budget(
        "vllm",
        vllm_log_release(server.version),
        dep.spec,
        memory_bytes=dep.memory_bytes,
        weights_bytes=weights,
        tp=tp,
        pp=pp,
        settings=BudgetSettings(
            gpu_util=dep.gpu_util or _label_float(server.labels, "gpu_memory_utilization"),
            activation_bytes=0,
            non_torch_bytes=0,
            cuda_graph_bytes=0,
            rope_table_bytes=0,  # the overhead holds them: the calibration's weights come without them
        ),
        device=dep.device,
    ).kv_budget_bytes  # the share minus the weights alone
    overhead = share - served
    if overhead < 0:
        raise UsageError(
            f"the server's blocks hold {served - share:,} B more than the card's share minus the weights: it does not "
            "run on this card with these weights",
            hint="Check --gpu, --weights-mem and --tp against the running server.",
        )
    return Calibration(
        model=dep.model_id,
        gpu=dep.gpu_id,
        engine="vllm",
        engine_version=server.version,
        tp=tp,
        pp=pp,
        weights_per_rank_bytes=weights,
        overhead_bytes=overhead,
        source=f"{source} (/metrics num_gpu_blocks; weights: kvsize's figure)",
    )


def served_kv_bytes(check: LogCheck) -> int | None:
    """The KV memory per GPU the served blocks hold, when the check computed it."""
    kv = next((f for f in check.figures if f.name == "KV memory"), None)
    return round(kv.logged * GIB) if kv is not None else None


# --- SGLang -----------------------------------------------------------------------------------------------


def sglang_log(info: Mapping[str, Any], model_override: str | None = None) -> EngineLog:
    """SGLang's /server_info as the start-up log it mirrors: the same settings and figures, so check_log applies."""
    states = info.get("internal_states")
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], Mapping) else {}
    found = state.get("memory_usage")
    usage: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    figures: dict[str, float] = {}
    tokens = info.get("max_total_num_tokens", usage.get("token_capacity"))
    if _number(tokens):
        figures["pool_tokens"] = float(tokens)
    if _number(usage.get("kvcache")):
        figures["kv_size_gb"] = float(usage["kvcache"])
    if _number(usage.get("weight")):
        figures["weights_gb"] = float(usage["weight"])
    settings = {
        k: info[k]
        for k in ("tp_size", "pp_size", "mem_fraction_static", "page_size", "kv_cache_dtype", "context_length")
        if info.get(k) is not None
    }
    return EngineLog(
        engine="sglang",
        engine_version=_text(info.get("version")),
        model=model_override or _text(info.get("model_path")),
        settings=settings,
        figures=figures,
    )


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def check_sglang_server(info: Mapping[str, Any], dep: Deployment) -> LogCheck:
    return check_log(sglang_log(info), dep)


def sglang_calibration(
    info: Mapping[str, Any], *, model: str, gpu: str, source: str, tp: int | None = None
) -> Calibration | None:
    """The one overhead SGLang's server measured: the weights per rank (memory_usage.weight, GB)."""
    log = sglang_log(info)
    if "weights_gb" not in log.figures or log.engine_version is None:
        return None
    return Calibration(
        model=model,
        gpu=gpu,
        engine="sglang",
        engine_version=log.engine_version,
        tp=tp or int(log.settings.get("tp_size") or 1),
        pp=int(log.settings.get("pp_size") or 1),
        weights_per_rank_bytes=round(log.figures["weights_gb"] * GIB),
        source=source,
    )
