"""`kvsize gpus` and `kvsize models`: what --gpu and the built-in registry accept."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from kvsize.cli.options import DebugOpt, JsonOpt, emit, user_errors

if TYPE_CHECKING:
    from kvsize.spec import ArchSpec


def gpus(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """List the GPU profiles --gpu accepts, with memory, bandwidth, low-precision support and class.

    --json prints one object whose "gpus" lists every profile."""
    with user_errors(debug):
        from kvsize.profiles import load_profiles

        profiles = sorted(load_profiles().values(), key=lambda p: (p.vendor or "", -p.memory_bytes, p.id))

    def render(console: Any) -> None:
        from kvsize.report import render_gpus

        render_gpus(console, profiles)

    def as_json() -> str:
        import json

        from kvsize.record import to_builtins

        return json.dumps({"gpus": [to_builtins(p) for p in profiles]}, indent=2)

    emit(render, as_json, json_output)


SearchOpt = Annotated[
    str | None,
    typer.Option(
        "--search",
        "-s",
        help="A loose name ('qwen3 235b', 'llama-3.1-8b'): matching models, best first.",
        metavar="TEXT",
    ),
]
FamilyOpt = Annotated[
    str | None,
    typer.Option("--family", help="Only families containing this text ('qwen', 'llama 3.1', 'gemma').", metavar="TEXT"),
]
AttentionOpt = Annotated[
    str | None,
    typer.Option(
        "--attention",
        help="Only this attention: MHA, GQA, MQA, MLA, hybrid, SSM, or a layer kind (full, sliding, chunked, "
        "cross, mamba, mamba2, gated_deltanet).",
        metavar="KIND",
    ),
]


FitsOpt = Annotated[
    str | None,
    typer.Option(
        "--fits",
        help="Only the models that fit this GPU (a profile id, the driver's name, or auto: this machine's), "
        "with how many requests each serves, most first. Needs --ctx.",
        show_default=False,
        metavar="GPU",
        rich_help_panel="Fit",
    ),
]
FitsCtxOpt = Annotated[
    str | None,
    typer.Option(
        "--ctx",
        "--max-model-len",
        help="With --fits: tokens per request (one value): 32k (=32768), 131072.",
        show_default=False,
        metavar="TOKENS",
        rich_help_panel="Fit",
    ),
]
FitsConcurrencyOpt = Annotated[
    str | None,
    typer.Option(
        "--concurrency",
        help="With --fits: requests the model must serve at once (default 1).",
        show_default=False,
        metavar="N",
        rich_help_panel="Fit",
    ),
]
FitsEngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        help="With --fits: whose rule to apply (one): vllm (default), sglang, trtllm, hf, llamacpp or formula.",
        show_default=False,
        metavar="ENGINE",
        rich_help_panel="Fit",
    ),
]
FitsKvDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-dtype",
        "--kv-cache-dtype",
        help="With --fits: KV storage (one): auto (each model's own, the default), bf16, fp8, ...",
        show_default=False,
        metavar="DTYPE",
        rich_help_panel="Fit",
    ),
]
FitsTpOpt = Annotated[
    str | None,
    typer.Option(
        "--tp",
        "--tensor-parallel-size",
        help="With --fits: tensor-parallel GPUs per replica (default 1), or auto (with --fits auto: the largest "
        "split of this machine's GPUs each model's heads allow).",
        show_default=False,
        metavar="N",
        rich_help_panel="Fit",
    ),
]


NameWordsArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="A loose name typed without quotes ('kvsize models qwen3 235b'): its words search as --search does "
        "(after --search's own word, they join it).",
        metavar="[NAME]...",
        show_default=False,
    ),
]


def models(
    words: NameWordsArg = None,
    search: SearchOpt = None,
    family: FamilyOpt = None,
    attention: AttentionOpt = None,
    fits: FitsOpt = None,
    ctx: FitsCtxOpt = None,
    concurrency: FitsConcurrencyOpt = None,
    engine: FitsEngineOpt = None,
    kv_dtype: FitsKvDtypeOpt = None,
    tp: FitsTpOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List the built-in models: their configs ship with kvsize, so they work offline and without a token.

    --fits GPU --ctx TOKENS: only those that fit, ranked by the requests they serve at once (exit 1 when none
    does). --json prints one object whose "models" lists each hub_id with its family and a summary (with
    --fits: its figures)."""
    search = " ".join(w for w in (search, *(words or ())) if w) or None  # `--search gemma 4` reads as 'gemma 4'
    fit_options = {"--ctx": ctx, "--concurrency": concurrency, "--engine": engine, "--kv-dtype": kv_dtype, "--tp": tp}
    if fits is not None or any(v is not None for v in fit_options.values()):
        models_that_fit(
            fits,
            ctx,
            concurrency or "1",
            engine or "vllm",
            kv_dtype or "auto",
            tp or "1",
            search,
            family,
            attention,
            json_output,
            debug,
            given=[name for name, value in fit_options.items() if value is not None],
        )
        return
    with user_errors(debug):
        from kvsize.config import parse_config
        from kvsize.registry import load_registry_config, select_entries

        entries = select_entries(search=search, family=family)
        rows = []
        for entry in entries:
            spec = parse_config(load_registry_config(entry), source=entry.hub_id)
            if attention and not spec_has_attention(spec, attention):
                continue
            counts: dict[str, int] = {}  # layers by kind, in order (groups of one kind that differ in detail merge)
            for layer, n in spec.layer_groups():
                counts[layer.kind] = counts.get(layer.kind, 0) + n
            kinds = ", ".join(f"{n} {kind}" for kind, n in counts.items())
            rows.append((entry, f"{spec.model_type}: {spec.attention_label} ({kinds})"))
    if not rows:
        filters = (("search", search), ("family", family), ("attention", attention))
        asked = ", ".join(f"--{name} {value!r}" for name, value in filters if value)
        typer.echo(f"No built-in model matches {asked}; 'kvsize models' lists them all.", err=True)
        raise typer.Exit(1)

    def render(console: Any) -> None:
        from kvsize.report import render_models

        render_models(console, rows)

    def as_json() -> str:
        import json

        items = [{"hub_id": e.hub_id, "family": e.family, "summary": s} for e, s in rows]
        return json.dumps({"models": items}, indent=2)

    emit(render, as_json, json_output)


def spec_has_attention(spec: ArchSpec, wanted: str) -> bool:
    """True when the model's attention label (MHA, GQA, ...) or one of its layer kinds is `wanted`."""
    from kvsize.errors import UsageError
    from kvsize.spec import AttentionKind, StateKind

    labels = {"mha", "gqa", "mqa", "mla", "hybrid", "ssm"}
    kinds = {k.value for k in AttentionKind} | {k.value for k in StateKind}
    key = wanted.strip().lower()
    if key not in labels | kinds:
        raise UsageError(
            f"--attention {wanted!r} is not an attention kind",
            hint=f"Use one of: MHA, GQA, MQA, MLA, hybrid, SSM, {', '.join(sorted(kinds))}.",
        )
    if key in labels:
        return spec.attention_label.lower() == key
    return any(key in layer.kind.split("+") for layer, _ in spec.layer_groups())


class FitRow(msgspec.Struct, frozen=True, kw_only=True):
    """One registry model that fits the card: its figures from kvsize.api.estimate_loaded."""

    hub_id: str
    family: str
    tp: int
    max_requests: int
    """Requests of ctx tokens the engine runs at once (GpuFit.max_concurrency: the KV budget, capped)."""
    max_requests_by_memory: int | None
    concurrency_cap: int | None
    kv_dtype: str
    weights_bytes: int
    """Weights on each GPU."""
    weights_estimated: bool
    """True when the weights are estimated (no size recorded for the model): the fit is no better than them."""
    kv_budget_bytes: int
    kv_bytes_per_request: int
    """KV bytes one request of ctx tokens holds on each GPU."""


def models_that_fit(
    gpu: str | None,
    ctx: str | None,
    concurrency: str,
    engine: str,
    kv_dtype: str,
    tp: str,
    search: str | None,
    family: str | None,
    attention: str | None,
    json_output: bool,
    debug: bool,
    given: list[str],
) -> None:
    """`kvsize models --fits GPU --ctx TOKENS`: the registry's models sized on one card by kvsize's own API
    (estimate_loaded, one scenario each), those that fit ranked by the requests they serve at once."""
    with user_errors(debug):
        from kvsize.api import estimate_loaded
        from kvsize.config import parse_config
        from kvsize.engines import get_engine
        from kvsize.errors import KvsizeError, UsageError
        from kvsize.local_gpu import is_auto
        from kvsize.profiles import resolve_gpu
        from kvsize.registry import select_entries
        from kvsize.resolve import load_model_config
        from kvsize.units import parse_count, parse_tokens

        if gpu is None:
            named = " and ".join([", ".join(given[:-1]), given[-1]] if len(given) > 1 else given)
            raise UsageError(
                f"{named} go{'es' if len(given) == 1 else ''} with --fits GPU",
                hint="For example --fits h100 --ctx 32k.",
            )
        if ctx is None:
            raise UsageError("kvsize models --fits needs --ctx", hint="For example --ctx 32k.")
        for name, value in (("--ctx", ctx), ("--engine", engine), ("--kv-dtype", kv_dtype), ("--tp", tp)):
            if "," in value:
                raise UsageError(f"kvsize models --fits takes one {name}, got '{value}'")
        tokens, requests = parse_tokens(ctx), parse_count(concurrency, "concurrency")
        engine_name = engine.strip().lower()
        if engine_name == "all":
            raise UsageError("kvsize models --fits takes one --engine, got 'all'", hint="For example --engine vllm.")
        rules = get_engine(engine_name)  # an unknown engine is bad input (exit 2), not 200 skipped rows
        card = resolve_gpu(gpu)  # an unknown card, or `auto` with no GPU, is one error before any model
        gpu_count = None
        notes: list[str] = []
        if is_auto(gpu):  # what --fits auto found (a card with no profile is sized with its reported memory)
            from kvsize.local_gpu import auto_notes

            notes = auto_notes()
        if tp.strip().lower() == "auto":
            if not is_auto(gpu):
                raise UsageError(
                    "--tp auto needs --fits auto", hint="It splits over this machine's GPUs; else give --tp N."
                )
            from kvsize.local_gpu import detect

            gpu_count = len(detect().gpus)
        fixed_tp = None if gpu_count is not None else parse_count(tp, "tensor-parallel size")
        rows: list[FitRow] = []
        skipped: dict[str, list[str]] = {}
        for entry in select_entries(search=search, family=family):
            try:
                loaded = load_model_config(entry.hub_id)  # the registry's config, as `kvsize MODEL` reads it
                spec = parse_config(loaded.raw, source=entry.hub_id)
                if attention and not spec_has_attention(spec, attention):
                    continue
                if fixed_tp is None:
                    from kvsize.local_gpu import auto_tp

                    model_tp = auto_tp(rules, spec, gpu_count or 1)
                else:
                    model_tp = fixed_tp
                result = estimate_loaded(
                    loaded,
                    ctx=[tokens],
                    batch=[requests],
                    kv_dtype=kv_dtype,
                    engine=engine_name,
                    tp=model_tp,
                    gpu=gpu,
                    with_max_context=False,
                )
            except KvsizeError as exc:  # the engine does not run this model, or not at this tp or dtype
                if isinstance(exc, UsageError) and str(exc).startswith("--attention"):
                    raise
                skipped.setdefault(" ".join(str(exc).split())[:160], []).append(entry.hub_id)
                continue
            s = result.scenarios[0]
            fit = s.gpu
            if fit is None or not fit.fits or (fit.context_limit is not None and fit.context_limit.refuses):
                continue
            rows.append(
                FitRow(
                    hub_id=entry.hub_id,
                    family=entry.family,
                    tp=model_tp,
                    max_requests=fit.max_concurrency,
                    max_requests_by_memory=fit.max_concurrency_by_memory,
                    concurrency_cap=fit.concurrency_cap,
                    kv_dtype=s.kv_dtype.value,
                    weights_bytes=fit.weights_bytes,
                    weights_estimated=fit.weights_estimated,
                    kv_budget_bytes=fit.kv_budget_bytes,
                    kv_bytes_per_request=s.kv_cache_bytes_per_gpu // max(1, s.batch),
                )
            )
        rows.sort(key=lambda r: (-r.max_requests, -(r.max_requests_by_memory or r.max_requests), r.hub_id))
    plural = "s" if requests != 1 else ""
    title = (
        f"Built-in models that fit {card.id} ({format_card(card)}): {requests:,} request{plural} of "
        f"{tokens:,} tokens ({engine_name}, KV {kv_dtype.strip().lower()}), most requests first"
    )

    def render(console: Any) -> None:
        from rich.text import Text

        from kvsize.report import Column, stacked_tables
        from kvsize.text import markup
        from kvsize.units import format_bytes

        columns = [
            Column("hub id", "left", key=True),
            Column("max reqs", key=True),
            Column("by memory"),
            Column("tp"),
            Column("KV"),
            Column("weights/GPU"),
            Column("KV budget/GPU"),
            Column("KV/request"),
        ]
        table_rows = [
            [
                markup(r.hub_id),
                f"{r.max_requests:,}"
                + (" (cap)" if r.concurrency_cap is not None and r.max_requests == r.concurrency_cap else ""),
                "-" if r.max_requests_by_memory is None else f"{r.max_requests_by_memory:,}",
                str(r.tp),
                markup(r.kv_dtype),
                format_bytes(r.weights_bytes) + (" (est.)" if r.weights_estimated else ""),
                format_bytes(r.kv_budget_bytes),
                format_bytes(r.kv_bytes_per_request),
            ]
            for r in rows
        ]
        if table_rows:
            for table in stacked_tables(title, columns, table_rows, max(console.width, 40)):
                console.print(table)
        else:
            console.print(Text(title))
            console.print(Text("No built-in model fits."))
        for note in notes:
            console.print(Text(f"note: {note}"))
        if any(r.weights_estimated for r in rows):
            console.print(
                Text("(est.): weights estimated from the config (no size recorded); the fit is only as good.")
            )
        if skipped:
            count = sum(len(v) for v in skipped.values())
            console.print(
                Text(
                    f"{count} model{'s' if count != 1 else ''} not sized ({engine_name} refuses them): "
                    + "; ".join(f"{len(v)}: {reason}" for reason, v in skipped.items())[:600]
                )
            )

    def as_json() -> str:
        import json

        from kvsize.record import to_builtins

        return json.dumps(
            {
                "gpu": card.id,
                "memory_bytes": card.memory_bytes,
                "ctx": tokens,
                "concurrency": requests,
                "engine": engine_name,
                "kv_dtype": kv_dtype.strip().lower(),
                "notes": notes,
                "models": [to_builtins(r) for r in rows],
                "skipped": [{"hub_id": h, "reason": reason} for reason, ids in skipped.items() for h in ids],
            },
            indent=2,
        )

    emit(render, as_json, json_output)
    if not rows:
        raise typer.Exit(1)  # the answer is "no": no built-in model fits (printed above)


def format_card(card: Any) -> str:
    from kvsize.units import format_bytes

    return format_bytes(card.memory_bytes)
