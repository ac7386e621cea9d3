"""kvsize: exact KV-cache memory for LLM deployments, under each serving engine's own rules.

    >>> import kvsize
    >>> result = kvsize.estimate("meta-llama/Llama-3.1-8B", ctx="32k", gpu="h100")
    >>> result.scenarios[0].kv_cache_bytes          # bytes, integer-exact
    >>> result.scenarios[0].gpu.max_concurrency     # requests of 32k that fit on the card

`estimate(model, **options)` takes a hub id, a path to a config.json (or its folder) or a config dict, and the
options of the CLI by their long names: ctx, batch, kv_dtype, engine, engine_version, tp, pp, gpu, gpu_mem,
weights_dtype, hf_overrides, ... (`kvsize.api.EstimateOptions` lists them all, with their types; each value is
read as the CLI reads it and refused as it refuses it, with kvsize.errors.UsageError). It returns an
`Estimate`: the architecture, one scenario per engine x context x batch x KV dtype (bytes per token, per request,
the engine's block rounding, the fit on the card) and notes. Exit codes and errors: README "Exit codes".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvsize.api import Estimate, estimate

__all__ = ["Estimate", "__version__", "estimate"]


def __dir__() -> list[str]:
    return sorted(__all__)


def __getattr__(name: str) -> Any:
    """kvsize.estimate, kvsize.Estimate and kvsize.__version__, loaded on first use."""
    # Loaded on first use so that `kvsize --help` imports neither pydantic nor importlib.metadata.
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("kvsize")
        except PackageNotFoundError:  # running from a checkout without installing
            return "0.0.0+unknown"
    if name in ("estimate", "Estimate"):
        from kvsize import api

        return getattr(api, name)
    raise AttributeError(f"module 'kvsize' has no attribute {name!r}")
