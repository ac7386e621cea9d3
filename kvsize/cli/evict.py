"""`kvsize evict`: how much memory an eviction policy hands back when the cache is paged."""

from __future__ import annotations

from typing import Annotated

import typer

from kvsize.cli.options import DebugOpt, JsonOpt, emit, user_errors

TokensOpt = Annotated[
    str, typer.Option("--tokens", help="Tokens in one request's cache (per layer): 16000, 16k.", metavar="TOKENS")
]
KeepOpt = Annotated[
    str, typer.Option("--keep", help="Tokens the policy keeps (the rest are evicted): 1600, 10%.", metavar="TOKENS|PCT")
]
EvictBlockOpt = Annotated[
    str, typer.Option("--block-size", help="Tokens per block (vLLM 16, TRT-LLM 32).", metavar="TOKENS")
]
PatternOpt = Annotated[
    str,
    typer.Option(
        "--pattern",
        help="Which tokens are evicted: uniform (scattered, exact expectation), clustered (kept tokens in runs, "
        "simulated), recent (keep the last --keep, as StreamingLLM's window).",
        metavar="uniform|clustered|recent",
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the clustered simulation.", metavar="N")]


def _keep(text: str, tokens: int) -> int:
    """--keep as tokens (0 allowed, at most --tokens) or a share of --tokens (exact decimal arithmetic)."""
    from decimal import Decimal, InvalidOperation

    from kvsize.errors import UsageError
    from kvsize.units import parse_tokens

    cleaned = text.strip()
    if cleaned.endswith("%"):
        number = cleaned[:-1].strip().replace("_", "")
        try:
            share = Decimal(number) if number.isascii() and number else Decimal(-1)
        except InvalidOperation:
            share = Decimal(-1)
        if not share.is_finite() or not 0 <= share <= 100:
            raise UsageError(
                f"cannot read --keep {shown(text)}", hint="Give tokens (1600) or a share from 0% to 100% (10%)."
            )
        return int((tokens * share / 100).to_integral_value())
    kept = parse_tokens(cleaned, allow_zero=True)
    if kept > tokens:
        raise UsageError(f"--keep {kept:,} is more than --tokens {tokens:,}", hint="Keep at most every token.")
    return kept


def shown(text: str) -> str:
    from kvsize.text import clean

    cleaned = clean(text)
    return f"'{cleaned[:60]}...'" if len(cleaned) > 60 else f"'{cleaned}'"


def evict(
    tokens: TokensOpt,
    keep: KeepOpt,
    block_size: EvictBlockOpt = "16",
    pattern: PatternOpt = "uniform",
    seed: SeedOpt = 0,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """Blocks freed when an eviction policy (StreamingLLM, H2O, SnapKV) keeps --keep of --tokens.

    A block frees only when every token in it is gone.

    Uniform is exact (hypergeometric); clustered is a seeded simulation."""
    with user_errors(debug):
        from kvsize.errors import UsageError
        from kvsize.serving import MAX_EVICT_BLOCK, PATTERNS
        from kvsize.serving import evict as run
        from kvsize.units import parse_count, parse_tokens

        total = parse_tokens(tokens)
        name = pattern.strip().lower()
        if name not in PATTERNS:
            raise UsageError(f"unknown --pattern {shown(pattern)}", hint=f"Choose one of: {', '.join(PATTERNS)}.")
        block = parse_count(block_size, "block size", maximum=MAX_EVICT_BLOCK)
        result = run(total, _keep(keep, total), block, name, seed)

    def render(console: object) -> None:
        from rich.console import Console

        assert isinstance(console, Console)
        r = result
        console.print(
            f"{r.tokens:,} tokens in {r.blocks:,} blocks of {r.block_size}; keep {r.keep:,} "
            f"({1 - r.tokens_evicted_fraction:.1%}), evict {r.tokens_evicted_fraction:.1%} ({r.pattern})"
        )
        console.print(
            f"blocks freed: {r.blocks_freed:,.2f} of {r.blocks:,} = {r.bytes_freed_fraction:.1%} of the cache's memory"
        )
        console.print(f"[dim]{r.method}; lossy: the evicted tokens are gone from attention[/]")

    from kvsize.record import to_json

    emit(render, lambda: to_json(result), json_output)
