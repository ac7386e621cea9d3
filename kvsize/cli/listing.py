"""`kvsize gpus` and `kvsize models`: what --gpu and the built-in registry accept."""

from __future__ import annotations

import sys

import typer

from kvsize.cli.options import DebugOpt, JsonOpt, user_errors


def gpus(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """List the GPU profiles --gpu accepts, with memory, bandwidth and low-precision support."""
    with user_errors(debug):
        from kvsize.profiles import load_profiles

        profiles = sorted(load_profiles().values(), key=lambda p: (p.vendor, -p.memory_bytes, p.id))
    if json_output:
        import json

        typer.echo(json.dumps([p.model_dump(mode="json") for p in profiles], indent=2))
        return
    from rich.console import Console

    from kvsize.report import render_gpus

    render_gpus(Console(highlight=False, width=None if sys.stdout.isatty() else 160), profiles)


def models(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """List the built-in models: their configs ship with kvsize, so they work offline and without a token."""
    with user_errors(debug):
        from kvsize.config import parse_config
        from kvsize.registry import load_registry_config, registry_entries

        rows = []
        for entry in registry_entries().values():
            spec = parse_config(load_registry_config(entry), source=entry.hub_id)
            kinds = ", ".join(f"{n} {layer.kind}" for layer, n in spec.layer_groups())
            rows.append((entry, f"{spec.model_type}: {spec.attention_label} ({kinds})"))
    if json_output:
        import json

        typer.echo(json.dumps([{"hub_id": e.hub_id, "summary": s} for e, s in rows], indent=2))
        return
    from rich.console import Console

    from kvsize.report import render_models

    render_models(Console(highlight=False, width=None if sys.stdout.isatty() else 160), rows)
