"""kvsize: exact KV-cache memory for LLM deployments."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("kvsize")
except PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0.0.0+unknown"

if TYPE_CHECKING:
    from kvsize.api import Estimate, estimate

__all__ = ["Estimate", "__version__", "estimate"]


def __getattr__(name: str) -> Any:
    # The API pulls in pydantic; load it on first use so `kvsize --help` stays light.
    if name in ("estimate", "Estimate"):
        from kvsize import api

        return getattr(api, name)
    raise AttributeError(f"module 'kvsize' has no attribute {name!r}")
