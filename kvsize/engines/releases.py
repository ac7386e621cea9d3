"""Any engine version a user types, to the release whose rules kvsize models. Pure.

Versions are PEP 440 (vLLM prints `0.29.1rc1.dev17+gd2d649e67`, NGC builds `0.11.0+582e4e37.nv25.11`), so they
are parsed with `packaging.version`, not by hand. A release maps to a modelled rule set only within that rule
set's own series (vLLM 0.19.1 -> 0.19: a patch release keeps its minor's cache rules); a release between two
modelled series is refused, because the rules changed in between at releases kvsize has not read (issue 22:
the sliding-window reserve, batch tiers, hybrid modes and Mamba state blocks each changed at another release).
A release newer than the newest modelled uses the newest rules, with a note; one older than the oldest is
refused, naming the oldest.
"""

from __future__ import annotations

from kvsize.errors import UsageError

# How many leading release numbers name a rule series, per engine: vLLM 0.19.x is one series, SGLang's and
# TensorRT-LLM's modelled releases are named by their full number.
SERIES_DEPTH = {"vllm": 2, "sglang": 3, "trtllm": 2}


class Release:
    """The outcome: the modelled rule set to apply, and a note when the release typed is not that one."""

    def __init__(self, rules: str, note: str | None = None) -> None:
        self.rules = rules
        self.note = note


def _series(text: str, depth: int) -> tuple[int, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        version = Version(text.strip())
    except InvalidVersion:
        raise UsageError(
            f"--engine-version '{text.strip()[:40]}' is not a release number",
            hint="For example 0.19, 0.19.1 or 0.29.1rc1.dev17+gd2d649e67 (as the engine prints it).",
        ) from None
    release = version.release + (0,) * depth
    return release[:depth]


def resolve_release(engine: str, title: str, modelled: tuple[str, ...], text: str | None) -> Release:
    """The rule set of `modelled` (newest first) that sizes release `text` of `engine` (None: the newest)."""
    if text is None:
        return Release(modelled[0])
    typed = text.strip()
    if typed in modelled:
        return Release(typed)
    depth = SERIES_DEPTH.get(engine)
    names = ", ".join(modelled)
    if depth is None:  # llama.cpp trees and transformers' cache layouts are named, not numbered
        raise UsageError(
            f"--engine-version '{typed[:40]}' is not modelled for {engine}", hint=f"Choose one of: {names}."
        )
    wanted = _series(typed, depth)
    series = {_series(m, depth): m for m in modelled}
    if wanted in series:
        rules = series[wanted]
        return Release(rules, f"{title} {typed}: sized with the rules of {title} {rules} (its series)")
    newest, oldest = max(series), min(series)
    if wanted > newest:
        rules = series[newest]
        return Release(
            rules,
            f"{title} {typed} is newer than the newest release kvsize models; sized with the rules of {rules}",
        )
    if wanted < oldest:
        raise UsageError(
            f"{title} {typed} is not modelled: older than the oldest release kvsize models ({series[oldest]})",
            hint=f"Choose one of: {names}.",
        )
    below = series[max(s for s in series if s < wanted)]
    above = series[min(s for s in series if s > wanted)]
    raise UsageError(
        f"{title} {typed} is not modelled: its cache rules may differ from both {below} and {above}, which kvsize "
        "models (docs/engines.md)",
        hint=f"Pass --engine-version {below} or {above} to size with that release's rules; kvsize models {names}.",
    )
