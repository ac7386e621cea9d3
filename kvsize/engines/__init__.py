"""Allocation rules, one module per engine. `formula` is the engine-independent floor."""

from __future__ import annotations

from functools import cache
from typing import Any

from kvsize.engines.base import Engine, UnsupportedArchitecture
from kvsize.engines.context import Device, EngineContext, UsageContext
from kvsize.engines.formula import FormulaEngine
from kvsize.engines.hf import HfEngine
from kvsize.engines.llamacpp import LlamaCppEngine
from kvsize.engines.sglang import SglangEngine
from kvsize.engines.trtllm import TrtllmEngine
from kvsize.engines.vllm import VllmEngine
from kvsize.errors import UsageError

ENGINES: dict[str, type[Engine]] = {
    FormulaEngine.name: FormulaEngine,
    VllmEngine.name: VllmEngine,
    HfEngine.name: HfEngine,
    SglangEngine.name: SglangEngine,
    TrtllmEngine.name: TrtllmEngine,
    LlamaCppEngine.name: LlamaCppEngine,
}
DEFAULT_ENGINE = VllmEngine.name

__all__ = [
    "DEFAULT_ENGINE",
    "ENGINES",
    "Device",
    "Engine",
    "EngineContext",
    "UnsupportedArchitecture",
    "UsageContext",
    "get_engine",
]


def get_engine(name: str, version: str | None = None, context: EngineContext | None = None, **options: Any) -> Engine:
    """The engine called `name` (case-insensitive) at `version` (default: the newest modelled release), for
    the device and scheduler settings in `context`. `options` are engine settings (block_size,
    max_num_batched_tokens, ...); engines ignore others' settings."""
    engine = ENGINES.get(name.strip().lower().replace(".", "").replace("-", ""))
    if engine is None:
        raise UsageError(f"unknown engine '{name}'", hint=f"Choose one of: {', '.join(ENGINES)}, all.")
    accepted = _settings_of(engine)
    chosen = engine(version, **{k: v for k, v in options.items() if k in accepted and v is not None})
    return chosen.with_context(context)


@cache
def _settings_of(engine: type[Engine]) -> frozenset[str]:
    """The settings an engine class takes (its constructor's parameters), read once per class."""
    import inspect

    return frozenset(inspect.signature(engine.__init__).parameters)
