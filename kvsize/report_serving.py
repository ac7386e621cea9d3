"""Serving-time figures (kvsize/serving.py) as short table lines, each labelled exact, bound or lossy."""

from __future__ import annotations

from collections.abc import Sequence

from rich.markup import escape
from rich.text import Text

from kvsize.api import Scenario
from kvsize.fit import LatencyBound
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
    peak = f", peak {first.peak_flops / 1e12:g} TFLOP/s bf16" if first.peak_flops else ""
    card = f"bandwidth {first.bandwidth_bytes_per_s / 1e12:g} TB/s{peak} (GPU profile)"
    return [table, from_markup(f"[dim]bounds, {escape(card)}: {escape(first.rule)}[/]")]


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:,.3g} s"
