"""What a person sees: every table rendered in a real 80-column pseudo-terminal, with colour and with
NO_COLOR=1, never cuts an id, a number or a verdict with "…"; and the answers a person acts on (advice, exit
codes, the plan, the check) carry the figures worked out by hand below.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from kvsize.cli import app

ROOT = Path(__file__).resolve().parent.parent
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
LLAMA_8B = "meta-llama/Llama-3.1-8B"
runner = CliRunner()


def in_terminal(*args: str, colour: bool = True, columns: int = 80, stderr: Any = None) -> tuple[int, str]:
    """Run `kvsize ARGS` with stdout and stderr on a pseudo-terminal of `columns` x 50 (what `stty cols 80`
    sets); return the exit code and the screen text without escape codes. `stderr`, when given, takes standard
    error instead (a file, or subprocess.DEVNULL: a spinner's redrawn lines are not what stays on screen)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    if not colour:
        env["NO_COLOR"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvsize", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave if stderr is None else stderr,
        env=env,
        cwd=ROOT,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    code = proc.wait(timeout=120)
    raw = b"".join(chunks).decode("utf-8", "replace")
    if colour:
        assert "\x1b[" in raw, "a terminal with colour gets escape codes"
    else:
        assert not re.search(r"\x1b\[[0-9;]*3[0-7]m", raw), "NO_COLOR=1: no colour codes"
    return code, ANSI.sub("", raw).replace("\r\n", "\n")


def assert_uncut(screen: str, columns: int = 80) -> None:
    assert "…" not in screen
    for line in screen.splitlines():
        assert len(line.rstrip()) <= columns, line


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_headline_at_80_columns(colour: bool) -> None:
    code, screen = in_terminal(LLAMA_8B, "--ctx", "131072", "--gpu", "h100", colour=colour)
    assert code == 0
    assert_uncut(screen)
    # 32 layers x 8 KV heads x (128 + 128) x 2 B = 131,072 B per token; x 131,072 tokens = 16 GiB.
    for text in ("131,072 B", "16.00 GiB", "yes", "fits", "h100-sxm"):
        assert text in screen
    # "max ctx" is at most the model's maximum (131,072); the engine pool has its own labelled line.
    assert re.search(r"131,072 │ +1 │ +bf16 │ .*│ +yes │ +3 │ +131,072", screen)
    assert "engine pool (tokens of KV):" in screen
    # The rule paragraph waits for --explain; no doubled engine label.
    assert "kv_cache_interface" not in screen and "vLLM 0.33.0: vLLM 0.33.0" not in screen
    assert "--explain" in screen
    # The legend lists only the parts drawn: nothing runs over the budget here.
    assert "KV over budget" not in screen
    if not colour:  # one character per part, so the bar reads without colour
        bar = next(line for line in screen.splitlines() if line.startswith("128k x1 bf16"))
        assert {"█", "▓", "░", "▒"} <= set(bar)


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_check_plan_gpus_models_at_80_columns(colour: bool) -> None:
    code, screen = in_terminal("check", "examples/capacity.yaml", colour=colour)
    assert code == 0
    assert_uncut(screen)
    for name in ("chat-8b", "long-context-70b", "in-house-3b"):
        assert re.search(rf"{name} +│ pass", screen), name
        assert f"pass {name}: ok:" in screen
    assert "3 deployments: 3 pass, 0 fail" in screen

    code, screen = in_terminal(
        "plan", "meta-llama/Llama-3.1-70B-Instruct", "--ctx", "32k", "--concurrency", "64", colour=colour
    )
    assert code == 0
    assert_uncut(screen)
    assert "64 requests of 32,768 tokens" in screen and "vllm" in screen and "bf16" in screen
    assert re.search(r"h100-sxm +│ +\d+ │ +\d │ +\d+ │ +\d+ │ +[\d.,]+", screen)
    assert "rtx-4090" not in screen and "apple-m4-max" not in screen  # data-centre GPUs by default

    code, screen = in_terminal("gpus", colour=colour)
    assert code == 0
    assert_uncut(screen)
    for path in sorted((ROOT / "gpu_profiles").glob("*.yaml")):
        assert re.search(rf"^ {re.escape(path.stem)} ", screen, re.MULTILINE), path.stem

    code, screen = in_terminal("models", colour=colour)
    assert code == 0
    assert_uncut(screen)
    models = json.loads(runner.invoke(app, ["models", "--json"]).stdout)["models"]
    for model in models:
        assert f" {model['hub_id']} " in screen, model["hub_id"]


def test_piped_output_follows_columns() -> None:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "kvsize", "check", "examples/capacity.yaml"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0
    assert_uncut(done.stdout)
    env["COLUMNS"] = "200"
    wide = subprocess.run(
        [sys.executable, "-m", "kvsize", "check", "examples/capacity.yaml"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    ).stdout
    assert max(len(line) for line in wide.splitlines()) > 80  # one wide table: the model column fits beside


def test_engine_all_side_by_side_with_one_bar_per_engine() -> None:
    code, screen = in_terminal(LLAMA_8B, "--ctx", "8k", "--gpu", "h100", "--engine", "all", colour=False)
    assert code == 0
    assert_uncut(screen)
    for engine in ("formula", "vllm", "hf", "sglang", "trtllm", "llamacpp"):
        assert re.search(rf"^ {engine} +│ +8,192 ", screen, re.MULTILINE), engine  # its table row
        assert re.search(rf"^ *{engine} 8k x1 bf16 [█▓░▒]+ +fits", screen, re.MULTILINE), engine  # its bar


def test_tp_bar_draws_one_gpu() -> None:
    # Llama-3.1-70B at tp 4: 80 layers x (8/4) heads x 256 x 2 B = 81,920 B per token per GPU; 32k tokens =
    # 2.5 GiB per GPU, well inside each GPU's budget: the bar shows no KV over budget.
    code, screen = in_terminal(
        "meta-llama/Llama-3.1-70B-Instruct", "--ctx", "32k", "--gpu", "h100", "--tp", "4", colour=False
    )
    assert code == 0
    assert_uncut(screen)
    assert "memory of one GPU (of tp 4 x pp 1)" in screen
    assert "KV over budget" not in screen and "does not fit" not in screen


def test_help_has_the_sizing_options_in_panels() -> None:
    code, screen = in_terminal("size", "--help", colour=False)
    assert code == 0
    for panel in ("Model", "Scenario", "Engine", "GPU and budget", "Offload", "Output"):
        assert f"─ {panel} ─" in screen, panel
    for flag in ("--ctx", "--gpu", "--kv-dtype", "--cpu-mem", "--json", "--explain"):
        assert flag in screen
    assert "<bool>" not in screen and "<str>" not in screen
    assert '".[plot]"' in screen  # not swallowed as rich markup
    code, overview = in_terminal("--help", colour=False)
    assert code == 0 and "Commands" in overview and "kvsize size --help" in overview


# --- acting on the answer --------------------------------------------------------------------------------

# The formula engine on a 24 GiB card with 16 GiB of weights and a 2 GiB reserve: KV budget 6 GiB.
# Llama-3.1-8B at bf16: 131,072 B per token, so 32k tokens = 4 GiB per request; 2 requests = 8 GiB > 6 GiB.
SMALL_CARD = (
    LLAMA_8B,
    "--engine",
    "formula",
    "--gpu-mem",
    "24GiB",
    "--weights-mem",
    "16GiB",
    "--reserve",
    "2GiB",
    "--ctx",
    "32k",
    "--batch",
    "2",
)


def test_does_not_fit_exits_1_with_advice() -> None:
    result = runner.invoke(app, [*SMALL_CARD, "--json"])
    assert result.exit_code == 1  # the answer is "no", printed, then exit 1
    gpu = json.loads(result.stdout)["scenarios"][0]["gpu"]
    assert (gpu["fits"], gpu["max_concurrency"], gpu["kv_budget_bytes"]) == (False, 1, 6 * 2**30)
    by_change = {s["change"]: s for s in gpu["suggestions"]}
    # fp8: 1 B per element, 2 GiB per request: 6 // 2 = 3 requests.
    assert (by_change["--kv-dtype fp8"]["fits"], by_change["--kv-dtype fp8"]["max_concurrency"]) == (True, 3)
    # tp 2 (32 query heads and 8 KV heads divide by 2): 8 GiB of weights per GPU, budget 24 - 2 - 8 = 14 GiB;
    # 4 KV heads per GPU: 2 GiB per request, 7 requests.
    assert (by_change["--tp 2"]["fits"], by_change["--tp 2"]["max_concurrency"]) == (True, 7)
    assert by_change["--tp 2"]["kv_budget_bytes"] == 14 * 2**30
    # Each of 2 requests may hold 3 GiB = 3 x 2^30 / 131,072 = 24,576 tokens: --ctx 24576, exactly 2 requests.
    assert (by_change["--ctx 24576"]["fits"], by_change["--ctx 24576"]["max_concurrency"]) == (True, 2)
    # --weights-mem was given, so a weights precision is not suggested; a custom card has no larger sibling.
    assert not any(c.startswith(("--weights-dtype", "--gpu")) for c in by_change)
    table = runner.invoke(app, list(SMALL_CARD))
    assert table.exit_code == 1
    assert "To make it fit" in table.stdout and "--kv-dtype fp8" in table.stdout


def test_fitting_with_headroom_exits_0_without_advice() -> None:
    result = runner.invoke(app, [LLAMA_8B, "--ctx", "8k", "--gpu", "h100", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["scenarios"][0]["gpu"]["suggestions"] == []


def test_larger_card_of_the_same_vendor() -> None:
    # Llama-3.1-70B's 141 GB of bf16 weights do not load on one H100 80GB; the smallest NVIDIA data-centre card
    # that holds them and one 8k request is suggested, as pasteable flags.
    result = runner.invoke(app, ["meta-llama/Llama-3.1-70B-Instruct", "--ctx", "8k", "--gpu", "h100", "--json"])
    assert result.exit_code == 1
    changes = [s["change"] for s in json.loads(result.stdout)["scenarios"][0]["gpu"]["suggestions"]]
    assert any(c.startswith("--gpu ") for c in changes) and "--tp 2" in changes


def test_text_glitches() -> None:
    text = runner.invoke(
        app, [LLAMA_8B, "--ctx", "8k", "--gpu", "h100", "--gpu-mem", "24GiB", "--cpu-mem", "16GiB"]
    ).stdout
    assert "h100-sxm with 24.00 GiB" in text and "25769803776 B" not in text
    # 16 GiB / (8,192 x 131,072 B = 1 GiB per request) = 16 requests; and never "1 requests".
    assert "(16 requests of 8,192)" in text and " 1 requests" not in text
    assert "estimated estimate" not in runner.invoke(app, ["Qwen/Qwen2.5-7B", "--ctx", "8k", "--gpu", "l4"]).stdout


def test_reserve_parts_add_up() -> None:
    from kvsize.report import reserve_parts

    for gpu_args in (
        ("--gpu", "h100"),
        ("--gpu", "h100", "--tp", "2"),
        ("--gpu", "l4", "--engine", "sglang"),
        ("--gpu", "h200", "--engine", "trtllm"),
        ("--gpu-mem", "24GiB", "--engine", "formula"),
    ):
        data = json.loads(runner.invoke(app, [LLAMA_8B, "--ctx", "8k", *gpu_args, "--json"]).stdout)
        from kvsize.fit import GpuFit

        fit = msgspec.convert(data["scenarios"][0]["gpu"], GpuFit)
        parts = reserve_parts(fit)
        assert sum(v for _, v in parts) == fit.reserve_bytes, gpu_args
        if fit.budget.engine in ("vllm", "sglang", "trtllm"):
            # What CUDA does not report of the card: on the H100 budget.py CUDA_CONTEXT_BYTES, 79.65 GiB
            # (nvidia-smi) - 79.19 GiB (CUDA-visible); elsewhere the profile's cuda_total_bytes: H200 140.40 GiB -
            # 139.81 GiB (a published vLLM log) = 150,754,820,096 - 150,119,844,413 = 634,975,683 B; L4 22.49 GiB
            # - 21.99 GiB (CUDA deviceQuery) = 24,152,899,584 - 23,612,293,120 = 540,606,464 B.
            hidden = {"h200": 150_754_820_096 - 150_119_844_413, "l4": 24_152_899_584 - 23_612_293_120}.get(
                gpu_args[1], 494_927_872
            )
            assert ("CUDA context", hidden) in parts, gpu_args


# --- plan, gpus, models, check ---------------------------------------------------------------------------


def test_plan_validates_engine_and_dtype() -> None:
    for bad in (["--engine", "vlm"], ["--kv-dtype", "fp9"], ["--engine", "all"], ["--kv-dtype", "bf16,fp8"]):
        result = runner.invoke(app, ["plan", LLAMA_8B, "--ctx", "8k", *bad])
        assert result.exit_code == 2, bad
        assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_plan_json_is_one_object_and_all_gpus_adds_the_rest() -> None:
    data = json.loads(runner.invoke(app, ["plan", LLAMA_8B, "--ctx", "8k", "--concurrency", "4", "--json"]).stdout)
    assert set(data) == {"model", "ctx", "concurrency", "engine", "kv_dtype", "plans"}
    ranked = {p["gpu"] for p in data["plans"]}
    assert "h100-sxm" in ranked and "rtx-4090" not in ranked and "jetson-agx-orin-64gb" not in ranked
    every = json.loads(runner.invoke(app, ["plan", LLAMA_8B, "--ctx", "8k", "--all-gpus", "--json"]).stdout)
    assert {p["gpu"] for p in every["plans"]} == {p.stem for p in (ROOT / "gpu_profiles").glob("*.yaml")}


def test_check_names_the_deployment_and_line(tmp_path: Path) -> None:
    path = tmp_path / "capacity.yaml"
    path.write_text(
        "deployments:\n"
        "  - name: ok\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n    require: {ctx: 8k}\n"
        "  - name: typo\n    model: meta-llama/Llama-3.1-8B\n    gpu: h1000\n    require: {ctx: 8k}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    assert f"{path}: line 6: deployment 'typo': unknown GPU profile 'h1000'" in result.stderr


def test_check_fails_one_unloadable_model_and_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    path = tmp_path / "capacity.yaml"
    path.write_text(
        "deployments:\n"
        "  - name: missing\n    model: ./no-such-folder/config.json\n    gpu: h100\n    require: {ctx: 8k}\n"
        "  - name: ok\n    model: meta-llama/Llama-3.1-8B\n    gpu: h100\n    require: {ctx: 8k}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(path), "--json"])
    assert result.exit_code == 1
    missing, ok = json.loads(result.stdout)["deployments"]
    assert missing["pass"] is False and "cannot be loaded" in missing["reason"] and missing["line"] == 2
    assert ok["pass"] is True and ok["line"] == 6
    assert f"::error file={path},line=2,title=kvsize capacity%3A missing::" in result.stderr  # ":" escaped


def test_verify_says_what_it_compares() -> None:
    result = runner.invoke(app, [LLAMA_8B, "--verify", "--gpu", "h100", "--device", "meta", "--ctx", "1k"])
    assert "compares the cache transformers holds with kvsize's --engine hf" in result.stderr
    assert "--gpu" in result.stderr and "rule is not what is measured" not in result.stderr  # --engine not given
    named = runner.invoke(app, [LLAMA_8B, "--verify", "--engine", "vllm", "--device", "meta", "--ctx", "1k"])
    assert "the vllm rule is not what is measured" in named.stderr
    plain = runner.invoke(app, [LLAMA_8B, "--verify", "--device", "meta", "--ctx", "1k"])
    assert "note: --verify compares" not in plain.stderr  # nothing the user gave goes unmeasured


def test_concurrency_never_shown_past_the_engine_cap() -> None:
    """When the engine's cap on running requests (fit.concurrency_cap, set by the engine hook) is below what the
    KV budget holds, the table shows the cap, marked, and a line says it binds."""
    import io

    from rich.console import Console

    import kvsize
    from kvsize.report import render_estimate, served_concurrency

    result = kvsize.estimate(LLAMA_8B, ctx=8192, gpu="h100")
    [scenario] = result.scenarios
    assert scenario.gpu is not None and scenario.gpu.max_concurrency > 2
    capped = msgspec.structs.replace(scenario.gpu, concurrency_cap=2, cap_binds=True)
    result = msgspec.structs.replace(result, scenarios=(msgspec.structs.replace(scenario, gpu=capped),))
    assert served_concurrency(capped) == 2
    out = io.StringIO()
    render_estimate(Console(file=out, width=80, no_color=True), result)
    screen = out.getvalue()
    assert_uncut(screen)
    assert re.search(r"│ +yes │ +2 cap │", screen)
    assert "concurrency cap binds: the engine runs at most 2 requests at once" in screen


# --- verify ----------------------------------------------------------------------------------------------

# A Llama whose cache is easy to work by hand and whose forward takes milliseconds on the CPU: 2 layers, 2 KV
# heads of 64 / 4 = 16, so K + V take 2 x 2 x 16 x 2 B = 128 B per token per layer in bf16.
SMALL_LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "vocab_size": 256,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


@pytest.mark.parametrize(
    ("colour", "form"),
    [
        (True, ["verify", "{model}", "--device", "meta", "--ctx", "1k,2k", "--layers", "1"]),
        (False, ["{model}", "--verify", "--device", "cpu", "--ctx", "64", "--batch", "1,2"]),
    ],
    ids=["verify-colour", "size-verify-NO_COLOR"],
)
def test_verify_at_80_columns(tmp_path: Path, colour: bool, form: list[str]) -> None:
    (tmp_path / "config.json").write_text(json.dumps(SMALL_LLAMA), encoding="utf-8")
    args = [arg.format(model=tmp_path) for arg in form]
    code, screen = in_terminal(*args, colour=colour, stderr=subprocess.DEVNULL)
    assert code == 0
    assert_uncut(screen)
    assert "PASS: logical bytes must match exactly" in screen
    if "meta" in args:
        # 1 layer built: 1 x 128 B x 1,024 tokens = 131,072 B; 2,048 tokens: 262,144 B. The full model's 2 layers:
        # 262,144 B = 256.00 KiB and 524,288 B = 512.00 KiB, in a second table that repeats ctx .. result.
        assert re.search(r"^ +1,024 │ +1 │ bf16 +│ match +│ +131,072 B │ +131,072 B │ +\+0 B", screen, re.MULTILINE)
        assert re.search(r"^ +2,048 │ +1 │ bf16 +│ match +│ +262,144 B │ +262,144 B │ +\+0 B", screen, re.MULTILINE)
        assert re.search(r"^ +1,024 │ +1 │ bf16 +│ match +│ +256.00 KiB / 256.00 KiB", screen, re.MULTILINE)
        assert re.search(r"^ +2,048 │ +1 │ bf16 +│ match +│ +512.00 KiB / 512.00 KiB", screen, re.MULTILINE)
    else:
        # 2 layers x 128 B x 64 tokens = 16,384 B per request; 2 requests: 32,768 B. No allocator on the CPU,
        # no full-model figure when every layer is built: those columns are left out.
        assert re.search(r"^ +64 │ +1 │ bf16 +│ match +│ +16,384 B │ +16,384 B │ +\+0 B", screen, re.MULTILINE)
        assert re.search(r"^ +64 │ +2 │ bf16 +│ match +│ +32,768 B │ +32,768 B │ +\+0 B", screen, re.MULTILINE)
        assert "allocator delta" not in screen and "full model (" not in screen


def test_verify_allocator_columns_stack_at_80_columns() -> None:
    """On CUDA every column has a figure: at 80 columns the allocator and full-model columns move to a second
    table that repeats ctx, batch, dtype and the verdict (report.py's stacking), none cut."""
    import io

    from rich.console import Console

    from kvsize.cli.verify import _comparison_tables

    scenario = SimpleNamespace(
        ctx=131_072,
        batch=8,
        kv_dtype="bf16",
        status="mismatch",
        predicted_bytes=137_438_953_472,
        measured_bytes=137_438_953_984,
        difference_bytes=512,
        allocator_delta_bytes=137_438_958_080,
        allocator_difference_pct=0.0034,
        allocator_peak_bytes=150_000_000_000,
        full_model=SimpleNamespace(predicted_bytes=549_755_813_888, measured_bytes=549_755_815_936),
    )
    out = io.StringIO()
    console = Console(file=out, width=80, no_color=True)
    for table in _comparison_tables(SimpleNamespace(scenarios=[scenario]), 80):
        console.print(table)
    screen = out.getvalue()
    assert_uncut(screen)
    # 137,438,953,472 B = 128 GiB; the allocator's 137,438,958,080 B = 128.00 GiB; 549,755,813,888 B = 512 GiB.
    assert len(re.findall(r"^ 131,072 │ +8 │ bf16 +│ MISMATCH │", screen, re.MULTILINE)) >= 2
    for text in (
        "137,438,953,472 B",
        "137,438,953,984 B",
        "+512 B",
        "128.00 GiB (+0.00%)",
        "139.70 GiB",
        "512.00 GiB / 512.00 GiB",
    ):
        assert text in screen, text


# --- "max ctx" never past the model's maximum context --------------------------------------------------------

# tiny_configs.TINY: 4 layers x 8 KV heads x 128 x (K + V) x 2 B = 16,384 B per token, max_position_embeddings
# 8,192. On an H100 SXM (85,520,809,984 B) with 16 GiB of weights and a 4 GiB reserve, the formula engine's KV
# budget is 85,520,809,984 - 17,179,869,184 - 4,294,967,296 = 64,045,973,504 B: 64,045,973,504 // 16,384 =
# 3,909,056 tokens for one request, 64,045,973,504 // (4 x 16,384) = 977,264 for each of 4. Both are far past
# the model's 8,192, which is what max_context says; the memory's figure is max_context_by_memory.
SMALL_CONTEXT_ON_A_BIG_CARD = ("--gpu", "h100", "--engine", "formula", "--weights-mem", "16GiB", "--reserve", "4GiB")


def small_context_model(tmp_path: Path) -> Path:
    from tiny_configs import TINY

    (tmp_path / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    return tmp_path


def test_json_max_context_stops_at_the_models_maximum(tmp_path: Path) -> None:
    model = str(small_context_model(tmp_path))
    result = runner.invoke(app, [model, "--ctx", "8k", "--batch", "1,4", *SMALL_CONTEXT_ON_A_BIG_CARD, "--json"])
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["architecture"]["max_context"] == 8192
    one, four = (s["gpu"] for s in data["scenarios"])
    assert one["kv_budget_bytes"] == four["kv_budget_bytes"] == 64_045_973_504
    assert (one["max_context"], one["max_context_by_memory"]) == (8192, 3_909_056)
    assert (four["max_context"], four["max_context_by_memory"]) == (8192, 977_264)
    # The table says the same: max ctx 8,192 on both rows.
    table = runner.invoke(app, [model, "--ctx", "8k", "--batch", "1,4", *SMALL_CONTEXT_ON_A_BIG_CARD])
    assert re.search(r"8,192 │ +1 │ .*│ +yes │ +[\d,]+ │ +8,192 *$", table.stdout, re.MULTILINE)
    assert re.search(r"8,192 │ +4 │ .*│ +yes │ +[\d,]+ │ +8,192 *$", table.stdout, re.MULTILINE)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "llamacpp", "hf"])
def test_no_engine_reports_a_context_past_the_models_maximum(tmp_path: Path, engine: str) -> None:
    # 80 GB less 16 GiB of weights leaves every engine tens of GB of KV: well over 8,192 x 16,384 B = 128 MiB.
    model = str(small_context_model(tmp_path))
    args = [model, "--ctx", "8k", "--gpu", "h100", "--engine", engine, "--weights-mem", "16GiB", "--json"]
    gpu = json.loads(runner.invoke(app, args).stdout)["scenarios"][0]["gpu"]
    assert gpu["max_context"] == 8192 and gpu["max_context_by_memory"] > 8192
    if gpu["kv_pool_tokens"] is not None:  # the engine's own pool, in tokens: a figure of its own, not capped
        assert gpu["kv_pool_tokens"] > 8192


def test_check_and_plan_json_keep_max_context_within_the_model(tmp_path: Path) -> None:
    model = small_context_model(tmp_path)
    path = tmp_path / "capacity.yaml"
    deployment = (
        "    model: {model}\n    gpu: h100\n    engine: formula\n    weights_mem: 16GiB\n    reserve: 4GiB\n"
        "    require: {{ctx: 8k, max_context: {need}}}\n"
    )
    path.write_text(
        "deployments:\n"
        + "  - name: within\n"
        + deployment.format(model=model, need="8k")
        + "  - name: beyond\n"
        + deployment.format(model=model, need="16k"),
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(path), "--json"])
    assert result.exit_code == 1  # the second asks for more than the model's 8,192 tokens
    within, beyond = json.loads(result.stdout)["deployments"]
    assert within["pass"] is True and (within["max_context"], within["max_context_by_memory"]) == (8192, 3_909_056)
    assert beyond["pass"] is False and beyond["max_context"] == 8192
    assert "1 request reaches at most 8,192 tokens (the model's maximum context), below 16,384" in beyond["reason"]
    # plan ranks cards by concurrency at --ctx: it carries no max_context at all, so none past the model's.
    plan = json.loads(runner.invoke(app, ["plan", str(model), "--ctx", "8k", "--json"]).stdout)
    assert plan["plans"] and not any("max_context" in p for p in plan["plans"])


def test_check_json_computes_max_context_without_a_requirement_for_it(tmp_path: Path) -> None:
    # The sizing command's max_context for Llama-3.1-70B at 128k on tp 4 H200s: the KV budget holds far more than
    # 131,072 tokens per request (the table: 36 requests of 131,072 fit), so the config's max_position_embeddings,
    # 131,072, is the answer. check --json must carry it, not null, though no requirement names max_context.
    path = tmp_path / "capacity.yaml"
    path.write_text(
        "deployments:\n  - name: long\n    model: meta-llama/Llama-3.1-70B-Instruct\n    gpu: h200\n    tp: 4\n"
        "    gpus: 8\n    kv_dtype: fp8\n    require: {ctx: 128k, min_concurrency: 8}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(path), "--json"])
    assert result.exit_code == 0, result.stderr
    (d,) = json.loads(result.stdout)["deployments"]
    assert d["max_context"] == 131_072 and d["max_context_by_memory"] > 131_072
    sized = json.loads(
        runner.invoke(
            app,
            [
                "meta-llama/Llama-3.1-70B-Instruct",
                "--ctx",
                "128k",
                "--gpu",
                "h200",
                "--tp",
                "4",
                "--kv-dtype",
                "fp8",
                "--json",
            ],
        ).stdout
    )["scenarios"][0]["gpu"]
    assert (d["max_context"], d["max_context_by_memory"]) == (sized["max_context"], sized["max_context_by_memory"])
    # replicas = gpus 8 / (tp 4 x pp 1) = 2: max_concurrency (the table's "max reqs") sums them, the engine's
    # concurrency is one replica's, as the gloss under the table says.
    assert d["replicas"] == 2 and d["max_concurrency"] == 2 * int(d["concurrency"])


@pytest.mark.parametrize("colour", [True, False], ids=["colour", "NO_COLOR"])
def test_check_keeps_each_model_id_on_one_line_at_80_columns(tmp_path: Path, colour: bool) -> None:
    # Deployment names and a model path wider than the room beside them: rich must narrow the deployment column
    # (it may wrap), never split "meta-llama/Llama-3.1-70B-Instruct" (33 characters) or the 44-character path.
    model = tmp_path / "a-rather-long-folder-name-for-a-model"
    model.mkdir()
    small_context_model(model)
    path = tmp_path / "capacity.yaml"
    path.write_text(
        "deployments:\n"
        "  - name: long-context-seventy-billion-instruct-prod\n    model: meta-llama/Llama-3.1-70B-Instruct\n"
        "    gpu: h200\n    tp: 4\n    kv_dtype: fp8\n    require: {ctx: 8k}\n"
        f"  - name: small-context-model-from-a-folder-on-disk\n    model: ./{model.name}\n"
        "    gpu: h100\n    engine: formula\n    require: {ctx: 8k}\n",
        encoding="utf-8",
    )
    code, screen = in_terminal("check", str(path), colour=colour)
    assert code == 0, screen
    assert_uncut(screen)
    lines = screen.splitlines()
    assert any("meta-llama/Llama-3.1-70B-Instruct" in line for line in lines), screen
    assert any(f"./{model.name}" in line for line in lines), screen
    assert "max reqs: requests of ctx at once, all replicas; JSON concurrency is per replica" in screen
