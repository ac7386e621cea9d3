"""`kvsize MODEL ...` (the `size` command, the default): size the KV cache over a grid, optionally on a card."""

from __future__ import annotations

import typer

from kvsize.cli.options import (
    AllocationOpt,
    BatchedTokensOpt,
    BatchOpt,
    BlockSizeOpt,
    CalibrationOpt,
    CpuMemOpt,
    CtxOpt,
    DebugOpt,
    DeviceOpt,
    DiskBandwidthOpt,
    DiskOpt,
    EncoderLenOpt,
    EngineOpt,
    EngineVersionOpt,
    ExplainOpt,
    FlashAttnOpt,
    GpuMemOpt,
    GpuOpt,
    GpuUtilOpt,
    HfOverridesOpt,
    JsonOpt,
    KvBudgetTokensOpt,
    KvDtypeOpt,
    KvMemoryOpt,
    KvUnifiedOpt,
    LayersOpt,
    LinkOpt,
    LlamaBatchSizeOpt,
    MaxNumSeqsOpt,
    ModelArg,
    OutputLenOpt,
    PlotOpt,
    PpOpt,
    PrefixCachingOpt,
    PrefixLenOpt,
    PromptLenOpt,
    ReportOpt,
    ReserveOpt,
    RevisionOpt,
    SkipLayersOpt,
    ToleranceOpt,
    TpOpt,
    TrustRemoteCodeOpt,
    UbatchSizeOpt,
    VerifyOpt,
    WeightsDtypeOpt,
    WeightsOpt,
    WeightsPerGpuOpt,
    WorkloadOpt,
    emit,
    render_estimate,
    serving_kwargs,
    split_list,
    stderr_line,
    user_errors,
)
from kvsize.errors import ExitCode


def size(
    context: typer.Context,
    model: ModelArg,
    revision: RevisionOpt = None,
    ctx: CtxOpt = None,
    batch: BatchOpt = "1",
    kv_dtype: KvDtypeOpt = "auto",
    engine: EngineOpt = "vllm",
    engine_version: EngineVersionOpt = None,
    hf_overrides: HfOverridesOpt = None,
    tp: TpOpt = "1",
    pp: PpOpt = "1",
    block_size: BlockSizeOpt = None,
    max_num_batched_tokens: BatchedTokensOpt = None,
    kv_unified: KvUnifiedOpt = False,
    ubatch_size: UbatchSizeOpt = None,
    batch_size: LlamaBatchSizeOpt = None,
    flash_attn: FlashAttnOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    kv_cache_dtype_skip_layers: SkipLayersOpt = None,
    gpu: GpuOpt = None,
    gpu_mem: GpuMemOpt = None,
    gpu_util: GpuUtilOpt = None,
    kv_memory: KvMemoryOpt = None,
    reserve: ReserveOpt = None,
    weights_mem: WeightsOpt = None,
    weights_dtype: WeightsDtypeOpt = None,
    cpu_mem: CpuMemOpt = None,
    link_bandwidth: LinkOpt = None,
    prefix_len: PrefixLenOpt = None,
    enable_prefix_caching: PrefixCachingOpt = None,
    prompt_len: PromptLenOpt = None,
    output_len: OutputLenOpt = None,
    workload: WorkloadOpt = None,
    kv_budget_tokens: KvBudgetTokensOpt = None,
    allocation: AllocationOpt = "paged",
    disk: DiskOpt = None,
    disk_bandwidth: DiskBandwidthOpt = None,
    plot: PlotOpt = None,
    encoder_len: EncoderLenOpt = None,
    json_output: JsonOpt = False,
    explain: ExplainOpt = False,
    debug: DebugOpt = False,
    verify: VerifyOpt = False,
    device: DeviceOpt = None,
    layers: LayersOpt = None,
    tolerance: ToleranceOpt = None,
    report: ReportOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
    calibration: CalibrationOpt = None,
    weights_mem_per_gpu: WeightsPerGpuOpt = None,
) -> None:
    """Size the KV cache of MODEL over a grid of contexts, batch sizes and dtypes (the default command).

    With --gpu: does each scenario fit one card, and what would make it fit; exit 1 when one does not fit.
    """
    if verify or any(v is not None for v in (device, layers, tolerance, report)) or trust_remote_code:
        from kvsize.cli.verify import size_verify

        if verify:  # say what is compared instead of silently dropping the sizing flags
            unused = [
                flag
                for flag, value in (
                    ("--gpu", gpu),
                    ("--gpu-mem", gpu_mem),
                    ("--gpu-util", gpu_util),
                    ("--kv-memory", kv_memory),
                    ("--reserve", reserve),
                    ("--weights-mem", weights_mem),
                    ("--weights-dtype", weights_dtype),
                    ("--cpu-mem", cpu_mem),
                    ("--plot", plot),
                )
                if value is not None
            ]
            if tp != "1" or pp != "1":
                unused.append("--tp/--pp")
            engine_name = engine.strip().lower()
            # click's ParameterSource, read by name (typer vendors click): DEFAULT means --engine was not given
            engine_given = getattr(context.get_parameter_source("engine"), "name", "DEFAULT") != "DEFAULT"
            if unused or (engine_given and engine_name != "hf"):  # only when a flag the user gave is not measured
                stderr_line(
                    "note: --verify compares the cache transformers holds with kvsize's --engine hf prediction"
                    + (
                        f"; the {engine_name} rule is not what is measured"
                        if engine_given and engine_name != "hf"
                        else ""
                    )
                    + (
                        f"; {', '.join(unused)} "
                        + ("does" if len(unused) == 1 and "/" not in unused[0] else "do")
                        + " not apply to it"
                        if unused
                        else ""
                    )
                    + "."
                )

        size_verify(
            model,
            verify=verify,
            ctx=ctx,
            batch=batch,
            kv_dtype=kv_dtype,
            engine_version=engine_version,
            device=device,
            layers=layers,
            tolerance=tolerance,
            report=report,
            trust_remote_code=trust_remote_code,
            encoder_len=encoder_len,
            revision=revision,
            json_output=json_output,
            debug=debug,
        )
        return
    with user_errors(debug):
        from kvsize.api import estimate_loaded
        from kvsize.deployment import from_options
        from kvsize.resolve import load_model_config

        # Every value through the capacity file's model (one validator, errors naming the option).
        settings = from_options(
            tp=tp,
            pp=pp,
            block_size=block_size,
            max_batched_tokens=max_num_batched_tokens,
            gpu_mem=gpu_mem,
            reserve=reserve,
            weights_mem=weights_mem,
            weights_mem_per_gpu=weights_mem_per_gpu,
            gpu_util=gpu_util,
            kv_memory=kv_memory,
            cpu_mem=cpu_mem,
            link_bandwidth=link_bandwidth,
            encoder_len=encoder_len,
            revision=revision,
            ubatch_size=ubatch_size,
            batch_size=batch_size,
            max_num_seqs=max_num_seqs,
        )
        loaded = load_model_config(model, revision=settings.revision)
        options = settings.estimate_options(
            kv_unified=kv_unified or None,
            flash_attn=flash_attn,
            enable_prefix_caching=enable_prefix_caching,
            kv_cache_dtype_skip_layers=kv_cache_dtype_skip_layers,
        )
        if calibration is not None:  # measured overheads from `kvsize log --save-calibration`
            from kvsize.calibration import apply_calibration, calibration_target, model_weights, read_calibration

            target = calibration_target(
                loaded.model,
                gpu=gpu,
                engine=split_list(engine),
                engine_version=engine_version,
                tp=settings.tp,
                pp=settings.pp,
                weights_bytes=model_weights(loaded, weights_dtype),
            )
            options = apply_calibration(options, read_calibration(calibration), target=target, source=calibration)
        result = estimate_loaded(
            loaded,
            ctx=split_list(ctx) if ctx is not None else None,
            batch=split_list(batch),
            kv_dtype=split_list(kv_dtype),
            engine=split_list(engine),
            **serving_kwargs(
                prefix_len=prefix_len,
                enable_prefix_caching=enable_prefix_caching,
                prompt_len=prompt_len,
                output_len=output_len,
                workload=workload,
                kv_budget_tokens=kv_budget_tokens,
                allocation=allocation,
                disk=disk,
                disk_bandwidth=disk_bandwidth,
            ),
            engine_version=engine_version,
            gpu=gpu,
            weights_dtype=weights_dtype,
            hf_overrides=hf_overrides,
            **options,
            with_advice=True,
        )
        if calibration is not None:
            from kvsize.calibration import calibrated_advice

            result = calibrated_advice(result)
        from kvsize.record import to_json  # not kvsize.report: a JSON run imports no rich

        if plot:
            from kvsize.config import parse_config
            from kvsize.plot import write_plot

            write_plot(result, plot, spec=parse_config(loaded.raw, source=loaded.location))
    emit(
        lambda console: render_estimate(console, result, explain=explain),
        lambda: to_json(result),
        json_output,
    )
    verdicts = [s.gpu.fits for s in result.scenarios if s.gpu is not None]
    # The answer is "no" (printed above, then exit 1) when a scenario the user asked for does not fit. Without
    # --ctx the contexts are kvsize's own grid, so the question was "does it fit at all": no only if none fits.
    if verdicts and (not all(verdicts) if ctx is not None else not any(verdicts)):
        raise typer.Exit(int(ExitCode.CHECK_FAILED))
