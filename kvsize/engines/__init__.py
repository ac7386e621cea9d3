"""Allocation rules, one module per engine. `formula` is the engine-independent floor."""

from __future__ import annotations

from kvsize.engines.base import Engine
from kvsize.engines.formula import FormulaEngine
from kvsize.errors import UsageError

ENGINES: dict[str, type[Engine]] = {FormulaEngine.name: FormulaEngine}
DEFAULT_ENGINE = FormulaEngine.name


def get_engine(name: str) -> Engine:
    """The engine called `name` (case-insensitive)."""
    engine = ENGINES.get(name.strip().lower())
    if engine is None:
        raise UsageError(f"unknown engine '{name}'", hint=f"Choose one of: {', '.join(ENGINES)}.")
    return engine()
