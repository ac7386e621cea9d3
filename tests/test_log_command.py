"""`kvsize log FILE|-` on real published start-up logs (tests/data/logs, sources in manifest.json), on standard
input, on text that is no engine log (exit 2) and on truncated logs; `--save-calibration` / `--calibration`."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from kvsize.cli.app import app
from kvsize.engine_log import parse_log

runner = CliRunner()
LOGS = Path(__file__).parent / "data" / "logs"
GIB = 1024**3
# llm-d-planner accuracy sweep, vLLM 0.19.0, Llama-3.1-8B-Instruct on one H100, max_model_len 8192, util 0.95
LLAMA_H100 = LOGS / "llmd-meta-llama-llama-3-1-8b-tp1pp1dp1-8192.log"


def run(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, ["log", *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def figures(stdout: str) -> dict[str, dict[str, object]]:
    return {f["name"]: f for f in json.loads(stdout)["figures"]}


def test_vllm_log_figure_by_figure() -> None:
    code, out, err = run(str(LLAMA_H100), "--gpu", "h100", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= {"engine", "engine_version", "model", "figures", "pass"}
    assert (data["engine"], data["engine_version"], data["model"]) == (
        "vllm",
        "0.19.0",
        "meta-llama/Llama-3.1-8B-Instruct",
    )
    assert data["pass"] is True
    figs = figures(out)
    assert set(figs["pool tokens"]) == {"name", "logged", "predicted", "error_pct", "unit"}
    # The log: "GPU KV cache size: 476,016 tokens" from 58.11 GiB. Paging by hand: one block of 16 tokens x 32 layers
    # x 8 KV heads x (128 + 128) x 2 B = 2 MiB; 58.11 GiB // 2 MiB = 29,752 blocks = 476,032 tokens
    # (the log's 58.11 is rounded; vLLM had 29,751 blocks).
    assert figs["pool tokens"]["logged"] == 476_016 and figs["pool tokens"]["predicted"] == 476_032
    # "Maximum concurrency for 8,192 tokens per request: 58.11x" = 29,752 blocks / 512 blocks per request.
    assert figs["max concurrency"]["logged"] == 58.11 and figs["max concurrency"]["predicted"] == 58.11
    assert figs["available KV memory"]["logged"] == 58.11 and figs["available KV memory"]["unit"] == "GiB"
    assert abs(figs["available KV memory"]["error_pct"]) < 1  # type: ignore[arg-type]
    assert figs["weights per rank"]["logged"] == 14.99


def test_float32_run_of_a_bf16_checkpoint() -> None:
    # The same sweep with --dtype float32 ('dtype': 'float32' in its non-default args): vLLM casts the bf16 weights
    # to float32 on load, "Model loading took 29.98 GiB" = 2 x the 16,060,522,496 B published (29.92 GiB) + the
    # float32 RoPE table; the KV budget follows (the log: 42.8 GiB available).
    code, out, err = run(str(LOGS / "llmd-meta-llama-llama-3-tp1pp1dp1-8192-dtf32.log"), "--gpu", "h100", "--json")
    assert code == 0, err
    figs = figures(out)
    assert figs["weights per rank"]["logged"] == 29.98
    assert abs(figs["weights per rank"]["error_pct"]) < 0.1  # type: ignore[arg-type]
    assert abs(figs["available KV memory"]["error_pct"]) < 1  # type: ignore[arg-type]


def test_standard_input_reads_the_same() -> None:
    code, out, err = run("-", "--gpu", "h100", "--json", stdin=LLAMA_H100.read_text())
    assert code == 0, err
    assert figures(out)["pool tokens"]["predicted"] == 476_032


def test_table_output_marks_figures() -> None:
    code, out, _ = run(str(LLAMA_H100), "--gpu", "h100")
    assert code == 0 and "pool tokens" in out and "476,016" in out and "within 1%" in out


def test_outside_tolerance_exits_1() -> None:
    # The budget is 0.12% off (58.18 vs 58.11 GiB): a 0.01% tolerance fails it.
    code, out, _ = run(str(LLAMA_H100), "--gpu", "h100", "--tolerance", "0.01", "--json")
    assert code == 1 and json.loads(out)["pass"] is False


def test_not_an_engine_log_exits_2() -> None:
    code, out, err = run("-", stdin="Traceback (most recent call last):\n  File 'x.py', line 1\nValueError: nope\n")
    assert code == 2 and out == ""
    assert err.startswith("Error: standard input is not an engine start-up log") and err.count("\n") == 1


def test_missing_file_exits_2(tmp_path: Path) -> None:
    code, _, err = run(str(tmp_path / "absent.log"))
    assert code == 2 and err.startswith("Error: cannot read log")


def test_truncated_log_reports_what_it_has() -> None:
    # Cut after "Model loading took 14.99 GiB": only the weights can be compared.
    lines = LLAMA_H100.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "Model loading took" in line)
    code, out, err = run("-", "--gpu", "h100", "--json", stdin="\n".join(lines[: cut + 1]) + "\n")
    assert code == 0, err
    assert list(figures(out)) == ["weights per rank"]


def test_truncated_before_any_figure_exits_2() -> None:
    # Cut after "Initializing a V1 LLM engine (v0.19.0)": a vLLM log, but no figure printed yet.
    lines = LLAMA_H100.read_text().splitlines()
    cut = next(i for i, line in enumerate(lines) if "Initializing a V1 LLM engine" in line)
    code, _, err = run("-", "--gpu", "h100", stdin="\n".join(lines[: cut + 1]) + "\n")
    assert code == 2 and err.startswith("Error: nothing in standard input that kvsize can predict")


def test_llamacpp_needs_no_config() -> None:
    # ggml-org/gpt-oss-20b-GGUF on an Apple M5 (llama.cpp b8164): 24 layers, 8 KV heads, head 64, n_swa 128.
    code, out, err = run(str(LOGS / "llamacpp-metal-gpt-oss-20b.log"), "--json")
    assert code == 0, err
    figs = figures(out)
    # non-SWA: 131,072 cells x 12 layers x 8 heads x (64 + 64) x 2 B (f16) = 3,221,225,472 B = 3072 MiB.
    assert figs["non-SWA cache size"]["predicted"] == 3072.0
    # SWA: min(131,072, pad(128 x 1 seq + 512 ubatch, 256)) = 768 cells; 768 x 12 x 8 x 128 x 2 B = 18 MiB.
    assert figs["SWA cache cells"]["predicted"] == 768 and figs["SWA cache size"]["predicted"] == 18.0
    assert json.loads(out)["engine"] == "llamacpp" and json.loads(out)["engine_version"] == "b8164"


def test_llamacpp_parallel_sequences() -> None:
    # gemma-2-2b-it on CPU, llama-server b7445, n_parallel auto = 4: SWA cells = min(8192, pad(4096 x 4 + 512))
    # = 8192; 8192 x 13 layers x 4 heads x (256 + 256) x 2 B = 416 MiB per half.
    code, out, _ = run(str(LOGS / "llamacpp-cpu-gemma2-2b-4seq.log"), "--json")
    assert code == 0
    assert figures(out)["KV size"]["predicted"] == 832.0


def test_sglang_log() -> None:
    # SGLang docs notebook: "KV Cache is allocated. K size: 27.13 GB, V size: 27.13 GB", max_total_num_tokens=444500.
    # Paging by hand: 32 layers x 8 heads x 128 x 2 B = 64 KiB per token for K (and V): 54.26 GiB / 128 KiB =
    # 444,497 tokens (the printed 27.13 is rounded).
    code, out, err = run(
        str(LOGS / "sglang-docs-h100-llama31-8b.log"),
        "--config",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "h100",
        "--json",
    )
    assert code == 0, err
    figs = figures(out)
    assert figs["pool tokens"]["logged"] == 444_500 and figs["pool tokens"]["predicted"] == 444_497


def test_trtllm_log() -> None:
    # NVIDIA/TensorRT-LLM#1400: "Allocate 69524783104 bytes for k/v cache. Using 132608 tokens in paged KV cache."
    # Llama-2-7B shapes in fp16: 32 layers x 32 heads x 128 x 2 (K, V) x 2 B = 512 KiB per token x 132,608.
    code, out, err = run(
        str(LOGS / "trtllm-1400-a100-llama2-7b-shape.log"),
        "--config",
        "meta-llama/Llama-2-7b-hf",
        "--kv-dtype",
        "fp16",
        "--json",
    )
    assert code == 0, err
    fig = figures(out)["KV bytes for the logged tokens"]
    assert fig["logged"] == fig["predicted"] == 132_608 * 32 * 32 * 128 * 2 * 2


def test_v0_log_format() -> None:
    # vllm-project/vllm#15815, V0 engine 0.7.1 on 2x L40S: "# CUDA blocks: 3947" from "the rest of the memory
    # reserved for KV Cache is 7.71GiB"; Qwen2.5-32B at tp 2: 64 layers x 4 KV heads per rank x 256 x 2 B x 16
    # tokens = 2 MiB per block; 7.71 GiB // 2 MiB = 3947.
    log = parse_log((LOGS / "vllm-15815-l40s-qwen25-32b-tp2.log").read_text())
    assert log is not None and log.engine_version == "0.7.1" and log.settings["engine_generation"] == "V0"
    code, out, err = run(str(LOGS / "vllm-15815-l40s-qwen25-32b-tp2.log"), "--config", "Qwen/Qwen2.5-32B", "--json")
    # kvsize log applies the log's own release (issue 22), and 0.7.1 is older than the oldest release kvsize has
    # read (vLLM 0.8.5, kvsize/engines/vllm_releases.py): refused as bad input, naming the oldest, never checked
    # against a later release's rules.
    assert code == 2, (out, err)
    assert "vLLM 0.7.1 is not modelled: older than the oldest release kvsize models" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_save_and_reuse_calibration(tmp_path: Path) -> None:
    cal = tmp_path / "h100-llama.yaml"
    code, _, err = run(str(LLAMA_H100), "--gpu", "h100", "--save-calibration", str(cal), "--json")
    assert code == 0, err
    data = yaml.safe_load(cal.read_text())
    # The log's "torch peak memory increase: 1.89GiB; non-torch forward increase memory: 0.25GiB" and
    # "Model loading took 14.99 GiB"; vLLM 0.19 subtracts no CUDA-graph estimate.
    assert data["activation_bytes"] == round(1.89 * GIB) and data["non_torch_bytes"] == round(0.25 * GIB)
    assert data["weights_per_rank_bytes"] == round(14.99 * GIB) and data["cuda_graph_bytes"] == 0
    assert (data["gpu"], data["tp"], data["pp"]) == ("h100-sxm", 1, 1)
    # Reused by the sizing command: ceil((85,520,809,984 - 494,927,872) x 0.95) - the measured parts reproduces
    # the logged 58.11 GiB.
    result = runner.invoke(
        app,
        [
            "meta-llama/Llama-3.1-8B-Instruct",
            "--gpu",
            "h100",
            "--ctx",
            "8k",
            "--engine-version",
            "0.19",
            "--gpu-util",
            "0.95",
            "--calibration",
            str(cal),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    budget = json.loads(result.stdout)["scenarios"][0]["gpu"]["kv_budget_bytes"]
    requested = -(-(85_520_809_984 - 494_927_872) * 95 // 100)
    assert budget == requested - round(14.99 * GIB) - round(1.89 * GIB) - round(0.25 * GIB)
    assert abs(budget / GIB - 58.11) < 0.02
    # ... and by kvsize log itself: the budget figure is then exact to the log's rounding.
    code, out, _ = run(str(LLAMA_H100), "--gpu", "h100", "--calibration", str(cal), "--json")
    assert abs(figures(out)["available KV memory"]["error_pct"]) < 0.05  # type: ignore[arg-type]


def test_calibration_key_in_capacity_file(tmp_path: Path) -> None:
    cal = tmp_path / "cal.yaml"
    assert run(str(LLAMA_H100), "--gpu", "h100", "--save-calibration", str(cal))[0] == 0
    capacity = tmp_path / "capacity.yaml"
    capacity.write_text(
        "deployments:\n  - name: d\n    model: meta-llama/Llama-3.1-8B-Instruct\n    gpu: h100\n"
        "    engine_version: '0.19'\n    gpu_util: 0.95\n    calibration: cal.yaml\n"
        "    require: {ctx: 8k, min_pool_tokens: 475000}\n"
    )
    result = runner.invoke(app, ["check", str(capacity), "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    d = json.loads(result.stdout)["deployments"][0]
    assert abs(d["kv_budget_bytes"] / GIB - 58.11) < 0.02


def test_bad_calibration_file_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("activation_bytes: -1\n")
    code, _, err = run(str(LLAMA_H100), "--gpu", "h100", "--calibration", str(bad))
    assert code == 2 and err.startswith("Error:") and "calibration" in err


def test_save_calibration_needs_measurements(tmp_path: Path) -> None:
    code, _, err = run(str(LOGS / "llamacpp-cuda-phi3-mini.log"), "--save-calibration", str(tmp_path / "c.yaml"))
    assert code == 2 and "no overheads" in err


def test_plan_reuses_calibration_on_its_card(tmp_path: Path) -> None:
    cal = tmp_path / "cal.yaml"
    assert run(str(LLAMA_H100), "--gpu", "h100", "--save-calibration", str(cal))[0] == 0
    args = [
        "plan",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--ctx",
        "1k",
        "--concurrency",
        "2000",
        "--gpus",
        "h100",
        "--engine-version",
        "0.19",
        "--json",
    ]
    plain = runner.invoke(app, args)
    calibrated = runner.invoke(app, [*args, "--calibration", str(cal)])
    assert plain.exit_code == 0 and calibrated.exit_code == 0, calibrated.stderr
    # vLLM 0.19's modelled overheads against the 0.19 start-up's measured parts: the measured overheads change
    # the requests one H100 holds, and the calibrated layout says so.
    assert json.loads(plain.stdout) != json.loads(calibrated.stdout)


def test_pool_on_the_logs_card_not_the_reference_h100() -> None:
    """The paging arithmetic runs on the card given (--gpu): vLLM's batch defaults key on it, and a sliding
    group's blocks per request follow them. Published log (manifest: xbill9/gemma4-dev, vLLM 0.29.0 on a Tesla
    T4): gemma-4-E2B served in float16, max_model_len 16,384, max_num_seqs 8, "Available KV cache memory: 4.66
    GiB", "GPU KV cache size: 519,681 tokens, Maximum concurrency for 16,384 tokens per request: 31.72x".

    By hand (vLLM 0.29: v1/core/kv_cache_utils.py, v1/kv_cache_interface.py): 15 layers own KV (20 reuse it,
    num_kv_shared_layers), 12 sliding (1 KV head x 256) and 3 full (1 x 512). Groups of 3 layers: 4 sliding + 1
    full. A full page of 16 tokens is 16 x 512 x 2 x 2 B = 32,768 B; the sliding layers' block grows to 32
    tokens for the same page. A block is 3 x 32,768 = 98,304 B: 4.66 GiB // 98,304 = 50,899 blocks. A request
    holds cdiv(16,384, 16) = 1,024 full blocks and, per sliding group, cdiv(511 + 4,096, 32) + 1 = 145 blocks:
    the window - 1 + the tokens in flight, 2 batches x 2,048 (the T4's default max_num_batched_tokens; an H100's
    8,192 would give min(511 + 2 x 8,192, 16,384) / 32 + 1 = 513). 50,899 / (1,024 + 4 x 145) = 31.73x, x 16,384
    = 519,905 tokens."""
    log = LOGS / "vllm-xbill9-t4-gemma-4-e2b-qat-w4a16.log"
    args = (str(log), "--config", "google/gemma-4-E2B-it", "--engine-version", "0.29.0", "--json")
    code, out, err = run(*args, "--gpu", "t4")
    figs = figures(out)
    assert figs["pool tokens"]["logged"] == 519_681 and figs["pool tokens"]["predicted"] == 519_905, err
    assert figs["max concurrency"]["logged"] == 31.72 and figs["max concurrency"]["predicted"] == 31.73
    # Without a card, the reference H100's defaults: 50,899 / (1,024 + 4 x 513) = 16.55x, far from the log.
    code, out, err = run(*args)
    assert figures(out)["max concurrency"]["predicted"] == 16.55, err
