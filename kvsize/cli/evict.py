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
    from kvsize.errors import UsageError
    from kvsize.units import parse_tokens

    cleaned = text.strip()
    if cleaned.endswith("%"):
        try:
            share = float(cleaned[:-1])
        except ValueError:
            share = -1.0
        if not 0 <= share <= 100:
            raise UsageError(f"cannot read --keep '{text}'", hint="Give tokens (1600) or a share (10%).")
        return round(tokens * share / 100)
    if cleaned == "0":
        return 0
    return parse_tokens(cleaned)


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
        from kvsize.serving import PATTERNS
        from kvsize.serving import evict as run
        from kvsize.units import parse_count, parse_tokens

        total = parse_tokens(tokens)
        name = pattern.strip().lower()
        if name not in PATTERNS:
            raise UsageError(f"unknown --pattern '{pattern}'", hint=f"Choose one of: {', '.join(PATTERNS)}.")
        result = run(total, _keep(keep, total), parse_count(block_size, "block size"), name, seed)

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
