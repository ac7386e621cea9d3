"""`kvsize MODEL ...` (the `size` command, the default): size the KV cache over a grid, optionally on a card."""

from __future__ import annotations

from typing import Any

import typer

from kvsize.cli.options import (
    AllocationOpt,
    AssumeStandardOpt,
    BatchedTokensOpt,
    BatchOpt,
    BenchResultOpt,
    BlockSizeOpt,
    CalibrationOpt,
    CpuMemOpt,
    CtxOpt,
    DebugOpt,
    DeviceOpt,
    DiskBandwidthOpt,
    DiskOpt,
    EmitOpt,
    EncoderLenOpt,
    EnforceEagerOpt,
    EngineOpt,
    EngineVersionOpt,
    ExpertParallelOpt,
    ExplainOpt,
    FlashAttnOpt,
    GpuMemOpt,
    GpuOpt,
    GpuUtilOpt,
    HfOverridesOpt,
    ItlOpt,
    JsonOpt,
    KvBudgetTokensOpt,
    KvDtypeOpt,
    KvMemoryOpt,
    KvUnifiedOpt,
    LanguageModelOnlyOpt,
    LayersOpt,
    LinkOpt,
    LlamaBatchSizeOpt,
    MaxNumSeqsOpt,
    MmLimitsOpt,
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
    ServedDtypeOpt,
    SkipLayersOpt,
    SkipMmProfilingOpt,
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
    make_console,
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
    dtype: ServedDtypeOpt = None,
    engine: EngineOpt = "vllm",
    engine_version: EngineVersionOpt = None,
    hf_overrides: HfOverridesOpt = None,
    assume_standard_attention: AssumeStandardOpt = False,
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
    enforce_eager: EnforceEagerOpt = False,
    language_model_only: LanguageModelOnlyOpt = False,
    limit_mm_per_prompt: MmLimitsOpt = None,
    skip_mm_profiling: SkipMmProfilingOpt = False,
    enable_expert_parallel: ExpertParallelOpt = False,
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
    emit_engine: EmitOpt = None,
    itl: ItlOpt = None,
    bench_result: BenchResultOpt = None,
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
        if emit_engine is not None:  # --emit: one scenario, sized with the engine and the caps it emits
            engine = _emit_scenario(context, emit_engine, engine, ctx, batch, kv_dtype, gpu, gpu_mem)
            max_num_seqs = max_num_seqs or batch  # the running-request cap emitted is the one the budget profiled
        from kvsize.api import estimate_loaded
        from kvsize.deployment import from_options
        from kvsize.resolve import load_model_config

        tp_auto = tp.strip().lower() == "auto"
        if tp_auto:
            _check_tp_auto(gpu, engine)
        # Every value through the capacity file's model (one validator, errors naming the option).
        settings = from_options(
            tp="1" if tp_auto else tp,
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
            enforce_eager=enforce_eager,
            language_model_only=language_model_only,
            enable_expert_parallel=enable_expert_parallel,
            skip_mm_profiling=skip_mm_profiling,
            limit_mm_per_prompt=limit_mm_per_prompt,
        )
        loaded = load_model_config(model, revision=settings.revision)
        tp_note = None
        extra_notes: list[str] = []
        if tp_auto:  # the largest tp the engine splits the model over on this machine's GPUs
            settings, tp_note = _auto_tp(
                loaded, settings, engine, engine_version, hf_overrides, assume_standard_attention
            )
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
            measured = read_calibration(calibration)
            options = apply_calibration(options, measured, target=target, source=calibration)
            if measured.overhead_bytes is not None:
                extra_notes.append(
                    "calibration from a running server (kvsize probe): the activation peak, non-torch and "
                    "CUDA-graph memory were measured as one figure, shown as the activation peak"
                )
        emit_args = {
            "weights_dtype": weights_dtype,
            "hf_overrides": hf_overrides,
            "enable_prefix_caching": enable_prefix_caching,
            "kv_cache_dtype_skip_layers": kv_cache_dtype_skip_layers,
            "options": options,
            "model": model,
            "gpu": gpu,
        }
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
            assume_standard_attention=assume_standard_attention,
            dtype=dtype,
            itl_ms=_itl_ms(itl),
            bench_result=bench_result,
            **options,
            with_advice=True,
        )
        if calibration is not None:
            from kvsize.calibration import calibrated_advice

            result = calibrated_advice(result)
        if tp_note is not None:
            extra_notes.insert(0, tp_note)
        if extra_notes:
            import msgspec

            result = msgspec.structs.replace(result, notes=(*result.notes, *extra_notes))
        from kvsize.record import to_json  # not kvsize.report: a JSON run imports no rich

        if plot:
            from kvsize.config import parse_config
            from kvsize.plot import write_plot

            spec = parse_config(loaded.raw, source=loaded.location, assume_standard_attention=assume_standard_attention)
            write_plot(result, plot, spec=spec)
    if emit_engine is not None:
        _emit_launch(result, loaded, settings, engine_version, emit_args, json_output, explain)
        return
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


def _check_tp_auto(gpu: str | None, engine: str) -> None:
    """--tp auto splits over this machine's GPUs (--gpu auto), under one engine's rules."""
    from kvsize.errors import UsageError
    from kvsize.local_gpu import is_auto

    if not is_auto(gpu):
        raise UsageError("--tp auto needs --gpu auto", hint="It splits over this machine's GPUs; else give --tp N.")
    if len(split_list(engine)) != 1 or engine.strip().lower() == "all":
        raise UsageError("--tp auto takes one --engine", hint="Each engine splits by its own rules; give one.")


def _auto_tp(
    loaded: Any,
    settings: Any,
    engine: str,
    engine_version: str | None,
    hf_overrides: str | None,
    assume_standard_attention: bool,
) -> tuple[Any, str]:
    """The settings with tp = the largest count <= this machine's GPUs (per pipeline stage) that the engine splits
    the model over (kvsize.local_gpu.auto_tp: its own start-up checks), and the note saying so."""
    import msgspec

    from kvsize.config import parse_config
    from kvsize.engines import get_engine
    from kvsize.local_gpu import auto_tp, detect
    from kvsize.overrides import apply_overrides, parse_overrides

    overrides = parse_overrides(hf_overrides)  # the config the run sizes (a head count may be overridden)
    raw = apply_overrides(loaded.raw, overrides) if overrides else loaded.raw
    spec = parse_config(raw, source=loaded.location, assume_standard_attention=assume_standard_attention)
    rules = get_engine(engine.strip().lower(), engine_version)
    count = len(detect().gpus)
    tp = auto_tp(rules, spec, count, settings.pp)
    note = f"--tp auto: tp {tp}, the largest split of {count} GPU{'s' if count != 1 else ''}"
    note += f" over {settings.pp} stages" if settings.pp > 1 else ""
    return msgspec.structs.replace(settings, tp=tp), f"{note} {rules.name} accepts for this model"


def _emit_scenario(
    context: typer.Context,
    emit_engine: str,
    engine: str,
    ctx: str | None,
    batch: str,
    kv_dtype: str,
    gpu: str | None,
    gpu_mem: str | None,
) -> str:
    """--emit's checks: one scenario on a card, sized by the engine emitted (--engine, when given, must be it)."""
    from kvsize.errors import UsageError
    from kvsize.launch import EMIT_ENGINES

    name = emit_engine.strip().lower().replace(".", "").replace("-", "")
    if name not in EMIT_ENGINES:
        raise UsageError(
            f"--emit {emit_engine[:20]}: no launch command for it", hint=f"One of: {', '.join(EMIT_ENGINES)}."
        )
    given = getattr(context.get_parameter_source("engine"), "name", "DEFAULT") != "DEFAULT"
    if given and engine.strip().lower().replace(".", "").replace("-", "") != name:
        raise UsageError(
            f"--emit {name} with --engine {engine[:20]}", hint="Drop --engine: --emit sizes with its engine."
        )
    for option, value in (("--ctx", ctx), ("--batch", batch), ("--kv-dtype", kv_dtype)):
        if value is None or len(split_list(value)) != 1:
            raise UsageError(
                f"--emit needs one {option}", hint=f"Give {option} one value: one command serves one scenario."
            )
    if gpu is None and gpu_mem is None:
        raise UsageError("--emit needs a card", hint="Add --gpu (or --gpu-mem): the command is emitted when it fits.")
    return name


def _emit_launch(
    result: Any,
    loaded: Any,
    settings: Any,
    engine_version: str | None,
    args: dict[str, Any],
    json_output: bool,
    explain: bool,
) -> None:
    """The launch command of the one scenario sized, or, when it does not fit, the answer and its advice (exit 1)."""
    from kvsize.launch import sized_launch
    from kvsize.record import to_json

    scenario = result.scenarios[0]
    fits = scenario.gpu is not None and scenario.gpu.fits
    launch = None
    if fits:
        launch = sized_launch(
            args["model"],
            scenario,
            loaded,
            args["options"],
            gpu=args["gpu"],
            engine_version=engine_version,
            kv_memory_bytes=settings.kv_memory,
            revision=settings.revision,
            weights_dtype=args["weights_dtype"],
            hf_overrides=args["hf_overrides"],
            prefix_caching=args["enable_prefix_caching"],
            kv_cache_dtype_skip_layers=args["kv_cache_dtype_skip_layers"],
        )
    if json_output:
        import json

        from kvsize.text import json_safe

        payload = json.loads(to_json(result))
        payload["launch"] = launch.to_json() if launch is not None else None
        typer.echo(json_safe(json.dumps(payload, indent=2, ensure_ascii=False)))
    elif launch is not None:
        typer.echo(launch.text())
    else:
        render_estimate(make_console(), result, explain=explain)
    if launch is None:
        stderr_line("Not emitted: the scenario does not fit (advice above).")
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _itl_ms(text: str | None) -> float | None:
    """--itl MS: a positive number of milliseconds."""
    if text is None:
        return None
    from kvsize.errors import UsageError

    try:
        value = float(text.strip().removesuffix("ms"))
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e9:  # NaN fails too
        raise UsageError(f"--itl expects a positive number of milliseconds, got '{text}'", hint="For example --itl 50.")
    return value
