"""Serving-time figures (kvsize/serving.py) as short table lines, each labelled exact, bound or lossy."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.text import Text

from kvsize.api import Scenario
from kvsize.fit import MEASURED_RULE, LatencyBound, MeasuredAgainstBound
from kvsize.text import from_markup
from kvsize.units import format_bytes


def serving_lines(scenarios: Sequence[Scenario], *, explain: bool = False) -> list[Text]:
    """Serving-time figures (kvsize/serving.py) of the first scenario, one short line each, labelled. The
    prefix-caching rule is a paragraph: printed with --explain, else a one-line pointer, as the engines' rules."""
    if not scenarios:
        return []
    s = scenarios[0]
    lines: list[str] = []
    if s.prefix is not None:
        p = s.prefix
        kinds = ", ".join(f"{k} {v:,}" for k, v in p.shared_tokens_by_kind.items())
        if p.enabled and p.shared_bytes:
            lines.append(
                f"prefix {p.prefix_len:,} tokens: {format_bytes(p.shared_bytes)} stored once "
                f"(tokens per layer: {kinds}) (exact)"
            )
        else:
            lines.append(f"prefix {p.prefix_len:,} tokens: not shared, every request stores it (exact)")
        if explain:
            lines.append(f"[dim]{escape(p.rule)}[/]")
        else:  # the rule starts with its engine, version and topic: "vLLM 0.33 prefix caching: ..."
            topic = p.rule.split(":", 1)[0] if ":" in p.rule[:60] else "prefix caching"
            lines.append(f"[dim]rule: {escape(topic)} (--explain prints it)[/]")
        if s.gpu is not None and s.gpu.prefill_saved_seconds is not None:
            lines.append(f"prefix hit saves >= {s.gpu.prefill_saved_seconds:.3g} s of prefill per request (bound)")
    if s.kv_budget_tokens is not None:
        lines.append(f"KV budget {s.kv_budget_tokens:,} tokens per layer per request (eviction) (lossy)")
    g = s.gpu
    if g is not None and g.workload is not None:
        w = g.workload
        what = f"{w.requests:,} requests"
        if s.prompt_len and s.output_len and w.requests == 1:
            what = f"P {s.prompt_len:,} + O {s.output_len:,}"
        lines.append(
            f"steady state ({what}, {w.allocation}): mean resident {format_bytes(w.mean_resident_bytes)}, "
            f"{w.steady_state_concurrency:,.1f} requests (bound)"
        )
        lines.append(
            f"p50 / p99 residency {format_bytes(w.p50_resident_bytes)} / {format_bytes(w.p99_resident_bytes)}; "
            f"p99 requests that fit: {w.concurrency_p99:,} (exact)"
        )
        lines.append(
            f"token state in reserved memory: paged {w.token_state_share_paged:.1%}, "
            f"contiguous {w.token_state_share_contiguous:.1%} (exact)"
        )
    if g is not None and g.throughput is not None:
        t = g.throughput
        lines.append(
            f"Little's law: <= {t.requests_per_s:,.2f} req/s, {t.output_tokens_per_s:,.0f} output tok/s "
            f"({t.request_seconds:.3g} s per request) (bound)"
        )
    if g is not None and g.offload is not None and g.offload.tiers:
        off = g.offload
        for tier in off.tiers:
            even = tier.break_even_context
            beats = ""
            if even is not None:
                beats = "; beats recompute at any ctx" if even <= 1 else f"; beats recompute from {even:,}"
            lines.append(
                f"{tier.tier} tier {format_bytes(tier.bytes)}: {tier.tokens:,} tokens, restore "
                f"{tier.restore_seconds_per_request:.3g} s/request at {tier.link_bytes_per_s / 1e9:g} GB/s"
                f"{beats} (bound)"
            )
        if off.recompute_seconds_per_request is not None:
            lines.append(f"recompute (prefill) {off.recompute_seconds_per_request:.3g} s/request (bound)")
        lines.append(f"[dim]link: {escape(off.link_source)}[/]")
    return [from_markup(line) for line in lines]


def latency_table(rows: Sequence[LatencyBound]) -> list[object]:
    """--itl: lower bounds on TTFT and ITL per ctx x batch (under 80 columns), then the rule and the card's
    figures they use. experts: routed experts a decode step reads per MoE layer (expected, uniform routing)."""
    if not rows:
        return []
    from rich import box
    from rich.table import Table

    first = rows[0]
    title = f"latency bounds; max @ {first.itl_target_ms:g} ms: most requests at ctx whose ITL bound fits it"
    table = Table(title=title, box=box.SIMPLE_HEAD)
    for name in (
        "ctx",
        "batch",
        "experts/layer",
        "read/step",
        "TTFT >=",
        "ITL >=",
        f"max @ {first.itl_target_ms:g} ms",
    ):
        table.add_column(name, justify="right")
    for r in rows:
        table.add_row(
            f"{r.ctx:,}",
            f"{r.batch:,}",
            f"{r.experts_read_per_layer:.1f}" if r.experts_read_per_layer is not None else "dense",
            format_bytes(round(r.weights_read_bytes + r.kv_read_bytes)),
            _duration(r.ttft_seconds_min) if r.ttft_seconds_min is not None else "-",
            _duration(r.itl_seconds_min),
            f"{r.max_requests_under_itl:,}",
        )
    return [table, from_markup(f"[dim]bounds, {escape(_card(first))}: {escape(first.rule)}[/]")]


def _card(row: LatencyBound | MeasuredAgainstBound) -> str:
    peak = f", peak {row.peak_flops / 1e12:g} TFLOP/s bf16" if row.peak_flops else ""
    return f"bandwidth {row.bandwidth_bytes_per_s / 1e12:g} TB/s{peak} (GPU profile)"


def measured_table(rows: Sequence[MeasuredAgainstBound]) -> list[object]:
    """--bench-result: each run's measured ITL, TTFT and output throughput beside the bound of its load, and the
    share of the bound it reached (1.0 = the roofline). A figure beyond its bound is marked, never hidden."""
    if not rows:
        return []
    from rich import box
    from rich.table import Table

    out: list[object] = []
    for r in rows:
        out.append(
            Text(
                f"measured vs bounds: {r.run} ({r.tool}); {r.requests:,} requests at once, prompt "
                f"{r.prompt_tokens:,} + output {r.output_tokens:,} tokens",
                style="italic",
            )
        )
        table = Table(box=box.SIMPLE_HEAD)
        for name in ("figure", "measured", "bound", "share", ""):
            table.add_column(name, justify="left" if name in ("figure", "") else "right")
        figures = (
            ("median ITL", r.itl_ms, r.itl_bound_ms, r.itl_share, ">=", "ITL"),
            ("median TTFT", r.ttft_ms, r.ttft_bound_ms, r.ttft_share, ">=", "TTFT"),
            (
                "output tok/s",
                r.output_tokens_per_s,
                r.output_tokens_per_s_bound,
                r.throughput_share,
                "<=",
                "throughput",
            ),
        )
        for label, measured, bound, share, sign, key in figures:
            if measured is None and bound is None:
                continue
            unit = "" if key == "throughput" else " ms"
            digits = ",.0f" if key == "throughput" else ",.3g"
            beyond = key in r.faster_than_bound
            table.add_row(
                label,
                f"{measured:{digits}}{unit}" if measured is not None else "-",
                f"{sign} {bound:{digits}}{unit}" if bound is not None else "-",
                f"{share:.0%}" if share is not None else "-",
                Text("beyond the bound", style="bold red") if beyond else "",
            )
        out.append(table)
        if r.faster_than_bound:
            out.append(
                from_markup(
                    f"[yellow]note:[/] {escape(', '.join(r.faster_than_bound))} measured beyond the bound: the run "
                    "was not the scenario sized here (another card, quantized weights, prefix-cache hits, "
                    "speculative decoding not in the result)"
                )
            )
    first = rows[0]
    out.append(
        from_markup(
            f"[dim]share: bound / measured for a latency, measured / bound for throughput; requests at once: "
            f"{escape(first.requests_source)}; {escape(MEASURED_RULE)}; {escape(_card(first))} (--itl prints the "
            "bounds' rule)[/]"
        )
    )
    return out


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:,.3g} s"
