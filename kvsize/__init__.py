"""kvsize: exact KV-cache memory for LLM deployments."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvsize.api import Estimate, estimate

__all__ = ["Estimate", "__version__", "estimate"]


def __getattr__(name: str) -> Any:
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
