"""`kvsize gpus` and `kvsize models`: what --gpu and the built-in registry accept."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

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


def models(
    search: SearchOpt = None,
    family: FamilyOpt = None,
    attention: AttentionOpt = None,
    json_output: JsonOpt = False,
    debug: DebugOpt = False,
) -> None:
    """List the built-in models: their configs ship with kvsize, so they work offline and without a token.

    --json prints one object whose "models" lists each hub_id with its family and a summary."""
    with user_errors(debug):
        from kvsize.config import parse_config
        from kvsize.registry import load_registry_config, select_entries

        entries = select_entries(search=search, family=family)
        rows = []
        for entry in entries:
            spec = parse_config(load_registry_config(entry), source=entry.hub_id)
            if attention and not spec_has_attention(spec, attention):
                continue
            kinds = ", ".join(f"{n} {layer.kind}" for layer, n in spec.layer_groups())
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
