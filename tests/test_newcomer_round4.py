"""A newcomer's first hour, round 4 (issue 20): a mistyped option is offered only the options it plausibly
mistypes; shell completion works through kvsize's own entry point; the sizing output explains its terms in
one line each and --explain prints the rule clauses of the model's own layer kinds; the advice never passes a
single change that does not fit for one that does, and offers the cheapest combination that fits.

Command lines run as a user runs them: `python -m kvsize` in a subprocess (HF_HUB_OFFLINE=1).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvsize.cli import app
from kvsize.cli.app import close_options
from kvsize.report import rule_for_kinds
from tests.test_terminal import assert_uncut, in_terminal

ROOT = Path(__file__).resolve().parent.parent
LLAMA_8B = "meta-llama/Llama-3.1-8B"
runner = CliRunner()


def kvsize(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("_KVSIZE", "COMP_"))}
    return subprocess.run(
        [sys.executable, "-m", "kvsize", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**base, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **(env or {})},
        check=False,
    )


# --- 1. a mistyped option -----------------------------------------------------------------------------------

TYPOS = {
    # click offered difflib's loose matches: "--allocation" for this one, a flag of kvsize itself
    "install-completion": (
        [LLAMA_8B, "--install-completion"],
        "Error: --install-completion is an option of kvsize itself, not of a command: "
        "run 'kvsize --install-completion'.",
    ),
    # a letter too many: --emit (click added --itl)
    "emitt": (
        [LLAMA_8B, "--emitt", "vllm"],
        "Error: No such option: --emitt. Did you mean: --emit? See 'kvsize size --help'.",
    ),
    # a letter too few: --allocation (click added --calibration, --explain)
    "alocation": (
        [LLAMA_8B, "--alocation", "paged"],
        "Error: No such option: --alocation. Did you mean: --allocation? See 'kvsize size --help'.",
    ),
    # two neighbours swapped, in another command
    "emit-dri": (
        ["check", "capacity.yaml", "--emit-dri", "out"],
        "Error: No such option: --emit-dri. Did you mean: --emit-dir? See 'kvsize check --help'.",
    ),
    "jsn": (["gpus", "--jsn"], "Error: No such option: --jsn. Did you mean: --json? See 'kvsize gpus --help'."),
    # a beginning: the names it begins, the shortest first, three at most (not --tp, --pp: one letter changed)
    "gp": (
        [LLAMA_8B, "--gp", "h100"],
        "Error: No such option: --gp. Did you mean: --gpu, --gpu-mem, --gpu-util? See 'kvsize size --help'.",
    ),
    # `_` for `-`; and one dash for two (click sees the short option -c)
    "underscore": (
        [LLAMA_8B, "--kv_dtype", "fp8"],
        "Error: No such option: --kv_dtype. Did you mean: --kv-dtype? See 'kvsize size --help'.",
    ),
    "one-dash": (
        [LLAMA_8B, "-ctx", "4k"],
        "Error: No such option: -ctx. Did you mean: --ctx? See 'kvsize size --help'.",
    ),
    # nothing near: no suggestion at all
    "unrelated": ([LLAMA_8B, "--zzzz"], "Error: No such option: --zzzz. See 'kvsize size --help'."),
    "unrelated-long": (
        [LLAMA_8B, "--frobnicate-widgets"],
        "Error: No such option: --frobnicate-widgets. See 'kvsize size --help'.",
    ),
}


@pytest.mark.parametrize("case", list(TYPOS))
def test_a_mistyped_option_gets_the_options_it_mistypes(case: str) -> None:
    args, line = TYPOS[case]
    done = kvsize(*args)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [line]


def test_close_options_ranks_the_closest_first() -> None:
    names = ["--gpu", "--gpu-mem", "--gpu-util", "--tp", "--pp", "--batch", "--batch-size", "--ctx"]
    assert close_options("--batc", names) == ["--batch", "--batch-size"]  # a beginning, the shorter first
    assert close_options("--bacth", names) == ["--batch"]  # one swap
    assert close_options("--ctxx", names) == ["--ctx"]
    assert close_options("--gpuu", names) == ["--gpu"]  # --gpu-mem is no beginning of it, and 4 edits away
    assert close_options("--install-completion", names) == []
    # A long name allows two edits (--weights-dtype), a short one only one (--tp for --tpx, not --pp).
    assert close_options("--weigts-dtyp", ["--weights-dtype", "--kv-dtype"]) == ["--weights-dtype"]
    assert close_options("--tpx", names) == ["--tp"]


# --- 2. shell completion -------------------------------------------------------------------------------------

COMPLETE = "_KVSIZE_COMPLETE"


def completions(words: str) -> list[str]:
    """What bash completion offers for the last word of `words`, as the script typer writes asks for it."""
    parts = shlex.split(words)
    done = kvsize(env={COMPLETE: "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout.split()


def test_bash_completion_script() -> None:
    done = kvsize(env={COMPLETE: "source_bash"})
    assert done.returncode == 0, done.stderr
    assert "complete -o default -F _kvsize_completion kvsize" in done.stdout
    assert f"{COMPLETE}=complete_bash $1" in done.stdout  # the script asks kvsize itself for the words


def test_completion_goes_through_the_default_command() -> None:
    # kvsize.cli.app:main registers only the command a run names; a completion run names none, and the first
    # word (a model) goes to `size`, whose options it completes.
    assert completions(f"kvsize {LLAMA_8B} --gp")[:3] == ["--gpu", "--gpu-mem", "--gpu-util"]
    assert completions("kvsize check capacity.yaml --emit") == ["--emit-dir"]
    assert completions("kvsize gp") == ["gpus"]
    assert {"--install-completion", "--show-completion", "--version"} <= set(completions("kvsize --"))


def test_show_completion_prints_this_shells_script() -> None:
    done = kvsize("--show-completion", env={"SHELL": "/bin/bash"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert f"{COMPLETE}=complete_" in done.stdout  # bash, zsh or fish: whichever runs the tests


def test_install_completion_writes_under_home(tmp_path: Path) -> None:
    done = kvsize("--install-completion", env={"HOME": str(tmp_path), "SHELL": "/bin/bash"})
    assert done.returncode == 0, done.stderr
    installed = Path(done.stdout.split(" completion installed in ", 1)[1].split(":", 1)[0])
    assert installed.is_relative_to(tmp_path) and COMPLETE in installed.read_text()


def test_no_shell_to_complete_for_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer._completion_shared as shared

    monkeypatch.setattr(shared, "_get_shell_name", lambda: "sh")  # a script's parent; no login shell either
    result = runner.invoke(app, ["--show-completion"], env={"SHELL": ""}, prog_name="kvsize")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "Error: Invalid value for '--show-completion': no completion for sh: run it from bash, zsh, fish or "
        "PowerShell. See 'kvsize --help'."
    ]


# --- 3. one-line glosses, and the rule of the model's own layer kinds ----------------------------------------


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_terms_are_explained_at_80_columns(colour: bool) -> None:
    code, screen = in_terminal(LLAMA_8B, "--ctx", "32k", "--gpu", "h100", colour=colour)
    assert code == 0
    assert_uncut(screen)
    flat = " ".join(screen.split())
    assert "elem/token: elements cached per token per layer; per token: bytes in all layers" in flat
    assert "state elem" not in flat  # no recurrent layer: no column of dashes, no gloss
    assert "non-torch: memory outside PyTorch's allocator (NCCL, cuBLAS buffers)" in flat
    # vLLM 0.34 (the newest): the pool is what warm-up leaves, less the start-up use and the margin it keeps
    assert "start-up use: in use when vLLM takes its first memory snapshot (CUDA context, NCCL)" in flat
    assert "warm-up margin: kept free after warm-up, max(1 GiB, 0.75 x the transient peak)" in flat
    # vLLM 0.33: ceil(CUDA-visible x 0.92) is the engine's; the other 8% it leaves free
    code, screen = in_terminal(LLAMA_8B, "--ctx", "32k", "--gpu", "h100", "--engine-version", "0.33", colour=colour)
    assert code == 0
    assert_uncut(screen)
    assert "outside the 0.92 share: the 8% the engine leaves free (--gpu-util 0.92)" in " ".join(screen.split())


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_a_hybrid_explains_its_state_column(colour: bool) -> None:
    code, screen = in_terminal("ai21labs/AI21-Jamba-1.5-Mini", "--ctx", "32k", colour=colour)
    assert code == 0
    assert_uncut(screen)
    flat = " ".join(screen.split())
    assert "state elem" in screen.splitlines()[3]  # the layers table's header row
    assert "state elem: recurrent state per request in one layer, fixed at any length" in flat


def test_sglang_share_is_what_runs_the_model() -> None:
    # SGLang's mem_fraction_static covers the weights and the KV pool; the rest is for activations and graphs.
    code, screen = in_terminal(LLAMA_8B, "--ctx", "32k", "--gpu", "h100", "--engine", "sglang", colour=False)
    assert code == 0
    assert "left to activations and CUDA graphs (--gpu-util 0.83)" in " ".join(screen.split())


def explained_rule(*args: str) -> str:
    code, screen = in_terminal(*args, "--ctx", "32k", "--explain", colour=False)
    assert code == 0
    assert_uncut(screen)
    flat = " ".join(screen.split())
    return flat[flat.index("rule: ") : flat.index(" KV cache")]


KIND_WORDS = ("sliding", "chunked", "mamba", "mla", "recurrent")


@pytest.mark.parametrize(
    ("model", "kinds"),
    [
        (LLAMA_8B, ()),  # full attention only
        ("ai21labs/AI21-Jamba-1.5-Mini", ("mamba",)),  # Mamba + full
        ("google/gemma-3-27b-it", ("sliding",)),  # sliding + full
        ("deepseek-ai/DeepSeek-V3", ("mla",)),
    ],
)
def test_explain_prints_the_clauses_of_the_models_kinds(model: str, kinds: tuple[str, ...]) -> None:
    rule = explained_rule(model).lower()
    assert rule.startswith("rule: vllm 0.34.0: blocks of 64 tokens per layer")
    assert "kv heads max(1, kv//tp)" in rule
    assert rule.endswith("(vllm/v1/kv_cache_interface.py, v1/core/kv_cache_planning.py)")
    for word in KIND_WORDS:
        assert (word in rule) == (word in kinds), (model, word, rule)


VLLM_RULE = (
    "vLLM 0.34.0: blocks of 64 tokens per layer (hybrid Mamba: enlarged to fit a state; MLA: the backend's block), "
    "sliding layers cdiv(min(W-1+in-flight, ctx), bs)+1 blocks, chunked cdiv(min(C+in-flight, ctx), bs), in-flight "
    "from the GPU's scheduler defaults, MLA latent replicated per TP rank, kv heads max(1, kv//tp); groups over the "
    "whole model, padded to a common size (vllm/v1/kv_cache_interface.py, v1/core/kv_cache_planning.py)"
)


def test_rule_for_kinds_keeps_the_sentence_whole() -> None:
    # Each clause of another kind goes with its separator; an aside left empty goes; the source stays.
    assert rule_for_kinds(VLLM_RULE, frozenset({"full"})) == (
        "vLLM 0.34.0: blocks of 64 tokens per layer, kv heads max(1, kv//tp); groups over the whole model, padded "
        "to a common size (vllm/v1/kv_cache_interface.py, v1/core/kv_cache_planning.py)"
    )
    assert rule_for_kinds(VLLM_RULE, frozenset({"full", "mamba", "state"})) == (
        "vLLM 0.34.0: blocks of 64 tokens per layer (hybrid Mamba: enlarged to fit a state), kv heads max(1, "
        "kv//tp); groups over the whole model, padded to a common size (vllm/v1/kv_cache_interface.py, "
        "v1/core/kv_cache_planning.py)"
    )
    every = frozenset({"full", "sliding", "chunked", "mla", "state"})
    assert rule_for_kinds(VLLM_RULE, every) == VLLM_RULE
    # A dropped clause's "; " survives it: "a; b, c" without b is "a; c".
    assert rule_for_kinds("x (s.py); sliding y, z", frozenset({"full"})) == "x (s.py); z"


# --- 4. advice: what fits, alone or together ------------------------------------------------------------------


def sized(*args: str) -> tuple[int, dict[str, Any]]:
    done = kvsize(*args, "--json")
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def assert_each_suggestion_true(args: list[str]) -> list[dict[str, Any]]:
    """Every suggestion, pasted onto the command line, gives what it promised; those offered as fitting fit."""
    _, data = sized(*args)
    [scenario] = data["scenarios"]
    assert not scenario["gpu"]["fits"]
    suggestions: list[dict[str, Any]] = scenario["gpu"]["suggestions"]
    for sug in suggestions:
        code, again = sized(*args, *sug["change"].split())
        [got] = again["scenarios"]
        assert code == (0 if sug["fits"] else 1), sug["change"]
        assert got["gpu"]["fits"] is sug["fits"], sug["change"]
        assert got["gpu"]["max_concurrency"] == sug["max_concurrency"], sug["change"]
        assert got["gpu"]["kv_budget_bytes"] == sug["kv_budget_bytes"], sug["change"]
    return suggestions


# Llama-3.1-405B (config): 126 layers, 8 KV heads of 128, bf16. At tp 8 each GPU holds 1 KV head, so a token
# costs 126 x 1 x 128 x 2 (K, V) x 2 B = 64,512 B per GPU in bf16 and 32,256 B in fp8; 8 requests of 131,072
# tokens (a multiple of vLLM's 16-token blocks): 67,645,734,912 B = 63 GiB in bf16, 33,822,867,456 B = 31.5 GiB
# in fp8. On 80 GB cards (no larger card to suggest, tp already 8), int4 weights leave a KV budget of 37.65 GiB
# (kvsize's vLLM budget): bf16 KV does not fit in it, fp8 KV does.
# Worked for vLLM 0.33's profiled budget (0.34's measured pool holds more).
NO_SINGLE_FITS = shlex.split(
    "meta-llama/Llama-3.1-405B --gpu-mem 80GB --tp 8 --ctx 128k --batch 8 --engine-version 0.33"
)


def test_when_no_single_change_fits_the_combination_is_offered() -> None:
    suggestions = assert_each_suggestion_true(NO_SINGLE_FITS)
    by_change = {s["change"]: s for s in suggestions}
    assert not any(s["fits"] for s in suggestions if len(s["change"].split()) == 2)
    combined = by_change["--kv-dtype fp8 --weights-dtype int4"]
    assert combined["fits"] and combined["kv_cache_bytes_per_gpu"] == 33_822_867_456
    assert by_change["--weights-dtype int4"]["kv_cache_bytes_per_gpu"] == 67_645_734_912
    assert by_change["--weights-dtype int4"]["kv_budget_bytes"] == combined["kv_budget_bytes"]  # the same card
    code, screen = in_terminal(*NO_SINGLE_FITS, colour=False)
    assert code == 1
    assert_uncut(screen)
    advice = " ".join(screen[screen.index("To make it fit") :].split())
    assert "--weights-dtype int4 not enough alone, 4 requests at once" in advice
    assert "together --kv-dtype fp8 --weights-dtype int4: fits, 9 requests at once" in advice
    assert "still does not fit" not in advice


# Llama-3.1-70B on one H100 at 32k x 4: more GPUs (--tp 4) or a larger card (--gpu b300) fit; on the same
# card int4 weights alone hold 3 requests of the 4, with fp8 KV too 6 (half the bytes per token). The
# combination needs no more hardware, so it is offered beside them.
SAME_CARD = shlex.split("meta-llama/Llama-3.1-70B --gpu h100 --ctx 32k --batch 4 --engine-version 0.33")


def test_a_combination_on_the_same_card_is_offered_beside_more_hardware() -> None:
    suggestions = assert_each_suggestion_true(SAME_CARD)
    by_change = {s["change"]: s for s in suggestions}
    assert by_change["--tp 4"]["fits"] and by_change["--gpu b300"]["fits"]
    assert not by_change["--weights-dtype int4"]["fits"] and by_change["--weights-dtype int4"]["max_concurrency"] == 3
    assert by_change["--kv-dtype fp8 --weights-dtype int4"]["fits"]
    assert [s["change"] for s in suggestions][-1] == "--kv-dtype fp8 --weights-dtype int4"  # singles first


def test_no_combination_when_a_single_change_on_the_card_fits() -> None:
    # Llama-3.1-8B at 128k x 4 on an H100: fp8 KV alone fits; nothing together is cheaper.
    _, data = sized(LLAMA_8B, "--gpu", "h100", "--ctx", "128k", "--batch", "4")
    changes = [s["change"] for s in data["scenarios"][0]["gpu"]["suggestions"]]
    assert "--kv-dtype fp8" in changes and all(len(c.split()) == 2 for c in changes)


def test_advice_sizes_a_bounded_number_of_times(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1 fp8 KV + 3 tp + 2 weights + 1 ctx + 3 cards + 8 combinations (kvsize/advice.py COMBINATION_REFITS).
    import kvsize.api

    calls = []
    original = kvsize.api._rerun

    def counted(*args: Any) -> Any:
        rerun = original(*args)

        def again(changes: Any) -> Any:
            calls.append(dict(changes))
            return rerun(changes)

        return again

    monkeypatch.setattr(kvsize.api, "_rerun", counted)
    # Nothing fits 512 requests of 128k of the 70B on one H100: every candidate is tried.
    result = runner.invoke(app, ["meta-llama/Llama-3.1-70B", "--gpu", "h100", "--ctx", "128k", "-b", "512", "--json"])
    assert result.exit_code == 1, result.output
    assert 10 < len(calls) <= 18, calls
    assert len({json.dumps(c, sort_keys=True) for c in calls}) == len(calls)  # none sized twice
