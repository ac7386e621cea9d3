"""Any engine version a user types (kvsize/engines/releases.py): PEP 440 versions, each to the modelled rule set
of its own series, newer releases to the newest rules with a note, releases between modelled series and older
than the oldest refused (issue 22's "any version a user types", issue 20's `--engine-version 0.19.1`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvsize.engines import get_engine
from kvsize.engines.releases import resolve_release
from kvsize.errors import UsageError

VLLM = ("0.33", "0.19", "0.11")


@pytest.mark.parametrize(
    ("typed", "rules"),
    [
        ("0.33", "0.33"),
        ("0.33.0", "0.33"),
        ("v0.33", "0.33"),
        ("0.33.0rc1", "0.33"),  # a release candidate of 0.33.0 is in the 0.33 series
        ("0.19.1", "0.19"),
        ("0.19.0.post1", "0.19"),
        ("0.11.0+582e4e37.nv25.11", "0.11"),  # NGC's build: the local version label is the vendor's
        ("0.11.2+rocm", "0.11"),
        ("0.34.0", "0.33"),  # newer than the newest: the newest rules, with a note
        ("1.0.0", "0.33"),
    ],
)
def test_vllm_release_to_rules(typed: str, rules: str) -> None:
    release = resolve_release("vllm", "vLLM", VLLM, typed)
    assert release.rules == rules
    assert (release.note is None) == (typed == rules)
    if typed.startswith(("0.34", "1.")):
        assert release.note is not None and "newer than the newest" in release.note


@pytest.mark.parametrize(
    ("typed", "why"),
    [
        ("0.24", "may differ from both 0.19 and 0.33"),
        ("0.20.0", "may differ from both 0.19 and 0.33"),  # the first release after 0.19: rules changed at 0.20
        ("0.18.9", "may differ from both 0.11 and 0.19"),
        ("0.12.0", "may differ from both 0.11 and 0.19"),
        ("0.29.1rc1.dev17+gd2d649e67", "may differ from both 0.19 and 0.33"),  # what vLLM prints at start-up
        ("0.10.2", "older than the oldest release kvsize models (0.11)"),
        ("0.8.5", "older than the oldest"),
        ("abc", "is not a release number"),
        ("0.33 ; rm", "is not a release number"),
    ],
)
def test_vllm_release_refused(typed: str, why: str) -> None:
    with pytest.raises(UsageError, match=why.replace("(", r"\(").replace(")", r"\)")):
        resolve_release("vllm", "vLLM", VLLM, typed)


def test_named_trees_stay_exact() -> None:
    # llama.cpp trees are named by date, not numbered: only the names kvsize models
    assert get_engine("llamacpp", "2025-04").version == "2025-04"
    with pytest.raises(UsageError, match="not modelled for llamacpp"):
        get_engine("llamacpp", "b7445")


def test_sglang_series_is_the_full_number() -> None:
    assert get_engine("sglang", "0.5.23").version == "0.5.23"
    assert get_engine("sglang", "0.5.23.post1").version == "0.5.23"
    with pytest.raises(UsageError, match="older than the oldest"):
        get_engine("sglang", "0.5.4")  # its mem_fraction_static formula differs (issue 22): not 0.5.23's


def test_the_note_reaches_the_user() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "8k", "--engine-version", "0.19.1"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"},
    )
    assert done.returncode == 0, done.stderr
    assert "note: vLLM 0.19.1: sized with the rules of vLLM 0.19 (its series)" in done.stdout
    assert "rule: vllm 0.19" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", "meta-llama/Llama-3.1-8B", "--ctx", "8k", "--engine-version", "0.24.0"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--engine-version 0.19 or 0.33" in done.stderr


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
