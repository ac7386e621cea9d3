"""`kvsize plan`: which GPUs, how many, and at what cost, to serve C requests of N tokens."""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil
from typing import TYPE_CHECKING

from kvsize.errors import KvsizeError
from kvsize.record import Record
from kvsize.resolve import LoadedConfig

if TYPE_CHECKING:
    from kvsize.calibration import Calibration

TP_CHOICES = (1, 2, 4, 8)  # one node's worth of tensor parallelism


class GpuPlan(Record, frozen=True, kw_only=True):
    """The cheapest layout of one GPU kind that serves the load."""

    gpu: str
    gpus: int | None
    """GPUs in all (tp x pp x replicas); None when no layout of up to 8-way tensor parallelism loads the model."""
    tp: int | None
    replicas: int | None
    concurrency_per_replica: int | None
    usd_per_hour: float | None
    """gpus x the lowest listed on-demand price of the profile (dated in the profile); None without a price."""
    reason: str


def plan_gpus(
    loaded: LoadedConfig,
    *,
    ctx: int,
    concurrency: int,
    engine: str = "vllm",
    engine_version: str | None = None,
    kv_dtype: str = "auto",
    gpus: Sequence[str] | None = None,
    calibration: Calibration | None = None,
) -> list[GpuPlan]:
    """For each GPU profile, the fewest GPUs (over tp in 1, 2, 4, 8 and data-parallel replicas) serving
    `concurrency` requests of `ctx` tokens; ranked by GPUs, then by cost. Default: the data-centre profiles.
    A `calibration` (kvsize log --save-calibration) replaces the modelled overheads and weights on the one layout
    it was measured on (model, card, engine, release, tp x pp); every other layout is modelled. One that applies
    to no layout ranked is bad input (UsageError naming the difference)."""
    from kvsize.api import estimate_loaded
    from kvsize.budget import BudgetSettings
    from kvsize.profiles import load_profiles

    profiles = load_profiles()
    names = list(gpus) if gpus else sorted(p.id for p in profiles.values() if p.segment == "datacenter")

    from kvsize.calibration import model_weights

    own_weights = model_weights(loaded) if calibration is not None else None

    def calibrated(gpu: str, tp: int) -> bool:
        """The calibration was measured on this layout (model, card, engine, release, tp, pp = 1)."""
        from kvsize.calibration import calibration_mismatches, calibration_target

        assert calibration is not None
        target = calibration_target(
            loaded.model, gpu=gpu, engine=engine, engine_version=engine_version, tp=tp, weights_bytes=own_weights
        )
        return not calibration_mismatches(calibration, target)

    if calibration is not None and not any(calibrated(n, tp) for n in names for tp in TP_CHOICES):
        from kvsize.calibration import calibration_target, require_match

        # It applies to no layout ranked here: say how it differs from the first one of its card (or the first).
        card = calibration.gpu if calibration.gpu in names else names[0] if names else None
        tp = calibration.tp if calibration.tp in TP_CHOICES else 1
        require_match(
            calibration,
            calibration_target(
                loaded.model, gpu=card, engine=engine, engine_version=engine_version, tp=tp, weights_bytes=own_weights
            ),
            source="(--calibration)",
        )
    plans = []
    for name in names:
        profile = profiles.get(name)
        best: GpuPlan | None = None
        reason = "the weights do not fit with up to 8-way tensor parallelism"
        for tp in TP_CHOICES:
            try:
                measured = calibration if calibration is not None and calibrated(name, tp) else None
                result = estimate_loaded(
                    loaded,
                    ctx=[ctx],
                    batch=[1],
                    kv_dtype=kv_dtype,
                    engine=engine,
                    engine_version=engine_version,
                    tp=tp,
                    gpu=name,
                    with_max_context=False,
                    budget=measured.budget_settings(BudgetSettings()) if measured else None,
                    weights_bytes=measured.whole_weights_bytes() if measured else None,
                )
            except KvsizeError as exc:  # e.g. tp not dividing the KV heads in this engine
                reason = " ".join(str(exc).split())
                continue
            fit = result.scenarios[0].gpu
            assert fit is not None
            limit = fit.context_limit
            if limit is not None and limit.refuses:  # the engine does not serve ctx for this model on any card
                reason = f"{limit.reason} ({limit.source})" + (
                    f"; {limit.override} overrides it" if limit.override else ""
                )
                break
            served = min(fit.max_concurrency, fit.concurrency_cap or fit.max_concurrency)  # the engine's cap binds
            if served < 1:
                continue
            replicas = ceil(concurrency / served)
            total = replicas * tp
            if best is None or total < (best.gpus or 0):
                prices = [
                    p.usd_per_hour
                    for p in (profile.price_usd_per_hour if profile else [])
                    if p.usd_per_hour is not None
                ]
                best = GpuPlan(
                    gpu=name,
                    gpus=total,
                    tp=tp,
                    replicas=replicas,
                    concurrency_per_replica=served,
                    usd_per_hour=round(min(prices) * total, 2) if prices else None,
                    reason=f"{replicas} x tp{tp}, {served} request{'s' if served != 1 else ''} each"
                    + (", calibrated" if measured is not None else ""),
                )
        plans.append(
            best
            or GpuPlan(
                gpu=name,
                gpus=None,
                tp=None,
                replicas=None,
                concurrency_per_replica=None,
                usd_per_hour=None,
                reason=reason,
            )
        )
    return sorted(plans, key=lambda p: (p.gpus is None, p.gpus or 0, p.usd_per_hour is None, p.usd_per_hour or 0))
