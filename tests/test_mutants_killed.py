"""Tests that kill the mutants benchmarks/mutants.py found alive (docs/testing.md lists them), each value worked
by hand from the engine's source or the rule's definition, cited beside it."""

from __future__ import annotations

import pytest

from kvsize.engines.context import Device, UsageContext
from kvsize.engines.sglang import tiered_reserve_mib
from kvsize.engines.vllm_scheduler import batch_defaults, scheduler_settings
from kvsize.errors import UsageError
from kvsize.units import _shown, parse_bandwidth, parse_revision

GIB = 1024**3


def test_vllm_160_gib_tier_starts_at_exactly_160_gib() -> None:
    # vllm/engine/arg_utils.py EngineArgs.get_batch_defaults@0.28.0: `if device_memory >= 160 * GiB_bytes:`
    # 16384 tokens / 1024 sequences; else `>= 70 * GiB_bytes` (not A100): API server 8192 / 1024.
    # 159.5 GiB is below the tier (a 159 GiB threshold would take it in); 160 GiB exactly is in it.
    below = Device(total_memory_bytes=159 * GIB + GIB // 2, name="NVIDIA H200")
    at = Device(total_memory_bytes=160 * GIB, name="NVIDIA H200")
    assert batch_defaults("0.28.0", below, UsageContext.API_SERVER) == (8192, 1024)
    assert batch_defaults("0.28.0", at, UsageContext.API_SERVER) == (16384, 1024)
    # 0.27.1 has no 160 GiB tier (VllmRules.tier_160gib False): the 70 GiB tier's 8192 / 1024.
    assert batch_defaults("0.27.1", at, UsageContext.API_SERVER) == (8192, 1024)


def test_vllm_throughput_mode_keeps_a_given_max_num_seqs() -> None:
    # vllm/engine/arg_utils.py _set_default_max_num_seqs_and_batched_tokens_args@0.19.0: throughput mode doubles
    # only the defaults; a --max-num-seqs the user gave (64) is kept as is (x1, not x0 or x2).
    settings = scheduler_settings(
        "0.19.0",
        Device(total_memory_bytes=80 * GIB, name="NVIDIA H100"),
        max_model_len=4096,
        throughput_mode=True,
        max_num_seqs=64,
    )
    assert settings.max_num_seqs == 64


def test_long_numbers_are_shown_by_their_digit_count() -> None:
    # units._shown: |value| >= 10**30 is shown as "about N digits", N = int(bit_length x log10 2) + 1.
    # 10**30: bit_length 100, 100 x 0.30103 = 30.1 -> 30 + 1 = 31 digits (a 10**31 cut would print it whole).
    assert _shown(10**30) == "(a number of about 31 digits)"
    # 10**40: bit_length 133, 133 x 0.30103 = 40.04 -> 41.
    assert _shown(10**40) == "(a number of about 41 digits)"


def test_bandwidth_in_gb_per_second() -> None:
    # units.parse_bandwidth: GB/s x 10**9 bytes per second, above 0 and at most MAX_LINK_GB_S (100,000).
    assert parse_bandwidth("64") == 64 * 10**9
    assert parse_bandwidth(1e-9) == 1  # 1e-9 GB/s = 1 B/s: the smallest rate that is not 0 once truncated
    for bad in ("0", "100001", 1e-10):  # 0; over the cap; 0.1 B/s truncates to 0
        with pytest.raises(UsageError):
            parse_bandwidth(bad)


def test_revision_text() -> None:
    # units.parse_revision: branch names under git check-ref-format; surrogates U+D800..U+DFFF refused (both ends).
    assert parse_revision("main") == "main"
    for bad in ("a\udfff", "a\ud800", 123):
        with pytest.raises(UsageError):
            parse_revision(bad)  # type: ignore[arg-type]


def test_sglang_tiered_reserve_below_90_gib() -> None:
    # sglang server_args.py ServerArgs.__post_init__@0.4.9.post2: `elif gpu_mem < 90 * 1024:` reserve
    # (9.5 + tp/2) GiB; 89.5 GiB at tp 1: (9.5 + 0.5) x 1024 = 10240 MiB.
    assert tiered_reserve_mib(89.5 * 1024, 1) == 10240


# --- survivors of the 2026-12-01 run (benchmarks/mutants.py --per-module 10 --seed 1) --------------------------


@pytest.mark.parametrize(
    ("name", "sms"),
    [
        # NVIDIA's specifications: RTX 6000 Ada 142 SMs (18,176 CUDA cores / 128), RTX 3090 82 (10,496 / 128),
        # L40 / L40S 142, L4 58, A10 72, RTX A6000 84 (10,752 / 128).
        ("NVIDIA RTX 6000 Ada Generation", 142),
        ("NVIDIA GeForce RTX 3090", 82),
        ("NVIDIA L40S", 142),
        ("NVIDIA L4", 58),
        ("NVIDIA A10", 72),
        ("NVIDIA RTX A6000", 84),
        (None, 132),  # no name: an H100's 132
    ],
)
def test_sm_counts_per_card(name: str | None, sms: int) -> None:
    from kvsize.budget import sm_count

    assert sm_count(name) == sms


def test_release_numbers_ignore_trailing_zeros() -> None:
    """releases._release_of: 1 and 1.0 are one release, so typing either for a newest of 1.0.0 gives no note."""
    from kvsize.engines.releases import Era, ReleaseTable

    table = ReleaseTable("x", "X", (Era("0.9.0", "0.9.0", "old"), Era("1.0.0", "1.0.0", "new")))
    assert table.resolve("1").note is None and table.resolve("1.0").note is None
    assert table.resolve("1.0.1").note is not None  # a later patch than the newest read
    # An era read up to a vendor build of its first release is named by that release alone.
    assert Era("0.8.5", "0.8.5+vendor", None).span() == "0.8.5"


def test_named_rule_sets_resolve_exactly() -> None:
    """releases.resolve_named (transformers' cache layouts): the name typed, exactly; another is refused naming
    the choices, the typed text cut at 40 characters."""
    from kvsize.engines.releases import resolve_named

    assert resolve_named("hf", ("5.15+", "<5.15"), "<5.15").rules == "<5.15"
    assert resolve_named("hf", ("5.15+", "<5.15"), None).rules == "5.15+"
    with pytest.raises(UsageError) as raised:
        resolve_named("hf", ("5.15+", "<5.15"), "x" * 100)
    assert f"'{'x' * 40}'" in str(raised.value) and "x" * 41 not in str(raised.value)
    assert "5.15+, <5.15" in (raised.value.hint or "")


def test_sglang_reserve_floor_only_above_60_gib() -> None:
    """arg_groups/memory_hook.py handle_gpu_memory_settings (0.5.23): `if gpu_mem > 60 * 1024: reserved =
    max(reserved, 10 * 1024)`. With chunk 2048, decode max_bs 8 and no prefill graph the reserve is
    512 + 2048 x 1.5 + 1/8 x 1024 + 8 x 2 = 3,728 MiB. At exactly 61,440 MiB (60 GiB) no floor:
    round((61,440 - 3,728) / 61,440, 3) = 0.939; one MiB more and the floor binds: round(51,201 / 61,441, 3) = 0.833."""
    from kvsize.engines.sglang import default_mem_fraction_static

    args = {"chunked_prefill_size": 2048, "cuda_graph_max_bs": 8, "prefill_graph": False}
    assert default_mem_fraction_static(61_440, **args) == 0.939
    assert default_mem_fraction_static(61_441, **args) == 0.833
