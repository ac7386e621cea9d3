"""Results -> rich tables and bars, or JSON. Receives a Console; keeps no globals."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from kvsize.api import Estimate, Scenario
from kvsize.capacity_file import CheckResult
from kvsize.gpu_ranking import GpuPlan
from kvsize.profiles import GpuProfile
from kvsize.registry import RegistryEntry
from kvsize.text import markup as escape  # rich markup escaped and control characters made visible
from kvsize.units import format_bytes, format_tokens

BAR_WIDTH = 50
MAX_BARS = 8


def estimate_json(result: Estimate) -> str:
    return result.model_dump_json(indent=2)


def render_estimate(console: Console, result: Estimate) -> None:
    arch = result.architecture
    console.print(f"[bold]{escape(result.model)}[/]  [dim]({escape(result.source)})[/]")
    heads = f", {arch.num_attention_heads} query heads" if arch.num_attention_heads else ""
    console.print(
        f"{escape(arch.model_type)}: {escape(arch.attention)}, {arch.num_layers} layers{heads}, "
        f"max context {arch.max_context if arch.max_context else 'not stated'}, config dtype {escape(arch.model_dtype)}"
    )
    console.print(_layers_table(result))
    rules = {f"{s.engine} {s.engine_version}": s.rule for s in result.scenarios}
    for engine, rule in rules.items():
        console.print(f"[dim]{escape(engine)}: {escape(rule)}[/]")
    if len(rules) > 1:
        console.print(_engines_table(result.scenarios))
    else:
        console.print(_scenarios_table(result.scenarios))
    gpu_rows = [s for s in result.scenarios if s.gpu is not None]
    if gpu_rows:
        console.print(_gpu_panel(gpu_rows))
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _layers_table(result: Estimate) -> Table:
    table = Table(title="Attention by layer", title_justify="left", show_edge=False)
    for column in ("layers", "kind", "kv heads", "head dim K/V", "window", "elem/token", "state elem"):
        table.add_column(column, justify="left" if column == "kind" else "right", no_wrap=True)
    for g in result.architecture.layers:
        if g.kv_lora_rank is not None:
            dims = f"latent {g.kv_lora_rank}+{g.qk_rope_head_dim}"
        elif g.head_dim:
            dims = f"{g.head_dim}/{g.head_dim_v}"
        else:
            dims = "-"
        window = str(g.window) if g.window else (f"{g.encoder_tokens} enc" if g.encoder_tokens else "-")
        if g.shares_kv_with is not None:
            window = f"uses layer {g.shares_kv_with}"
        table.add_row(
            str(g.count),
            g.kind,
            str(g.num_kv_heads) if g.num_kv_heads is not None else "-",
            dims,
            window,
            f"{g.elements_per_token:,}" if g.elements_per_token else "-",
            f"{g.state_elements:,} {g.state_dtype}" if g.state_elements else "-",
        )
    return table


def _engines_table(scenarios: Sequence[Scenario]) -> Table:
    """--engine all: one row per scenario, one column per engine, so the cost of the choice shows."""
    engines = list(dict.fromkeys(s.engine for s in scenarios))
    multi_gpu = any(s.tp * s.pp > 1 for s in scenarios)
    table = Table(
        title="KV cache by engine" + (" (per GPU of the most loaded rank)" if multi_gpu else ""),
        title_justify="left",
        show_edge=False,
    )
    for column in ("ctx", "batch", "dtype", *engines):
        table.add_column(column, justify="right", no_wrap=True)
    rows: dict[tuple[int, int, str], dict[str, Scenario]] = {}
    for s in scenarios:
        rows.setdefault((s.ctx, s.batch, s.kv_dtype.value), {})[s.engine] = s
    for (ctx, batch, dtype), by_engine in rows.items():
        cells = []
        for engine in engines:
            found = by_engine.get(engine)
            if found is None:
                cells.append("-")
                continue
            size = found.kv_cache_bytes_per_gpu if multi_gpu else found.kv_cache_bytes
            fit = "" if found.gpu is None else (" [green]fits[/]" if found.gpu.fits else " [red]no[/]")
            cells.append(format_bytes(size) + fit)
        table.add_row(f"{ctx:,}", str(batch), dtype, *cells)
    return table


def _scenarios_table(scenarios: Sequence[Scenario]) -> Table:
    with_gpu = any(s.gpu is not None for s in scenarios)
    multi_gpu = any(s.tp * s.pp > 1 for s in scenarios)
    title = "KV cache (max reqs: requests of ctx tokens that fit; max ctx: per request at batch)" if with_gpu else ""
    table = Table(
        title=title or "KV cache",
        title_justify="left",
        show_edge=False,
    )
    columns = ["ctx", "batch", "dtype", "per token", "per request", "total"]
    if multi_gpu:
        columns.append("per GPU")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    if with_gpu:
        for column in ("fits", "max reqs", "max ctx"):
            table.add_column(column, justify="right", no_wrap=True)
    for s in scenarios:
        row = [
            f"{s.ctx:,}",
            str(s.batch),
            s.kv_dtype.value,
            f"{s.kv_bytes_per_token:,} B",
            format_bytes(s.bytes_per_request),
            format_bytes(s.kv_cache_bytes),
        ]
        if multi_gpu:
            row.append(format_bytes(s.kv_cache_bytes_per_gpu))
        if s.gpu is not None:
            max_ctx = "no limit" if s.gpu.max_context is None else f"{s.gpu.max_context:,}"
            row += ["[green]yes[/]" if s.gpu.fits else "[red]no[/]", f"{s.gpu.max_concurrency:,}", max_ctx]
        elif with_gpu:
            row += ["", "", ""]
        table.add_row(*row)
    return table


def _gpu_panel(scenarios: Sequence[Scenario]) -> Group:
    first = scenarios[0].gpu
    assert first is not None
    weights_label = "estimated " if first.weights_estimated else ""
    b = first.budget
    parts = ", ".join(
        f"{label} {format_bytes(value)}"
        for label, value in (
            ("activation peak", b.activation_bytes),
            ("non-torch", b.non_torch_bytes),
            ("CUDA graphs", b.cuda_graph_bytes),
        )
        if value
    )
    lines: list[Text | Table | str] = [
        Text.from_markup(
            f"[bold]{escape(first.name)}[/] per GPU: {format_bytes(first.memory_bytes)} = weights "
            f"{format_bytes(first.weights_bytes)} ({weights_label}{escape(first.weights_source)}) + reserve "
            f"{format_bytes(first.reserve_bytes)}{f' ({parts})' if parts else ''} + KV budget "
            f"{format_bytes(first.kv_budget_bytes)}"
        ),
        Text.from_markup(f"[dim]budget: {escape(b.rule)}[/]"),
    ]
    if first.kv_pool_tokens is not None and first.concurrency is not None:
        s0 = scenarios[0]
        lines.append(
            f"engine pool: {first.kv_pool_tokens:,} tokens of KV; concurrency for {s0.ctx:,} tokens per request: "
            f"{first.concurrency:.2f}x"
        )
    if first.speed is not None:
        sp = first.speed
        prefill = f", prefill >= {sp.prefill_seconds_min:.3g} s" if sp.prefill_seconds_min is not None else ""
        lines.append(
            f"speed bound at {scenarios[0].batch} x {scenarios[0].ctx:,}: decode <= "
            f"{sp.decode_tokens_per_s_per_request_max:,.0f} tok/s per request, "
            f"<= {sp.decode_tokens_per_s_max:,.0f} tok/s in all{prefill} (roofline upper bounds)"
        )
    if first.offload is not None:
        off = first.offload
        lines.append(
            f"offload tier {format_bytes(off.memory_bytes)}: +{off.extra_tokens:,} tokens "
            f"({off.extra_requests:,} requests of {scenarios[0].ctx:,}); moving one request takes "
            f"{off.transfer_seconds_per_request:.3g} s at {off.link_bytes_per_s / 1e9:g} GB/s"
        )
    bars = Table.grid(padding=(0, 1))
    bars.add_column(justify="right")
    bars.add_column()
    bars.add_column()
    shown = list(scenarios)[:MAX_BARS]
    for s in shown:
        assert s.gpu is not None
        label = f"{format_tokens(s.ctx)} x{s.batch} {s.kv_dtype.value}"
        bars.add_row(label, memory_bar(s), "[green]fits[/]" if s.gpu.fits else "[red]does not fit[/]")
    lines.append(bars)
    if len(scenarios) > len(shown):
        lines.append(f"(bars for the first {len(shown)} of {len(scenarios)} scenarios)")
    if first.kv_budget_bytes < 0:
        lines.append(
            Text.from_markup(
                "[red]The weights alone do not fit on this card[/]: pick a larger card, give a multi-GPU total "
                "with --gpu-mem, or use a quantized checkpoint."
            )
        )
    lines.append(
        Text.from_markup(
            "[blue]█[/] weights  [green]█[/] KV cache  [dim]░[/] free  [yellow]█[/] reserve  [red]█[/] KV over budget"
        )
    )
    return Group(*lines)


def memory_bar(s: Scenario, width: int = BAR_WIDTH) -> Text:
    """weights | KV | reserve | free, scaled to the card; KV beyond the budget is drawn in red past it."""
    gpu = s.gpu
    assert gpu is not None
    total = gpu.memory_bytes

    def cells(n: int) -> int:
        return max(0, round(width * n / total))

    weights = min(cells(gpu.weights_bytes), width)
    budget = max(gpu.kv_budget_bytes, 0)
    kv_in = min(cells(min(s.kv_cache_bytes, budget)), width)
    reserve = min(cells(gpu.reserve_bytes), width)  # a reserve larger than a tiny card: one bar's width, not millions
    free = max(width - weights - kv_in - reserve, 0)
    bar = Text()
    bar.append("█" * weights, style="blue")
    bar.append("█" * kv_in, style="green")
    bar.append("░" * free, style="dim")
    bar.append("█" * reserve, style="yellow")
    over = s.kv_cache_bytes - budget
    if over > 0:  # past the card's edge: a short red run, and '+' when it is longer than a fifth of the card
        run = max(cells(over), 1)
        bar.append("█" * min(run, width // 5) + ("+" if run > width // 5 else ""), style="red")
    return bar


def render_gpus(console: Console, profiles: Iterable[GpuProfile]) -> None:
    table = Table(title="GPU profiles", title_justify="left", show_edge=False)
    for column in ("id", "name", "memory", "bandwidth", "bf16 TFLOP/s", "fp8", "fp4", "aliases"):
        table.add_column(column, justify="right" if column in ("memory", "bandwidth", "bf16 TFLOP/s") else "left")
    for p in profiles:
        bf16 = p.dense_tflops.get("bf16") if p.dense_tflops else None
        bandwidth = f"{p.memory_bandwidth_bytes_per_s / 1e9:,.0f} GB/s" if p.memory_bandwidth_bytes_per_s else "-"
        table.add_row(
            p.id,
            escape(p.name),
            format_bytes(p.memory_bytes),
            bandwidth,
            "-" if bf16 is None else f"{bf16:g}",
            "yes" if p.fp8_native else "-",
            "yes" if p.fp4_native else "-",
            ", ".join(p.aliases),
        )
    console.print(table)


def render_models(console: Console, entries: Iterable[tuple[RegistryEntry, str]]) -> None:
    table = Table(title="Built-in models (work offline)", title_justify="left", show_edge=False)
    table.add_column("hub id")
    table.add_column("architecture")
    for entry, summary in entries:
        table.add_row(entry.hub_id, summary)
    console.print(table)


def render_check(console: Console, results: Sequence[CheckResult]) -> None:
    table = Table(title="Capacity check", title_justify="left", show_edge=False)
    for column in ("deployment", "model", "gpu", "ctx x batch", "max reqs", "KV budget/GPU", "result"):
        table.add_column(column, no_wrap=column != "result")
    for r in results:
        budget = "-" if r.kv_budget_bytes is None else format_bytes(r.kv_budget_bytes)
        verdict = f"[green]pass[/] {escape(r.reason)}" if r.passed else f"[red]FAIL[/] {escape(r.reason)}"
        table.add_row(
            escape(r.name),
            escape(r.model),
            escape(r.gpu or "-"),
            f"{r.ctx:,} x {r.batch}",
            "-" if r.max_concurrency is None else f"{r.max_concurrency:,}",
            budget,
            verdict,
        )
    console.print(table)
    failed = sum(not r.passed for r in results)
    console.print(f"{len(results)} deployments: {len(results) - failed} pass, {failed} fail")


def render_plan(console: Console, plans: Sequence[GpuPlan]) -> None:
    table = Table(
        title="GPUs needed (tp x replicas), cheapest layout per GPU kind", title_justify="left", show_edge=False
    )
    for column in ("gpu", "GPUs", "tp", "replicas", "reqs/replica", "USD/hour", "layout"):
        table.add_column(column, justify="left" if column in ("gpu", "layout") else "right", no_wrap=True)
    for p in plans:
        table.add_row(
            p.gpu,
            "-" if p.gpus is None else str(p.gpus),
            "-" if p.tp is None else str(p.tp),
            "-" if p.replicas is None else str(p.replicas),
            "-" if p.concurrency_per_replica is None else f"{p.concurrency_per_replica:,}",
            "-" if p.usd_per_hour is None else f"{p.usd_per_hour:,.2f}",
            escape(p.reason),
        )
    console.print(table)
