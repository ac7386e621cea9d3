"""Serving-time figures of one scenario: kvsize/serving.py's arithmetic applied to an engine, a spec and a fit.

Pure: takes the scenario's estimate and fit and returns updated copies (sharing counted) plus the new figures.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import msgspec

from kvsize.dtypes import KvDtype
from kvsize.engines.base import Engine
from kvsize.engines.formula import FormulaEngine
from kvsize.errors import UsageError
from kvsize.fit import GpuFit, Hardware, OffloadTier, engine_max_context, weights_read_per_step, within_model_context
from kvsize.serving import (
    NO_SERVING,
    PrefixShare,
    ServingSettings,
    affine_life_sum,
    break_even_context,
    life_sum,
    littles_law,
    prefill_flops,
    prefix_share,
    shared_concurrency,
    shared_total,
    tiers,
    workload_figures,
)
from kvsize.sizing import KvEstimate
from kvsize.spec import ArchSpec


def sized_context(ctx: int, settings: ServingSettings) -> int:
    """The context an eviction budget lets a request hold per layer: min(ctx, --kv-budget-tokens)."""
    budget = settings.kv_budget_tokens
    return ctx if budget is None else min(ctx, budget)


def _breakpoints(spec: ArchSpec, settings: ServingSettings) -> set[int]:
    points = set()
    for layer, _ in spec.layer_groups():
        for a in (layer.attention, layer.cross):
            if a is not None and a.window:
                points.update({a.window - 1, a.window, a.window + 1, a.window + 2})
    if settings.kv_budget_tokens:
        points.update({settings.kv_budget_tokens, settings.kv_budget_tokens + 1})
    return points


def _sizer(
    engine: Engine, spec: ArchSpec, kv_dtype: KvDtype, tp: int, pp: int, settings: ServingSettings
) -> Callable[[int], int]:
    """Bytes of one request of t tokens on the most loaded GPU, memoised (a workload asks for many t)."""

    @lru_cache(maxsize=1 << 16)
    def size(t: int) -> int:
        ctx = sized_context(t, settings)
        return engine.estimate(spec, ctx=ctx, batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp).kv_cache_bytes_per_gpu

    return size


def _prefix_share_at(
    engine: Engine, spec: ArchSpec, ctx: int, *, kv_dtype: KvDtype, tp: int, pp: int, settings: ServingSettings
) -> PrefixShare:
    """The shared prefix of `settings` in the engine's blocks, for requests of `ctx` tokens."""
    return prefix_share(
        engine,
        spec,
        prefix_len=settings.prefix_len or 0,
        prompt_len=settings.prompt_len or ctx,
        ctx=sized_context(ctx, settings),
        kv_dtype=kv_dtype,
        tp=tp,
        pp=pp,
        enabled=settings.enable_prefix_caching,
    )


def shared_max_context(
    engine: Engine,
    spec: ArchSpec,
    unshared: int,
    *,
    batch: int,
    budget: int,
    kv_dtype: KvDtype,
    tp: int,
    pp: int,
    settings: ServingSettings,
) -> int | None:
    """The longest ctx whose `batch` requests fit in `budget` when the shared prefix is stored once, counted
    as max reqs counts it: batch x (request - shared) + shared <= budget (kvsize/serving.py shared_total), the
    request and the shared part in the engine's blocks at that ctx (prefix_share). `unshared` is the answer
    without sharing, a lower bound; None: no limit (as one request alone)."""
    from kvsize.fit import max_context

    assert settings.prefix_len is not None

    def total(c: int) -> int:
        request = engine.estimate(spec, ctx=sized_context(c, settings), batch=1, kv_dtype=kv_dtype, tp=tp, pp=pp)
        share = _prefix_share_at(engine, spec, c, kv_dtype=kv_dtype, tp=tp, pp=pp, settings=settings)
        return shared_total(request.kv_cache_bytes_per_gpu, batch, share.shared_bytes_per_gpu)

    alone = max_context(engine, spec, kv_dtype, batch=1, budget=budget, tp=tp, pp=pp)
    if alone is None:
        return None  # sharing only lowers the bytes: no limit either
    low, high = unshared, alone + 1  # low fits (or is the unshared answer), high never does (one request)
    while high - low > 1:  # bytes grow with ctx: a bisection
        mid = (low + high) // 2
        low, high = (mid, high) if total(mid) <= budget else (low, mid)
    return low


def serving_figures(
    engine: Engine,
    spec: ArchSpec,
    est: KvEstimate,
    fit: GpuFit | None,
    *,
    kv_dtype: KvDtype,
    tp: int,
    pp: int,
    hardware: Hardware | None,
    settings: ServingSettings = NO_SERVING,
) -> tuple[KvEstimate, GpuFit | None, PrefixShare | None]:
    """(estimate with the shared prefix counted, fit with the serving figures, the prefix share)."""
    ctx, batch = est.ctx, est.batch
    share = None
    if settings.prefix_len is not None and settings.prefix_len > ctx:
        raise UsageError(f"--prefix-len {settings.prefix_len} exceeds the context {ctx}", hint="Give a shorter prefix.")
    if settings.prefix_len is not None:
        share = _prefix_share_at(engine, spec, ctx, kv_dtype=kv_dtype, tp=tp, pp=pp, settings=settings)
    per_gpu_request = est.kv_cache_bytes_per_gpu // batch
    shared_gpu = share.shared_bytes_per_gpu if share else 0
    if share is not None and share.shared_bytes:
        est = msgspec.structs.replace(
            est,
            kv_cache_bytes=shared_total(est.bytes_per_request, batch, share.shared_bytes),
            kv_cache_bytes_per_gpu=shared_total(per_gpu_request, batch, shared_gpu),
        )
    if fit is None:
        return est, None, share
    hw = hardware or Hardware()
    usable = max(fit.kv_budget_bytes, 0)
    update: dict[str, object] = {}
    if shared_gpu:
        memory_fits = fit.kv_budget_bytes >= 0 and est.kv_cache_bytes_per_gpu <= fit.kv_budget_bytes
        refused = fit.context_limit is not None and fit.context_limit.refuses
        update.update(memory_fits=memory_fits, fits=memory_fits and not refused)
        held = shared_concurrency(usable, per_gpu_request, shared_gpu)
        cap = getattr(fit, "concurrency_cap", None)  # the engine's running-request cap, where fit models one
        update["max_concurrency"] = min(held, cap) if isinstance(cap, int) else held
        update["max_concurrency_by_memory"] = held
        update["cap_binds"] = isinstance(cap, int) and cap < held
        if fit.max_context_by_memory is not None:  # the longest context, the prefix stored once as above
            by_memory = shared_max_context(
                engine,
                spec,
                fit.max_context_by_memory,
                batch=batch,
                budget=usable,
                kv_dtype=kv_dtype,
                tp=tp,
                pp=pp,
                settings=settings,
            )
            update["max_context_by_memory"] = by_memory
            update["max_context"] = within_model_context(by_memory, engine_max_context(engine, spec))
        if fit.concurrency is not None:
            update["concurrency"] = (usable - shared_gpu) / max(per_gpu_request - shared_gpu, 1)
    prompt = settings.prompt_len or ctx
    flops = (hw.bf16_flops or 0) * tp
    can_prefill = bool(flops and hw.active_parameters)

    def prefill_seconds(tokens: int, cached: int = 0) -> float:
        assert hw.active_parameters is not None
        work = prefill_flops(
            active_parameters=hw.active_parameters,
            num_layers=hw.num_layers,
            attention_width=hw.attention_width,
            tokens=tokens,
            cached=cached,
        )
        return work / flops

    if share is not None and share.hit_tokens and can_prefill:
        update["prefill_saved_seconds"] = prefill_seconds(prompt) - prefill_seconds(prompt, share.hit_tokens)

    requests = settings.requests()
    if requests is not None:
        size = _sizer(engine, spec, kv_dtype, tp, pp, settings)
        formula = FormulaEngine()
        real = _sizer(formula, spec, kv_dtype, tp, pp, settings)
        block = engine.residency_granularity(spec, kv_dtype, tp)
        points = _breakpoints(spec, settings)

        def life(p: int, o: int) -> int:
            return life_sum(size, p, o, block) if block > 1 else affine_life_sum(size, p, o, points)

        allocation = "contiguous" if engine.reserves_context_up_front else settings.allocation
        work = workload_figures(
            requests,
            size=size,
            life=life,
            token_state_life=lambda p, o: affine_life_sum(real, p, o, points),
            ctx=ctx,
            budget=usable,
            shared=shared_gpu,
            allocation=allocation,
        )
        update["workload"] = work
        update["steady_state_concurrency"] = work.steady_state_concurrency
        if hw.bandwidth_bytes_per_s:
            mean_p = sum(r.prompt for r in requests) / len(requests)
            mean_o = sum(r.output for r in requests) / len(requests)
            hit = share.hit_tokens if share else 0
            prefill = prefill_seconds(round(mean_p), min(hit, round(mean_p))) if can_prefill else 0.0
            cap = getattr(fit, "concurrency_cap", None)
            conc = min(work.steady_state_concurrency, cap) if isinstance(cap, int) else work.steady_state_concurrency
            update["throughput"] = littles_law(
                concurrency=conc,
                weights_bytes=weights_read_per_step(fit.weights_bytes, hw),
                kv_bytes=min(conc * work.mean_resident_bytes, usable),
                bandwidth=hw.bandwidth_bytes_per_s,
                output=round(mean_o),
                prefill_seconds=prefill,
            )
    if fit.offload is not None:
        update["offload"] = _offload(fit.offload, est, hw, settings, prefill_seconds if can_prefill else None, ctx)
    return est, msgspec.structs.replace(fit, **update) if update else fit, share


def _offload(
    off: OffloadTier,
    est: KvEstimate,
    hw: Hardware,
    settings: ServingSettings,
    prefill: Callable[[int], float] | None,
    ctx: int,
) -> OffloadTier:
    gpus = est.tp * est.pp
    per_gpu_request = est.kv_cache_bytes_per_gpu // est.batch
    cpu_speed = off.link_bytes_per_s
    if settings.cpu_bytes_per_s:
        cpu_speed = min(cpu_speed, settings.cpu_bytes_per_s)
    found = tiers(
        cpu_bytes=off.memory_bytes,
        disk_bytes=settings.disk_bytes,
        link_bytes_per_s=cpu_speed,
        disk_bytes_per_s=settings.disk_bytes_per_s,
        bytes_per_token=est.kv_bytes_per_token,
        request_bytes_per_gpu=per_gpu_request,
    )
    update: dict[str, object] = {"tiers": tuple(found)}
    if prefill is not None and hw.active_parameters and hw.bf16_flops:
        active, flops = hw.active_parameters, hw.bf16_flops * est.tp

        def even(speed: int) -> int | None:
            return break_even_context(
                bytes_per_token_per_gpu=-(-est.kv_bytes_per_token // gpus),
                link_bytes_per_s=speed,
                active_parameters=active,
                num_layers=hw.num_layers,
                attention_width=hw.attention_width,
                flops_per_s=flops,
            )

        update["tiers"] = tuple(msgspec.structs.replace(t, break_even_context=even(t.link_bytes_per_s)) for t in found)
        update["recompute_seconds_per_request"] = prefill(ctx)
        update["break_even_context"] = even(cpu_speed)
    return msgspec.structs.replace(off, **update)
