"""Advice a user can trust: every suggestion's `change`, pasted onto the same command line, gives exactly the
figures the suggestion promised (fits, requests at once, KV budget, KV per GPU), and is never bad input. Also
the engine cap's message and the shared prefix's max ctx, worked by hand from the config and the engines'
source.

Llama-3.1-8B (config): 32 layers, 8 KV heads of 128, bf16. vLLM 0.33.0 pages of 16 tokens
(vllm/v1/core/kv_cache_utils.py: one block = block_size tokens of one layer), so one token costs
32 x 8 x 128 x 2 (K, V) x 2 B = 131,072 B and one block of all layers 16 x 131,072 = 2 MiB.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from kvsize.cli import app
from tests.test_terminal import assert_uncut, in_terminal

# Cases worked by hand for vLLM 0.33.0 (16-token blocks, the profiled budget): conftest.py vllm_033.
pytestmark = pytest.mark.usefixtures("vllm_033")

ROOT = Path(__file__).resolve().parent.parent
LLAMA_8B = "meta-llama/Llama-3.1-8B"
WORKLOAD = ROOT / "examples" / "chat_workload.csv"
MIB = 2**20
runner = CliRunner()


def sized(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code in (0, 1), result.output  # never bad input (2) or an environment failure (3)
    return result.exit_code, json.loads(result.stdout)


def pasted_scenario(data: dict[str, Any], original: dict[str, Any], change: str) -> dict[str, Any]:
    """The scenario of the pasted run that stands for `original` after `change`."""
    flag, value = change.split(" ", 1)
    ctx = int(value) if flag == "--ctx" else original["ctx"]
    found = [
        s
        for s in data["scenarios"]
        if (s["engine"], s["ctx"], s["batch"]) == (original["engine"], ctx, original["batch"])
    ]
    if len(found) > 1:  # several dtypes asked for: the same one, unless the change is the dtype
        found = [s for s in found if flag == "--kv-dtype" or s["kv_dtype"] == original["kv_dtype"]]
    assert len(found) == 1, (change, [(s["engine"], s["ctx"], s["batch"]) for s in data["scenarios"]])
    return found[0]


PASTE_CASES = {
    # audit 2: the shared prefix is stored once in every rerun
    "prefix-len": [LLAMA_8B, "--gpu", "h100", "--ctx", "8k", "--batch", "64", "--prefix-len", "2k"],
    # audit 3: prompt + output; no --ctx below 2,000 may be suggested
    "prompt-output": [LLAMA_8B, "--batch", "300", "--gpu", "h100", "--prompt-len", "1500", "--output-len", "500"],
    "gpu-util": [LLAMA_8B, "--ctx", "32k", "--batch", "8", "--gpu", "h100", "--gpu-util", "0.5"],
    "tp-4": ["meta-llama/Llama-3.1-70B-Instruct", "--ctx", "32k", "--batch", "16", "--gpu", "h100", "--tp", "4"],
    "tp-2-prefix-prompt": shlex.split(
        "Qwen/Qwen3-8B --ctx 16k --batch 64 --gpu l40s --tp 2 --prefix-len 4k --prompt-len 12k --output-len 4k"
    ),
    # a workload file: ctx = the longest row, 6,000 + 1,200; no --ctx below it
    "workload": [LLAMA_8B, *shlex.split("--gpu l40s --batch 64 --prefix-len 300 --workload"), str(WORKLOAD)],
    # weights given per GPU stay per GPU when --tp is pasted
    "weights-per-gpu": [LLAMA_8B, "--ctx", "32k", "--batch", "8", "--gpu", "l40s", "--weights-mem-per-gpu", "15GiB"],
    # audit 4: one pasted flag changes every engine
    "engine-all": [LLAMA_8B, "--ctx", "32k", "--gpu", "l4", "--engine", "all"],
    "grid-two-engines": [
        LLAMA_8B,
        *shlex.split("--ctx 16k,32k --batch 4,8 --gpu l40s --engine vllm,sglang --prefix-len 1k --kv-dtype bf16"),
    ],
    # audit 5: the cap binds below the batch
    "cap": [LLAMA_8B, "--ctx", "128k", "--batch", "4", "--gpu", "h100", "--max-num-seqs", "2"],
}


@pytest.mark.parametrize("case", list(PASTE_CASES))
def test_every_suggestion_is_true_when_pasted(case: str) -> None:
    assert_true_when_pasted(PASTE_CASES[case], case)


def test_suggestions_are_true_when_pasted_with_a_calibration(tmp_path: Path) -> None:
    # Measured overheads and weights from a published vLLM log (tests/test_log_command.py) replace the model's.
    cal = tmp_path / "h100-llama.yaml"
    log = ROOT / "tests" / "data" / "logs" / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log"
    assert runner.invoke(app, ["log", str(log), "--gpu", "h100", "--save-calibration", str(cal)]).exit_code == 0
    # The log's own model (a calibration applies to the deployment it measured only); the advice keeps the
    # changes that stay on it (--kv-dtype, --ctx, --batch) and leaves out the card, tp and weights changes.
    args = ["meta-llama/Llama-3.1-8B-Instruct", "--gpu", "h100", "--ctx", "32k", "--batch", "16"]
    args += ["--engine-version", "0.19"]
    assert_true_when_pasted([*args, "--calibration", str(cal)], "calibration")
    _, data = sized(*args, "--calibration", str(cal))
    changes = [sug["change"] for s in data["scenarios"] for sug in s["gpu"]["suggestions"]]
    assert not any(flag in change.split() for change in changes for flag in ("--gpu", "--tp", "--weights-dtype"))


def assert_true_when_pasted(args: list[str], case: str, *, need_advice: bool = True) -> None:
    _, data = sized(*args)
    advised = [s for s in data["scenarios"] if s["gpu"]["suggestions"]]
    assert advised or not need_advice, "each case needs advice"
    for scenario in advised:
        for sug in scenario["gpu"]["suggestions"]:
            code, again = sized(*args, *sug["change"].split())
            got = pasted_scenario(again, scenario, sug["change"])["gpu"]
            promised = {k: sug[k] for k in ("fits", "max_concurrency", "max_concurrency_by_memory", "cap_binds")}
            assert {k: got[k] for k in promised} == promised, (case, scenario["engine"], sug["change"])
            assert got["kv_budget_bytes"] == sug["kv_budget_bytes"]
            assert got["concurrency_cap"] == sug["concurrency_cap"]
            if len(again["scenarios"]) == 1:  # the exit code says the same: 0 fits, 1 does not
                assert code == (0 if sug["fits"] else 1)


def test_no_context_shorter_than_the_requests_is_suggested() -> None:
    # Audit 3: 300 requests of 1,500 + 500 tokens need ctx >= 2,000; a shorter --ctx is bad input when pasted
    # ("workload row (1500, 500) exceeds the context"), so none is suggested; the KV budget holds 225 of them.
    _, data = sized(*PASTE_CASES["prompt-output"])
    [scenario] = data["scenarios"]
    assert scenario["ctx"] == 2000 and not scenario["gpu"]["fits"]
    assert not [s for s in scenario["gpu"]["suggestions"] if s["change"].startswith("--ctx")]
    # With a prefix of 4k inside 12k + 4k, none below 16,384 either (16k is the scenario's own ctx).
    _, data = sized(*PASTE_CASES["tp-2-prefix-prompt"])
    assert not [s for s in data["scenarios"][0]["gpu"]["suggestions"] if s["change"].startswith("--ctx")]


def test_suggestions_count_the_shared_prefix() -> None:
    # Audit 2, worked by hand. 8k x64 with a 2,048-token prefix. vLLM 0.33.0 stores whole prefix blocks once
    # (v1/core/single_type_kv_cache_manager.py FullAttentionManager.find_longest_cache_hit): hit =
    # min(2048, prompt - 1 = 8191) = 2048 = 128 blocks shared; each request holds 8192 / 16 = 512 blocks.
    # --kv-dtype fp8 halves a block (1 MiB): the same 55.02 GiB budget (tests/test_planner.py VLLM_BUDGET =
    # 59,082,486,744 B) holds 59,082,486,744 // 2^20 = 56,345 blocks (the bf16 pool: 28,172 blocks = 450,752
    # tokens), so (56,345 - 128) // (512 - 128) = 56,217 // 384 = 146 requests.
    _, data = sized(*PASTE_CASES["prefix-len"])
    [scenario] = data["scenarios"]
    gpu = scenario["gpu"]
    assert gpu["kv_budget_bytes"] == 59_082_486_744
    assert gpu["kv_pool_tokens"] == 450_752
    blocks = gpu["kv_budget_bytes"] // (2 * MIB)
    assert blocks == 28_172
    by_change = {s["change"]: s for s in gpu["suggestions"]}
    fp8_blocks = gpu["kv_budget_bytes"] // MIB
    assert by_change["--kv-dtype fp8"]["max_concurrency"] == (fp8_blocks - 128) // (512 - 128) == 146


def test_max_ctx_counts_the_shared_prefix_once() -> None:
    # Audit 12, worked by hand: 64 requests share 128 prefix blocks (above). Requests of n blocks each fit while
    # 64 x (n - 128) + 128 <= 28,172 blocks of the budget, so n - 128 <= 28,044 / 64 = 438.2: n = 566 blocks,
    # ctx = 566 x 16 = 9,056 tokens. max reqs counts alike: (28,172 - 128) // (512 - 128) = 73.
    # (Without the sharing, max ctx would be 28,172 // 64 = 440 blocks = 7,040 tokens.)
    _, data = sized(*PASTE_CASES["prefix-len"])
    gpu = data["scenarios"][0]["gpu"]
    assert (gpu["max_concurrency"], gpu["max_context"], gpu["max_context_by_memory"]) == (73, 9_056, 9_056)
    # The answer is tight: 64 requests of 9,056 tokens fit, of 9,057 (567 blocks) do not.
    assert sized(LLAMA_8B, "--gpu", "h100", "--ctx", "9056", "--batch", "64", "--prefix-len", "2k")[0] == 0
    assert sized(LLAMA_8B, "--gpu", "h100", "--ctx", "9057", "--batch", "64", "--prefix-len", "2k")[0] == 1


def test_cap_message_compares_with_what_the_budget_holds() -> None:
    # Audit 5. Qwen3-0.6B (config: 28 layers, 8 KV heads of 128, bf16): 28 x 8 x 128 x 2 x 2 = 114,688 B per
    # token. On an H200 vLLM's pool is 1,163,040 tokens = 72,690 blocks of 16; a 1,024-token request is 64
    # blocks, so the budget holds 72,690 // 64 = 1,135 (the pool line's 1,163,040 / 1,024 = 1135.78x), but
    # max_num_seqs is 1,024 (vLLM 0.33.0 engine/arg_utils.py default for an H200 as the API server).
    # The H200's CUDA-visible memory is 139.81 GiB = 150,119,844,413 B (gpu_profiles/h200.yaml cuda_total_bytes, a
    # published vLLM log), 140,047,811 B under the nominal 140.40 GiB less the CUDA context.
    # That is 140,047,811 x 0.92 = 128,843,986 B less KV memory: 1,123 tokens, 71 blocks of 16 (1,136 tokens):
    # 72,619 blocks. The RoPE table, 40,960 positions x 128 x 2 B = 10,485,760 B (kvsize/rope_tables.py), is
    # 5.71 blocks of 1,835,008 B more: 72,614 blocks = 1,161,824 tokens, 72,614 // 64 = 1,134 requests,
    # 1,161,824 / 1,024 = 1134.59x.
    _, data = sized("Qwen/Qwen3-0.6B", "--ctx", "1k", "--gpu", "h200")
    gpu = data["scenarios"][0]["gpu"]
    block = 16 * 114_688
    assert (gpu["kv_budget_bytes"] + 10_485_760) // block == 72_619  # the budget before the table
    assert gpu["kv_budget_bytes"] // block == 72_614
    assert gpu["kv_pool_tokens"] == 72_614 * 16 == 1_161_824
    assert (gpu["max_concurrency"], gpu["max_concurrency_by_memory"], gpu["concurrency_cap"]) == (1024, 1134, 1024)
    assert gpu["cap_binds"]
    code, screen = in_terminal(
        "Qwen/Qwen3-0.6B", "--ctx", "1k", "--gpu", "h200", "--engine-version", "0.33", colour=False
    )  # the release worked above (the terminal run is a fresh process)
    assert code == 0
    assert_uncut(screen)
    flat = " ".join(screen.split())
    assert "at most 1,024 requests at once, fewer than the 1,134 the KV budget holds at 1,024 tokens" in flat
    assert "1134.59x, above the engine's cap of 1,024 running requests" in flat


def test_sglang_cap_message_compares_with_what_the_budget_holds() -> None:
    # Audit 5, SGLang at 128 tokens on an H200: pages of one token, so the pool of 1,169,968 tokens holds
    # 1,169,968 // 128 = 9,140 requests; SGLang's default max_running_requests (mem_cache/
    # kv_cache_configurator.py KVCacheConfigurator.resolve_max_num_reqs, 0.5.23) is int(pool / 128 x 512)
    # clamped to [2048, 4096] = 4,096. From the H200's CUDA-visible 139.81 GiB (140,047,811 B under the old
    # start) the pool is 140,047,811 x 0.903 / 114,688 = 1,102 tokens smaller: 1,168,866. SGLang's RoPE table is
    # float32 (40,960 x 128 x 4 B = 20,971,520 B = 182.9 tokens): 1,168,683 tokens, holding 9,130.
    _, data = sized("Qwen/Qwen3-0.6B", "--ctx", "128", "--gpu", "h200", "--engine", "sglang")
    gpu = data["scenarios"][0]["gpu"]
    assert (gpu["kv_budget_bytes"] + 20_971_520) // 114_688 == 1_168_866  # the pool before the table
    assert gpu["kv_pool_tokens"] == gpu["kv_budget_bytes"] // 114_688 == 1_168_683
    assert (gpu["max_concurrency"], gpu["max_concurrency_by_memory"], gpu["concurrency_cap"]) == (4096, 9130, 4096)
    code, screen = in_terminal("Qwen/Qwen3-0.6B", "--ctx", "128", "--gpu", "h200", "--engine", "sglang")
    flat = " ".join(screen.split())
    assert code == 0 and "at most 4,096 requests at once, fewer than the 9,130 the KV budget holds" in flat


def test_cap_below_the_batch_is_said_in_the_verdict_and_the_advice() -> None:
    # Llama-3.1-8B, 128k x4 on an H100 with --max-num-seqs 2: the pool is 28,729 blocks before the RoPE table
    # (131,072 x 128 x 2 B = 32 MiB = 16 blocks of 2 MiB), 28,713 blocks = 459,408 tokens after it; a
    # 131,072-token request is 8,192 blocks, so the budget holds 28,713 // 8,192 = 3 (< 4: does not fit) and the
    # cap runs 2. vLLM 0.33.0 (v1/core/sched/scheduler.py Scheduler.schedule) admits waiting requests only while
    # len(self.running) < max_num_seqs: the other 2 wait in the queue, holding no blocks, not preempted.
    args = PASTE_CASES["cap"]
    code, data = sized(*args)
    gpu = data["scenarios"][0]["gpu"]
    assert code == 1
    assert gpu["kv_pool_tokens"] == (28_729 - 16) * 16 == 459_408
    assert (gpu["fits"], gpu["max_concurrency"], gpu["max_concurrency_by_memory"]) == (False, 2, 3)
    # fp8 halves a block: 57,426 blocks // 8,192 = 7 held, the batch of 4 fits in memory, 2 run at once.
    fp8 = next(s for s in gpu["suggestions"] if s["change"] == "--kv-dtype fp8")
    assert (fp8["fits"], fp8["max_concurrency"], fp8["max_concurrency_by_memory"], fp8["cap_binds"]) == (
        True, 2, 7, True,
    )  # fmt: skip
    code, screen = in_terminal(*args, colour=False)
    assert code == 1
    assert_uncut(screen)
    flat = " ".join(screen.split())
    assert "fewer than the 3 the KV budget holds at 131,072 tokens" in flat
    assert "of the batch of 4, 2 run and 2 wait in the queue (not preempted)" in flat
    assert "--kv-dtype fp8 fits, 2 requests at once (the engine's cap; the KV budget holds 7; 2 of the" in flat
    assert "fits, 2 requests at once, KV budget" not in flat  # never without saying the cap binds


def test_batch_above_the_cap_that_fits_in_memory_says_so() -> None:
    # Qwen3-0.6B, 32k x8 on an H200 with --max-num-seqs 2: the pool is 73,759 blocks before the RoPE table (from
    # the H200's CUDA-visible 139.81 GiB: 140,047,811 x 0.92 / 114,688 B = 1,123 tokens, 70 blocks fewer than
    # from the nominal size), and the table (10,485,760 B = 5.71 blocks) leaves 73,753 = 1,180,048 tokens; a
    # 32,768-token request is 2,048 blocks, so the budget holds 73,753 // 2,048 = 36 >= 8: the batch fits in
    # memory (exit 0), but vLLM runs 2 of the 8 at once and the other 6 wait in the queue, not preempted.
    args = ["Qwen/Qwen3-0.6B", "--ctx", "32k", "--batch", "8", "--gpu", "h200", "--max-num-seqs", "2"]
    args += ["--engine-version", "0.33"]  # the release worked above (the terminal run is a fresh process)
    code, data = sized(*args)
    gpu = data["scenarios"][0]["gpu"]
    assert (gpu["kv_budget_bytes"] + 10_485_760) // (16 * 114_688) == 73_759  # the budget before the table
    assert code == 0 and gpu["kv_pool_tokens"] == 73_753 * 16 == 1_180_048
    assert (gpu["fits"], gpu["max_concurrency"], gpu["max_concurrency_by_memory"], gpu["cap_binds"]) == (
        True, 2, 36, True,
    )  # fmt: skip
    code, screen = in_terminal(*args)
    assert code == 0
    assert_uncut(screen)
    flat = " ".join(screen.split())
    assert "fewer than the 36 the KV budget holds at 32,768 tokens" in flat
    assert "the batch fits in memory, but of the batch of 8, 2 run and 6 wait in the queue (not preempted)" in flat


def test_engine_all_advises_every_engine_that_does_not_fit() -> None:
    # Audit 4: on an L4 at 32k, vLLM and SGLang do not fit (the others do). Each suggested change is judged
    # for both: SGLang's budget is 115.90 MiB, so fp8 (2 GiB for 32k) still does not fit there.
    args = PASTE_CASES["engine-all"]
    _, data = sized(*args)
    failing = {s["engine"]: s["gpu"] for s in data["scenarios"] if not s["gpu"]["fits"]}
    assert set(failing) == {"vllm", "sglang"}
    changes = {e: [s["change"] for s in g["suggestions"]] for e, g in failing.items()}
    assert changes["vllm"] == changes["sglang"]  # the same changes, each judged for each engine
    fp8 = {e: next(s for s in g["suggestions"] if s["change"] == "--kv-dtype fp8") for e, g in failing.items()}
    assert fp8["vllm"]["fits"] and not fp8["sglang"]["fits"]
    code, screen = in_terminal(*args)
    assert code == 1
    assert_uncut(screen)
    advice = screen[screen.index("To make it fit") :]
    assert advice.startswith("To make it fit (32k x1; vllm, sglang):")
    for change in changes["vllm"]:
        block = advice[advice.index(change) :].split("\n  --", 1)[0]
        assert "vllm:" in block and "sglang:" in block, block


@pytest.mark.parametrize(
    "args",
    [
        "google/gemma-3-27b-it --gpu h200 --batch 16 --prefix-len 8k",  # sliding layers keep part of the prefix
        "Qwen/Qwen3-8B --gpu h100 --batch 32 --prefix-len 2k --engine sglang",  # pages of one token
        "Qwen/Qwen3-8B --gpu h100 --batch 32 --prefix-len 2k --engine trtllm",
        "meta-llama/Llama-3.1-8B --gpu l4 --batch 8 --prefix-len 1000 --prompt-len 1500 --output-len 500",
    ],
)
def test_max_ctx_with_a_prefix_is_the_longest_that_fits(args: str) -> None:
    # The law behind audit 12: with the prefix counted as max reqs counts it, `batch` requests of max ctx fit
    # and of max ctx + 1 do not (the exit code of the same command at that ctx).
    _, data = sized(*shlex.split(args), "--ctx", "32k")
    longest = data["scenarios"][0]["gpu"]["max_context_by_memory"]
    assert sized(*shlex.split(args), "--ctx", str(longest))[0] == 0
    assert sized(*shlex.split(args), "--ctx", str(longest + 1))[0] == 1


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from([LLAMA_8B, "Qwen/Qwen3-8B", "Qwen/Qwen3-0.6B", "google/gemma-3-27b-it"]),
    gpu=st.sampled_from(["l4", "l40s", "h100", "h200"]),
    engine=st.sampled_from(["vllm", "sglang", "trtllm"]),
    ctx=st.integers(1, 20).map(lambda k: k * 2048),  # within every model's maximum context (40,960)
    batch=st.integers(1, 96),
    prefix=st.one_of(st.none(), st.integers(1, 2048)),
    util=st.sampled_from([None, "0.7", "0.95"]),
    seqs=st.sampled_from([None, "4", "64"]),
)
def test_suggestions_are_true_when_pasted_law(
    model: str, gpu: str, engine: str, ctx: int, batch: int, prefix: int | None, util: str | None, seqs: str | None
) -> None:
    # The law, over scenarios nobody picked: whatever is suggested, pasting it gives the promised figures.
    args = [model, "--gpu", gpu, "--engine", engine, "--ctx", str(ctx), "--batch", str(batch)]
    for flag, value in (("--prefix-len", prefix), ("--gpu-util", util), ("--max-num-seqs", seqs)):
        args += [flag, str(value)] if value is not None else []
    result = runner.invoke(app, [*args, "--json"])
    if result.exit_code == 2:  # a combination the engine refuses (e.g. its minimum memory): nothing to advise
        return
    assert_true_when_pasted(args, "law", need_advice=False)
