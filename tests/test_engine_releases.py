"""Any engine version a user types (kvsize/engines/releases.py): PEP 440 versions, each to the modelled rule set
of its own series, newer releases to the newest rules with a note, releases between modelled series and older
than the oldest refused (issue 22's "any version a user types", issue 20's `--engine-version 0.19.1`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvsize.engines import get_engine
from kvsize.engines.releases import Era, ReleaseTable
from kvsize.errors import UsageError

# A synthetic table: the resolution laws, apart from any engine's real eras.
TABLE = ReleaseTable(
    engine="demo",
    title="Demo",
    eras=(
        Era("0.8.5", "0.9.2", "a"),
        Era("0.10.0", "0.13.0", "b"),
        Era("0.14.0", "0.33.0", "c"),
    ),
)


@pytest.mark.parametrize(
    ("typed", "era"),
    [
        ("0.8.5", "a"),
        ("0.8.5.post1", "a"),  # a post release follows its release
        ("0.9.2", "a"),
        ("0.10.0", "b"),  # an era's first release
        ("0.10", "b"),  # 0.10 == 0.10.0 (PEP 440)
        ("v0.10.0", "b"),
        ("0.10.0rc1", "b"),  # a release candidate is cut from its release's branch
        ("0.10.0.dev5", "a"),  # a dev build precedes its release: the era before it
        ("0.10.1rc1.dev17+gd2d649e67", "b"),  # after 0.10.0, before 0.10.1
        ("0.13.9", "b"),
        ("0.14.0+582e4e37.nv25.11", "c"),  # a vendor's local label is dropped
        ("0.14.0+rocm", "c"),
        ("0.33.0", "c"),
    ],
)
def test_release_to_era(typed: str, era: str) -> None:
    resolved = TABLE.resolve(typed)
    assert resolved.era.rules == era
    assert resolved.note is None  # within the releases read: no note


@pytest.mark.parametrize("typed", ["0.33.1", "0.34", "1.0.0", "0.34.0rc1", "0.33.0.post1"])
def test_newer_than_the_newest_read_uses_the_newest_with_a_note(typed: str) -> None:
    resolved = TABLE.resolve(typed)
    assert resolved.era.rules == "c"
    assert resolved.note is not None and "newer than the newest release kvsize has read (0.33.0)" in resolved.note


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("0.8.4", "older than the oldest release kvsize models (0.8.5)"),
        ("0.8.5.dev1", "older than the oldest"),  # a dev build of the oldest precedes it
        ("0.7.1", "older than the oldest"),
        ("abc", "is not a release number"),
        ("0.33 ; rm", "is not a release number"),
        ("", "is not a release number"),
    ],
)
def test_release_refused(typed: str, why: str) -> None:
    with pytest.raises(UsageError, match=re.escape(why)):
        TABLE.resolve(typed)


def test_no_version_is_the_newest_read() -> None:
    resolved = TABLE.resolve(None)
    assert (resolved.release, resolved.era.rules, resolved.note) == ("0.33.0", "c", None)


def test_era_spans_name_series() -> None:
    assert [TABLE.span_of(e) for e in TABLE.eras] == ["0.8.5-0.9", "0.10-0.13", "0.14-0.33"]
    assert Era("0.11.0", "0.11.2", None).span() == "0.11"  # the whole series
    assert Era("0.11.0", "0.11.0", None).span(next_first="0.11.1") == "0.11.0"  # the next era starts inside it
    assert Era("0.11.1", "0.11.2", None).span() == "0.11.1-0.11.2"
    assert Era("0.8.5", "0.8.5.post1", None).span() == "0.8.5"
    assert Era("0.4.9.post2", "0.4.10.post1", None, series_depth=3).span() == "0.4.9.post2-0.4.10"
    assert Era("0.5.4", "0.5.9", None, series_depth=3).span() == "0.5.4-0.5.9"


def test_eras_must_be_in_release_order() -> None:
    with pytest.raises(ValueError, match="release order"):  # checked on the first version typed
        ReleaseTable("x", "X", (Era("0.2", "0.2", 1), Era("0.1", "0.1", 2))).resolve("0.2")


@given(st.tuples(st.integers(0, 1), st.integers(0, 40), st.integers(0, 5)))
def test_era_order_follows_release_order(numbers: tuple[int, int, int]) -> None:
    """A later release never maps to an earlier era (the map is monotone in PEP 440 order)."""
    text = ".".join(map(str, numbers))
    later = f"{numbers[0]}.{numbers[1]}.{numbers[2] + 1}"
    try:
        first = TABLE.resolve(text).era
    except UsageError:
        return  # older than the oldest
    assert TABLE.eras.index(TABLE.resolve(later).era) >= TABLE.eras.index(first)


def test_named_trees_stay_exact() -> None:
    # llama.cpp is modelled by build number since issue 22 (kvsize/engines/llamacpp_releases.py); the old tree
    # names stay aliases of their eras, and b7445 (a start-up log's build) resolves to its era.
    assert get_engine("llamacpp", "2025-04").version == "2025-04"
    assert get_engine("llamacpp", "b7445").version == "b7445"
    with pytest.raises(UsageError, match="older than the oldest build"):
        get_engine("llamacpp", "b5000")


def test_sglang_series_is_the_full_number() -> None:
    # SGLang's series is the patch number: 0.5.4 and 0.5.23 are different eras (issue 22: 0.5.4's
    # mem_fraction_static formula differs), and a post release maps to its own release's era.
    assert get_engine("sglang", "0.5.23").version == "0.5.23"
    assert get_engine("sglang", "0.5.23.post1").rules_name == "0.5.23"
    assert get_engine("sglang", "0.5.4").rules_name == "0.5.4"
    assert get_engine("sglang", "v0.5.4.post1").rules_name == "0.5.4"
    with pytest.raises(UsageError, match="older than the oldest"):
        get_engine("sglang", "0.3.6")
    # 0.4.0-0.4.9.post1 were read for the default mem_fraction_static only: sized with a note saying so.
    early = get_engine("sglang", "0.4.9.post1")
    assert early.rules_name == "0.4.9" and early.release_note is not None and "only the default" in early.release_note


def test_the_era_reaches_the_user() -> None:
    def run(version: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "8k", "--engine-version", version],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
        )

    patch = run("0.19.1")
    assert patch.returncode == 0, patch.stderr
    assert "rule: vllm 0.19.1 (rules of 0.19)" in patch.stdout
    between = run("0.24.0")  # every release from 0.8.5 to 0.33.0 has its era (kvsize/engines/vllm_releases.py)
    assert between.returncode == 0 and "rule: vllm 0.24.0 (rules of 0.24)" in between.stdout
    old = run("0.7.1")
    assert old.returncode == 2 and old.stderr.count("\n") == 1 and "oldest release kvsize models (0.8.5)" in old.stderr


def test_json_carries_the_note() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvsize",
            "meta-llama/Llama-3.1-8B",
            "--ctx",
            "8k",
            "--engine-version",
            "0.34.1",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0
    assert any("newer than the newest" in n for n in json.loads(done.stdout)["notes"])


def test_engine_version_help_lists_the_eras() -> None:
    from kvsize.cli.options import ENGINE_ERAS
    from kvsize.engines.llamacpp_releases import LLAMACPP_RELEASES
    from kvsize.engines.sglang_releases import SGLANG_RELEASES
    from kvsize.engines.trtllm_releases import TRTLLM_RELEASES
    from kvsize.engines.vllm_releases import VLLM_RELEASES

    tables = (VLLM_RELEASES, SGLANG_RELEASES, LLAMACPP_RELEASES, TRTLLM_RELEASES)
    assert {table.title: table.spans() for table in tables} == ENGINE_ERAS
