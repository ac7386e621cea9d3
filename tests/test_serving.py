"""Serving-time memory (kvsize/serving.py): every expected value is worked by hand from the config and the
engines' source, with the arithmetic in the comment beside it.

Shared model: a Llama-3.1-8B-shaped config, 32 full layers x 8 KV heads x (128 + 128) x 2 B (bf16)
= 4,096 B per token per layer, 131,072 B per token for the model.
"""

from __future__ import annotations

import json
from fractions import Fraction
from itertools import combinations
from math import comb
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvsize.api import estimate
from kvsize.cli.app import app
from kvsize.config import parse_config
from kvsize.dtypes import KvDtype
from kvsize.engines import get_engine
from kvsize.errors import ConfigError, UsageError
from kvsize.serving import (
    break_even_context,
    evict,
    expected_freed_uniform,
    life_sum,
    percentile,
    prefix_share,
    shared_concurrency,
    shared_total,
    tiers,
)
from kvsize.workload_file import parse_workload

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "head_dim": 128,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
}
PER_TOKEN = 32 * 8 * 256 * 2  # 131,072 B
# Gemma-2 shape: layers alternate sliding (window 1000) and full; 4 KV heads x (256 + 256) x 2 B = 4,096 B per layer.
GEMMA2 = {
    "model_type": "gemma2",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "hidden_size": 2304,
    "head_dim": 256,
    "intermediate_size": 9216,
    "vocab_size": 256000,
    "max_position_embeddings": 8192,
    "sliding_window": 1000,
    "torch_dtype": "bfloat16",
}
BF16 = KvDtype.BF16
runner = CliRunner()


def share(engine: str, config: dict[str, object], prefix: int, ctx: int, prompt: int | None = None, **kw: object):  # type: ignore[no-untyped-def]
    return prefix_share(
        get_engine(engine, **kw),
        parse_config(config),
        prefix_len=prefix,
        prompt_len=prompt or ctx,
        ctx=ctx,
        kv_dtype=BF16,
    )


# --- 1. shared prefixes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "tokens"),
    [
        (2048, 2048),  # on a block boundary: 2048 / 16 = 128 whole blocks
        (2050, 2048),  # off it: floor(2050 / 16) = 128 blocks; the 2 tokens of block 129 stay per request
        (2063, 2048),  # floor(2063 / 16) = 128
        (2064, 2064),  # floor(2064 / 16) = 129 blocks = 2064 tokens
        (15, 0),  # less than one block: nothing shared
    ],
)
def test_vllm_shares_whole_blocks(prefix: int, tokens: int) -> None:
    # vLLM 0.33.0 FullAttentionManager.find_longest_cache_hit: whole cached blocks from the start.
    got = share("vllm", LLAMA, prefix, ctx=8192)
    assert got.shared_tokens_by_kind == {"full": tokens}
    assert got.shared_bytes == tokens * PER_TOKEN


def test_vllm_hit_stops_one_token_short_of_the_prompt() -> None:
    # kv_cache_manager.py get_computed_blocks: max_cache_hit_length = num_tokens - 1. A 2048-token prompt that
    # is all prefix hits 2047 tokens: floor(2047 / 16) = 127 blocks = 2032 tokens.
    got = share("vllm", LLAMA, 2048, ctx=4096, prompt=2048)
    assert got.hit_tokens == 2047
    assert got.shared_bytes == 2032 * PER_TOKEN


def test_vllm_sliding_layers_share_only_blocks_inside_the_window() -> None:
    # Gemma-2 shape, prefix 2048, ctx 2500, block 16. Full layers: 128 blocks = 2048 tokens.
    # Sliding (W = 1000): at the last step num_computed = 2499, get_num_skipped_tokens = 2499 - 1000 + 1 = 1500,
    # floor(1500 / 16) = 93 blocks freed; prefix blocks 93..127 remain = 35 blocks = 560 tokens.
    got = share("vllm", GEMMA2, 2048, ctx=2500)
    assert got.shared_tokens_by_kind == {"sliding": 560, "full": 2048}
    assert got.shared_bytes == 2 * 2048 * 4096 + 2 * 560 * 4096  # 21,364,736
    # ctx 4000: skipped 3000 tokens = 187 blocks > 128 prefix blocks: sliding layers share nothing.
    assert share("vllm", GEMMA2, 2048, ctx=4000).shared_tokens_by_kind == {"sliding": 0, "full": 2048}


def test_sglang_shares_tokens_trtllm_whole_blocks_formula_exactly() -> None:
    # SGLang radix cache, page 1 (RadixKey.page_aligned is a no-op): every prefix token.
    assert share("sglang", LLAMA, 2050, ctx=8192).shared_bytes == 2050 * PER_TOKEN
    # TensorRT-LLM block reuse, tokens_per_block 32: floor(2050 / 32) = 64 blocks = 2048 tokens.
    assert share("trtllm", LLAMA, 2050, ctx=8192).shared_bytes == 2048 * PER_TOKEN
    assert share("trtllm", LLAMA, 2080, ctx=8192).shared_bytes == 2080 * PER_TOKEN  # 65 blocks
    # The formula stores exactly N once (no block, no recomputed last token).
    assert share("formula", LLAMA, 2050, ctx=2050).shared_bytes == 2050 * PER_TOKEN
    # Formula sliding layers: prefix tokens inside the last W of ctx = 2048 - (2500 - 1000) = 548.
    assert share("formula", GEMMA2, 2048, ctx=2500).shared_tokens_by_kind == {"sliding": 548, "full": 2048}


@pytest.mark.parametrize("engine", ["llamacpp", "hf"])
def test_engines_without_prefix_sharing_say_so(engine: str) -> None:
    got = share(engine, LLAMA, 2048, ctx=8192)
    assert not got.enabled and got.shared_bytes == 0
    assert "share" in got.rule


def test_prefix_caching_off_shares_nothing() -> None:
    got = share("vllm", LLAMA, 2048, ctx=8192, enable_prefix_caching=False)
    assert not got.enabled and got.shared_bytes == 0


def test_totals_and_concurrency_count_the_prefix_once() -> None:
    # 64 requests of 8192 tokens, 2048 shared: 64 x 8192 x 131072 - 63 x 2048 x 131072 = 51,808,043,008 B.
    result = estimate(LLAMA, ctx=8192, batch=64, kv_dtype="bf16", prefix_len=2048)
    s = result.scenarios[0]
    assert s.kv_cache_bytes == 51_808_043_008
    assert s.shared_bytes == 268_435_456 and s.prefix_len == 2048
    assert shared_total(8192 * PER_TOKEN, 64, 2048 * PER_TOKEN) == 51_808_043_008
    # 55 GiB budget, 1 GiB per request, 256 MiB of it shared: (55 - 0.25) / 0.75 = 73 requests (55 without).
    assert shared_concurrency(55 << 30, 1 << 30, 1 << 28) == 73


def test_prefix_on_a_card_raises_concurrency_and_saves_prefill() -> None:
    plain = estimate(LLAMA, ctx=8192, kv_dtype="bf16", gpu="h100").scenarios[0].gpu
    shared = estimate(LLAMA, ctx=8192, kv_dtype="bf16", gpu="h100", prefix_len=2048).scenarios[0].gpu
    assert plain is not None and shared is not None
    budget = plain.kv_budget_bytes
    assert plain.max_concurrency == budget // (8192 * PER_TOKEN)
    # (budget - 2048 x 131072) // (6144 x 131072)
    assert shared.max_concurrency == (budget - 2048 * PER_TOKEN) // (6144 * PER_TOKEN)
    assert shared.prefill_saved_seconds is not None and shared.prefill_saved_seconds > 0


# --- 2. workloads ---------------------------------------------------------------------------------------


def test_residency_over_a_requests_life_with_block_rounding() -> None:
    # P 1500, O 500, blocks of 16: at decode step i the request holds cdiv(1500 + i, 16) x 16 tokens.
    # t = 1501..1504 -> 1504 (4 steps); then blocks 95..125 of 16 steps each at 16k tokens.
    # Sum = 4 x 1504 + 16 x 16 x (95 + ... + 125) = 6016 + 256 x 3410 = 878,976 token-steps.
    def size(t: int) -> int:
        return -(-t // 16) * 16

    assert life_sum(size, 1500, 500, 16) == 878_976
    assert life_sum(size, 1500, 500, 1) == 878_976  # token by token: the same sum
    # Mean 1757.952 tokens: P + O/2 = 1750 plus about half a block of rounding.
    result = estimate(LLAMA, kv_dtype="bf16", gpu="h100", prompt_len=1500, output_len=500)
    s = result.scenarios[0]
    assert s.ctx == 2000  # ctx = P + O without --ctx
    work = s.gpu.workload if s.gpu else None
    assert work is not None
    assert work.mean_resident_bytes == -(-878_976 * PER_TOKEN // 500)  # 230,418,285
    assert s.gpu is not None and s.gpu.steady_state_concurrency == pytest.approx(
        s.gpu.kv_budget_bytes / work.mean_resident_bytes
    )
    # Real token state: sum of t for t = 1501..2000 = 875,250; paged holds 878,976, contiguous 2000 x 500.
    assert work.token_state_share_paged == pytest.approx(875_250 / 878_976)
    assert work.token_state_share_contiguous == pytest.approx(875_250 / 1_000_000)
    assert s.gpu.throughput is not None and s.gpu.throughput.label == "bound"


def test_contiguous_allocation_reserves_the_whole_context() -> None:
    s = estimate(
        LLAMA, ctx=4096, kv_dtype="bf16", gpu="h100", prompt_len=1500, output_len=500, allocation="contiguous"
    ).scenarios[0]
    assert s.gpu is not None and s.gpu.workload is not None
    assert s.gpu.workload.mean_resident_bytes == 4096 * PER_TOKEN
    assert s.gpu.workload.token_state_share_contiguous == pytest.approx(875_250 / (4096 * 500))


def test_percentiles_and_workload_files(tmp_path: Path) -> None:
    assert percentile(list(range(1, 101)), 99) == 99  # nearest rank: ceil(0.99 x 100) = 99th value
    assert percentile(list(range(1, 101)), 50) == 50
    assert percentile([10, 20], 99) == 20 and percentile([10, 20], 50) == 10
    assert parse_workload("prompt,output\n100,20\n300,40\n", source="w.csv") == [(100, 20), (300, 40)]
    text = "percentiles:\n  p50: {prompt: 800, output: 200}\n  p99: [6000, 1500]\n"
    assert parse_workload(text, source="w.yaml") == [(800, 200), (6000, 1500)]
    for bad in ("- [1, true]\n", "- [0, 5]\n", "!!python/object:os.system {}\n", "requests: 5\n"):
        with pytest.raises(ConfigError):
            parse_workload(bad, source="w.yaml")
    with pytest.raises(ConfigError):
        parse_workload("1,2\n" * 400_000, source="w.csv")  # over the size cap


def test_workload_p99_concurrency() -> None:
    # Rows (1000, 200) and (6000, 2000): peaks 1200 -> 1200 tokens (75 blocks), 8000 tokens (500 blocks).
    s = estimate(LLAMA, kv_dtype="bf16", gpu="h100", workload=[(1000, 200), (6000, 2000)]).scenarios[0]
    assert s.ctx == 8000
    w = s.gpu.workload if s.gpu else None
    assert w is not None and s.gpu is not None
    assert (w.p50_resident_bytes, w.p99_resident_bytes) == (1200 * PER_TOKEN, 8000 * PER_TOKEN)
    assert w.concurrency_p99 == s.gpu.kv_budget_bytes // (8000 * PER_TOKEN)


# --- 3. eviction ----------------------------------------------------------------------------------------


def test_hypergeometric_expectation_by_hand() -> None:
    # T 4, evict 2, blocks [2, 2]: each empties with C(2, 0) / C(4, 2) = 1/6 -> 1/3 in all.
    assert expected_freed_uniform(4, 2, 2) == Fraction(1, 3)
    # T 5, evict 3, blocks [2, 2, 1]: C(3, 1) / C(5, 3) = 3/10 twice, C(4, 2) / C(5, 3) = 6/10 once -> 6/5.
    assert expected_freed_uniform(5, 3, 2) == Fraction(6, 5)


def test_issue_example_scattered_against_recent() -> None:
    # 16,000 tokens in 1,000 blocks of 16, 90% evicted (keep 1,600): 1000 x C(15984, 14384) / C(16000, 14400).
    exact = 1000 * Fraction(comb(16000 - 16, 14400 - 16), comb(16000, 14400))
    assert expected_freed_uniform(16000, 14400, 16) == exact
    scattered = evict(16000, 1600, 16, "uniform")
    assert scattered.blocks == 1000 and scattered.tokens_evicted_fraction == pytest.approx(0.9)
    assert scattered.bytes_freed_fraction < 0.2  # under a fifth (about 0.9^16 = 18.5%)
    assert scattered.method.startswith("exact")
    # Recent window: the last 1,600 tokens are blocks 900..999; blocks 0..899 empty -> 90%.
    recent = evict(16000, 1600, 16, "recent")
    assert recent.blocks_freed == 900 and recent.bytes_freed_fraction == pytest.approx(0.9)
    clustered = evict(16000, 1600, 16, "clustered", seed=1)
    assert clustered.method.startswith("simulation") and clustered.seed == 1
    assert clustered == evict(16000, 1600, 16, "clustered", seed=1)  # seeded: reproducible
    assert scattered.bytes_freed_fraction < clustered.bytes_freed_fraction <= 0.9


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 8), st.integers(1, 4), st.data())
def test_hypergeometric_matches_enumeration(tokens: int, block: int, data: st.DataObject) -> None:
    evicted = data.draw(st.integers(0, tokens))
    cases = list(combinations(range(tokens), evicted))
    blocks = -(-tokens // block)
    freed = sum(blocks - len({p // block for p in range(tokens) if p not in set(c)}) for c in cases)
    assert expected_freed_uniform(tokens, evicted, block) == Fraction(freed, len(cases))


def test_evict_command() -> None:
    out = runner.invoke(app, ["evict", "--tokens", "16000", "--keep", "10%", "--block-size", "16", "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert {"blocks", "blocks_freed", "bytes_freed_fraction", "tokens_evicted_fraction"} <= set(data)
    assert data["keep"] == 1600 and data["blocks"] == 1000
    bad = runner.invoke(app, ["evict", "--tokens", "16000", "--keep", "1600", "--pattern", "lru"])
    assert bad.exit_code == 2 and bad.output.count("Error:") == 1


def test_kv_budget_is_bounded_like_a_window_and_lossy() -> None:
    # 4096 tokens kept per layer at ctx 32768: 4096 / 16 = 256 blocks x 16 x 131072 B.
    s = estimate(LLAMA, ctx=32768, kv_dtype="bf16", kv_budget_tokens=4096).scenarios[0]
    assert s.ctx == 32768 and s.bytes_per_request == 4096 * PER_TOKEN
    assert s.kv_budget_tokens == 4096 and any("lossy" in n for n in s.notes)


# --- 4. offload tiers -----------------------------------------------------------------------------------


def test_tier_sizes_and_times() -> None:
    # 512 GiB / 131072 B = 4,194,304 tokens; a 32k request is 4,294,967,296 B: 0.067108864 s at 64 GB/s,
    # 0.6135667565714286 s from a 7 GB/s disk (the slower of disk and link).
    cpu, disk = tiers(
        cpu_bytes=512 << 30,
        disk_bytes=4 << 40,
        link_bytes_per_s=64_000_000_000,
        disk_bytes_per_s=7_000_000_000,
        bytes_per_token=PER_TOKEN,
        request_bytes_per_gpu=32768 * PER_TOKEN,
    )
    assert (cpu.tokens, disk.tokens) == (4_194_304, 33_554_432)
    assert cpu.restore_seconds_per_request == pytest.approx(0.067108864)
    assert disk.restore_seconds_per_request == pytest.approx(4_294_967_296 / 7e9)


def test_break_even_context_by_hand() -> None:
    # restore 1000 B/token over 1e8 B/s = 1e-5 s/token; recompute (2 x 100 n + 2 x 1 x 1000 n^2) / 1e9.
    # n > (1e-5 - 2e-7) / 2e-6 = 4.9 -> 5: restore(5) = 5e-5 < 5.1e-5; restore(4) = 4e-5 > 3.28e-5.
    kw = {"bytes_per_token_per_gpu": 1000, "active_parameters": 100, "num_layers": 1, "attention_width": 1000}
    assert break_even_context(link_bytes_per_s=100_000_000, flops_per_s=1e9, **kw) == 5
    assert break_even_context(link_bytes_per_s=10_000_000_000, flops_per_s=1e9, **kw) == 1  # always wins


def test_link_defaults_follow_the_gpu_profile() -> None:
    # H100 SXM: PCIe Gen5 x16, 64 GB/s one way. GH200: NVLink-C2C, 900 GB/s both ways = 450 one way.
    for gpu, link in (("h100", 64_000_000_000), ("gh200", 450_000_000_000)):
        s = estimate(LLAMA, ctx=32768, kv_dtype="bf16", gpu=gpu, offload=(512 << 30, None)).scenarios[0]
        off = s.gpu.offload if s.gpu else None
        assert off is not None and off.link_bytes_per_s == link
        assert off.tiers[0].restore_seconds_per_request == pytest.approx(32768 * PER_TOKEN / link)
        assert off.recompute_seconds_per_request is not None and off.break_even_context is not None
    given_link = estimate(LLAMA, ctx=32768, kv_dtype="bf16", gpu="gh200", offload=(1 << 30, 25_000_000_000))
    assert given_link.scenarios[0].gpu.offload.link_bytes_per_s == 25_000_000_000  # type: ignore[union-attr]


def test_disk_needs_a_cpu_tier_and_prompt_needs_output() -> None:
    with pytest.raises(UsageError):
        estimate(LLAMA, ctx=4096, gpu="h100", disk=(1 << 40, None))
    with pytest.raises(UsageError):
        estimate(LLAMA, ctx=4096, prompt_len=100)


# --- CLI ------------------------------------------------------------------------------------------------


def test_cli_serving_options(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    args = [str(config), "--gpu", "h100", "--prefix-len", "2k", "--prompt-len", "3000", "--output-len", "1000"]
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    s = json.loads(out.output)["scenarios"][0]
    assert s["prefix_len"] == 2048 and s["shared_bytes"] == 2048 * PER_TOKEN and s["ctx"] == 4000
    assert s["gpu"]["steady_state_concurrency"] > s["gpu"]["max_concurrency"]
    off = runner.invoke(app, [*args, "--no-enable-prefix-caching", "--json"])
    assert json.loads(off.output)["scenarios"][0]["shared_bytes"] == 0
    table = runner.invoke(app, args)
    assert table.exit_code == 0 and "stored once" in table.output and "steady state" in table.output


def test_llamacpp_slots_reserve_their_whole_context() -> None:
    # llama.cpp allocates every -c cell at start-up: the steady state is the admission figure, and a request
    # of 2,000 tokens in a 2,048-cell slot (gpad(2000) = 2048) holds 875,250 / (2048 x 500) of it as tokens.
    s = estimate(LLAMA, kv_dtype="bf16", gpu="h100", engine="llamacpp", prompt_len=1500, output_len=500).scenarios[0]
    assert s.gpu is not None and s.gpu.workload is not None
    assert s.gpu.workload.allocation == "contiguous"
    assert s.gpu.workload.mean_resident_bytes == s.bytes_per_request == 2048 * PER_TOKEN
    assert s.gpu.workload.token_state_share_contiguous == pytest.approx(875_250 / (2048 * 500))


def test_prefix_longer_than_the_context_is_refused() -> None:
    with pytest.raises(UsageError):
        estimate(LLAMA, ctx=4096, prefix_len=8192)


def test_every_pcie_profile_states_its_host_link() -> None:
    from kvsize.profiles import load_profiles

    speeds = {"Gen3": 16, "Gen4": 32, "Gen5": 64, "Gen6": 128}  # x16 per direction, PCI-SIG
    for profile in load_profiles().values():
        link = profile.interconnect
        assert link is not None
        if link.host_link_kind == "pcie":
            gen = next(g for g in speeds if g in (link.pcie or ""))
            lanes = 8 if "x8" in (link.pcie or "") else 16  # RTX 4060 Ti / 5060 Ti: x8, half the x16 rate
            assert link.host_link_gb_s_per_direction == speeds[gen] * lanes // 16, profile.id
        elif link.host_link_kind == "nvlink-c2c":
            assert link.host_link_gb_s_per_direction == 450, profile.id  # 900 GB/s both ways
        elif link.host_link_kind == "unified":
            assert link.host_link_gb_s_per_direction is None, profile.id


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 9000), st.integers(1, 9000), st.sampled_from(["vllm", "sglang", "trtllm", "formula"]))
def test_sharing_is_whole_blocks_and_never_costs_memory(prefix: int, extra: int, engine: str) -> None:
    # Law: a shared prefix is at most the prefix, a whole number of the engine's blocks (token pools: pages of 1),
    # and batch requests with it never need more than without it.
    ctx = prefix + extra
    got = share(engine, LLAMA, prefix, ctx=ctx)
    tokens = got.shared_tokens_by_kind["full"]
    block = {"vllm": 16, "trtllm": 32}.get(engine, 1)
    assert tokens <= prefix and tokens % block == 0
    per_request = get_engine(engine).estimate(parse_config(LLAMA), ctx=ctx, batch=1, kv_dtype=BF16).bytes_per_request
    assert got.shared_bytes <= per_request
    assert shared_total(per_request, 8, got.shared_bytes) <= 8 * per_request


def test_capacity_file_requires_serving_figures(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    (tmp_path / "capacity.yaml").write_text(
        "deployments:\n"
        "  - name: chat\n"
        "    model: ./config.json\n"
        "    gpu: h100\n"
        "    require:\n"
        "      ctx: 8k\n"
        "      prefix_len: 1024\n"
        "      prompt_len: 1500\n"
        "      output_len: 500\n"
        "      min_steady_state_concurrency: 100000\n"
    )
    out = runner.invoke(app, ["check", str(tmp_path / "capacity.yaml"), "--json"])
    assert out.exit_code == 1, out.output
    [row] = json.loads(out.output)["deployments"]
    # 1024 tokens x 131,072 B stored once.
    assert row["shared_bytes"] == 1024 * PER_TOKEN
    assert row["steady_state_concurrency"] < 100000 and "steady-state" in row["reason"]
