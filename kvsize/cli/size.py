"""`kvsize MODEL ...` (the `size` command, the default): size the KV cache over a grid, optionally on a card."""

from __future__ import annotations

from kvsize.cli.options import (
    BatchedTokensOpt,
    BatchOpt,
    BlockSizeOpt,
    CpuMemOpt,
    CtxOpt,
    DebugOpt,
    DeviceOpt,
    EncoderLenOpt,
    EngineOpt,
    EngineVersionOpt,
    GpuMemOpt,
    GpuOpt,
    GpuUtilOpt,
    JsonOpt,
    KvDtypeOpt,
    KvMemoryOpt,
    LayersOpt,
    LinkOpt,
    ModelArg,
    PlotOpt,
    PpOpt,
    ReportOpt,
    ReserveOpt,
    RevisionOpt,
    ToleranceOpt,
    TpOpt,
    TrustRemoteCodeOpt,
    VerifyOpt,
    WeightsDtypeOpt,
    WeightsOpt,
    emit,
    render_estimate,
    split_list,
    user_errors,
)


def size(
    model: ModelArg,
    ctx: CtxOpt = None,
    batch: BatchOpt = "1",
    kv_dtype: KvDtypeOpt = "auto",
    engine: EngineOpt = "vllm",
    engine_version: EngineVersionOpt = None,
    tp: TpOpt = "1",
    pp: PpOpt = "1",
    block_size: BlockSizeOpt = None,
    max_num_batched_tokens: BatchedTokensOpt = None,
    gpu: GpuOpt = None,
    gpu_mem: GpuMemOpt = None,
    gpu_util: GpuUtilOpt = None,
    kv_memory: KvMemoryOpt = None,
    reserve: ReserveOpt = None,
    weights_mem: WeightsOpt = None,
    weights_dtype: WeightsDtypeOpt = None,
    cpu_mem: CpuMemOpt = None,
    link_bandwidth: LinkOpt = None,
    plot: PlotOpt = None,
    encoder_len: EncoderLenOpt = None,
    revision: RevisionOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
    verify: VerifyOpt = False,
    device: DeviceOpt = None,
    layers: LayersOpt = None,
    tolerance: ToleranceOpt = None,
    report: ReportOpt = None,
    trust_remote_code: TrustRemoteCodeOpt = False,
) -> None:
    """Size the KV cache of MODEL over a grid of contexts, batch sizes and dtypes (the default command)."""
    if verify or any(v is not None for v in (device, layers, tolerance, report)) or trust_remote_code:
        from kvsize.cli.verify import size_verify

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
        from kvsize.api import estimate_loaded, offload_settings
        from kvsize.budget import BudgetSettings
        from kvsize.deployment import from_options
        from kvsize.resolve import load_model_config
        from kvsize.units import parse_count, parse_fraction, parse_size

        # Every value through the capacity file's model first (one validator, errors naming the option); the
        # parse_* calls below are the same parsers, reading values already known to be good.
        settings = from_options(
            tp=tp,
            pp=pp,
            block_size=block_size,
            max_batched_tokens=max_num_batched_tokens,
            gpu_mem=gpu_mem,
            reserve=reserve,
            weights_mem=weights_mem,
            gpu_util=gpu_util,
            kv_memory=kv_memory,
            cpu_mem=cpu_mem,
            link_bandwidth=link_bandwidth,
            encoder_len=encoder_len,
            revision=revision,
        )
        loaded = load_model_config(model, revision=revision)
        result = estimate_loaded(
            loaded,
            ctx=split_list(ctx) if ctx is not None else None,
            batch=split_list(batch),
            kv_dtype=split_list(kv_dtype),
            engine=split_list(engine),
            engine_version=engine_version,
            tp=parse_count(tp, "tensor-parallel size"),
            pp=parse_count(pp, "pipeline-parallel size"),
            engine_options={
                "block_size": parse_count(block_size, "block size") if block_size is not None else None,
                "max_num_batched_tokens": (
                    parse_count(max_num_batched_tokens, "batched-token budget")
                    if max_num_batched_tokens is not None
                    else None
                ),
            },
            gpu=gpu,
            gpu_mem=parse_size(gpu_mem) if gpu_mem is not None else None,
            reserve_bytes=parse_size(reserve, allow_zero=True) if reserve is not None else None,
            weights_bytes=parse_size(weights_mem) if weights_mem is not None else None,
            weights_dtype=weights_dtype,
            encoder_len=settings.encoder_len,
            budget=BudgetSettings(
                gpu_util=parse_fraction(gpu_util, "--gpu-util") if gpu_util is not None else None,
                kv_memory_bytes=parse_size(kv_memory) if kv_memory is not None else None,
            ),
            offload=offload_settings(cpu_mem, link_bandwidth),
        )
        if plot:
            from kvsize.config import parse_config
            from kvsize.plot import write_plot

            write_plot(result, plot, spec=parse_config(loaded.raw, source=loaded.location))
    emit(lambda console: render_estimate(console, result), lambda: result.model_dump_json(indent=2), json_output)
