"""`kvsize gpus` and `kvsize models`: what --gpu and the built-in registry accept."""

from __future__ import annotations

from typing import Any

from kvsize.cli.options import DebugOpt, JsonOpt, emit, user_errors


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

        return json.dumps({"gpus": [p.model_dump(mode="json") for p in profiles]}, indent=2)

    emit(render, as_json, json_output)


def models(json_output: JsonOpt = False, debug: DebugOpt = False) -> None:
    """List the built-in models: their configs ship with kvsize, so they work offline and without a token.

    --json prints one object whose "models" lists each hub_id with a summary."""
    with user_errors(debug):
        from kvsize.config import parse_config
        from kvsize.registry import load_registry_config, registry_entries

        rows = []
        for entry in registry_entries().values():
            spec = parse_config(load_registry_config(entry), source=entry.hub_id)
            kinds = ", ".join(f"{n} {layer.kind}" for layer, n in spec.layer_groups())
            rows.append((entry, f"{spec.model_type}: {spec.attention_label} ({kinds})"))

    def render(console: Any) -> None:
        from kvsize.report import render_models

        render_models(console, rows)

    def as_json() -> str:
        import json

        return json.dumps({"models": [{"hub_id": e.hub_id, "summary": s} for e, s in rows]}, indent=2)

    emit(render, as_json, json_output)
