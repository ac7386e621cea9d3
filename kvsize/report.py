"""Results -> rich tables and bars, or JSON. Receives a Console; keeps no globals.

Layout rule: an id, a number or a verdict is never cut with "…". Tables that do not fit the console are split
into stacked tables that repeat their key columns (lower-priority columns move down); only names may wrap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import msgspec
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from kvsize.text import from_markup
from kvsize.text import markup as escape  # rich markup escaped and control characters made visible
from kvsize.units import format_bytes, format_tokens

if TYPE_CHECKING:  # types only: importing them builds pydantic models a given command does not need
    from kvsize.api import Estimate, Scenario
    from kvsize.capacity_file import CheckResult
    from kvsize.fit import ContextLimit, GpuFit, Suggestion
    from kvsize.gpu_ranking import GpuPlan
    from kvsize.profiles import GpuProfile
    from kvsize.registry import RegistryEntry

BAR_WIDTH = 50
MIN_BAR_WIDTH = 20
MAX_BARS = 8
WRAP_MIN_WIDTH = 20  # a wrapping column (names, reasons) is packed as if this wide; rich wraps it to fit

# One character per part of the memory bar, so the bar reads without colour (NO_COLOR=1) too.
BAR_PARTS: dict[str, tuple[str, str, str]] = {
    # key: (character, style, legend label)
    "weights": ("█", "blue", "weights"),
    "kv": ("▓", "green", "KV cache"),
    "free": ("░", "dim", "free"),
    "reserve": ("▒", "yellow", "reserve"),
    "over": ("×", "red", "KV over budget"),
    "beyond": ("+", "red", "longer than drawn"),
}

# Engines whose budget starts from CUDA-visible memory, i.e. the card less the CUDA context
# (kvsize/budget.py CUDA_CONTEXT_BYTES).
_CUDA_CONTEXT_ENGINES = ("vllm", "sglang", "trtllm")


def plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


# --- tables that never cut a cell ------------------------------------------------------------------------


class Column(msgspec.Struct, frozen=True):
    header: str
    justify: str = "right"
    key: bool = False
    """Repeated in every stacked part (the row's identity)."""
    wrap: bool = False
    """May wrap (names, reasons): the last resort, after stacking."""
    priority: int = 0
    """Lower goes into the first table first; columns keep their order on screen."""


def _cell(value: str | Text) -> Text:
    if isinstance(value, Text):
        return value
    return from_markup(value) if "[" in value else Text(value)  # no markup to parse: a thousand rows add up


def stacked_tables(
    title: str, columns: Sequence[Column], rows: Sequence[Sequence[str | Text]], width: int
) -> list[RenderableType]:
    """One table when it fits `width`; else parts that repeat the key columns, the others in their order."""
    cells = [[_cell(c) for c in row] for row in rows]
    widths = []
    for i, col in enumerate(columns):
        natural = max([Text(col.header).cell_len, *(row[i].cell_len for row in cells)])
        widths.append(min(natural, WRAP_MIN_WIDTH) if col.wrap else natural)

    def span(indices: Sequence[int]) -> int:  # show_edge=False: one space each side, one separator between
        return sum(widths[i] + 2 for i in indices) + len(indices) - 1

    keys = [i for i, c in enumerate(columns) if c.key]
    waiting = sorted((i for i, c in enumerate(columns) if not c.key), key=lambda i: (columns[i].priority, i))
    parts: list[list[int]] = []
    while waiting or not parts:
        current = list(keys)
        for i in list(waiting):  # first fit, by priority: a narrower column may still join this table
            if span([*current, i]) <= width or current == keys:
                current.append(i)
                waiting.remove(i)
        parts.append(current)
    tables: list[RenderableType] = [Text(title, style="italic")]  # a line of its own: wraps at the console
    for part in parts:
        order = sorted(part)
        fast = _long_table(columns, cells, order, width)
        if fast is not None:
            tables.append(fast)
            continue
        table = Table(show_edge=False, expand=False)
        for i in order:
            col = columns[i]
            table.add_column(
                col.header,
                justify="left" if col.justify == "left" else "right",
                no_wrap=not col.wrap,
                overflow="fold",
            )
        for row in cells:
            table.add_row(*(row[i] for i in order))
        tables.append(table)
    return tables


def _long_table(
    columns: Sequence[Column], cells: Sequence[Sequence[Text]], order: Sequence[int], width: int
) -> Group | None:
    """A long table part whose cells all fit on one line, drawn as rich would draw it in one pass
    (kvsize/report_table.py); None where rich's own layout is needed (short tables, a cell to wrap)."""
    from kvsize.report_table import FAST_ROWS, natural_widths, table_text

    if len(cells) < FAST_ROWS:
        return None
    rows = [[row[i] for i in order] for row in cells]
    headers = [columns[i].header for i in order]
    plain = (c.plain for row in rows for c in row)
    if sum(w + 3 for w in natural_widths(headers, rows)) - 1 > width or any("\n" in p or p != p.strip() for p in plain):
        return None
    text = table_text(headers, [columns[i].justify for i in order], rows)
    text.no_wrap, text.overflow = True, "ignore"
    return Group(text)  # in a Group: console.print joins bare Texts into a new one, dropping no_wrap


def _width(console: Console) -> int:
    return max(console.width, 40)


# --- the sizing command ----------------------------------------------------------------------------------


def render_estimate(console: Console, result: Estimate, *, explain: bool = False) -> None:
    arch = result.architecture
    width = _width(console)
    console.print(f"[bold]{escape(result.model)}[/]  [dim]({escape(result.source)})[/]")
    heads = f", {arch.num_attention_heads} query heads" if arch.num_attention_heads else ""
    console.print(
        f"{escape(arch.model_type)}: {escape(arch.attention)}, {arch.num_layers} layers{heads}, "
        f"max context {f'{arch.max_context:,}' if arch.max_context else 'not stated'}, "
        f"config dtype {escape(arch.model_dtype)}"
    )
    for table in _layers_tables(result, width):
        console.print(table)
    rules = {
        (s.engine, s.engine_version + (f" (rules of {s.engine_rules})" if s.engine_rules else "")): s.rule
        for s in result.scenarios
    }
    if explain:
        kinds = layer_kinds(result)
        for rule in rules.values():  # each rule starts with its engine and version
            console.print(f"[dim]rule: {escape(rule_for_kinds(rule, kinds))}[/]")
    elif rules:
        named = ", ".join(f"{engine} {version}" for engine, version in rules)
        console.print(f"[dim]rule: {escape(named)} (--explain prints it)[/]")
    multi_engine = len({engine for engine, _ in rules}) > 1
    for table in _scenario_tables(result, width, multi_engine):
        console.print(table)
    gpu_rows = [s for s in result.scenarios if s.gpu is not None]
    if gpu_rows:
        console.print(_gpu_panel(gpu_rows, width, explain=explain, multi_engine=multi_engine))
    from kvsize.report_serving import latency_table, measured_table, serving_lines

    for line in serving_lines(result.scenarios, explain=explain):
        console.print(line)
    for renderable in [*latency_table(result.latency), *measured_table(result.measured)]:
        console.print(renderable)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _layers_tables(result: Estimate, width: int) -> list[RenderableType]:
    with_state = any(g.state_elements for g in result.architecture.layers)
    columns = [
        Column("layers", key=True),
        Column("kind", "left", key=True),
        Column("kv heads"),
        Column("head dim K/V"),
        Column("window"),
        Column("elem/token"),
    ]
    if with_state:  # a model with no recurrent layer has nothing to show in it
        columns.append(Column("state elem"))
    rows = []
    for g in result.architecture.layers:
        if g.kv_lora_rank is not None:
            dims = f"latent {g.kv_lora_rank}+{g.qk_rope_head_dim}"
            if g.index_head_dim:  # DeepSeek sparse attention's indexer key
                dims += f", idx {g.index_head_dim}"
            elif g.index_shared:  # GLM-5.2: the top-k of an earlier layer, no key of its own
                dims += ", idx shared"
        elif g.head_dim and g.head_dim_v == 0:  # one row serves as K and V (DeepSeek-V4's window and entries)
            dims = f"{g.head_dim} (K=V)"
        elif g.head_dim:
            dims = f"{g.head_dim}/{g.head_dim_v}" + (f", idx {g.index_head_dim}" if g.index_head_dim else "")
        else:
            dims = "-"
        window = str(g.window) if g.window else (f"{g.encoder_tokens:,} enc" if g.encoder_tokens else "-")
        if g.shares_kv_with is not None:
            window = f"uses layer {g.shares_kv_with}"
        rows.append(
            [
                str(g.count),
                escape(g.kind),
                str(g.num_kv_heads) if g.num_kv_heads is not None else "-",
                dims,
                window,
                f"{g.elements_per_token:,}" if g.elements_per_token else "-",
                *([f"{g.state_elements:,} {g.state_dtype}" if g.state_elements else "-"] if with_state else []),
            ]
        )
    legend = "elem/token: elements cached per token per layer; per token: bytes in all layers"
    if with_state:
        legend += "; state elem: recurrent state per request in one layer, fixed at any length"
    return [*stacked_tables("Attention by layer", columns, rows, width), from_markup(f"[dim]{escape(legend)}[/]")]


# The layer kinds a clause of an engine's rule text (kvsize/engines/*.py `rule`: one text for every model) is
# about, by its first words: --explain prints a model's rule without the clauses of kinds it has none of. A
# clause no pattern names is about every model, and is kept.
_KIND_CLAUSES: tuple[tuple[str, frozenset[str]], ...] = (  # compiled on first use (re's cache): --explain only
    (r"(hybrid )?mamba|recurrent|conv state|\d+ slot\(s\)|max\(1, n_seq\)|outside the pool", frozenset({"state"})),
    (r"mla|one latent|deepseek-v3\.2 indexer", frozenset({"mla"})),
    (r"sliding and chunked|sliding/chunked|windowed|in-flight", frozenset({"sliding", "chunked"})),
    (r"sliding|iswa|full otherwise", frozenset({"sliding"})),
    (r"chunked", frozenset({"chunked"})),
    (r"shared/moe-only", frozenset({"shared", "none"})),
)
_STATE_KINDS = frozenset({"mamba", "mamba2", "gated_deltanet", "lightning", "kda", "short_conv"})


def layer_kinds(result: Estimate) -> frozenset[str]:
    """The layer kinds of the model (`mamba2+full` is both), recurrent states as one kind, "state"."""
    kinds = {part for g in result.architecture.layers for part in g.kind.split("+")}
    if kinds & _STATE_KINDS or any(g.state_elements for g in result.architecture.layers):
        kinds.add("state")
    return frozenset(kinds)


def rule_for_kinds(rule: str, kinds: frozenset[str]) -> str:
    """`rule` without its clauses (and parenthesised asides) about layer kinds not in `kinds`; the closing
    source (file names in parentheses) is always kept."""
    body, source = rule, ""
    if rule.endswith(")"):
        start = _opening(rule, len(rule) - 1)
        if start > 0 and rule[start - 1] == " ":
            body, source = rule[: start - 1], rule[start - 1 :]
    return _kept_clauses(body, kinds) + source


def _opening(text: str, close: int) -> int:
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return -1


def _kept_clauses(text: str, kinds: frozenset[str]) -> str:
    """Split at top-level ", " and "; ", drop the clauses of absent kinds; a dropped clause's "; " survives it."""
    pieces: list[tuple[str, str]] = []
    depth, start, sep = 0, 0, ""
    for i, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and text[i : i + 2] in (", ", "; "):
            pieces.append((sep, text[start:i]))
            sep, start = text[i : i + 2], i + 2
    pieces.append((sep, text[start:]))
    out, carry = "", ""
    for sep, piece in pieces:
        about = next((k for pattern, k in _KIND_CLAUSES if re.match(pattern, piece, re.IGNORECASE)), frozenset())
        if about and not about & kinds:
            carry = "; " if "; " in (sep, carry) else sep
            continue
        joint = "; " if "; " in (sep, carry) else sep
        out += (joint if out else "") + _kept_asides(piece, kinds)
        carry = ""
    return out


def _kept_asides(text: str, kinds: frozenset[str]) -> str:
    """`text` with each top-level " (...)" aside filtered like a rule; one left empty is dropped."""
    out, i = "", 0
    while (start := text.find(" (", i)) >= 0:
        depth, end = 0, -1
        for j in range(start + 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[j], 0)
            if depth == 0:
                end = j
                break
        if end < 0:
            break
        inner = _kept_clauses(text[start + 2 : end], kinds)
        out += text[i:start] + (f" ({inner})" if inner else "")
        i = end + 1
    return out + text[i:]


def served_concurrency(gpu: GpuFit) -> int:
    """Requests of ctx served at once: the KV budget's count, never above the engine's cap."""
    if gpu.concurrency_cap is not None:
        return min(gpu.max_concurrency, gpu.concurrency_cap)
    return gpu.max_concurrency


def shown_max_context(gpu: GpuFit) -> str:
    """The longest context per request: `max_context`, already capped at the engine's maximum for the model
    (kvsize.fit engine_max_context, RoPE scaling included), as in the JSON."""
    return "no limit" if gpu.max_context is None else f"{gpu.max_context:,}"


def _scenario_tables(result: Estimate, width: int, multi_engine: bool) -> list[RenderableType]:
    scenarios = result.scenarios
    with_gpu = any(s.gpu is not None for s in scenarios)
    multi_gpu = any(s.tp * s.pp > 1 for s in scenarios)
    # One engine: its pool has its own line under the table; side by side, a column.
    with_pool = multi_engine and any(s.gpu is not None and s.gpu.kv_pool_tokens is not None for s in scenarios)
    batched = any(s.batch > 1 for s in scenarios)
    # What a reader acts on goes into the first table: the verdict and the limits, then the sizes.
    columns = [Column("engine", "left", key=True)] if multi_engine else []
    columns += [Column("ctx", key=True), Column("batch", key=True), Column("dtype", key=True)]
    columns += [Column("per token", priority=7), Column("per request", priority=5)]
    if batched:
        columns.append(Column("total", priority=6))
    if multi_gpu:
        columns.append(Column("per GPU", priority=4))  # what the fit is judged on
    if with_gpu:
        columns += [Column("fits", priority=1), Column("max reqs", priority=2), Column("max ctx", priority=3)]
        if with_pool:
            columns.append(Column("pool tokens", priority=8))
    rows = []
    for s in scenarios:
        row = [s.engine] if multi_engine else []
        row += [f"{s.ctx:,}", str(s.batch), s.kv_dtype.value, f"{s.kv_bytes_per_token:,} B"]
        row.append(format_bytes(s.bytes_per_request))
        if batched:
            row.append(format_bytes(s.kv_cache_bytes))
        if multi_gpu:
            row.append(format_bytes(s.kv_cache_bytes_per_gpu))
        if s.gpu is not None:
            g = s.gpu
            reqs = f"{served_concurrency(g):,}" + (" cap" if g.cap_binds else "")
            row += ["[green]yes[/]" if g.fits else "[red]no[/]", reqs, shown_max_context(g)]
            if with_pool:
                row.append("-" if g.kv_pool_tokens is None else f"{g.kv_pool_tokens:,}")
        elif with_gpu:
            row += ["-", "-", "-"] + (["-"] if with_pool else [])
        rows.append(row)
    title = "KV cache"
    if multi_gpu:  # per token / request / total add up every rank; "per GPU" is the most loaded GPU's share
        layouts = {(s.tp, s.pp) for s in scenarios}
        tp, pp = next(iter(layouts)) if len(layouts) == 1 else (0, 0)
        gpus = f"all {tp * pp} GPUs (tp {tp} x pp {pp})" if tp else "all GPUs of a replica"
        title = f"KV cache, summed over {gpus}; per GPU: the most loaded one"
    tables = stacked_tables(title, columns, rows, width)
    return tables


def _scenario_legend(with_pool: bool) -> str:
    text = (
        "max reqs: requests of ctx tokens that fit at once; max ctx: longest context per request at that batch "
        "(at most the model's maximum)"
    )
    return text + ("; pool tokens: the engine's whole KV pool, in tokens" if with_pool else "")


def context_limit_lines(scenarios: Sequence[Scenario], *, explain: bool = False) -> list[RenderableType]:
    """A ctx past the engine's maximum for the model (kvsize/fit.py context_limit): "does not fit:" with the
    engine's rule and switch when the engine refuses it, "warning:" when it runs it anyway. Engines with the
    same maximum and verdict share a line (--engine all); --explain adds each rule's source."""
    groups: dict[tuple[int, int, bool], list[ContextLimit]] = {}
    for s in scenarios:
        limit = s.gpu.context_limit if s.gpu is not None else None
        if limit is None:
            continue
        same = groups.setdefault((limit.ctx, limit.maximum, limit.refuses), [])
        if all(other.engine != limit.engine for other in same):
            same.append(limit)
    lines: list[RenderableType] = []
    for (ctx, maximum, refuses), limits in sorted(groups.items(), key=lambda item: not item[0][2]):
        head = "[red]does not fit:[/]" if refuses else "[yellow]warning:[/]"
        if len(limits) == 1:
            text = limits[0].reason
        else:
            what = "; ".join(f"{x.engine} {x.action}" for x in limits)
            text = f"ctx {ctx:,} is past the model's maximum context {maximum:,}: {what}"
        if explain:
            text += " (" + "; ".join(x.source for x in limits) + ")"
        switches = [x.override for x in limits if x.override]
        if switches:
            verb = "overrides" if len(switches) == 1 else "override"
            text += f"; {', '.join(switches)} {verb} it, at the risk of wrong outputs"
        elif not refuses:
            text += "; outputs past the maximum are untrained"
        lines.append(from_markup(f"{head} {escape(text)}"))
    return lines


def reserve_parts(gpu: GpuFit) -> list[tuple[str, int]]:
    """The reserve (card - weights - KV budget) part by part; the parts add up to the reserve exactly."""
    from kvsize.budget import CUDA_CONTEXT_BYTES

    b = gpu.budget
    parts: list[tuple[str, int]] = []
    if b.engine in _CUDA_CONTEXT_ENGINES and b.kv_budget_bytes != 0 and b.requested_bytes < b.memory_bytes:
        # What CUDA does not report of the card (the profile's cuda_total_bytes, where a driver log gives it),
        # else kvsize's CUDA-context constant.
        hidden = b.memory_bytes - b.visible_bytes if b.visible_bytes else CUDA_CONTEXT_BYTES
        parts.append(("CUDA context", hidden))
    parts += [
        (label, value)
        for label, value in (
            ("RoPE tables", b.rope_table_bytes),
            ("activation peak", b.activation_bytes),
            ("non-torch", b.non_torch_bytes),
            ("CUDA graphs", b.cuda_graph_bytes),
            ("start-up use", b.start_snapshot_bytes),
            ("warm-up margin", b.margin_bytes),
        )
        if value
    ]
    rest = gpu.reserve_bytes - sum(v for _, v in parts)
    if b.engine in ("vllm", "sglang") and b.utilization is not None:
        label = f"outside the {b.utilization:g} share"
    elif b.engine == "trtllm" and b.utilization is not None:
        label = f"outside the {b.utilization:g} fraction of free memory"
    elif b.rule.startswith("given"):
        label = "not given to the KV cache"
    elif b.engine == "given reserve":
        label = "given reserve (--reserve)"
    else:  # formula, hf, llamacpp: budget.py keeps back 8% of the card, as vLLM's default 0.92 share
        label = "8% of the card kept back"
    if rest:
        parts.append((label, rest))
    return parts


def reserve_gloss(label: str, gpu: GpuFit) -> str | None:
    """What a part of the reserve is, in a few words, for a reader who does not know the engine's terms."""
    share, engine = gpu.budget.utilization, gpu.budget.engine
    if label == "non-torch":
        return "non-torch: memory outside PyTorch's allocator (NCCL, cuBLAS buffers)"
    if label == "start-up use":
        return "start-up use: in use when vLLM takes its first memory snapshot (CUDA context, NCCL)"
    if label == "warm-up margin":
        return "warm-up margin: kept free after warm-up, max(1 GiB, 0.75 x the transient peak)"
    if not label.startswith("outside the") or share is None:
        return None
    if engine == "sglang":  # mem_fraction_static covers weights and the KV pool; the rest serves the run
        return f"{label}: left to activations and CUDA graphs (--gpu-util {share:g})"
    rest = f"{round((1 - share) * 100, 2):g}%"
    return f"{label}: the {rest} the engine leaves free (--gpu-util {share:g})"


def _pool_lines(scenarios: Sequence[Scenario]) -> list[str]:
    """The engine's pool in tokens and its concurrency for each ctx of the grid: one line per pool (per KV
    dtype), naming the dtype when the grid has several."""
    by_pool: dict[tuple[str, int], dict[int, GpuFit]] = {}
    for s in scenarios:
        g = s.gpu
        if g is not None and g.kv_pool_tokens is not None and g.concurrency is not None:
            by_pool.setdefault((s.kv_dtype.value, g.kv_pool_tokens), {}).setdefault(s.ctx, g)
    lines = []
    for (dtype, pool), per_ctx in by_pool.items():
        label = f"tokens of KV, {dtype}" if len(by_pool) > 1 else "tokens of KV"
        ctxs = [f"{ctx:,} tokens per request: {g.concurrency:.2f}x{_above_cap(g)}" for ctx, g in per_ctx.items()]
        swa = next(iter(per_ctx.values())).kv_pool_swa_tokens
        shown = f"{pool:,} full + {swa:,} sliding-window" if swa is not None else f"{pool:,}"
        lines.append(f"engine pool ({label}): {shown}; concurrency for " + "; for ".join(ctxs))
    return lines


def _gpu_panel(scenarios: Sequence[Scenario], width: int, *, explain: bool, multi_engine: bool) -> Group:
    first = scenarios[0].gpu
    assert first is not None
    lines: list[RenderableType] = []
    with_pool = multi_engine and any(s.gpu is not None and s.gpu.kv_pool_tokens is not None for s in scenarios)
    lines.append(from_markup(f"[dim]{escape(_scenario_legend(with_pool))}[/]"))
    lines += context_limit_lines(scenarios, explain=explain)
    group = scenarios[0].tp * scenarios[0].pp
    per = f"per GPU (1 of {group})" if group > 1 else "per GPU"
    lines.append(
        from_markup(
            f"[bold]{escape(first.name)}[/] {per}: {format_bytes(first.memory_bytes)} = weights "
            f"{format_bytes(first.weights_bytes)} + reserve {format_bytes(first.reserve_bytes)} + KV budget "
            f"{format_bytes(first.kv_budget_bytes)}" + (f" ({escape(scenarios[0].engine)})" if multi_engine else "")
        )
    )
    shares = reserve_parts(first)
    parts = " + ".join(f"{label} {format_bytes(value)}" for label, value in shares)
    if parts:
        lines.append(Text(f"  reserve {format_bytes(first.reserve_bytes)} = {parts}"))
        glosses = [gloss for label, _ in shares if (gloss := reserve_gloss(label, first)) is not None]
        if glosses:
            lines.append(from_markup(f"[dim]  {escape('; '.join(glosses))}[/]"))
    if explain:
        lines.append(from_markup(f"[dim]  budget: {escape(first.budget.rule)}[/]"))
        if first.budget.rope_table_bytes:
            lines.append(from_markup(f"[dim]  {escape(first.budget.rope_table_rule)}[/]"))
        if first.budget.activation_rule:
            lines.append(from_markup(f"[dim]  activation peak: {escape(first.budget.activation_rule)}[/]"))
    if multi_engine:
        budgets: dict[str, int] = {}
        for s in scenarios:
            if s.gpu is not None:
                budgets.setdefault(s.engine, s.gpu.kv_budget_bytes)
        listed = ", ".join(f"{engine} {format_bytes(value)}" for engine, value in budgets.items())
        lines.append(Text(f"  KV budget per GPU by engine: {listed}"))
    estimate_label = "" if "estimate" in first.weights_source else " (an estimate)" if first.weights_estimated else ""
    lines.append(Text(f"  weights: {first.weights_source}{estimate_label}"))
    s0 = scenarios[0]
    if not multi_engine:
        lines += [Text(line) for line in _pool_lines(scenarios)]
    lines += _cap_lines(scenarios)
    if first.speed is not None and not multi_engine:
        sp = first.speed
        prefill = f", prefill >= {sp.prefill_seconds_min:.3g} s" if sp.prefill_seconds_min is not None else ""
        lines.append(
            Text(
                f"speed bound at {sp.requests} x {s0.ctx:,}"
                + (
                    f" (the engine's cap; {s0.batch - sp.requests:,} of the batch wait)"
                    if sp.requests < s0.batch
                    else ""
                )
                + ": decode <= "
                f"{sp.decode_tokens_per_s_per_request_max:,.0f} tok/s per request, "
                f"<= {sp.decode_tokens_per_s_max:,.0f} tok/s in all{prefill} (roofline upper bounds)"
            )
        )
    if first.offload is not None:
        off = first.offload
        lines.append(
            Text(
                f"offload tier {format_bytes(off.memory_bytes)}: +{off.extra_tokens:,} tokens "
                f"({plural(off.extra_requests, 'request')} of {s0.ctx:,}); moving one request takes "
                f"{off.transfer_seconds_per_request:.3g} s at {off.link_bytes_per_s / 1e9:g} GB/s"
            )
        )
    lines.append(_bars(scenarios, width, multi_engine))
    if first.kv_budget_bytes < 0:
        lines.append(
            from_markup(
                "[red]The weights alone do not fit on this card[/]: pick a larger card, more GPUs (--tp), or a "
                "quantized checkpoint (--weights-dtype)."
            )
        )
    lines += _advice_lines(scenarios)
    return Group(*lines)


def _above_cap(gpu: GpuFit) -> str:
    """The pool line's concurrency is the memory's: say when the engine's cap is lower."""
    cap = gpu.concurrency_cap
    if cap is None or gpu.concurrency is None or gpu.concurrency <= cap:
        return ""
    return f", above the engine's cap of {plural(cap, 'running request')}"


def held_by_memory(gpu: GpuFit) -> int:
    """Requests of ctx the KV budget holds, before the engine's cap."""
    return gpu.max_concurrency if gpu.max_concurrency_by_memory is None else gpu.max_concurrency_by_memory


def _cap_lines(scenarios: Sequence[Scenario]) -> list[RenderableType]:
    """The first scenario whose engine cap binds: the cap against what the KV budget holds (uncapped), and a
    batch above the cap, which runs cap at a time while the rest wait in the queue, not preempted (vLLM 0.33
    v1/core/sched/scheduler.py Scheduler.schedule; SGLang managers/scheduler.py get_new_batch_prefill)."""
    for s in scenarios:
        g = s.gpu
        if g is None or g.concurrency_cap is None or not g.cap_binds:
            continue
        engine = f"{s.engine}: " if len({x.engine for x in scenarios}) > 1 else ""
        cap = g.concurrency_cap
        text = (
            f"concurrency cap binds: {engine}the engine runs at most {plural(cap, 'request')} at once, fewer "
            f"than the {held_by_memory(g):,} the KV budget holds at {s.ctx:,} tokens"
        )
        if s.batch > cap:  # "fits" is the memory's verdict; the queue is the cap's
            waiting = s.batch - cap
            but = "the batch fits in memory, but " if g.fits else ""
            text += f"; {but}of the batch of {s.batch:,}, {cap:,} run and {waiting:,} wait in the queue (not preempted)"
        return [Text(text)]
    return []


def _bars(scenarios: Sequence[Scenario], width: int, multi_engine: bool) -> RenderableType:
    shown = list(scenarios)[:MAX_BARS]
    labels = [
        (f"{s.engine} " if multi_engine else "") + f"{format_tokens(s.ctx)} x{s.batch} {s.kv_dtype.value}"
        for s in shown
    ]
    verdicts = [
        "fits"
        if s.gpu is not None and s.gpu.fits
        else "past max ctx"  # the memory holds it; the engine refuses the context (context_limit_lines)
        if s.gpu is not None and s.gpu.context_limit is not None and s.kv_cache_bytes_per_gpu <= s.gpu.kv_budget_bytes
        else "does not fit"
        for s in shown
    ]
    label_w = max(Text(label).cell_len for label in labels)
    verdict_w = max(len(v) for v in verdicts)
    # The bar may run a fifth past the card (KV over budget) plus a '+'.
    room = width - label_w - verdict_w - 2
    bar_w = max(MIN_BAR_WIDTH, min(BAR_WIDTH, room * 5 // 6 - 1))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    present: set[str] = set()
    for s, label, verdict in zip(shown, labels, verdicts, strict=True):
        bar, parts = memory_bar(s, bar_w)
        present |= parts
        grid.add_row(label, bar, f"[green]{verdict}[/]" if verdict == "fits" else f"[red]{verdict}[/]")
    group = shown[0].tp * shown[0].pp
    items: list[RenderableType] = []
    if group > 1:
        items.append(Text(f"memory of one GPU (of tp {shown[0].tp} x pp {shown[0].pp}):"))
    items.append(grid)
    if len(scenarios) > len(shown):
        items.append(Text(f"(bars for the first {len(shown)} of {len(scenarios)} scenarios)"))
    legend = Text()
    for key, (char, style, label) in BAR_PARTS.items():
        if key in present:
            if legend:
                legend.append("  ")
            legend.append(char, style=style)
            legend.append(f" {label}")
    items.append(legend)
    return Group(*items)


def bar_cells(parts: Sequence[tuple[str, int]], width: int) -> list[tuple[str, int]]:
    """Cells of `width` for each part, in proportion to its bytes; a part of any size gets at least one cell
    (1.40 GiB of weights on a 140.40 GiB card is under half a cell at width 50, and must still show), and the
    cells add up to `width` exactly (the part rounded up the most gives way, or gains where one is short)."""
    present = [(key, value) for key, value in parts if value > 0]
    total = sum(value for _, value in present)
    if not present or width <= 0:
        return []
    exact = {key: width * value / total for key, value in present}
    cells = {key: max(1, round(exact[key])) for key, _ in present}
    while sum(cells.values()) > width and any(c > 1 for c in cells.values()):
        key = max((k for k in cells if cells[k] > 1), key=lambda k: (cells[k] - exact[k], cells[k]))
        cells[key] -= 1
    while sum(cells.values()) < width:
        key = max(cells, key=lambda k: exact[k] - cells[k])
        cells[key] += 1
    return [(key, cells[key]) for key, _ in present]


def memory_bar(s: Scenario, width: int = BAR_WIDTH) -> tuple[Text, set[str]]:
    """One GPU: weights | KV | free | reserve, scaled to the card; KV beyond the budget runs past its edge.
    Every part present shows, in one cell at least.

    Returns the bar and the parts it draws (for the legend)."""
    gpu = s.gpu
    assert gpu is not None
    kv = s.kv_cache_bytes_per_gpu  # the most loaded GPU, the one the budget is for
    budget = max(gpu.kv_budget_bytes, 0)
    kv_in = min(kv, budget)
    # weights + KV budget + reserve = the card (reserve = memory - weights - budget); weights past the card
    # (a negative budget) widen the scale instead.
    parts = [("weights", gpu.weights_bytes), ("kv", kv_in), ("free", budget - kv_in), ("reserve", gpu.reserve_bytes)]
    bar = Text()
    present: set[str] = set()
    for key, count in bar_cells(parts, width):
        char, style, _ = BAR_PARTS[key]
        bar.append(char * count, style=style)
        present.add(key)
    over = kv - budget
    if over > 0:  # past the card's edge: a short run, and '+' when it is longer than a fifth of the card
        run = max(round(width * over / max(gpu.memory_bytes, 1)), 1)
        char, style, _ = BAR_PARTS["over"]
        bar.append(char * min(run, width // 5), style=style)
        present.add("over")
        if run > width // 5:
            char, style, _ = BAR_PARTS["beyond"]
            bar.append(char, style=style)
            present.add("beyond")
    return bar, present


def advised_scenarios(scenarios: Sequence[Scenario]) -> list[Scenario]:
    """The scenarios the advice covers: the first that does not fit (else the first with little headroom), and
    with several engines each engine's scenario of the same ctx and batch in the same state, one per engine."""
    with_advice = [s for s in scenarios if s.gpu is not None and s.gpu.suggestions]
    if not with_advice:
        return []
    first = next((s for s in with_advice if s.gpu is not None and not s.gpu.fits), with_advice[0])
    assert first.gpu is not None
    covered: dict[str, Scenario] = {}
    for s in with_advice:
        assert s.gpu is not None
        if (s.ctx, s.batch, s.gpu.fits) == (first.ctx, first.batch, first.gpu.fits):
            covered.setdefault(s.engine, s)
    return list(covered.values())


def _suggestion_verdict(sug: Suggestion, batch: int) -> str:
    verdict = "[green]fits[/]" if sug.fits else "[red]not enough alone[/]"
    text = f"{verdict}, {plural(sug.max_concurrency, 'request')} at once"
    cap = sug.concurrency_cap
    if sug.cap_binds and cap is not None:
        held = sug.max_concurrency if sug.max_concurrency_by_memory is None else sug.max_concurrency_by_memory
        text += f" (the engine's cap; the KV budget holds {held:,}"
        text += f"; {batch - cap:,} of the batch of {batch:,} wait)" if batch > cap else ")"
    return f"{text}, KV budget {format_bytes(sug.kv_budget_bytes)}"


def _advice_lines(scenarios: Sequence[Scenario]) -> list[RenderableType]:
    """Each suggested change once, with what pasting it gives every engine the advice covers."""
    covered = advised_scenarios(scenarios)
    if not covered:
        return []
    first = covered[0]
    assert first.gpu is not None
    head = "To make it fit" if not first.gpu.fits else "For more headroom"
    several = len({x.engine for x in scenarios}) > 1
    scope = f"{format_tokens(first.ctx)} x{first.batch}"
    if several:
        scope += f"; {', '.join(s.engine for s in covered)}"
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    changes = list(dict.fromkeys(sug.change for s in covered if s.gpu is not None for sug in s.gpu.suggestions))
    for change in changes:
        said: list[str] = []
        why = ""
        for s in covered:
            assert s.gpu is not None
            sug = next((x for x in s.gpu.suggestions if x.change == change), None)
            label = f"{escape(s.engine)}: " if several else ""
            said.append(label + (_suggestion_verdict(sug, s.batch) if sug else "[red]not served[/]"))
            why = why or (sug.why if sug else "")
        said[-1] += f" ({escape(why)})"
        if len(change.split()) > 2:  # a combination: its flags lead the text, the first column stays narrow
            said = [f"[bold]{escape(change)}[/]" + (":" if several else f": {said[0]}"), *(said if several else [])]
            grid.add_row("  together", "\n".join(said))
        else:
            grid.add_row(f"  [bold]{escape(change)}[/]", "\n".join(said))
    return [from_markup(f"[bold]{head}[/] ({escape(scope)}):"), grid]


# --- listings --------------------------------------------------------------------------------------------


def render_gpus(console: Console, profiles: Iterable[GpuProfile]) -> None:
    columns = [
        Column("id", "left", key=True),
        Column("memory"),
        Column("bandwidth"),
        Column("bf16 TFLOP/s"),
        Column("fp8", "left"),
        Column("fp4", "left"),
        Column("class", "left"),
        Column("name", "left", wrap=True),
        Column("aliases", "left", wrap=True),
    ]
    rows = []
    for p in profiles:
        bf16 = p.dense_tflops.get("bf16") if p.dense_tflops else None
        bandwidth = f"{p.memory_bandwidth_bytes_per_s / 1e9:,.0f} GB/s" if p.memory_bandwidth_bytes_per_s else "-"
        rows.append(
            [
                p.id,
                format_bytes(p.memory_bytes),
                bandwidth,
                "-" if bf16 is None else f"{bf16:g}",
                "yes" if p.fp8_native else "-",
                "yes" if p.fp4_native else "-",
                p.segment,
                escape(p.name),
                ", ".join(p.aliases) or "-",
            ]
        )
    for table in stacked_tables("GPU profiles", columns, rows, _width(console)):
        console.print(table)


def render_models(console: Console, entries: Iterable[tuple[RegistryEntry, str]]) -> None:
    columns = [Column("hub id", "left", key=True), Column("architecture", "left", wrap=True)]
    rows = [[escape(entry.hub_id), escape(summary)] for entry, summary in entries]
    for table in stacked_tables("Built-in models (work offline)", columns, rows, _width(console)):
        console.print(table)


# --- check and plan --------------------------------------------------------------------------------------


CHECK_KEYS_MIN = 16  # the check's key columns at their narrowest: deployment folded to 1, result 6, padding, rules


def render_check(console: Console, results: Sequence[CheckResult]) -> None:
    # A model id is never split while it fits beside the key columns (rich shrinks the deployment column
    # first); only one wider than that folds.
    room = _width(console) - CHECK_KEYS_MIN
    columns = [
        Column("deployment", "left", key=True, wrap=True),
        Column("result", "left", key=True),
        Column("gpu", "left"),
        Column("ctx x batch"),
        Column("max reqs"),
        Column("KV budget/GPU"),
        Column("model", "left", wrap=any(Text(r.model).cell_len > room for r in results)),
    ]
    rows = []
    for r in results:
        budget = "-" if r.kv_budget_bytes is None else format_bytes(r.kv_budget_bytes)
        rows.append(
            [
                escape(r.name),
                "[green]pass[/]" if r.passed else "[red]FAIL[/]",
                escape(r.gpu or "-"),
                f"{r.ctx:,} x {r.batch}",
                "-" if r.max_concurrency is None else f"{r.max_concurrency:,}",
                budget,
                escape(r.model),
            ]
        )
    for table in stacked_tables("Capacity check", columns, rows, _width(console)):
        console.print(table)
    # max_concurrency is summed over replicas (capacity_file.check_deployment); concurrency is the engine's own
    console.print("[dim]max reqs: requests of ctx at once, all replicas; JSON concurrency is per replica[/]")
    if results:
        console.print(_verdict_lines(results, _width(console)))
    failed = sum(not r.passed for r in results)
    console.print(f"{plural(len(results), 'deployment')}: {len(results) - failed} pass, {failed} fail")


def _verdict_lines(results: Sequence[CheckResult], width: int) -> Group:
    """`pass NAME: REASON` per deployment as one Text (one string and its colour spans): a print, or a Text
    joined, per line costs rich about 0.4 ms, half of checking a deployment (benchmarks/startup.py). User
    text goes through `clean`, as in every table; lines that all fit the width skip rich's wrapping pass."""
    from rich.cells import cell_len
    from rich.text import Span

    from kvsize.text import clean

    pieces: list[str] = []
    spans: list[Span] = []
    at = 0
    for r in results:
        word, style = ("pass", "green") if r.passed else ("FAIL", "red")
        where = f" (line {r.line})" if r.line and not r.passed else ""
        line = f"{word} {clean(r.name)}{where}: {clean(r.reason)}"
        spans.append(Span(at, at + 4, style))
        pieces.append(line)
        at += len(line) + 1
    text = Text("\n".join(pieces), spans=spans)
    if all(cell_len(line) <= width for line in pieces):  # nothing to wrap: skip rich's wrapping pass
        text.no_wrap, text.overflow = True, "ignore"
    return Group(text)


def render_plan(console: Console, plans: Sequence[GpuPlan], *, title: str) -> None:
    columns = [
        Column("gpu", "left", key=True),
        Column("GPUs", key=True),
        Column("tp"),
        Column("replicas"),
        Column("reqs/replica"),
        Column("USD/hour"),
    ]
    served = [p for p in plans if p.gpus is not None]
    rows = [
        [
            p.gpu,
            str(p.gpus),
            "-" if p.tp is None else str(p.tp),
            "-" if p.replicas is None else str(p.replicas),
            "-" if p.concurrency_per_replica is None else f"{p.concurrency_per_replica:,}",
            "-" if p.usd_per_hour is None else f"{p.usd_per_hour:,.2f}",
        ]
        for p in served
    ]
    if not rows:  # no card serves it: the title and the reasons, not an empty table
        console.print(Text(title))
    for table in stacked_tables(title, columns, rows, _width(console)) if rows else []:
        console.print(table)
    unserved: dict[str, list[str]] = {}
    for p in plans:
        if p.gpus is None:
            unserved.setdefault(p.reason, []).append(p.gpu)
    for reason, names in unserved.items():
        console.print(from_markup(f"[red]cannot serve it[/] on {escape(', '.join(names))}: {escape(reason)}"))
