"""Engine releases as data: each engine's history is a table of eras, and any version a user types maps to one.

An era is a range of releases whose cache rules are identical; its `rules` record holds one named switch per
rule that changed somewhere in the engine's history (each engine module defines its own record and cites the
file and function of every field). Engine code reads switches and never compares version strings.

Versions are PEP 440 (vLLM prints `0.29.1rc1.dev17+gd2d649e67`, NGC builds `0.11.0+582e4e37.nv25.11`), so they
are parsed with `packaging.version`, not by hand:
- a release, patch, post or vendor build (`+nv25.11`, `+rocm`: the local label is dropped) maps to the era
  whose first release is the newest at or below it;
- a release candidate or alpha/beta (`0.26.0rc1`) is cut from its release's branch, so it maps as that release;
- a development build (`0.29.1rc1.dev17`) precedes its release (PEP 440 ordering) and maps to the era of the
  newest release before it;
- a release newer than the newest read uses the newest era, with a note; one older than the oldest era's first
  release is refused, naming the oldest.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Generic, TypeVar

from kvsize.errors import UsageError

if TYPE_CHECKING:
    from packaging.version import Version

RulesT = TypeVar("RulesT")


@dataclass(frozen=True)
class Era(Generic[RulesT]):
    """Releases `first` .. `last` (the newest of them read), whose cache rules are `rules`."""

    first: str
    last: str
    rules: RulesT
    read: tuple[str, ...] = ()
    """The releases whose source was read for this era (sdists, wheels or tags)."""
    series_depth: int = 2
    """Leading numbers that name a release series: vLLM's 0.21 (2), SGLang's 0.5.4 (3)."""
    partly_read: str | None = None
    """What was read of an era whose source was read only in part; every figure it sizes carries the note."""

    @property
    def name(self) -> str:
        """The era's id: its first release (what calibrations and rule comparisons key on)."""
        return self.first

    def span(self, next_first: str | None = None) -> str:
        """How the output names the era: `0.21-0.25` (whole series), `0.11` (one whole series), `0.10.0` or
        `0.11.1-0.11.2` (part of a series: the next era starts inside it), `0.8.5` (from a patch release)."""
        depth = self.series_depth
        shares_series = next_first is not None and _series(next_first, depth) == _series(self.last, depth)
        first = _series_name(self.first, depth, start=True)
        last = self.last if shares_series else _series_name(self.last, depth, start=False)
        if _series(self.first, depth) == _series(self.last, depth):
            if first != self.first and not shares_series:  # the era is the whole series
                return first
            same = _public(self.first) == _public(self.last) or self.last.startswith(self.first + ".post")
            return self.first if same else f"{self.first}-{self.last}"
        return f"{first}-{last}"


@dataclass(frozen=True)
class Resolved(Generic[RulesT]):
    """A typed version resolved: the release named, its era and a note when the era is a guess."""

    release: str
    era: Era[RulesT]
    note: str | None = None


@dataclass(frozen=True)
class ReleaseTable(Generic[RulesT]):
    """One engine's eras, oldest first; each era runs until the next one's first release."""

    engine: str
    title: str
    eras: tuple[Era[RulesT], ...]
    unread: tuple[str, ...] = ()
    """Releases inside an era whose source could not be read (no sdist): sized with that era, with a note."""

    @cached_property
    def _firsts(self) -> list[Version]:
        """The eras' first releases, parsed, checked to be in release order. Parsed on the first version typed,
        not at import: a run at the newest release never loads packaging."""
        firsts = [_parse(e.first) for e in self.eras]
        if firsts != sorted(firsts) or len(set(firsts)) != len(firsts):
            raise ValueError(f"{self.engine}: eras must be in release order")
        return firsts

    @property
    def newest(self) -> Era[RulesT]:
        return self.eras[-1]

    @property
    def oldest(self) -> Era[RulesT]:
        return self.eras[0]

    def span_of(self, era: Era[RulesT]) -> str:
        """The era's name in the output (`0.21-0.25`), told apart from the eras beside it."""
        if era not in self.eras:  # a named era outside the numbered ones (llama.cpp's trees without a build)
            return era.span()
        index = self.eras.index(era)
        following = self.eras[index + 1].first if index + 1 < len(self.eras) else None
        return era.span(following)

    def spans(self) -> str:
        """Every era, for --engine-version's help: `0.8.5, 0.9, ...`."""
        return ", ".join(self.span_of(e) for e in self.eras)

    def era_named(self, name: str) -> Era[RulesT] | None:
        return next((e for e in self.eras if e.name == name), None)

    @cached_property
    def _resolved(self) -> dict[str, Resolved[RulesT]]:
        """Releases resolved so far: a capacity file names the same release on every deployment."""
        return {}

    def resolve(self, text: str | None) -> Resolved[RulesT]:
        """The era that sizes release `text` (None: the newest read)."""
        if text is None:
            return Resolved(self.newest.last, self.newest)
        known = self._resolved.get(text)
        if known is None:
            known = self._resolved[text] = self._resolve(text)
        return known

    def _resolve(self, text: str) -> Resolved[RulesT]:
        typed = text.strip()
        version = _parse(typed)
        if version.release == (0, 1) and version.is_devrelease:
            # setuptools-scm's fallback for a checkout without release tags (vLLM built from a shallow clone
            # prints 0.1.dev7548+gbaba038): no release can be told from it.
            raise UsageError(
                f"{self.title} {typed} is a build from a checkout without release tags: its release cannot be told",
                hint="Pass --engine-version with the release the checkout was made from (0.9.2, 0.19.1, ...).",
            )
        key = _order_key(version)
        firsts = self._firsts
        if key < firsts[0]:
            raise UsageError(
                f"{self.title} {typed} is not modelled: older than the oldest release kvsize models "
                f"({self.oldest.first})",
                hint=f"kvsize models {self.title} {self.oldest.first} to {self.newest.last} ({self.spans()}).",
            )
        era = [e for e, first in zip(self.eras, firsts, strict=True) if first <= key][-1]
        shown = typed.lstrip("vV")
        if key > _parse(self.newest.last):  # PEP 440: 0.33 == 0.33.0; a post release (0.5.23.post1) is later
            return Resolved(
                shown,
                era,
                f"{self.title} {shown} is newer than the newest release kvsize has read ({self.newest.last}); "
                f"sized with the rules of {self.span_of(era)}",
            )
        if era.partly_read is not None:
            return Resolved(
                shown,
                era,
                f"{self.title} {shown}: only {era.partly_read} was read in this release's source; the other rules "
                f"are those of the next era read in full",
            )
        if any(_release_of(version) == _release_of(_parse(u)) for u in self.unread):
            return Resolved(
                shown,
                era,
                f"{self.title} {shown}'s source was not read (none is published): sized with the rules of "
                f"{self.span_of(era)}; a change kvsize dates to the next era may have landed in it",
            )
        return Resolved(shown, era)


def _parse(text: str) -> Version:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text.strip())
    except InvalidVersion:
        raise UsageError(
            f"--engine-version '{text.strip()[:40]}' is not a release number",
            hint="For example 0.19, 0.19.1 or 0.29.1rc1.dev17+gd2d649e67 (as the engine prints it).",
        ) from None


def _release_of(version: Version) -> tuple[int, ...]:
    """The release numbers without trailing zeros: 0.33 and 0.33.0 are one release."""
    numbers = list(version.release)
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    return tuple(numbers)


def _order_key(version: Version) -> Version:
    """Where a version sits among releases: the local label dropped; a pre-release (rc, alpha, beta) as its
    release; a development build where PEP 440 puts it (before its release)."""
    from packaging.version import Version

    if version.is_devrelease:
        return Version(version.public)
    if version.is_prerelease:
        return Version(version.base_version)
    return Version(version.public)


def _series(text: str, depth: int) -> tuple[str, ...]:
    return tuple(text.split(".")[:depth])


def _public(text: str) -> str:
    return text.split("+")[0]


def _series_name(text: str, depth: int, *, start: bool) -> str:
    """A release by its series (`depth` numbers): 0.21.0 -> 0.21, 0.19.1 -> 0.19 as an era's end; an era that
    starts inside a series (a patch or post release: 0.8.5, 0.4.9.post2) keeps its full name."""
    numbers = text.split(".")
    numbered = len(numbers) > depth and all(n.isdigit() for n in numbers[:depth])
    if numbered and (not start or all(n == "0" for n in numbers[depth:])):
        return ".".join(numbers[:depth])
    return text


# --- engines whose releases are named, not numbered, or not yet tabled ------------------------------------


class Release:
    """A named rule set (llama.cpp trees, transformers' cache layouts): the one typed, exactly."""

    def __init__(self, rules: str, note: str | None = None) -> None:
        self.rules = rules
        self.note = note


def resolve_named(engine: str, modelled: tuple[str, ...], text: str | None) -> Release:
    """The rule set named `text` among `modelled` (newest first; None: the newest)."""
    if text is None:
        return Release(modelled[0])
    typed = text.strip()
    if typed in modelled:
        return Release(typed)
    raise UsageError(
        f"--engine-version '{typed[:40]}' is not modelled for {engine}", hint=f"Choose one of: {', '.join(modelled)}."
    )
